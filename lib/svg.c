/* svg.c: the SVG elements of svg.h. */
#include "svg.h"

#include <math.h>

static void attrs_of(FILE *f, const char *attrs)
{
    if (attrs && *attrs) fprintf(f, " %s", attrs);
}

void pl_svg_begin(FILE *f, double width, double height, int font_size)
{
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
               "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"%d\">\n",
            width, height, width, height, font_size);
    fputs("<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n", f);
}

int pl_svg_end(FILE *f)
{
    fputs("</svg>\n", f);
    return ferror(f) ? -1 : 0;
}

void pl_svg_rect(FILE *f, double x, double y, double w, double h, const char *fill,
                 const char *attrs)
{
    fprintf(f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\"", x, y,
            w, h, fill);
    attrs_of(f, attrs);
    fputs("/>\n", f);
}

void pl_svg_line(FILE *f, double x1, double y1, double x2, double y2, const char *stroke,
                 const char *attrs)
{
    fprintf(f, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"%s\"", x1, y1,
            x2, y2, stroke);
    attrs_of(f, attrs);
    fputs("/>\n", f);
}

void pl_svg_text(FILE *f, double x, double y, const char *attrs, const char *text)
{
    fprintf(f, "<text x=\"%.2f\" y=\"%.2f\"", x, y);
    attrs_of(f, attrs);
    fputc('>', f);
    pl_svg_escape(f, text ? text : "");
    fputs("</text>\n", f);
}

void pl_svg_swatch(FILE *f, double x, double y, const char *fill, const char *label)
{
    pl_svg_rect(f, x, y - 10, 12, 12, fill, NULL);
    pl_svg_text(f, x + 16, y, NULL, label);
}

void pl_svg_escape(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        default:
            if ((unsigned char)*s >= 0x20 || *s == '\t') fputc(*s, f);
        }
    }
}

double pl_svg_nice_step(double span, int n)
{
    double raw = span / n, p = pow(10.0, floor(log10(raw))), f = raw / p;
    return (f < 1.5 ? 1.0 : f < 3.5 ? 2.0 : f < 7.5 ? 5.0 : 10.0) * p;
}

void pl_svg_y_grid(FILE *f, double x0, double y0, double w, double h, double top, double step,
                   double label_dx, const char *label)
{
    char t[160];
    for (double v = 0; v <= top + step / 2; v += step) {
        const double y = y0 + h - h * v / top;
        pl_svg_line(f, x0, y, x0 + w, y, "#ddd", "");
        snprintf(t, sizeof t, "%g", v);
        pl_svg_text(f, x0 - 6, y + 4, "text-anchor=\"end\"", t);
    }
    snprintf(t, sizeof t, "transform=\"rotate(-90 %g %g)\" text-anchor=\"middle\"",
             x0 - label_dx, y0 + h / 2);
    pl_svg_text(f, x0 - label_dx, y0 + h / 2, t, label);
}
