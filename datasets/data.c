/* data.c: the synthetic corpus, byte-level tokenisation, the token file format and the
 * loader that slices a global batch across ranks (see data.h and datasets/README.md). */
#include "data.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "fileio.h"
#include "mem.h"
#include "rng.h"
#include "util.h"

/* ---------------------------------------------------------------- tokens in memory */

uint64_t pl_tokens_checksum(const uint16_t *tok, int64_t n)
{
    uint64_t h = PL_FNV1A_START;
    for (int64_t i = 0; i < n; i++) {
        unsigned char le[2];
        pl_put_le(le, tok[i], 2);
        h = pl_fnv1a(h, le, 2);
    }
    return h;
}

static void set_source(struct pl_tokens *t, const char *source)
{
    snprintf(t->source, sizeof t->source, "%s", source ? source : "(memory)");
}

struct pl_tokens pl_tokens_new(int64_t n, int vocab, const char *source)
{
    PL_ASSERT(n >= 0 && vocab >= 1 && vocab <= PL_TOKENS_MAX_VOCAB);
    struct pl_tokens t;
    memset(&t, 0, sizeof t);
    /* The dataset is input, not training state: it is charged as workspace so the
     * params/grads/optim categories the ZeRO lab measures stay exact. */
    t.tok = pl_mem_alloc((size_t)n * sizeof(uint16_t), PL_MEM_WORK, PL_HOST, "tokens");
    t.n = n;
    t.vocab = vocab;
    set_source(&t, source);
    return t;
}

void pl_tokens_free(struct pl_tokens *t)
{
    if (t->tok) pl_mem_free(t->tok);
    memset(t, 0, sizeof *t);
}

/* ---------------------------------------------------------------- the file format */

enum { TOKEN_BYTES = 2, CHUNK = 1 << 15 };

void pl_tokens_write(const char *path, const struct pl_tokens *t)
{
    struct pl_atomic_file a;
    pl_atomic_open(&a, path, "token file");

    unsigned char hdr[PL_TOKENS_HEADER_BYTES];
    memset(hdr, 0, sizeof hdr);
    memcpy(hdr, PL_TOKENS_MAGIC, 8);
    pl_put_le(hdr + 8, PL_TOKENS_VERSION, 4);
    pl_put_le(hdr + 12, (uint32_t)t->vocab, 4);
    pl_put_le(hdr + 16, TOKEN_BYTES, 4);
    pl_put_le(hdr + 20, PL_TOKENS_HEADER_BYTES, 4);
    pl_put_le(hdr + 24, (uint64_t)t->n, 8);
    pl_put_le(hdr + 32, pl_tokens_checksum(t->tok, t->n), 8);
    pl_atomic_write(&a, hdr, sizeof hdr);

    /* Explicit little-endian bytes, so a file reads the same on any host. */
    static unsigned char buf[CHUNK * TOKEN_BYTES];
    for (int64_t i = 0; !a.failed && i < t->n; i += CHUNK) {
        int64_t m = t->n - i < CHUNK ? t->n - i : CHUNK;
        for (int64_t j = 0; j < m; j++) pl_put_le(buf + TOKEN_BYTES * j, t->tok[i + j], 2);
        pl_atomic_write(&a, buf, (size_t)m * TOKEN_BYTES);
    }
    pl_atomic_commit(&a);
}

/* Printable form of the first 8 bytes, for the wrong-magic message. */
static void show_bytes(const unsigned char *p, int n, char *out, size_t len)
{
    size_t k = 0;
    for (int i = 0; i < n && k + 5 < len; i++) {
        if (p[i] >= 32 && p[i] < 127 && p[i] != '"' && p[i] != '\\')
            out[k++] = (char)p[i];
        else
            k += (size_t)snprintf(out + k, len - k, "\\x%02x", p[i]);
    }
    out[k] = 0;
}

#define MAKE_ONE "make one with gencorpus or tokenize"

int pl_tokens_read_checked(const char *path, struct pl_tokens *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f)
        return pl_err(err, errlen, "cannot open token file '%s': %s (%s)", path, strerror(errno),
                    MAKE_ONE);
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return pl_err(err, errlen, "token file '%s' is not a regular file", path);
    }
    int64_t size = (int64_t)st.st_size;
    unsigned char hdr[PL_TOKENS_HEADER_BYTES];
    size_t got_hdr = fread(hdr, 1, sizeof hdr, f);
    /* The magic first: a short text file is "not a token file" rather than "truncated". */
    if (got_hdr >= 8 && memcmp(hdr, PL_TOKENS_MAGIC, 8) != 0) {
        char shown[64];
        show_bytes(hdr, 8, shown, sizeof shown);
        fclose(f);
        return pl_err(err, errlen,
                    "'%s' is not a paralab token file: wrong magic \"%s\", expected \"%s\" (%s; "
                    "a text file must be tokenized first)",
                    path, shown, PL_TOKENS_MAGIC, MAKE_ONE);
    }
    if (got_hdr != sizeof hdr) {
        fclose(f);
        return pl_err(err, errlen,
                    "token file '%s' is truncated: %lld bytes, shorter than the %d-byte header "
                    "(%s)",
                    path, (long long)size, PL_TOKENS_HEADER_BYTES, MAKE_ONE);
    }
    uint32_t version = (uint32_t)pl_get_le(hdr + 8, 4), vocab = (uint32_t)pl_get_le(hdr + 12, 4);
    uint32_t tbytes = (uint32_t)pl_get_le(hdr + 16, 4), hbytes = (uint32_t)pl_get_le(hdr + 20, 4);
    uint64_t n = pl_get_le(hdr + 24, 8), sum = pl_get_le(hdr + 32, 8);
    if (version != PL_TOKENS_VERSION) {
        fclose(f);
        return pl_err(err, errlen,
                    "token file '%s' has format version %u; this build reads version %u "
                    "(regenerate it with this build's gencorpus or tokenize)",
                    path, version, PL_TOKENS_VERSION);
    }
    if (tbytes != TOKEN_BYTES || hbytes != PL_TOKENS_HEADER_BYTES) {
        fclose(f);
        return pl_err(err, errlen,
                    "token file '%s' has a corrupt header: %u bytes per token and a %u-byte "
                    "header, expected %d and %d",
                    path, tbytes, hbytes, TOKEN_BYTES, PL_TOKENS_HEADER_BYTES);
    }
    if (vocab < 1 || vocab > PL_TOKENS_MAX_VOCAB) {
        fclose(f);
        return pl_err(err, errlen,
                    "token file '%s' has vocab size %u, out of range: it must be 1..%d", path,
                    vocab, PL_TOKENS_MAX_VOCAB);
    }
    int64_t body = size - PL_TOKENS_HEADER_BYTES;
    if (n > (uint64_t)INT64_MAX / TOKEN_BYTES || (int64_t)n * TOKEN_BYTES != body) {
        fclose(f);
        if (n <= (uint64_t)INT64_MAX / TOKEN_BYTES && body < (int64_t)n * TOKEN_BYTES)
            return pl_err(err, errlen,
                        "token file '%s' is truncated: the header says %llu tokens (%llu "
                        "bytes) but only %lld bytes follow it",
                        path, (unsigned long long)n, (unsigned long long)n * TOKEN_BYTES,
                        (long long)body);
        return pl_err(err, errlen,
                    "token file '%s' has a token count mismatch: the header says %llu tokens "
                    "but %lld bytes (%lld tokens) follow it",
                    path, (unsigned long long)n, (long long)body, (long long)(body / TOKEN_BYTES));
    }

    *out = pl_tokens_new((int64_t)n, (int)vocab, path);
    static unsigned char buf[CHUNK * TOKEN_BYTES];
    for (int64_t i = 0; i < (int64_t)n; i += CHUNK) {
        int64_t m = (int64_t)n - i < CHUNK ? (int64_t)n - i : CHUNK;
        if (fread(buf, TOKEN_BYTES, (size_t)m, f) != (size_t)m) {
            fclose(f);
            pl_tokens_free(out);
            return pl_err(err, errlen, "reading token file '%s' failed at token %lld", path,
                        (long long)i);
        }
        for (int64_t j = 0; j < m; j++)
            out->tok[i + j] = (uint16_t)pl_get_le(buf + TOKEN_BYTES * j, 2);
    }
    fclose(f);

    uint64_t got = pl_tokens_checksum(out->tok, out->n);
    if (got != sum) {
        pl_tokens_free(out);
        return pl_err(err, errlen,
                    "token file '%s' is corrupt: checksum %016llx in the header, but the tokens "
                    "hash to %016llx (regenerate the file)",
                    path, (unsigned long long)sum, (unsigned long long)got);
    }
    for (int64_t i = 0; i < out->n; i++) {
        if (out->tok[i] >= vocab) {
            int v = out->tok[i];
            pl_tokens_free(out);
            return pl_err(err, errlen,
                        "token file '%s': token %d at index %lld is out of range for its vocab "
                        "size %u (tokens must be 0..%u)",
                        path, v, (long long)i, vocab, vocab - 1);
        }
    }
    return 0;
}

struct pl_tokens pl_tokens_read(const char *path)
{
    struct pl_tokens t;
    char err[1024];
    if (pl_tokens_read_checked(path, &t, err, sizeof err) != 0) pl_usage_error("%s", err);
    return t;
}

/* ---------------------------------------------------------------- byte tokenisation */

int64_t pl_utf8_first_invalid(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t len;
        uint32_t cp, min;
        if ((c & 0xe0) == 0xc0) {
            len = 2, cp = c & 0x1f, min = 0x80;
        } else if ((c & 0xf0) == 0xe0) {
            len = 3, cp = c & 0x0f, min = 0x800;
        } else if ((c & 0xf8) == 0xf0) {
            len = 4, cp = c & 0x07, min = 0x10000;
        } else {
            return (int64_t)i;
        }
        if (i + len > n) return (int64_t)i;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xc0) != 0x80) return (int64_t)i;
            cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return (int64_t)i;
        i += len;
    }
    return -1;
}

struct pl_tokens pl_tokens_from_bytes(const unsigned char *s, size_t n, const char *source)
{
    struct pl_tokens t = pl_tokens_new((int64_t)n, PL_BYTE_VOCAB, source);
    for (size_t i = 0; i < n; i++) t.tok[i] = s[i];
    return t;
}

void pl_tokens_to_bytes(const struct pl_tokens *t, unsigned char *out)
{
    for (int64_t i = 0; i < t->n; i++) {
        PL_REQUIRE(t->tok[i] < 256,
                   "'%s' is not byte-level: token %d at index %lld is above 255 (vocab %d)",
                   t->source, t->tok[i], (long long)i, t->vocab);
        out[i] = (unsigned char)t->tok[i];
    }
}

/* ---------------------------------------------------------------- the synthetic corpus */

/* The generator writes an endless stream into a window [0, n) and stops once it is full.
 * Every random choice draws the next counter of one stream, so the text is a pure function
 * of the seed. */
struct gen {
    uint64_t seed, stream, ctr;
    char *out;
    size_t n, pos;
};

static unsigned pick(struct gen *g, unsigned k)
{
    return (unsigned)(pl_rng_u64(g->seed, g->stream, g->ctr++) % k);
}

static void emit(struct gen *g, const char *s)
{
    for (; *s && g->pos < g->n; s++) g->out[g->pos++] = *s;
}

static void emitf(struct gen *g, const char *fmt, ...) PL_PRINTF(2, 3);
static void emitf(struct gen *g, const char *fmt, ...)
{
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    emit(g, buf);
}

/* The first letter of a sentence is upper case; emitting through this keeps that rule. */
static void emit_cap(struct gen *g, const char *s)
{
    if (g->pos < g->n && *s) {
        char c = *s;
        g->out[g->pos++] = (c >= 'a' && c <= 'z') ? (char)(c - 'a' + 'A') : c;
        s++;
    }
    emit(g, s);
}

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const char *const NAMES[] = {"Alice", "Bob",  "Carol", "Dave",  "Erin",   "Frank",
                                    "Grace", "Heidi", "Ivan", "Judy",  "Oscar",  "Peggy",
                                    "Rupert", "Sybil", "Trent", "Victor", "Wendy", "Zoe"};
static const char *const THINGS[][2] = {
    {"apple", "apples"}, {"book", "books"}, {"coin", "coins"},   {"box", "boxes"},
    {"cherry", "cherries"}, {"key", "keys"}, {"stone", "stones"}, {"cup", "cups"},
    {"shell", "shells"}, {"pencil", "pencils"}};
static const char *const ANIMALS[][2] = {{"cat", "cats"},     {"dog", "dogs"},
                                         {"bird", "birds"},   {"fox", "foxes"},
                                         {"child", "children"}, {"mouse", "mice"},
                                         {"horse", "horses"}, {"sheep", "sheep"}};
/* Verb forms: [0] with a plural subject, [1] with a singular one. */
static const char *const VERBS[][2] = {{"sleep", "sleeps"}, {"run", "runs"},
                                       {"sit", "sits"},     {"watch", "watches"},
                                       {"play", "plays"},   {"wait", "waits"},
                                       {"hide", "hides"}};
static const char *const ADJS[] = {"little", "old", "brown", "quiet", "happy", "small",
                                   "young", "grey"};
static const char *const PLACES[] = {"the door", "the river", "the old tree", "the house",
                                     "the garden", "the hill", "the gate", "the market"};
static const char *const PREPS[] = {"near", "by", "under", "behind", "beside"};
static const char *const MOODS[] = {"happy", "tired", "hungry", "calm", "busy"};
static const char *const WORDS[] = {"zero",    "one",     "two",       "three",    "four",
                                    "five",    "six",     "seven",     "eight",    "nine",
                                    "ten",     "eleven",  "twelve",    "thirteen", "fourteen",
                                    "fifteen", "sixteen", "seventeen", "eighteen", "nineteen",
                                    "twenty"};

static const char *thing(unsigned k, unsigned count)
{
    return THINGS[k][count == 1 ? 0 : 1];
}

/* A short story: two people, counts that change by a transfer, and a check that adds up. */
static void story(struct gen *g)
{
    unsigned a = pick(g, COUNT(NAMES)), b = (a + 1 + pick(g, COUNT(NAMES) - 1)) % COUNT(NAMES);
    unsigned k = pick(g, COUNT(THINGS));
    unsigned na = 1 + pick(g, 9), nb = pick(g, 6), give = 1 + pick(g, na);
    const char *A = NAMES[a], *Bn = NAMES[b];
    emitf(g, "%s has %u %s. %s has %u %s. ", A, na, thing(k, na), Bn, nb, thing(k, nb));
    emitf(g, "%s gives %u %s to %s. ", A, give, thing(k, give), Bn);
    emitf(g, "Now %s has %u %s and %s has %u %s. ", A, na - give, thing(k, na - give), Bn,
          nb + give, thing(k, nb + give));
    if (pick(g, 2)) {
        unsigned found = 1 + pick(g, 5), now = nb + give + found;
        emitf(g, "Then %s finds %u more %s, so %s has %u %s. ", Bn, found, thing(k, found), Bn,
              now, thing(k, now));
    }
    emitf(g, "%s is %s.\n", A, MOODS[pick(g, COUNT(MOODS))]);
}

/* Sentences whose verb and copula agree with a singular or plural subject. */
static void scene(struct gen *g)
{
    unsigned sentences = 2 + pick(g, 3);
    for (unsigned s = 0; s < sentences; s++) {
        unsigned an = pick(g, COUNT(ANIMALS)), plural = pick(g, 2);
        unsigned v = pick(g, COUNT(VERBS));
        emit_cap(g, "the ");
        emitf(g, "%s %s %s %s %s. ", ADJS[pick(g, COUNT(ADJS))], ANIMALS[an][plural],
              VERBS[v][!plural], PREPS[pick(g, COUNT(PREPS))], PLACES[pick(g, COUNT(PLACES))]);
        emitf(g, "The %s %s %s.", ANIMALS[an][plural], plural ? "are" : "is",
              MOODS[pick(g, COUNT(MOODS))]);
        emit(g, s + 1 < sentences ? " " : "\n");
    }
}

/* A counting run, up or down, in digits or in words: every next item is predictable. */
static void counting(struct gen *g)
{
    unsigned len = 4 + pick(g, 6);
    if (pick(g, 2)) {
        unsigned start = pick(g, 21 - len + 1);
        emit(g, "Count in words:");
        for (unsigned i = 0; i < len; i++) emitf(g, " %s", WORDS[start + i]);
    } else if (pick(g, 2)) {
        unsigned start = pick(g, 90);
        emitf(g, "Count from %u:", start);
        for (unsigned i = 0; i < len; i++) emitf(g, " %u", start + i);
    } else {
        unsigned start = len + pick(g, 40);
        emitf(g, "Count down from %u:", start);
        for (unsigned i = 0; i < len; i++) emitf(g, " %u", start - i);
    }
    emit(g, ".\n");
}

/* Correct arithmetic facts with small operands. */
static void arithmetic(struct gen *g)
{
    unsigned facts = 2 + pick(g, 3);
    for (unsigned i = 0; i < facts; i++) {
        unsigned x = pick(g, 20), y = pick(g, 20);
        switch (pick(g, 3)) {
        case 0: emitf(g, "%u + %u = %u.", x, y, x + y); break;
        case 1: emitf(g, "%u - %u = %u.", x > y ? x : y, x > y ? y : x, x > y ? x - y : y - x); break;
        default: emitf(g, "%u * %u = %u.", x % 10, y % 10, (x % 10) * (y % 10)); break;
        }
        emit(g, i + 1 < facts ? " " : "\n");
    }
}

void pl_corpus_generate(uint64_t seed, char *out, size_t n)
{
    struct gen g = {seed, pl_rng_stream("datasets.corpus"), 0, out, n, 0};
    while (g.pos < g.n) {
        switch (pick(&g, 4)) {
        case 0: story(&g); break;
        case 1: scene(&g); break;
        case 2: counting(&g); break;
        default: arithmetic(&g); break;
        }
    }
}

struct pl_tokens pl_corpus_tokens(uint64_t seed, int64_t n)
{
    PL_REQUIRE(n > 0, "corpus size %lld must be positive", (long long)n);
    char *text = pl_mem_alloc((size_t)n, PL_MEM_WORK, PL_HOST, "corpus text");
    pl_corpus_generate(seed, text, (size_t)n);
    char source[64];
    snprintf(source, sizeof source, "synthetic corpus (seed %llu)", (unsigned long long)seed);
    struct pl_tokens t = pl_tokens_from_bytes((const unsigned char *)text, (size_t)n, source);
    pl_mem_free(text);
    return t;
}

/* ---------------------------------------------------------------- the loader */

void pl_loader_init(struct pl_loader *l, const struct pl_tokens *data, int B, int T, int rank,
                    int nranks, uint64_t seed)
{
    memset(l, 0, sizeof *l);
    PL_REQUIRE(B > 0, "batch=%d must be positive", B);
    PL_REQUIRE(T > 0, "seq_len=%d must be positive", T);
    PL_REQUIRE(nranks > 0 && rank >= 0 && rank < nranks, "rank %d of %d ranks is not valid",
               rank, nranks);
    PL_REQUIRE(B % nranks == 0,
               "batch=%d is not divisible by %d ranks: each rank takes batch/ranks sequences "
               "(choose a batch that is a multiple of %d)",
               B, nranks, nranks);
    int64_t need = (int64_t)B * T + 1;
    PL_REQUIRE(data->n >= need,
               "%s holds %lld tokens, shorter than one batch: batch=%d x seq_len=%d needs %lld "
               "(use a longer file, or a smaller batch or seq_len)",
               data->source, (long long)data->n, B, T, (long long)need);
    l->data = data;
    l->B = B;
    l->T = T;
    l->rank = rank;
    l->nranks = nranks;
    l->local_B = B / nranks;
    l->seed = seed;
    l->windows = (data->n - 1) / T;
    l->epoch = -1;
    l->perm = pl_mem_alloc((size_t)l->windows * sizeof(int64_t), PL_MEM_WORK, PL_HOST,
                           "loader order");
}

void pl_loader_free(struct pl_loader *l)
{
    if (l->perm) pl_mem_free(l->perm);
    memset(l, 0, sizeof *l);
}

/* Fisher-Yates with counter-based draws keyed by the epoch: every rank derives the same
 * order without talking to the others. */
static void shuffle_epoch(struct pl_loader *l, int64_t epoch)
{
    uint64_t stream = pl_rng_stream("datasets.loader") ^ pl_mix64((uint64_t)epoch);
    for (int64_t i = 0; i < l->windows; i++) l->perm[i] = i;
    for (int64_t i = l->windows - 1; i > 0; i--) {
        int64_t j = (int64_t)(pl_rng_u64(l->seed, stream, (uint64_t)i) % (uint64_t)(i + 1));
        int64_t t = l->perm[i];
        l->perm[i] = l->perm[j];
        l->perm[j] = t;
    }
    l->epoch = epoch;
}

int64_t pl_loader_window(struct pl_loader *l, int64_t g)
{
    PL_ASSERT(g >= 0);
    int64_t epoch = g / l->windows;
    if (epoch != l->epoch) shuffle_epoch(l, epoch);
    return l->perm[g % l->windows];
}

int64_t pl_loader_seq0(const struct pl_loader *l, int64_t step)
{
    return step * l->B + (int64_t)l->rank * l->local_B;
}

void pl_loader_batch(struct pl_loader *l, int64_t step, int *inputs, int *targets)
{
    PL_REQUIRE(step >= 0, "step %lld must not be negative", (long long)step);
    const int T = l->T;
    for (int i = 0; i < l->local_B; i++) {
        int64_t g = pl_loader_seq0(l, step) + i;
        const uint16_t *w = l->data->tok + pl_loader_window(l, g) * T;
        for (int t = 0; t < T; t++) {
            inputs[(size_t)i * T + t] = w[t];
            targets[(size_t)i * T + t] = w[t + 1];
        }
    }
}
