/* plots.h: Lab 7's two figures as small standalone SVG files: grouped bars of tokens per
 * expert, and lines of a modelled time against the routing skew. */
#ifndef LAB07_PLOTS_H
#define LAB07_PLOTS_H

/* Bars of a[e] and b[e] side by side for e < E. */
void l7_plot_tokens(const char *path, int E, const long *a, const long *b, const char *label_a,
                 const char *label_b, const char *title);
/* nseries lines through (x[i], y[s * nx + i]). */
void l7_plot_lines(const char *path, int nx, const float *x, int nseries, const double *y,
                const char *const *labels, const char *title, const char *xlabel);

#endif
