/* units.c: the size formats of units.h. */
#include "units.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

const char *pl_format_bytes(double bytes, char *buf, size_t len)
{
    static const char *const unit[] = {"B", "kB", "MB", "GB", "TB"};
    int u = 0;
    double x = bytes;
    while (fabs(x) >= 1000.0 && u < 4) {
        x /= 1000.0;
        u++;
    }
    if (u == 0) snprintf(buf, len, "%.0f B", x);
    else snprintf(buf, len, "%.1f %s", x, unit[u]);
    return buf;
}

const char *pl_format_count(size_t count, char *buf, size_t len)
{
    char raw[32];
    snprintf(raw, sizeof raw, "%zu", count);
    size_t n = strlen(raw), k = 0;
    for (size_t i = 0; i < n && k + 2 < len; i++) {
        if (i && (n - i) % 3 == 0) buf[k++] = ' ';
        buf[k++] = raw[i];
    }
    if (len) buf[k < len ? k : len - 1] = '\0';
    return buf;
}
