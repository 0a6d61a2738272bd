/* checkpoint.c: the single-device checkpoint (see checkpoint.h). The header is written field
 * by field in the order below, little-endian, zero-padded to 512 bytes:
 *
 *   magic[8] "PLCHECKP", u32 version, u32 header bytes,
 *   config: u32 vocab, d_model, n_layers, n_heads, d_ff, seq_len, f32 dropout,
 *           u32 n_experts, top_k, f32 capacity_factor, aux_loss_coef, u64 init seed,
 *   u64 numel, u64 adam_t,
 *   state:  i64 step, u64 seed, u32 batch, f32 lr, beta1, beta2, eps, weight_decay,
 *           grad_clip, i64 data_tokens, u64 data_checksum, i64 corpus_tokens,
 *           u64 corpus_seed, char data_path[256],
 *   ... zeros ..., u64 body checksum at 496, u64 header checksum (of bytes 0..503) at 504.
 *
 * The body is params, adam_m, adam_v: 3 x numel fp32. Both checksums are FNV-1a 64. */
#include "checkpoint.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "fileio.h"
#include "mem.h"
#include "ops.h"
#include "util.h"

enum { BODY_SUM_AT = 496, HEAD_SUM_AT = 504, CHUNK = 1 << 16 };

/* ---------------------------------------------------------------- header fields */

struct cursor {
    unsigned char *p;
    size_t at;
};

static void put(struct cursor *c, uint64_t v, int bytes)
{
    PL_ASSERT(c->at + (size_t)bytes <= BODY_SUM_AT);
    pl_put_le(c->p + c->at, v, bytes);
    c->at += (size_t)bytes;
}

static uint64_t get(struct cursor *c, int bytes)
{
    uint64_t v = pl_get_le(c->p + c->at, bytes);
    c->at += (size_t)bytes;
    return v;
}

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void put_f32(struct cursor *c, float f) { put(c, f32_bits(f), 4); }
static float get_f32(struct cursor *c) { return bits_f32((uint32_t)get(c, 4)); }

static void encode_header(unsigned char *h, const struct pl_model_config *cfg, uint64_t numel,
                          uint64_t adam_t, const struct pl_train_state *st)
{
    memset(h, 0, PL_CKPT_HEADER_BYTES);
    memcpy(h, PL_CKPT_MAGIC, 8);
    struct cursor c = {h, 8};
    put(&c, PL_CKPT_VERSION, 4);
    put(&c, PL_CKPT_HEADER_BYTES, 4);
    put(&c, (uint32_t)cfg->vocab, 4);
    put(&c, (uint32_t)cfg->d_model, 4);
    put(&c, (uint32_t)cfg->n_layers, 4);
    put(&c, (uint32_t)cfg->n_heads, 4);
    put(&c, (uint32_t)cfg->d_ff, 4);
    put(&c, (uint32_t)cfg->seq_len, 4);
    put_f32(&c, cfg->dropout);
    put(&c, (uint32_t)cfg->n_experts, 4);
    put(&c, (uint32_t)cfg->top_k, 4);
    put_f32(&c, cfg->capacity_factor);
    put_f32(&c, cfg->aux_loss_coef);
    put(&c, cfg->seed, 8);
    put(&c, numel, 8);
    put(&c, adam_t, 8);
    put(&c, (uint64_t)st->step, 8);
    put(&c, st->seed, 8);
    put(&c, (uint32_t)st->batch, 4);
    put_f32(&c, st->opt.lr);
    put_f32(&c, st->opt.beta1);
    put_f32(&c, st->opt.beta2);
    put_f32(&c, st->opt.eps);
    put_f32(&c, st->opt.weight_decay);
    put_f32(&c, st->opt.grad_clip);
    put(&c, (uint64_t)st->data_tokens, 8);
    put(&c, st->data_checksum, 8);
    put(&c, (uint64_t)st->corpus_tokens, 8);
    put(&c, st->corpus_seed, 8);
    PL_ASSERT(c.at + sizeof st->data_path <= BODY_SUM_AT);
    memcpy(h + c.at, st->data_path, sizeof st->data_path);
    h[c.at + sizeof st->data_path - 1] = 0;
}

static void decode_header(unsigned char *h, struct pl_model_config *cfg, uint64_t *numel,
                          uint64_t *adam_t, struct pl_train_state *st)
{
    struct cursor c = {h, 16};
    memset(cfg, 0, sizeof *cfg);
    memset(st, 0, sizeof *st);
    cfg->vocab = (int)get(&c, 4);
    cfg->d_model = (int)get(&c, 4);
    cfg->n_layers = (int)get(&c, 4);
    cfg->n_heads = (int)get(&c, 4);
    cfg->d_ff = (int)get(&c, 4);
    cfg->seq_len = (int)get(&c, 4);
    cfg->dropout = get_f32(&c);
    cfg->n_experts = (int)get(&c, 4);
    cfg->top_k = (int)get(&c, 4);
    cfg->capacity_factor = get_f32(&c);
    cfg->aux_loss_coef = get_f32(&c);
    cfg->seed = get(&c, 8);
    *numel = get(&c, 8);
    *adam_t = get(&c, 8);
    st->step = (int64_t)get(&c, 8);
    st->seed = get(&c, 8);
    st->batch = (int)get(&c, 4);
    st->opt.lr = get_f32(&c);
    st->opt.beta1 = get_f32(&c);
    st->opt.beta2 = get_f32(&c);
    st->opt.eps = get_f32(&c);
    st->opt.weight_decay = get_f32(&c);
    st->opt.grad_clip = get_f32(&c);
    st->data_tokens = (int64_t)get(&c, 8);
    st->data_checksum = get(&c, 8);
    st->corpus_tokens = (int64_t)get(&c, 8);
    st->corpus_seed = get(&c, 8);
    memcpy(st->data_path, h + c.at, sizeof st->data_path);
    st->data_path[sizeof st->data_path - 1] = 0;
}

/* ---------------------------------------------------------------- config comparison */

const char *pl_checkpoint_config_diff(const struct pl_model_config *a,
                                      const struct pl_model_config *b, char *buf, size_t len)
{
#define INT_FIELD(f)                                                                         \
    if (a->f != b->f) {                                                                      \
        snprintf(buf, len, #f ": %d in the checkpoint, %d here", a->f, b->f);                \
        return buf;                                                                          \
    }
#define FLOAT_FIELD(f)                                                                       \
    if (f32_bits(a->f) != f32_bits(b->f)) {                                                  \
        snprintf(buf, len, #f ": %g in the checkpoint, %g here", a->f, b->f);                \
        return buf;                                                                          \
    }
    INT_FIELD(vocab)
    INT_FIELD(d_model)
    INT_FIELD(n_layers)
    INT_FIELD(n_heads)
    INT_FIELD(d_ff)
    INT_FIELD(seq_len)
    FLOAT_FIELD(dropout)
    INT_FIELD(n_experts)
    /* MoE settings matter only when there are experts. */
    if (a->n_experts > 0) {
        INT_FIELD(top_k)
        FLOAT_FIELD(capacity_factor)
        FLOAT_FIELD(aux_loss_coef)
    }
    if (a->seed != b->seed) {
        snprintf(buf, len, "seed: %llu in the checkpoint, %llu here",
                 (unsigned long long)a->seed, (unsigned long long)b->seed);
        return buf;
    }
#undef INT_FIELD
#undef FLOAT_FIELD
    return NULL;
}

/* ---------------------------------------------------------------- save */

/* Streams one op-memory array to the file as little-endian fp32, adding its bytes to *sum. */
static void write_array(struct pl_atomic_file *a, const float *dev, size_t n, float *host,
                        unsigned char *bytes, uint64_t *sum)
{
    for (size_t i = 0; i < n && !a->failed; i += CHUNK) {
        size_t m = n - i < CHUNK ? n - i : CHUNK;
        if (dev)
            pl_to_host(host, dev + i, m * sizeof(float));
        else
            memset(host, 0, m * sizeof(float));
        for (size_t j = 0; j < m; j++) pl_put_le(bytes + 4 * j, f32_bits(host[j]), 4);
        *sum = pl_fnv1a(*sum, bytes, 4 * m);
        pl_atomic_write(a, bytes, 4 * m);
    }
}

void pl_checkpoint_save(const char *path, const struct pl_model *m,
                        const struct pl_train_state *st)
{
    PL_ASSERT(m->params != NULL);
    struct pl_atomic_file a;
    pl_atomic_open(&a, path, "checkpoint");

    unsigned char h[PL_CKPT_HEADER_BYTES];
    uint64_t numel = m->layout.numel;
    encode_header(h, &m->cfg, numel, (uint64_t)m->adam_t, st);
    pl_atomic_write(&a, h, sizeof h);

    float *host = pl_mem_alloc(CHUNK * sizeof(float), PL_MEM_WORK, PL_HOST, "checkpoint io");
    unsigned char *bytes = pl_mem_alloc(CHUNK * 4, PL_MEM_WORK, PL_HOST, "checkpoint io bytes");
    uint64_t sum = PL_FNV1A_START;
    write_array(&a, m->params, numel, host, bytes, &sum);
    write_array(&a, m->adam_m, numel, host, bytes, &sum);
    write_array(&a, m->adam_v, numel, host, bytes, &sum);
    pl_mem_free(host);
    pl_mem_free(bytes);

    /* The checksums go in last, over the finished body and header. */
    pl_put_le(h + BODY_SUM_AT, sum, 8);
    pl_put_le(h + HEAD_SUM_AT, pl_fnv1a(PL_FNV1A_START, h, HEAD_SUM_AT), 8);
    if (!a.failed) pl_atomic_ok(&a, fseek(a.f, 0, SEEK_SET) == 0);
    pl_atomic_write(&a, h, sizeof h);
    pl_atomic_commit(&a);
}

/* ---------------------------------------------------------------- load */

/* Opens path and validates the header; on success f is positioned at the body. */
static int open_checked(const char *path, FILE **fp, struct pl_model_config *cfg,
                        uint64_t *numel, uint64_t *adam_t, struct pl_train_state *st,
                        uint64_t *body_sum, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) return pl_err(err, errlen, "cannot open checkpoint '%s': %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return pl_err(err, errlen, "checkpoint '%s' is not a regular file", path);
    }
    unsigned char h[PL_CKPT_HEADER_BYTES];
    size_t got = fread(h, 1, sizeof h, f);
    if (got >= 8 && memcmp(h, PL_CKPT_MAGIC, 8) != 0) {
        fclose(f);
        return pl_err(err, errlen,
                    "'%s' is not a paralab checkpoint: wrong magic (expected \"%s\"; checkpoints "
                    "are written by train --save)",
                    path, PL_CKPT_MAGIC);
    }
    if (got != sizeof h) {
        fclose(f);
        return pl_err(err, errlen,
                    "checkpoint '%s' is truncated: %lld bytes, shorter than its %d-byte header",
                    path, (long long)sb.st_size, PL_CKPT_HEADER_BYTES);
    }
    struct cursor c = {h, 8};
    uint32_t version = (uint32_t)get(&c, 4), hbytes = (uint32_t)get(&c, 4);
    if (version != PL_CKPT_VERSION) {
        fclose(f);
        return pl_err(err, errlen,
                    "checkpoint '%s' has format version %u; this build reads version %u "
                    "(train again, or load it with the build that wrote it)",
                    path, version, PL_CKPT_VERSION);
    }
    c.at = HEAD_SUM_AT;
    uint64_t hs = get(&c, 8);
    if (hbytes != PL_CKPT_HEADER_BYTES || hs != pl_fnv1a(PL_FNV1A_START, h, HEAD_SUM_AT)) {
        fclose(f);
        return pl_err(err, errlen,
                    "checkpoint '%s' is corrupt: its header checksum does not match (the file "
                    "was damaged after it was written)",
                    path);
    }
    decode_header(h, cfg, numel, adam_t, st);
    c.at = BODY_SUM_AT;
    *body_sum = get(&c, 8);

    char why[512];
    if (pl_model_config_error(cfg, why, sizeof why)) {
        fclose(f);
        return pl_err(err, errlen, "checkpoint '%s' holds a config that cannot work: %s", path,
                    why);
    }
    struct pl_model_layout lay;
    pl_model_layout_init(&lay, cfg);
    size_t expect = lay.numel;
    pl_model_layout_free(&lay);
    if (*numel != expect) {
        fclose(f);
        return pl_err(err, errlen,
                    "checkpoint '%s' is corrupt: it says %llu parameters but its config has %zu",
                    path, (unsigned long long)*numel, expect);
    }
    long long body = (long long)sb.st_size - PL_CKPT_HEADER_BYTES;
    long long want = (long long)(3 * *numel * sizeof(float));
    if (body != want) {
        fclose(f);
        return pl_err(err, errlen,
                    "checkpoint '%s' is %s: %lld bytes follow the header, the %llu parameters "
                    "and their two AdamW moments need %lld",
                    path, body < want ? "truncated" : "too long (count mismatch)", body,
                    (unsigned long long)*numel, want);
    }
    *fp = f;
    return 0;
}

int pl_checkpoint_peek(const char *path, struct pl_model_config *cfg, struct pl_train_state *st,
                       char *err, size_t errlen)
{
    FILE *f;
    uint64_t numel, adam_t, body_sum;
    if (open_checked(path, &f, cfg, &numel, &adam_t, st, &body_sum, err, errlen) != 0) return -1;
    fclose(f);
    return 0;
}

static int read_array(FILE *f, float *dev, size_t n, float *host, unsigned char *bytes,
                      uint64_t *sum)
{
    for (size_t i = 0; i < n; i += CHUNK) {
        size_t m = n - i < CHUNK ? n - i : CHUNK;
        if (fread(bytes, 4, m, f) != m) return -1;
        *sum = pl_fnv1a(*sum, bytes, 4 * m);
        for (size_t j = 0; j < m; j++) host[j] = bits_f32((uint32_t)pl_get_le(bytes + 4 * j, 4));
        pl_to_device(dev + i, host, m * sizeof(float));
    }
    return 0;
}

int pl_checkpoint_load_checked(const char *path, struct pl_model *m, struct pl_train_state *st,
                               char *err, size_t errlen)
{
    PL_ASSERT(m->params && m->adam_m && m->adam_v);
    FILE *f;
    struct pl_model_config cfg;
    uint64_t numel, adam_t, body_sum;
    if (open_checked(path, &f, &cfg, &numel, &adam_t, st, &body_sum, err, errlen) != 0)
        return -1;
    char why[256];
    if (pl_checkpoint_config_diff(&cfg, &m->cfg, why, sizeof why)) {
        fclose(f);
        return pl_err(err, errlen,
                    "checkpoint '%s' does not match this model's config: %s (drop the config "
                    "flags to take the checkpoint's, or start without loading it)",
                    path, why);
    }
    float *host = pl_mem_alloc(CHUNK * sizeof(float), PL_MEM_WORK, PL_HOST, "checkpoint io");
    unsigned char *bytes = pl_mem_alloc(CHUNK * 4, PL_MEM_WORK, PL_HOST, "checkpoint io bytes");
    uint64_t sum = PL_FNV1A_START;
    int rc = read_array(f, m->params, numel, host, bytes, &sum);
    rc = rc ? rc : read_array(f, m->adam_m, numel, host, bytes, &sum);
    rc = rc ? rc : read_array(f, m->adam_v, numel, host, bytes, &sum);
    pl_mem_free(host);
    pl_mem_free(bytes);
    fclose(f);
    if (rc != 0) return pl_err(err, errlen, "reading checkpoint '%s' failed", path);
    if (sum != body_sum)
        return pl_err(err, errlen,
                    "checkpoint '%s' is corrupt: the parameters and moments do not match the "
                    "checksum in its header (the file was damaged after it was written)",
                    path);
    m->adam_t = (int)adam_t;
    pl_model_params_changed(m);
    return 0;
}

void pl_checkpoint_load(const char *path, struct pl_model *m, struct pl_train_state *st)
{
    char err[1024];
    if (pl_checkpoint_load_checked(path, m, st, err, sizeof err) != 0) pl_usage_error("%s", err);
}
