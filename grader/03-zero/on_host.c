/* on_host.c: the live PL_HOST blocks of the memory ledger, kept by wrapping pl_mem_alloc and
 * pl_mem_free (on_host.h). Few blocks are host memory (the kit's bookkeeping, a state
 * struct), so a plain array searched from the end serves. */
#include "on_host.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "mem.h"

struct block {
    uintptr_t p;
    size_t bytes;
    char label[48];
};

static struct {
    struct block *b;
    size_t n, cap;
    int on;
    struct gr03_on_host first;
} h;

void *__real_pl_mem_alloc(size_t bytes, enum pl_mem_cat cat, enum pl_where where,
                          const char *label);
void __real_pl_mem_free(void *p);

void *__wrap_pl_mem_alloc(size_t bytes, enum pl_mem_cat cat, enum pl_where where,
                          const char *label)
{
    void *p = __real_pl_mem_alloc(bytes, cat, where, label);
    if (where != PL_HOST) return p;
    if (h.n == h.cap) {
        h.cap = h.cap ? 2 * h.cap : 64;
        h.b = realloc(h.b, h.cap * sizeof *h.b);
        PL_REQUIRE(h.b, "out of memory keeping the PL_HOST blocks");
    }
    struct block *k = &h.b[h.n++];
    k->p = (uintptr_t)p;
    k->bytes = bytes;
    snprintf(k->label, sizeof k->label, "%s", label ? label : "");
    return p;
}

void __wrap_pl_mem_free(void *p)
{
    for (size_t i = h.n; p && i-- > 0;)
        if (h.b[i].p == (uintptr_t)p) {
            h.b[i] = h.b[--h.n];
            break;
        }
    __real_pl_mem_free(p);
}

void gr03_host_begin(void)
{
    h.first.seen = 0;
    h.on = 1;
}

struct gr03_on_host gr03_host_end(void)
{
    h.on = 0;
    return h.first;
}

void gr03_host_place(const void *buf, const char *call, const char *arg, int part)
{
    if (!h.on || h.first.seen || !buf) return;
    uintptr_t c = (uintptr_t)buf;
    for (size_t i = h.n; i-- > 0;) {
        const struct block *k = &h.b[i];
        if (c < k->p || c >= k->p + (k->bytes ? k->bytes : 1)) continue;
        h.first.seen = 1;
        snprintf(h.first.label, sizeof h.first.label, "%s", k->label);
        if (part >= -1)
            snprintf(h.first.what, sizeof h.first.what, "%s's %s (part %d)", call, arg, part);
        else
            snprintf(h.first.what, sizeof h.first.what, "%s's %s", call, arg);
        return;
    }
}
