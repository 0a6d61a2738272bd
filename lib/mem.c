/* mem.c: the memory ledger. Live allocations sit in an open-addressing table keyed by
 * pointer, so a free knows its size and category, an unknown pointer (double free) is
 * caught, and leaks can be listed at exit. A short ring of recent frees lets the double
 * free message name the buffer.
 *
 * On the GPU build device memory goes through a caching allocator: a freed device block is
 * kept for the next allocation of the same rounded size instead of being returned with
 * cudaFree, which waits for the whole device and would serialise every overlapped step.
 * The ledger still counts what the program holds; the blocks the cache keeps are reported
 * on their own (pl_mem_stats.device_cached), and given back when an allocation would
 * otherwise fail. A cap on the device bytes (pl_mem_set_device_cap, PL_DEVICE_MEM) makes an
 * allocation past it fail on either build, as a device of that size would. */
#include "mem.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#ifdef PL_GPU
#include <cuda_runtime.h>
#endif
#ifdef __GLIBC__
#include <malloc.h> /* mallopt */
#endif

#define LABEL_LEN 48
#define FREED_RING 256

struct entry {
    void *p; /* NULL: empty; TOMBSTONE: deleted */
    size_t bytes;
    enum pl_mem_cat cat;
    enum pl_where where;
    char label[LABEL_LEN];
};

struct freed {
    void *p;
    char label[LABEL_LEN];
};

/* A device block kept by the cache, by its rounded size. */
struct cached {
    void *p;
    size_t bytes;
};

static struct {
    struct entry *table;
    size_t cap, used; /* used counts live entries and tombstones */
    struct pl_mem_stats stats;
    struct freed ring[FREED_RING];
    size_t ring_next;
    struct cached *cache;
    size_t ncached, cap_cached;
    size_t device_cap; /* pl_mem_set_device_cap; 0: none */
} g;

static char tombstone_byte;
#define TOMBSTONE ((void *)&tombstone_byte)

static const char *cat_names[PL_MEM_NCAT] = {"params", "grads", "optim", "activ", "comm", "work"};

const char *pl_mem_cat_name(enum pl_mem_cat cat)
{
    return (cat >= 0 && cat < PL_MEM_NCAT) ? cat_names[cat] : "?";
}

static size_t slot_of(const void *p, size_t cap)
{
    uint64_t h = (uint64_t)(uintptr_t)p;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return (size_t)(h & (cap - 1));
}

static struct entry *find(const void *p)
{
    if (!g.table) return NULL;
    for (size_t i = slot_of(p, g.cap), n = 0; n < g.cap; i = (i + 1) & (g.cap - 1), n++) {
        if (g.table[i].p == NULL) return NULL;
        if (g.table[i].p == p) return &g.table[i];
    }
    return NULL;
}

static void insert(const struct entry *e);

static void grow(void)
{
    struct entry *old = g.table;
    size_t old_cap = g.cap;
    g.cap = old_cap ? old_cap * 2 : 1024;
    g.table = calloc(g.cap, sizeof *g.table);
    if (!g.table) pl_fatal("out of host memory for the memory ledger's table");
    g.used = 0;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].p && old[i].p != TOMBSTONE) insert(&old[i]);
    free(old);
}

static void insert(const struct entry *e)
{
    if ((g.used + 1) * 4 > g.cap * 3) grow();
    size_t i = slot_of(e->p, g.cap);
    while (g.table[i].p != NULL && g.table[i].p != TOMBSTONE) i = (i + 1) & (g.cap - 1);
    if (g.table[i].p == NULL) g.used++;
    g.table[i] = *e;
}

/* 64-byte multiples: a unique pointer even for empty buffers, and the size blocks are
 * cached by. */
static size_t rounded_size(size_t bytes)
{
    size_t rounded = (bytes + 63) / 64 * 64;
    return rounded ? rounded : 64;
}

#ifdef PL_GPU
static void *cache_take(size_t rounded)
{
    for (size_t i = g.ncached; i-- > 0;)
        if (g.cache[i].bytes == rounded) {
            void *p = g.cache[i].p;
            g.cache[i] = g.cache[--g.ncached];
            g.stats.device_cached -= rounded;
            return p;
        }
    return NULL;
}

static void cache_put(void *p, size_t rounded)
{
    if (g.ncached == g.cap_cached) {
        size_t cap = g.cap_cached ? 2 * g.cap_cached : 64;
        struct cached *c = realloc(g.cache, cap * sizeof *c);
        if (!c) { /* no room to remember it: give it back instead */
            PL_CHECK_CUDA(cudaFree(p));
            return;
        }
        g.cache = c;
        g.cap_cached = cap;
    }
    g.cache[g.ncached++] = (struct cached){p, rounded};
    g.stats.device_cached += rounded;
}
#endif

void pl_mem_release_cache(void)
{
#ifdef PL_GPU
    for (size_t i = 0; i < g.ncached; i++) PL_CHECK_CUDA(cudaFree(g.cache[i].p));
    g.ncached = 0;
    g.stats.device_cached = 0;
#endif
}

/* The host's counterpart of the device cache: glibc maps every block above its mmap
 * threshold (128 kB at first) afresh and trims the heap's top after each free, so a step
 * that allocates and frees a unit-sized buffer per layer (ZeRO-3's gathered parameters, its
 * gradient buckets) would pay for new pages on every use. Raising both thresholds once
 * keeps freed blocks in the heap for the next allocation. */
static void keep_host_blocks(void)
{
#ifdef __GLIBC__
    static int done;
    if (done) return;
    done = 1;
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 64 << 20);
#endif
}

/* Host blocks carry guards, checked when the block is freed: GUARD_BYTES of GUARD_FILL
 * before the block, and from its end (its bytes, not the rounded size) to GUARD_BYTES past
 * the rounded size. A write past the end of a buffer (rows sized by one width and written at
 * another, a count of elements taken for bytes) then stops the program naming the buffer,
 * where it would otherwise corrupt a neighbour or the C library's heap, or pass unseen,
 * as the heap's layout has it. A write that runs on into the next block is seen at either
 * block's free, usually the next one's (the C library's own check of the heap can stop the
 * program first: glibc's "free(): invalid size" is the same mistake). Device blocks of the
 * GPU build have none: checking them would copy them to the host. An AddressSanitizer
 * build (make ASAN=1) has none around the block either, so that its own check sees the
 * first byte past the rounded size; the rounded size's slack is still checked. */
#if defined(__SANITIZE_ADDRESS__)
#define GUARD_BYTES 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GUARD_BYTES 0
#endif
#endif
#ifndef GUARD_BYTES
#define GUARD_BYTES 64
#endif
#define GUARD_FILL 0xA5

static int guarded(enum pl_where where)
{
#ifdef PL_GPU
    return where != PL_DEVICE;
#else
    (void)where;
    return 1;
#endif
}

static void guard_set(unsigned char *p, size_t bytes)
{
    memset(p - GUARD_BYTES, GUARD_FILL, GUARD_BYTES);
    memset(p + bytes, GUARD_FILL, rounded_size(bytes) - bytes + GUARD_BYTES);
}

/* The first byte of n at g that is not GUARD_FILL, or n. */
static size_t guard_broken(const unsigned char *g0, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (g0[i] != GUARD_FILL) return i;
    return n;
}

/* 1 when e's guard after its end holds a changed byte, its offset past the end in *at. */
static int tail_broken(const struct entry *e, size_t *at)
{
    size_t n = rounded_size(e->bytes) - e->bytes + GUARD_BYTES;
    *at = guard_broken((const unsigned char *)e->p + e->bytes, n);
    return *at < n;
}

/* The live host block that ends last below p (where a write that ran into p's guard came
 * from), or NULL. */
static const struct entry *block_below(const void *p)
{
    const struct entry *best = NULL;
    for (size_t i = 0; i < g.cap; i++) {
        const struct entry *e = &g.table[i];
        if (!e->p || e->p == TOMBSTONE || !guarded(e->where) || e->p >= p) continue;
        if (!best || e->p > best->p) best = e;
    }
    return best;
}

static void guard_check(const struct entry *e)
{
    const unsigned char *p = e->p;
    size_t t;
    if (tail_broken(e, &t))
        pl_fatal("pl_mem_free: '%s' (%zu bytes, %s) was written past its end: byte %zu after "
                 "it changed. Some code wrote beyond the buffer it was given: rows sized by "
                 "one width and written at another (d_ff for d_model, say), a count of "
                 "elements taken for bytes, or an index one past the last",
                 e->label, e->bytes, cat_names[e->cat], t);
    if (guard_broken(p - GUARD_BYTES, GUARD_BYTES) == GUARD_BYTES) return;
    /* A write that ran on from the block below broke that block's tail guard first. */
    const struct entry *b = block_below(p);
    if (b && tail_broken(b, &t))
        pl_fatal("pl_mem_free: '%s' (%zu bytes, %s) was written past its end, on into the "
                 "guard before '%s', the block above it in memory. Some code wrote beyond the "
                 "buffer it was given: rows sized by one width and written at another (d_ff "
                 "for d_model, say), a count of elements taken for bytes, or an index past "
                 "the last",
                 b->label, b->bytes, cat_names[b->cat], e->label);
    pl_fatal("pl_mem_free: the guard bytes before '%s' (%zu bytes, %s) were overwritten: some "
             "code wrote before its start (a negative index) or past the end of a buffer "
             "freed since", e->label, e->bytes, cat_names[e->cat]);
}

static void *raw_alloc(size_t bytes, enum pl_where where, const char *label)
{
    size_t rounded = rounded_size(bytes);
#ifdef PL_GPU
    if (where == PL_DEVICE) {
        void *p = cache_take(rounded);
        if (!p && cudaMalloc(&p, rounded) != cudaSuccess) {
            /* The cache's blocks may be what is missing: return them and try once more. */
            (void)cudaGetLastError();
            pl_mem_release_cache();
            if (cudaMalloc(&p, rounded) != cudaSuccess)
                pl_fatal("cudaMalloc of %zu bytes for '%s' failed (the program holds %zu "
                         "bytes of device and host memory through the ledger)", bytes, label,
                         g.stats.current_total);
        }
        /* Stream-ordered on the compute stream, like every kernel that will use it. */
        PL_CHECK_CUDA(cudaMemset(p, 0, rounded));
        return p;
    }
#endif
    keep_host_blocks();
    unsigned char *block = aligned_alloc(64, GUARD_BYTES + rounded + GUARD_BYTES);
    if (!block) pl_fatal("out of memory allocating %zu bytes for '%s'", bytes, label);
    memset(block + GUARD_BYTES, 0, bytes);
    guard_set(block + GUARD_BYTES, bytes);
    return block + GUARD_BYTES;
}

static void raw_free(void *p, size_t bytes, enum pl_where where)
{
#ifdef PL_GPU
    if (where == PL_DEVICE) {
        /* Work already queued may still use the block: the next user is ordered after it
         * on the compute stream, and communication waits for the compute stream. */
        cache_put(p, rounded_size(bytes));
        return;
    }
#endif
    (void)bytes;
    free((unsigned char *)p - GUARD_BYTES);
}

/* The watcher (pl_mem_watch), told of every change. */
static void (*watch_fn)(const struct pl_mem_stats *, void *);
static void *watch_ctx;

void pl_mem_watch(void (*fn)(const struct pl_mem_stats *now, void *ctx), void *ctx)
{
    watch_fn = fn;
    watch_ctx = ctx;
}

static void told(void)
{
    if (watch_fn) watch_fn(&g.stats, watch_ctx);
}

void *pl_mem_alloc(size_t bytes, enum pl_mem_cat cat, enum pl_where where, const char *label)
{
    if (cat < 0 || cat >= PL_MEM_NCAT) pl_fatal("pl_mem_alloc: bad category %d for '%s'", cat, label);
    struct entry e = {.bytes = bytes, .cat = cat, .where = where};
    snprintf(e.label, sizeof e.label, "%s", label ? label : "?");
    struct pl_mem_stats *s = &g.stats;
    if (where == PL_DEVICE && g.device_cap &&
        (s->device_current > g.device_cap || bytes > g.device_cap - s->device_current))
        pl_fatal("out of device memory: this rank's cap is %zu bytes (PL_DEVICE_MEM or "
                 "pl_mem_set_device_cap), and pl_mem_alloc of %zu bytes for '%s' (%s) would "
                 "pass it with the %zu bytes of device memory held (params %zu, grads %zu, "
                 "optim %zu, activ %zu, comm %zu, work %zu): hold less at once "
                 "(recomputation, ZeRO, more stages, smaller microbatches, buffers freed "
                 "sooner) or run on a larger device",
                 g.device_cap, bytes, e.label, cat_names[cat], s->device_current,
                 s->device_cat[PL_MEM_PARAMS], s->device_cat[PL_MEM_GRADS],
                 s->device_cat[PL_MEM_OPTIM], s->device_cat[PL_MEM_ACTIV],
                 s->device_cat[PL_MEM_COMM], s->device_cat[PL_MEM_WORK]);
    e.p = raw_alloc(bytes, where, e.label);
    insert(&e);

    if (where == PL_DEVICE) {
        s->device_current += bytes;
        s->device_cat[cat] += bytes;
        if (s->device_current > s->device_peak) {
            s->device_peak = s->device_current;
            memcpy(s->device_peak_cat, s->device_cat, sizeof s->device_peak_cat);
        }
    }
    s->current[cat] += bytes;
    s->current_total += bytes;
    s->live_allocs++;
    if (s->current[cat] > s->peak[cat]) s->peak[cat] = s->current[cat];
    if (s->current_total > s->peak_total) s->peak_total = s->current_total;
    told();
    return e.p;
}

static int (*free_check)(const void *p, size_t bytes, const char *label);

void pl_mem_set_free_check(int (*check)(const void *p, size_t bytes, const char *label))
{
    free_check = check;
}

void pl_mem_free(void *p)
{
    if (!p) return;
    struct entry *e = find(p);
    if (!e) {
        for (size_t i = 0; i < FREED_RING; i++)
            if (g.ring[i].p == p)
                pl_fatal("pl_mem_free: '%s' (%p) was already freed (double free)",
                         g.ring[i].label, p);
        pl_fatal("pl_mem_free: %p was not allocated by pl_mem_alloc (or was freed long ago)", p);
    }
    if (guarded(e->where)) guard_check(e);
    int keep = free_check && free_check(p, e->bytes, e->label);
    struct pl_mem_stats *s = &g.stats;
    s->current[e->cat] -= e->bytes;
    s->current_total -= e->bytes;
    if (e->where == PL_DEVICE) s->device_current -= e->bytes, s->device_cat[e->cat] -= e->bytes;
    s->live_allocs--;
    struct freed *f = &g.ring[g.ring_next++ % FREED_RING];
    f->p = p;
    memcpy(f->label, e->label, LABEL_LEN);
    if (!keep) raw_free(p, e->bytes, e->where);
    e->p = TOMBSTONE;
    told();
}

size_t pl_mem_size(const void *p)
{
    struct entry *e = p ? find(p) : NULL;
    return e ? e->bytes : 0;
}

int pl_mem_block_of(const void *p, enum pl_where *where, const char **label)
{
    const char *c = p;
    for (size_t i = 0; p && i < g.cap; i++) {
        const struct entry *e = &g.table[i];
        if (!e->p || e->p == TOMBSTONE) continue;
        const char *lo = e->p;
        if (c < lo || c >= lo + (e->bytes ? e->bytes : 1)) continue;
        if (where) *where = e->where;
        if (label) *label = e->label;
        return 1;
    }
    return 0;
}

void pl_mem_get_stats(struct pl_mem_stats *out)
{
    *out = g.stats;
}

void pl_mem_reset_peak(void)
{
    for (int c = 0; c < PL_MEM_NCAT; c++) g.stats.peak[c] = g.stats.current[c];
    g.stats.peak_total = g.stats.current_total;
    g.stats.device_peak = g.stats.device_current;
    memcpy(g.stats.device_peak_cat, g.stats.device_cat, sizeof g.stats.device_peak_cat);
}

void pl_mem_set_device_cap(size_t bytes) { g.device_cap = bytes; }
size_t pl_mem_device_cap(void) { return g.device_cap; }

int pl_mem_parse_bytes(const char *text, size_t *bytes)
{
    static const struct { const char *unit; double scale; } units[] = {
        {"", 1.0}, {"b", 1.0}, {"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12},
        {"kib", 1024.0}, {"mib", 1048576.0}, {"gib", 1073741824.0}, {"tib", 1099511627776.0}};
    if (!text) return -1;
    const char *s = text;
    while (*s == ' ') s++;
    if (*s < '0' || *s > '9') return -1; /* no sign, no leading point, no "inf" */
    char *end;
    double v = strtod(s, &end);
    while (*end == ' ') end++;
    char unit[8];
    size_t n = strlen(end);
    if (n >= sizeof unit) return -1;
    for (size_t i = 0; i <= n; i++)
        unit[i] = (char)(end[i] >= 'A' && end[i] <= 'Z' ? end[i] - 'A' + 'a' : end[i]);
    for (size_t i = 0; i < sizeof units / sizeof *units; i++) {
        if (strcmp(unit, units[i].unit) != 0) continue;
        double b = v * units[i].scale;
        if (!(b >= 0.0) || b >= 1.8e19) return -1;
        *bytes = (size_t)(b + 0.5);
        return 0;
    }
    return -1;
}

size_t pl_mem_report_leaks(FILE *f)
{
    size_t n = 0;
    for (size_t i = 0; i < g.cap; i++) {
        struct entry *e = &g.table[i];
        if (!e->p || e->p == TOMBSTONE) continue;
        if (f) {
            if (n == 0) fprintf(f, "memory ledger: allocations never freed:\n");
            fprintf(f, "  %-32s %-6s %zu bytes\n", e->label, pl_mem_cat_name(e->cat), e->bytes);
        }
        n++;
    }
    return n;
}

void pl_mem_print(FILE *f, const char *title)
{
    fprintf(f, "%s\n  %-8s %14s %14s\n", title, "category", "current(B)", "peak(B)");
    for (int c = 0; c < PL_MEM_NCAT; c++)
        fprintf(f, "  %-8s %14zu %14zu\n", cat_names[c], g.stats.current[c], g.stats.peak[c]);
    fprintf(f, "  %-8s %14zu %14zu\n", "total", g.stats.current_total, g.stats.peak_total);
    if (g.device_cap)
        fprintf(f, "  device: %zu bytes now, %zu at peak, of a %zu-byte cap\n",
                g.stats.device_current, g.stats.device_peak, g.device_cap);
    if (g.stats.device_cached)
        fprintf(f, "  device cache: %zu bytes kept for reuse (not in the totals)\n",
                g.stats.device_cached);
}
