/* mem.h: the memory ledger. Every allocation of the kit goes through pl_mem_alloc, tagged
 * with a category, so each rank can say how many bytes of parameters, gradients, optimizer
 * state, activations, communication buffers and workspace it holds now and held at peak.
 * This is what the ZeRO lab measures its savings with. */
#ifndef PL_MEM_H
#define PL_MEM_H

#include <stddef.h>
#include <stdio.h>

enum pl_mem_cat {
    PL_MEM_PARAMS,
    PL_MEM_GRADS,
    PL_MEM_OPTIM,
    PL_MEM_ACTIV,
    PL_MEM_COMM,
    PL_MEM_WORK,
    PL_MEM_NCAT
};

/* Where a buffer lives. On the CPU build PL_DEVICE is host memory too. */
enum pl_where { PL_HOST, PL_DEVICE };

struct pl_mem_stats {
    size_t current[PL_MEM_NCAT];
    size_t peak[PL_MEM_NCAT]; /* peak of each category on its own */
    size_t current_total;
    size_t peak_total;        /* peak of the sum, which is at most the sum of the peaks */
    size_t live_allocs;
    size_t device_cached;     /* GPU build: freed device blocks the caching allocator keeps
                               * for reuse; held from the device, not by the program */
    size_t device_current;    /* the bytes of the PL_DEVICE blocks (every category), now */
    size_t device_peak;       /* and at peak: what a device's memory must hold */
    size_t device_cat[PL_MEM_NCAT];      /* the PL_DEVICE bytes of each category, now */
    size_t device_peak_cat[PL_MEM_NCAT]; /* and when device_peak was reached: what it holds */
};

const char *pl_mem_cat_name(enum pl_mem_cat cat); /* "params", "grads", "optim", ... */

/* Zero-filled, 64-byte aligned; never returns NULL (out of memory is fatal, naming label).
 * bytes == 0 is allowed and returns a unique non-NULL pointer that must still be freed. */
void *pl_mem_alloc(size_t bytes, enum pl_mem_cat cat, enum pl_where where, const char *label);

/* Freeing a pointer the ledger does not know (never allocated, or freed twice) is fatal
 * and names the label it had when it was last freed, if any. NULL is ignored. A host block
 * (every block of the CPU build) whose guard bytes were written, just past its end or just
 * before its start, is fatal too, naming the buffer written past. Before a
 * known block is freed, the check set by pl_mem_set_free_check (the communication layer's:
 * no call in flight may use the block) sees it; when it returns 1, the ledger forgets the
 * block but its memory is not released, so that a receive in flight cannot write into the
 * heap (the program is stopped with the reason when that call completes). */
void pl_mem_free(void *p);
void pl_mem_set_free_check(int (*check)(const void *p, size_t bytes, const char *label));

/* A device of a given size: when bytes > 0, an allocation in PL_DEVICE that would take this
 * rank's device bytes (device_current) past bytes stops the program (exit 1) naming the
 * block, what the rank holds and the cap, as a GPU's allocator fails when its memory is
 * full; on the CPU build too, so a run can be held to a device's memory anywhere. 0 (the
 * default) sets no cap. pl_init sets it from PL_DEVICE_MEM (pl_mem_parse_bytes's forms). */
void pl_mem_set_device_cap(size_t bytes);
size_t pl_mem_device_cap(void);
/* A size in bytes: a whole or decimal number with an optional unit, B, kB, MB, GB, TB
 * (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024), case aside, a space allowed
 * before it ("80GB", "1.5 GiB", "65536"). 0, or -1 when text is not one. */
int pl_mem_parse_bytes(const char *text, size_t *bytes);

/* Bytes and category of a live allocation; 0 and -1 when the pointer is unknown. */
size_t pl_mem_size(const void *p);

/* The live allocation that holds address p anywhere inside it: 1 with its place and label
 * (either pointer may be NULL), 0 when none does. It scans the ledger: for checks, not for
 * a hot path. */
int pl_mem_block_of(const void *p, enum pl_where *where, const char **label);

void pl_mem_get_stats(struct pl_mem_stats *out);

/* Starts a new measurement window: peaks are set to the current values. */
void pl_mem_reset_peak(void);

/* Lists live allocations (label, category, bytes) to f and returns how many there are;
 * pl_finalize calls it so that a leak is reported when the program ends. */
size_t pl_mem_report_leaks(FILE *f);

/* GPU build: returns the device blocks the caching allocator keeps (cudaFree, which waits
 * for the device); the CPU build keeps none. */
void pl_mem_release_cache(void);

/* Calls fn(now, ctx) after every allocation and free, with the ledger as it stands: how a
 * program draws its memory over time (Lab 3's sawtooth of gathered units). One watcher at
 * a time; fn NULL stops watching. fn must not allocate through the ledger. */
void pl_mem_watch(void (*fn)(const struct pl_mem_stats *now, void *ctx), void *ctx);

/* A one-line-per-category table of current and peak bytes. */
void pl_mem_print(FILE *f, const char *title);

#endif
