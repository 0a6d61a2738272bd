/* verdict.c: a judge's reasons and the records of gathered observations (verdict.h). No
 * MPI here: a test program links this file with a lab's judge.c alone. */
#include "verdict.h"
#include "train.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

const char *gr_fmt_beyond_into(double x, double limit, char *buf, size_t len)
{
    char lim[32];
    for (int digits = 1; digits <= 9; digits++) {
        snprintf(buf, len, "%.*e", digits - 1, x);
        snprintf(lim, sizeof lim, "%.*e", digits - 1, limit);
        if (strcmp(buf, lim) && (strtod(buf, NULL) > limit) == (x > limit)) break;
    }
    return buf;
}

void gr_why_init(struct gr_why *w)
{
    w->n = 0;
    w->fraction = 1;
}

void gr_why_say(struct gr_why *w, const char *fmt, ...)
{
    if (w->n >= GR_WHY_LINES) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->line[w->n++], GR_WHY_LEN, fmt, ap);
    va_end(ap);
}

void gr_why_partial(struct gr_why *w, double fraction)
{
    if (fraction < w->fraction) w->fraction = fraction;
}

const void *gr_obs_rank(const struct gr_obs *o, int r)
{
    return o->data + (size_t)r * o->size;
}

/* The fixed head of one case in a record file. */
struct head {
    char magic[8];
    char lab[40];
    char op[32];
    int32_t icase, ncases, nranks, pad;
    uint64_t size;
};

int gr_record_write(FILE *f, const char *lab, const char *op, int icase, int ncases,
                    const struct gr_obs *o)
{
    struct head h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, GR_RECORD_MAGIC, sizeof h.magic);
    snprintf(h.lab, sizeof h.lab, "%s", lab);
    snprintf(h.op, sizeof h.op, "%s", op);
    h.icase = icase;
    h.ncases = ncases;
    h.nranks = o->nranks;
    h.size = o->size;
    size_t n = (size_t)o->nranks * o->size;
    if (fwrite(&h, sizeof h, 1, f) != 1 || (n && fwrite(o->data, n, 1, f) != 1)) return -1;
    return fflush(f) == 0 ? 0 : -1;
}

int gr_record_read(FILE *f, struct gr_record *r, char *err, size_t len)
{
    struct head h;
    memset(r, 0, sizeof *r);
    size_t got = fread(&h, 1, sizeof h, f);
    if (got == 0 && feof(f)) return 0;
    if (got != sizeof h || memcmp(h.magic, GR_RECORD_MAGIC, sizeof h.magic) != 0) {
        snprintf(err, len, "not a record of gathered observations (it starts with the magic "
                 "'%s' and is written by a driver's --record FILE)", GR_RECORD_MAGIC);
        return -1;
    }
    if (h.nranks < 1 || h.nranks > 4096 || h.size > ((uint64_t)1 << 30)) {
        snprintf(err, len, "case %d of op %s: %d ranks of %llu bytes each is no run a driver "
                 "makes", h.icase, h.op, h.nranks, (unsigned long long)h.size);
        return -1;
    }
    size_t n = (size_t)h.nranks * (size_t)h.size;
    unsigned char *data = malloc(n ? n : 1);
    if (!data || (n && fread(data, n, 1, f) != 1)) {
        free(data);
        snprintf(err, len, "case %d of op %s is cut short: %zu bytes of observations expected",
                 h.icase, h.op, n);
        return -1;
    }
    memcpy(r->lab, h.lab, sizeof r->lab);
    r->lab[sizeof r->lab - 1] = '\0';
    memcpy(r->op, h.op, sizeof r->op);
    r->op[sizeof r->op - 1] = '\0';
    r->icase = h.icase;
    r->ncases = h.ncases;
    r->obs.nranks = h.nranks;
    r->obs.size = (size_t)h.size;
    r->obs.data = data;
    return 1;
}

void gr_record_free(struct gr_record *r)
{
    free((void *)r->obs.data);
    r->obs.data = NULL;
}

void gr_cmp_words(const struct gr_cmp *m, const char *what, const char *hint, char *buf,
                  size_t len)
{
    const char *sep = hint[0] ? ": " : "";
    if (!m->finite)
        snprintf(buf, len, "%s: element %zu is %g (expected %g)%s%s", what, (size_t)m->at,
                 m->got, m->ref, sep, hint);
    else
        snprintf(buf, len, "%s: relative L2 error %.2e (tolerance %.0e; max abs %.2e at "
                 "element %zu: expected %.6g, got %.6g)%s%s", what, m->rel, m->tol, m->max_abs,
                 (size_t)m->at, m->ref, m->got, sep, hint);
}

const char *gr_param_error_words(const struct pl_model_layout *lay,
                                 const struct gr_param_verdict *v, char *buf, size_t len)
{
    if (v->tensor < 0 || v->tensor >= lay->n_tensors) {
        snprintf(buf, len, "no parameters compared");
        return buf;
    }
    const struct pl_param_desc *d = &lay->tensors[v->tensor];
    char shape[64] = "[", who[32] = "";
    size_t used = 1;
    for (int k = 0; k < d->ndim && used < sizeof shape; k++)
        used += (size_t)snprintf(shape + used, sizeof shape - used, "%s%lld", k ? ", " : "",
                                 (long long)d->shape[k]);
    if (used < sizeof shape) snprintf(shape + used, sizeof shape - used, "]");
    if (v->rank >= 0) snprintf(who, sizeof who, "rank %d, ", v->rank);
    if (v->nonfinite)
        snprintf(buf, len, "%stensor %s %s: %d elements in all are NaN or Inf (first bad element "
                 "%zu of this tensor)", who, d->name, shape, v->nonfinite, v->worst_elem);
    else
        snprintf(buf, len, "%stensor %s %s: relative L2 error %.2e (largest element error %.2e, "
                 "at element %zu), all parameters %.2e", who, d->name, shape, v->rel,
                 v->max_abs, v->worst_elem, v->overall);
    return buf;
}
