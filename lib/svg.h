/* svg.h: the few SVG elements every picture of the kit is drawn with (the replayed timeline,
 * the placement plot, the labs' figures): a white page, rectangles, lines, text with its
 * characters escaped, and legend swatches. Coordinates are in pixels; the caller lays out. */
#ifndef PL_SVG_H
#define PL_SVG_H

#include <stdio.h>

/* The <svg> element of a width x height page (with a matching viewBox, so it scales) in
 * sans-serif of font_size pixels, and its white background. */
void pl_svg_begin(FILE *f, double width, double height, int font_size);
/* Closes the page; returns 0, or -1 when anything written to f failed. Does not close f. */
int pl_svg_end(FILE *f);

/* A rectangle filled with fill ("none" for an outline); attrs ("" or NULL for none) is
 * added as written, e.g. "stroke=\"white\"". */
void pl_svg_rect(FILE *f, double x, double y, double w, double h, const char *fill,
                 const char *attrs);
void pl_svg_line(FILE *f, double x1, double y1, double x2, double y2, const char *stroke,
                 const char *attrs);
/* text at (x, y), escaped; attrs as for pl_svg_rect, e.g. "text-anchor=\"end\"". */
void pl_svg_text(FILE *f, double x, double y, const char *attrs, const char *text);
/* A 12-pixel square of colour fill with label to its right, baseline y. */
void pl_svg_swatch(FILE *f, double x, double y, const char *fill, const char *label);
/* Writes s with &, <, >, " escaped and control characters dropped. */
void pl_svg_escape(FILE *f, const char *s);
/* An axis's tick step: 1, 2 or 5 times a power of ten that cuts span (> 0) into about n. */
double pl_svg_nice_step(double span, int n);
/* A value axis up the left of the plot box (x0, y0, w, h) from 0 to top: a light grid line
 * and a tick label every step, and label turned upright label_dx pixels left of x0. */
void pl_svg_y_grid(FILE *f, double x0, double y0, double w, double h, double top, double step,
                   double label_dx, const char *label);

#endif
