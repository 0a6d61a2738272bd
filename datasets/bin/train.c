/* train: the single-device trainer. Trains the reference GPT (or its MoE variant) on a token
 * file or on the synthetic corpus, printing a progress line per step and a summary, and
 * saves and resumes checkpoints with bit-identical losses. The help text is printed from the
 * same table the parser reads, so the two cannot drift apart. It lives under datasets/,
 * which builds on lib/, because it uses both (lib/ never includes datasets/). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint.h"
#include "data.h"
#include "fileio.h"
#include "flags.h"
#include "model.h"
#include "ops.h"
#include "paralab.h"

/* ---------------------------------------------------------------- flags */

struct opts {
    struct pl_model_config cfg;
    struct pl_adamw_config opt;
    const char *data, *save, *load, *losses, *recompute, *attention, *precision;
    int64_t corpus_tokens, steps, save_every, log_every;
    uint64_t corpus_seed;
    int batch;
};

static struct opts o;

#define F(name, kind, field, arg, help) {name, PL_FLAG_##kind, &o.field, arg, help, 0}
static struct pl_flag flags[] = {
    /* model */
    F("--vocab", INT, cfg.vocab, "N", "vocabulary size, at least the data's (256 for bytes)"),
    F("--d-model", INT, cfg.d_model, "N", "width of the residual stream"),
    F("--layers", INT, cfg.n_layers, "N", "transformer blocks"),
    F("--heads", INT, cfg.n_heads, "N", "attention heads (must divide --d-model)"),
    F("--d-ff", INT, cfg.d_ff, "N", "MLP hidden width; 4 x --d-model unless given"),
    F("--seq-len", INT, cfg.seq_len, "N", "tokens per sequence"),
    F("--dropout", FLOAT, cfg.dropout, "P", "residual dropout in [0, 1)"),
    F("--experts", INT, cfg.n_experts, "N", "experts per MoE layer (0: dense MLP)"),
    F("--top-k", INT, cfg.top_k, "K", "experts each token is routed to"),
    F("--capacity-factor", FLOAT, cfg.capacity_factor, "F", "expert capacity factor"),
    F("--aux-coef", FLOAT, cfg.aux_loss_coef, "A", "load-balancing loss coefficient"),
    F("--seed", U64, cfg.seed, "S", "initialisation, dropout and data-order seed"),
    /* training */
    F("--data", STR, data, "FILE", "token file (default: the synthetic corpus, in memory)"),
    F("--corpus-tokens", I64, corpus_tokens, "N", "size of the in-memory synthetic corpus"),
    F("--corpus-seed", U64, corpus_seed, "S", "seed of the in-memory synthetic corpus"),
    F("--steps", I64, steps, "N", "optimizer steps to take in this run"),
    F("--batch", INT, batch, "B", "sequences per step"),
    F("--lr", FLOAT, opt.lr, "X", "AdamW learning rate"),
    F("--weight-decay", FLOAT, opt.weight_decay, "X", "AdamW weight decay (matrices only)"),
    F("--grad-clip", FLOAT, opt.grad_clip, "X", "max global gradient norm (0: off)"),
    F("--recompute", STR, recompute, "R", "activation recomputation: none, selective or full (same losses bit for bit; less activation memory, more FLOPs)"),
    F("--attention", STR, attention, "A", "attention: materialised (saves each head's T x T probabilities) or flash (tiles with an online softmax; saves T log-sum-exps a head; the same losses to fp32 rounding)"),
    F("--precision", STR, precision, "P", "fp32, or bf16: mixed precision, with fp32 master weights and AdamW moments, a bf16 working copy and bf16 gradients (2 + 2 + 12 bytes a parameter) and the products (linear layers, attention) on bf16 inputs with fp32 sums (losses within bf16 rounding of fp32's)"),
    F("--grads-fp32", SWITCH, cfg.grads_fp32, NULL, "with --precision bf16: keep the gradients in fp32 (2 + 4 + 12 bytes a parameter)"),
    /* checkpoints and output */
    F("--save", STR, save, "FILE", "write a checkpoint here at the end"),
    F("--save-every", I64, save_every, "N", "also write it every N steps (0: only at the end)"),
    F("--load", STR, load, "FILE", "resume from this checkpoint"),
    F("--losses", STR, losses, "FILE", "write 'step loss' per step, loss as an exact hex float (on --load: kept up to the checkpoint's step, then appended to)"),
    F("--log-every", I64, log_every, "N", "print a progress line every N steps"),
};
#undef F
#define NFLAGS ((int)(sizeof flags / sizeof flags[0]))

static void defaults(void)
{
    o.cfg = pl_model_config_default();
    o.opt = pl_adamw_config_default();
    o.corpus_tokens = 1000000;
    o.corpus_seed = 1;
    o.steps = 200;
    o.batch = 8;
    o.log_every = 1;
    o.recompute = "none";
    o.attention = "materialised";
    o.precision = "fp32";
}

static void usage(FILE *f)
{
    defaults();
    fprintf(f, "usage: train [flags]\n\n"
               "Trains the reference GPT on one device, one progress line per step.\n"
               "Without --data it trains on the synthetic corpus generated in memory\n"
               "(datasets/README.md). --load resumes a checkpoint: its config and settings\n"
               "are used, and a flag that contradicts them is refused.\n\n");
}

static int given(const char *name) { return pl_flag_given(flags, NFLAGS, name); }

static void parse_args(int argc, char **argv)
{
    defaults();
    static const struct pl_flags_program prog = {"train", usage, 0};
    struct pl_flag *const tables[] = {flags};
    const int n[] = {NFLAGS};
    pl_flags_parse(&prog, tables, n, 1, argc, argv);
    if (given("--d-model") && !given("--d-ff")) o.cfg.d_ff = 4 * o.cfg.d_model;
}

static void check_training_flags(enum pl_recompute *recompute)
{
    if (pl_recompute_parse(o.recompute, recompute) != 0)
        pl_usage_error("--recompute '%s' is not a choice: use " PL_RECOMPUTE_NAMES, o.recompute);
    /* not a property of the weights: a resumed run may choose either */
    if (pl_attention_parse(o.attention, &o.cfg.attention) != 0)
        pl_usage_error("--attention '%s' is not a choice: use " PL_ATTENTION_NAMES,
                       o.attention);
    if (pl_precision_parse(o.precision, &o.cfg.precision) != 0)
        pl_usage_error("--precision '%s' is not a choice: use " PL_PRECISION_NAMES,
                       o.precision);
    PL_REQUIRE(!o.cfg.grads_fp32 || o.cfg.precision == PL_PRECISION_BF16,
               "--grads-fp32 is for --precision bf16 (with fp32 the gradients are fp32 "
               "already): add --precision bf16 or drop --grads-fp32");
    PL_REQUIRE(o.steps >= 0, "--steps %lld must be 0 or more", (long long)o.steps);
    PL_REQUIRE(o.batch > 0, "--batch %d must be positive (sequences per step)", o.batch);
    PL_REQUIRE(o.opt.lr > 0, "--lr %g must be positive (e.g. 0.001)", o.opt.lr);
    PL_REQUIRE(o.opt.weight_decay >= 0, "--weight-decay %g must be 0 or more",
               o.opt.weight_decay);
    PL_REQUIRE(o.opt.grad_clip >= 0, "--grad-clip %g must be 0 (off) or more", o.opt.grad_clip);
    PL_REQUIRE(o.corpus_tokens > 0, "--corpus-tokens %lld must be positive",
               (long long)o.corpus_tokens);
    PL_REQUIRE(o.log_every >= 1, "--log-every %lld must be 1 or more", (long long)o.log_every);
    PL_REQUIRE(o.save_every >= 0, "--save-every %lld must be 0 (off) or more",
               (long long)o.save_every);
    PL_REQUIRE(!o.save_every || o.save, "--save-every needs --save FILE to know where to write");
    /* A bad output path found after an hour of training loses the hour: try it now. */
    char err[8400];
    if (o.save && pl_atomic_check(o.save, "checkpoint", err, sizeof err) != 0)
        pl_usage_error("--save: %s", err);
}

/* ---------------------------------------------------------------- resuming */

/* A flag given on the command line must agree with the checkpoint; others take its value. */
static void adopt_int(const char *path, const char *flag, int *mine, int theirs)
{
    if (given(flag) && *mine != theirs)
        pl_usage_error("checkpoint '%s' was trained with %s %d but %s %d was given (leave the "
                       "flag out to use the checkpoint's value, or train from scratch)",
                       path, flag, theirs, flag, *mine);
    *mine = theirs;
}

static void adopt_float(const char *path, const char *flag, float *mine, float theirs)
{
    if (given(flag) && memcmp(mine, &theirs, sizeof theirs) != 0)
        pl_usage_error("checkpoint '%s' was trained with %s %g but %s %g was given (leave the "
                       "flag out to use the checkpoint's value, or train from scratch)",
                       path, flag, theirs, flag, *mine);
    *mine = theirs;
}

static void adopt_u64(const char *path, const char *flag, uint64_t *mine, uint64_t theirs)
{
    if (given(flag) && *mine != theirs)
        pl_usage_error("checkpoint '%s' was trained with %s %llu but %s %llu was given (leave "
                       "the flag out to use the checkpoint's value, or train from scratch)",
                       path, flag, (unsigned long long)theirs, flag, (unsigned long long)*mine);
    *mine = theirs;
}

static void adopt_checkpoint(const char *path, struct pl_train_state *st)
{
    struct pl_model_config c;
    char err[1024];
    if (pl_checkpoint_peek(path, &c, st, err, sizeof err) != 0) pl_usage_error("%s", err);
    adopt_int(path, "--vocab", &o.cfg.vocab, c.vocab);
    adopt_int(path, "--d-model", &o.cfg.d_model, c.d_model);
    adopt_int(path, "--layers", &o.cfg.n_layers, c.n_layers);
    adopt_int(path, "--heads", &o.cfg.n_heads, c.n_heads);
    adopt_int(path, "--d-ff", &o.cfg.d_ff, c.d_ff);
    adopt_int(path, "--seq-len", &o.cfg.seq_len, c.seq_len);
    adopt_float(path, "--dropout", &o.cfg.dropout, c.dropout);
    adopt_int(path, "--experts", &o.cfg.n_experts, c.n_experts);
    adopt_int(path, "--top-k", &o.cfg.top_k, c.top_k);
    adopt_float(path, "--capacity-factor", &o.cfg.capacity_factor, c.capacity_factor);
    adopt_float(path, "--aux-coef", &o.cfg.aux_loss_coef, c.aux_loss_coef);
    adopt_u64(path, "--seed", &o.cfg.seed, c.seed);
    adopt_int(path, "--batch", &o.batch, st->batch);
    adopt_float(path, "--lr", &o.opt.lr, st->opt.lr);
    adopt_float(path, "--weight-decay", &o.opt.weight_decay, st->opt.weight_decay);
    adopt_float(path, "--grad-clip", &o.opt.grad_clip, st->opt.grad_clip);
    o.opt.beta1 = st->opt.beta1;
    o.opt.beta2 = st->opt.beta2;
    o.opt.eps = st->opt.eps;
    if (st->corpus_tokens > 0) {
        if (!o.data) {
            int64_t n = st->corpus_tokens;
            uint64_t s = st->corpus_seed;
            if (given("--corpus-tokens") && o.corpus_tokens != n)
                pl_usage_error("checkpoint '%s' was trained on a synthetic corpus of %lld "
                               "tokens but --corpus-tokens %lld was given",
                               path, (long long)n, (long long)o.corpus_tokens);
            adopt_u64(path, "--corpus-seed", &o.corpus_seed, s);
            o.corpus_tokens = n;
        }
    } else if (!o.data) {
        pl_usage_error("checkpoint '%s' was trained on the data file '%s' (%lld tokens): pass "
                       "it with --data",
                       path, st->data_path, (long long)st->data_tokens);
    }
}

/* ---------------------------------------------------------------- training */

static void write_losses_line(FILE *f, int64_t step, double loss)
{
    if (f) fprintf(f, "%lld %a\n", (long long)step, loss);
}

/* The --losses file. A fresh run starts it empty. A resumed run keeps its lines up to the
 * checkpoint's step and cuts the rest: they were written by a run that went on past the
 * checkpoint, and this run writes those steps again, so the file always holds each step
 * once, as a run that never stopped would have written it. */
static FILE *open_losses(const char *path, int resumed, int64_t ckpt_step)
{
    FILE *f = resumed ? fopen(path, "r+") : NULL;
    if (!f) {
        if (resumed && errno != ENOENT)
            pl_usage_error("cannot open --losses file '%s': %s", path, strerror(errno));
        f = fopen(path, "w");
        if (!f) pl_usage_error("cannot write --losses file '%s': %s", path, strerror(errno));
        return f;
    }
    char line[256];
    long keep = 0;
    for (long long no = 1; fgets(line, sizeof line, f); no++) {
        long long step;
        char loss[64], extra;
        if (!strchr(line, '\n') || sscanf(line, "%lld %63s %c", &step, loss, &extra) != 2)
            pl_usage_error("--losses file '%s' line %lld is not a 'step loss' line of train: "
                           "it was not written by train (give a new file, or the one of the "
                           "run being resumed)", path, no);
        if (step > ckpt_step) break;
        keep = ftell(f);
    }
    if (ftruncate(fileno(f), keep) != 0 || fseek(f, 0, SEEK_END) != 0)
        pl_fatal("cutting --losses file '%s' back to step %lld failed: %s", path,
                 (long long)ckpt_step, strerror(errno));
    return f;
}

static const char *human(double v, char *buf, size_t len)
{
    if (v >= 1e9) snprintf(buf, len, "%.2fG", v / 1e9);
    else if (v >= 1e6) snprintf(buf, len, "%.2fM", v / 1e6);
    else if (v >= 1e3) snprintf(buf, len, "%.1fk", v / 1e3);
    else snprintf(buf, len, "%.0f", v);
    return buf;
}

int main(int argc, char **argv)
{
    pl_init(&argc, &argv);
    if (pl_size() > 1)
        pl_usage_error_all("train runs on one device, but %d ranks were started (run it without "
                           "mpirun; the labs train on several ranks)",
                           pl_size());
    parse_args(argc, argv);
    struct pl_train_state st;
    memset(&st, 0, sizeof st);
    if (o.load) adopt_checkpoint(o.load, &st);
    enum pl_recompute recompute;
    check_training_flags(&recompute);
    pl_model_config_check_or_die(&o.cfg);

    /* The data: a token file, or the synthetic corpus made in memory. */
    struct pl_tokens data = o.data ? pl_tokens_read(o.data)
                                   : pl_corpus_tokens(o.corpus_seed, o.corpus_tokens);
    PL_REQUIRE(data.vocab <= o.cfg.vocab,
               "%s has vocab size %d but the model's --vocab is %d (use --vocab %d or more)",
               data.source, data.vocab, o.cfg.vocab, data.vocab);
    uint64_t data_sum = pl_tokens_checksum(data.tok, data.n);
    if (o.load && (data.n != st.data_tokens || data_sum != st.data_checksum))
        pl_usage_error("checkpoint '%s' was trained on other data (%lld tokens, checksum "
                       "%016llx%s%s) than %s (%lld tokens, checksum %016llx): resume on the "
                       "same data",
                       o.load, (long long)st.data_tokens, (unsigned long long)st.data_checksum,
                       st.data_path[0] ? ", " : "", st.data_path, data.source,
                       (long long)data.n, (unsigned long long)data_sum);

    const int B = o.batch, T = o.cfg.seq_len;
    struct pl_loader loader;
    pl_loader_init(&loader, &data, B, T, 0, 1, o.cfg.seed);

    struct pl_model *m = pl_model_new(&o.cfg, PL_MODEL_ALL);
    pl_model_set_recompute(m, recompute);
    if (o.load) {
        pl_checkpoint_load(o.load, m, &st);
        PL_REQUIRE(m->adam_t == st.step,
                   "checkpoint '%s' is inconsistent: %d optimizer steps but training step %lld",
                   o.load, m->adam_t, (long long)st.step);
    } else {
        st.seed = o.cfg.seed;
        st.batch = B;
        st.opt = o.opt;
        st.data_tokens = data.n;
        st.data_checksum = data_sum;
        st.corpus_tokens = o.data ? 0 : o.corpus_tokens;
        st.corpus_seed = o.data ? 0 : o.corpus_seed;
        snprintf(st.data_path, sizeof st.data_path, "%s", o.data ? o.data : "");
    }

    char desc[512], nbuf[32];
    pl_model_config_describe(&o.cfg, desc, sizeof desc);
    pl_print0("train: %s%s%s%s%s\n", desc, recompute ? " recompute=" : "",
              recompute ? pl_recompute_name(recompute) : "",
              o.cfg.attention ? " attention=" : "",
              o.cfg.attention ? pl_attention_name(o.cfg.attention) : "");
    pl_print0("train: %s parameters; data %s, %lld tokens; batch %d x %d tokens; lr %g%s%s\n",
              human((double)m->layout.numel, nbuf, sizeof nbuf), data.source,
              (long long)data.n, B, T, o.opt.lr, o.load ? "; resumed from " : "",
              o.load ? o.load : "");
    if (o.load) pl_print0("train: resuming at step %lld\n", (long long)st.step + 1);

    FILE *losses = o.losses ? open_losses(o.losses, o.load != NULL, st.step) : NULL;

    size_t tok_bytes = (size_t)B * T * sizeof(int);
    int *in = pl_mem_alloc(tok_bytes, PL_MEM_WORK, PL_HOST, "batch inputs");
    int *tg = pl_mem_alloc(tok_bytes, PL_MEM_WORK, PL_HOST, "batch targets");
    int *in_dev = pl_mem_alloc(tok_bytes, PL_MEM_ACTIV, PL_DEVICE, "batch inputs (op memory)");
    int *tg_dev = pl_mem_alloc(tok_bytes, PL_MEM_ACTIV, PL_DEVICE, "batch targets (op memory)");

    double first_loss = NAN, tail_sum = 0, total_time = 0, total_flops = 0, total_rerun = 0;
    int64_t tail_n = 0, tail_from = o.steps > 10 ? o.steps - 10 : 0;
    for (int64_t i = 0; i < o.steps; i++) {
        int64_t step = st.step; /* 0-based: the batch index; printed 1-based */
        pl_loader_batch(&loader, step, in, tg);
        pl_to_device(in_dev, in, tok_bytes);
        pl_to_device(tg_dev, tg, tok_bytes);
        struct pl_model_ctx ctx = pl_model_ctx_eval();
        ctx.train = 1;
        ctx.seed = st.seed;
        ctx.seq0 = pl_loader_seq0(&loader, step);

        double f0 = pl_ledger()->flops, r0 = pl_ledger()->flops_recompute, t0 = pl_now();
        double loss = pl_model_step(m, in_dev, tg_dev, B, &o.opt, &ctx);
        double dt = pl_now() - t0, df = pl_ledger()->flops - f0;
        total_rerun += pl_ledger()->flops_recompute - r0;
        st.step++;
        total_time += dt;
        total_flops += df;
        if (i == 0) first_loss = loss;
        if (i >= tail_from) tail_sum += loss, tail_n++;
        PL_REQUIRE(isfinite(loss),
                   "the loss became %g at step %lld: training diverged (try a smaller --lr)",
                   loss, (long long)st.step);
        write_losses_line(losses, st.step, loss);
        if ((i + 1) % o.log_every == 0 || i + 1 == o.steps)
            pl_print0("step %6lld | loss %.6f | %8.2f ms | %9.0f tok/s | %7.2f GFLOP/s\n",
                      (long long)st.step, loss, dt * 1e3, B * T / dt, df / dt / 1e9);
        if (o.save && o.save_every && st.step % o.save_every == 0 && i + 1 < o.steps)
            pl_checkpoint_save(o.save, m, &st);
    }
    if (losses) fclose(losses);
    if (o.save) pl_checkpoint_save(o.save, m, &st);

    if (o.steps > 0) {
        pl_print0("summary: %lld steps (to step %lld) of %d x %d tokens in %.2f s: %.0f tok/s, "
                  "%.2f GFLOP/s (%.3f GFLOP per step)\n",
                  (long long)o.steps, (long long)st.step, B, T, total_time,
                  (double)o.steps * B * T / total_time, total_flops / total_time / 1e9,
                  total_flops / o.steps / 1e9);
        if (recompute)
            pl_print0("summary: recompute %s reran %.3f of those GFLOP per step (model FLOPs "
                      "%.3f GFLOP per step)\n", pl_recompute_name(recompute),
                      total_rerun / o.steps / 1e9, (total_flops - total_rerun) / o.steps / 1e9);
        else if (total_rerun > 0) /* flash attention's backward recomputes the probabilities */
            pl_print0("summary: attention %s reran %.3f of those GFLOP per step (model FLOPs "
                      "%.3f GFLOP per step)\n", pl_attention_name(o.cfg.attention),
                      total_rerun / o.steps / 1e9, (total_flops - total_rerun) / o.steps / 1e9);
        pl_print0("summary: loss %.4f at the first step -> %.4f (mean of the last %lld)\n",
                  first_loss, tail_sum / tail_n, (long long)tail_n);
    }
    if (o.save) pl_print0("summary: checkpoint at step %lld saved to %s\n", (long long)st.step, o.save);
    if (o.steps > 0) { /* the model state per parameter, as the ledger holds it */
        struct pl_mem_stats ms;
        pl_mem_get_stats(&ms);
        double psi = (double)m->layout.numel;
        pl_print0("summary: model state %g + %g + %g bytes per parameter (params + grads + "
                  "optim, %s)\n", ms.current[PL_MEM_PARAMS] / psi,
                  ms.current[PL_MEM_GRADS] / psi, ms.current[PL_MEM_OPTIM] / psi,
                  pl_precision_name(o.cfg.precision));
    }
    if (pl_rank() == 0) pl_mem_print(stdout, "memory (bytes by category)");

    pl_mem_free(in);
    pl_mem_free(tg);
    pl_mem_free(in_dev);
    pl_mem_free(tg_dev);
    pl_model_free(m);
    pl_loader_free(&loader);
    pl_tokens_free(&data);
    pl_finalize();
    return 0;
}
