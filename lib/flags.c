/* flags.c: the table-driven command-line parser of flags.h, with help and "did you mean". */
#include "flags.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "runtime.h"

static const struct pl_flags_program *cur;

static PL_NORETURN PL_PRINTF(1, 2) void flag_error(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (cur && cur->collective) pl_usage_error_all("%s", msg);
    pl_usage_error("%s", msg);
}

static void print_value(FILE *f, const struct pl_flag *fl)
{
    switch (fl->kind) {
    case PL_FLAG_INT: fprintf(f, "%d", *(int *)fl->ptr); break;
    case PL_FLAG_I64: fprintf(f, "%lld", (long long)*(int64_t *)fl->ptr); break;
    case PL_FLAG_U64: fprintf(f, "%llu", (unsigned long long)*(uint64_t *)fl->ptr); break;
    case PL_FLAG_FLOAT: fprintf(f, "%g", *(float *)fl->ptr); break;
    case PL_FLAG_DOUBLE: fprintf(f, "%g", *(double *)fl->ptr); break;
    case PL_FLAG_STR:
        fprintf(f, "%s", *(const char **)fl->ptr ? *(const char **)fl->ptr : "none");
        break;
    case PL_FLAG_SWITCH: fprintf(f, "%s", *(int *)fl->ptr ? "on" : "off"); break;
    }
}

void pl_flags_help(FILE *f, const struct pl_flags_program *prog, struct pl_flag *const *tables,
                   const int *n, int ntables)
{
    if (prog->usage) prog->usage(f);
    for (int t = 0; t < ntables; t++)
        for (int i = 0; i < n[t]; i++) {
            const struct pl_flag *fl = &tables[t][i];
            char left[64];
            snprintf(left, sizeof left, "%s %s", fl->name, fl->arg ? fl->arg : "");
            fprintf(f, "  %-22s %s", left, fl->help);
            if (!strstr(fl->help, "default")) {
                fprintf(f, " (default ");
                print_value(f, fl);
                fprintf(f, ")");
            }
            fprintf(f, "\n");
        }
    fprintf(f, "  %-22s this text\n", "--help");
}

static int edit_distance(const char *a, const char *b)
{
    int la = (int)strlen(a), lb = (int)strlen(b);
    if (la > 40 || lb > 40) return 99;
    int d[41][41];
    for (int i = 0; i <= la; i++) d[i][0] = i;
    for (int j = 0; j <= lb; j++) d[0][j] = j;
    for (int i = 1; i <= la; i++)
        for (int j = 1; j <= lb; j++) {
            int c = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < c) c = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < c) c = d[i][j - 1] + 1;
            d[i][j] = c;
        }
    return d[la][lb];
}

static PL_NORETURN void unknown_flag(const char *a, struct pl_flag *const *tables, const int *n,
                                     int ntables)
{
    const char *best = NULL;
    int bd = 4;
    for (int t = 0; t < ntables; t++)
        for (int i = 0; i < n[t]; i++) {
            int dist = edit_distance(a, tables[t][i].name);
            if (dist < bd) bd = dist, best = tables[t][i].name;
        }
    if (best)
        flag_error("unknown flag '%s' (did you mean %s? %s --help lists the flags)", a, best,
                   cur->name);
    flag_error("unknown flag '%s' (%s --help lists the flags)", a, cur->name);
}

static void parse_value(struct pl_flag *fl, const char *v)
{
    char *end;
    errno = 0;
    switch (fl->kind) {
    case PL_FLAG_INT: {
        long x = strtol(v, &end, 10);
        if (errno || end == v || *end || x < -2147483647L || x > 2147483647L)
            flag_error("%s '%s' is not a whole number (e.g. %s 64)", fl->name, v, fl->name);
        *(int *)fl->ptr = (int)x;
        break;
    }
    case PL_FLAG_I64: {
        long long x = strtoll(v, &end, 10);
        if (errno || end == v || *end)
            flag_error("%s '%s' is not a whole number (e.g. %s 100)", fl->name, v, fl->name);
        *(int64_t *)fl->ptr = x;
        break;
    }
    case PL_FLAG_U64: {
        if (v[0] == '-')
            flag_error("%s '%s' must not be negative (a seed is 0 or more)", fl->name, v);
        unsigned long long x = strtoull(v, &end, 10);
        if (errno || end == v || *end)
            flag_error("%s '%s' is not a whole number (e.g. %s 1)", fl->name, v, fl->name);
        *(uint64_t *)fl->ptr = x;
        break;
    }
    case PL_FLAG_FLOAT:
    case PL_FLAG_DOUBLE: {
        double x = strtod(v, &end);
        if (errno || end == v || *end || !isfinite(x))
            flag_error("%s '%s' is not a number (e.g. %s 0.001)", fl->name, v, fl->name);
        if (fl->kind == PL_FLAG_FLOAT) *(float *)fl->ptr = (float)x;
        else *(double *)fl->ptr = x;
        break;
    }
    case PL_FLAG_STR:
        if (!*v) flag_error("%s needs a value (%s %s)", fl->name, fl->name, fl->arg);
        *(const char **)fl->ptr = v;
        break;
    case PL_FLAG_SWITCH: *(int *)fl->ptr = 1; break;
    }
    fl->set = 1;
}

static struct pl_flag *find_flag(const char *name, struct pl_flag *const *tables, const int *n,
                                 int ntables)
{
    for (int t = 0; t < ntables; t++)
        for (int i = 0; i < n[t]; i++)
            if (!strcmp(tables[t][i].name, name)) return &tables[t][i];
    return NULL;
}

void pl_flags_parse(const struct pl_flags_program *prog, struct pl_flag *const *tables,
                    const int *n, int ntables, int argc, char **argv)
{
    cur = prog;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            if (!pl_initialized() || pl_rank() == 0)
                pl_flags_help(stdout, prog, tables, n, ntables);
            if (pl_initialized()) pl_finalize();
            exit(0);
        }
        const char *eq = strchr(a, '=');
        char name[64];
        snprintf(name, sizeof name, "%.*s", eq ? (int)(eq - a) : (int)strlen(a), a);
        struct pl_flag *fl = find_flag(name, tables, n, ntables);
        if (!fl) unknown_flag(name, tables, n, ntables);
        if (fl->kind == PL_FLAG_SWITCH && !eq)
            parse_value(fl, "");
        else if (eq)
            parse_value(fl, eq + 1);
        else if (i + 1 < argc)
            parse_value(fl, argv[++i]);
        else
            flag_error("%s needs a value (%s %s: %s)", a, a, fl->arg, fl->help);
    }
}

int pl_flag_given(const struct pl_flag *flags, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(flags[i].name, name)) return flags[i].set;
    return 0;
}
