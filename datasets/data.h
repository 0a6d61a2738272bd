/* data.h: the kit's training data. A deterministic generator of a small synthetic language,
 * byte-level tokenisation of UTF-8 text, the token file format (see datasets/README.md),
 * and the loader that hands each rank its slice of a global batch.
 *
 * The vocabulary is bytes (256 tokens), so the generated corpus and any UTF-8 file use the
 * same model. Tokens are held as uint16 in memory and on disk so that a larger vocabulary
 * fits the same format. */
#ifndef PL_DATA_H
#define PL_DATA_H

#include <stddef.h>
#include <stdint.h>

#define PL_TOKENS_MAGIC "PLTOKENS" /* 8 bytes, no terminator on disk */
#define PL_TOKENS_VERSION 1u
#define PL_TOKENS_HEADER_BYTES 64
#define PL_TOKENS_MAX_VOCAB 65536
#define PL_BYTE_VOCAB 256

/* A token sequence in memory. `source` names where it came from, for messages. */
struct pl_tokens {
    uint16_t *tok;
    int64_t n;
    int vocab;
    char source[256];
};

/* FNV-1a 64 over the little-endian uint16 tokens: the checksum stored in the header. */
uint64_t pl_tokens_checksum(const uint16_t *tok, int64_t n);

/* An empty sequence of n tokens (zero-filled) with the given vocabulary. */
struct pl_tokens pl_tokens_new(int64_t n, int vocab, const char *source);
void pl_tokens_free(struct pl_tokens *t);

/* Writes to a temporary file next to path, then renames it over path, so a reader never
 * sees a half-written file (fileio.h). A path that cannot be written is a usage error
 * (exit 2); a write that fails once the file exists (disk full) is fatal (exit 1). */
void pl_tokens_write(const char *path, const struct pl_tokens *t);

/* Reads and validates a token file. On a bad file returns -1 and puts into err a message
 * naming the file, what was wrong and what would be right; the caller decides how to stop.
 * Returns 0 on success. */
int pl_tokens_read_checked(const char *path, struct pl_tokens *out, char *err, size_t errlen);

/* Same, but a bad file is a usage error: the message and exit code 2. */
struct pl_tokens pl_tokens_read(const char *path);

/* ---- byte-level tokenisation ---- */

/* Offset of the first byte that breaks UTF-8 (overlong forms, surrogates and code points
 * above U+10FFFF included), or -1 when all n bytes are valid UTF-8. */
int64_t pl_utf8_first_invalid(const unsigned char *s, size_t n);

/* One token per byte; vocab 256. */
struct pl_tokens pl_tokens_from_bytes(const unsigned char *s, size_t n, const char *source);

/* The bytes back, into out[n] (the caller allocates t->n bytes). A token above 255 is a
 * usage error: it is not a byte-level file. */
void pl_tokens_to_bytes(const struct pl_tokens *t, unsigned char *out);

/* ---- the synthetic corpus ---- */

/* Fills out[0..n) with text of the synthetic language, a pure function of (seed, n):
 * the first n bytes of an endless stream of short paragraphs. Sentences follow templates
 * with number agreement, named people reappear within a paragraph, counting runs continue
 * in order and arithmetic facts are correct, so a small model can learn real structure. */
void pl_corpus_generate(uint64_t seed, char *out, size_t n);

/* The corpus as n byte tokens. */
struct pl_tokens pl_corpus_tokens(uint64_t seed, int64_t n);

/* ---- the loader ---- */

/* The global batch of step s is B sequences of T+1 tokens (inputs and their next-token
 * targets). The token stream is cut into W = (n-1)/T windows of T+1 tokens overlapping by
 * one token; each epoch visits every window once in an order shuffled by (seed, epoch).
 * Global sequence g = s*B + b uses position g mod W of epoch g / W. Rank r of R gets rows
 * [r*B/R, (r+1)*B/R) of that batch, so the ranks' slices are disjoint and their
 * concatenation in rank order is the single-device batch exactly. */
struct pl_loader {
    const struct pl_tokens *data;
    int B, T;          /* global batch and sequence length */
    int rank, nranks;
    int local_B;       /* B / nranks */
    uint64_t seed;
    int64_t windows;   /* W */
    int64_t epoch;     /* epoch whose order is in perm, -1 before the first batch */
    int64_t *perm;     /* W window indices */
};

/* Checks B > 0, T > 0, B divisible by nranks and that the data holds at least one batch
 * (B*T+1 tokens); each failure is a usage error naming the file and the numbers. */
void pl_loader_init(struct pl_loader *l, const struct pl_tokens *data, int B, int T,
                    int rank, int nranks, uint64_t seed);
void pl_loader_free(struct pl_loader *l);

/* This rank's rows of the global batch of `step`: inputs and targets are local_B x T,
 * row-major; targets[i][t] = inputs[i][t+1] of the window. Deterministic in step alone,
 * so resuming at any step reproduces the same batches. */
void pl_loader_batch(struct pl_loader *l, int64_t step, int *inputs, int *targets);

/* Global index of this rank's first sequence in the batch of `step`: step*B + rank*local_B.
 * It is the model's pl_model_ctx.seq0, so each rank draws the dropout masks its rows would
 * get on one device. */
int64_t pl_loader_seq0(const struct pl_loader *l, int64_t step);

/* Window index (in the token stream, start = w*T) of global sequence g: for tests. */
int64_t pl_loader_window(struct pl_loader *l, int64_t g);

#endif
