/* model.h: the single-device reference -- a tiny GPT and its mixture-of-experts variant,
 * built only from ops.h. Forward, backward and the AdamW training step, written to be read:
 * this is the executable spec every lab is graded against.
 *
 * The model, pre-layernorm GPT-2 style, for B sequences of T <= seq_len tokens (N = B*T rows):
 *
 *     x_0     = wte[tokens] + wpe[0..T)                              embedding
 *     x_mid   = x_l + drop(attn(ln1(x_l)) @ w_proj^T + b_proj)        attention half of block l
 *     x_{l+1} = x_mid + drop(mlp(ln2(x_mid)))                         MLP half of block l
 *     logits  = lnf(x_L) @ head^T                                     final layernorm + head
 *     loss    = mean over the N positions of -log softmax(logits)[target]
 *               + sum over MoE blocks of the load-balancing loss
 *
 * mlp(h) = gelu(h @ w_fc^T + b_fc) @ w_proj^T + b_proj (dense), or the routed mixture of
 * experts described at pl_moe_route below. Dropout sits on the two residual branches only.
 *
 * The LM head is NOT tied to the token embedding: every parameter then belongs to exactly
 * one part of the model, so a pipeline stage, a tensor-parallel shard or a ZeRO shard never
 * has to share (and all-reduce) a weight between the first and the last stage.
 *
 * Memory. Parameters, gradients and AdamW moments are each ONE flat buffer (categories
 * params, grads, optim of the memory ledger), laid out part by part:
 *     [embedding: wte, wpe][block 0]...[block L-1][head: lnf.w, lnf.b, head.w]
 * so the gradients of a backward are produced from the end of the flat buffer to its start
 * (DDP buckets fill in order) and one block's parameters are one contiguous range (ZeRO-3
 * gathers one range per block). The layout's table names every tensor with its offset and
 * shape; struct pl_block_params and friends give pointers per part, bound onto ANY buffer
 * of the part's size (the model's own, or a gathered copy a lab owns).
 *
 * All float and int arrays given to the forward/backward functions are op memory (device
 * memory on the GPU build), as in ops.h. Backward functions ACCUMULATE (+=) into parameter
 * gradients (zero them with pl_model_zero_grad or pl_zero); activation gradients (dx) are
 * written (=), and dx may be the same buffer as dy. */
#ifndef PL_MODEL_H
#define PL_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include "recompute.h"
#include "tensor.h"

/* ---- configuration ----------------------------------------------------------------------- */

enum pl_precision { PL_PRECISION_FP32, PL_PRECISION_BF16 };
#define PL_PRECISION_NAMES "fp32 or bf16"
/* "fp32", "bf16"; parse: 0 and *out set, or -1 for any other text. */
const char *pl_precision_name(enum pl_precision p);
int pl_precision_parse(const char *text, enum pl_precision *out);

struct pl_model_config {
    int vocab;     /* token ids are in [0, vocab) */
    int d_model;   /* C */
    int n_layers;  /* L transformer blocks */
    int n_heads;   /* must divide d_model */
    int d_ff;      /* hidden width of the MLP (of each expert) */
    int seq_len;   /* longest sequence: rows of the position embedding */
    float dropout; /* residual-branch dropout, in [0, 1) */
    /* Mixture of experts: n_experts == 0 means every block has a dense MLP. */
    int n_experts;
    int top_k;             /* experts per token, 1..n_experts */
    float capacity_factor; /* > 0; see pl_moe_capacity */
    float aux_loss_coef;   /* a in a*E*sum_i f_i P_i, >= 0 */
    uint64_t seed;         /* parameter initialisation */
    /* How the attention half computes attention (recompute.h): materialised (0, the
     * default) or flash. Not a property of the weights: checkpoints neither store nor
     * compare it, and the labs' own sharded attention ignores it. */
    enum pl_attention attention;
    /* The whole model's numerics (pl_model_*; see "precision" below): fp32 (0, the default)
     * or bf16 mixed precision. Not a property of the weights either: checkpoints hold the
     * fp32 master weights in both and neither store nor compare it. */
    enum pl_precision precision;
    /* bf16 only: the gradients are held (and so reduced, by whoever reduces them) in fp32,
     * 4 bytes per parameter instead of 2. Must be 0 in fp32, whose gradients are fp32. */
    int grads_fp32;
};

/* A small dense GPT (vocab 256, d_model 64, 2 layers, 4 heads, d_ff 256, seq_len 64, no
 * dropout, n_experts 0); setting n_experts makes it MoE with top_k 2, capacity factor 1.25
 * and aux_loss_coef 0.01. */
struct pl_model_config pl_model_config_default(void);

/* NULL when the config can work; otherwise a message in buf saying what is wrong and what
 * would be right, e.g. "d_model=50 is not divisible by n_heads=4 (choose n_heads in
 * {1,2,5,10,25,50})". */
const char *pl_model_config_error(const struct pl_model_config *c, char *buf, size_t len);
/* pl_usage_error (exit 2) with that message when the config cannot work. */
void pl_model_config_check_or_die(const struct pl_model_config *c);
/* "vocab=256 d_model=64 ..." for logs and checkpoints' messages. */
const char *pl_model_config_describe(const struct pl_model_config *c, char *buf, size_t len);

/* ---- parameter layout ---------------------------------------------------------------------
 * A part is -1 (PL_PART_EMBED), a block 0..L-1, or L (the final layernorm and head; the
 * macro PL_PART_HEAD(cfg) spells it). */
#define PL_PART_EMBED (-1)
#define PL_PART_HEAD(cfg) ((cfg)->n_layers)

enum pl_param_init { PL_INIT_NORMAL, PL_INIT_ZEROS, PL_INIT_ONES };

struct pl_param_desc {
    char name[PL_NAME_LEN]; /* "wte", "h.3.attn.w_qkv", "lnf.b", ... */
    int part;
    size_t offset;          /* first element in the flat buffer */
    size_t numel;
    int ndim;
    int64_t shape[PL_MAX_DIMS];
    enum pl_param_init init;
    float std;              /* PL_INIT_NORMAL: 0.02, residual projections 0.02/sqrt(2L) */
    int decay;              /* AdamW weight decay applies (matrices and embeddings only) */
};

struct pl_model_layout {
    struct pl_model_config cfg;
    int n_tensors;
    struct pl_param_desc *tensors; /* in flat order */
    size_t numel;                  /* total parameters, Psi (of an ends layout: its parts') */
    size_t embed_numel, block_numel, head_numel; /* one part's floats, held or not */
    /* 0: the whole model. Else an ends layout (pl_model_layout_init_ends): it lists only the
     * parts these bits name, packed from offset 0 in flat order, and no block. */
    unsigned ends;
};
#define PL_ENDS_EMBED 1u
#define PL_ENDS_HEAD 2u

/* Pure arithmetic on the config (checked first); allocates only the table. */
void pl_model_layout_init(struct pl_model_layout *lay, const struct pl_model_config *cfg);
/* The layout of the embedding alone, the head alone or both (ends: PL_ENDS_EMBED and/or
 * PL_ENDS_HEAD), packed: what a pipeline stage that holds a model's ends, and none of its
 * blocks whole, keeps of them. Each tensor keeps its name, shape, init and decay, so its
 * values are the whole model's bit for bit; only the offsets differ. */
void pl_model_layout_init_ends(struct pl_model_layout *lay, const struct pl_model_config *cfg,
                               unsigned ends);
void pl_model_layout_free(struct pl_model_layout *lay);
/* 1 when the layout holds the part (every part, for a whole model's layout). */
int pl_model_layout_holds(const struct pl_model_layout *lay, int part);
/* The flat range [*offset, *offset + *numel) of a part (a part the layout holds). */
void pl_model_part_range(const struct pl_model_layout *lay, int part, size_t *offset,
                         size_t *numel);
/* The tensor of that name, or NULL. */
const struct pl_param_desc *pl_model_find_param(const struct pl_model_layout *lay,
                                                const char *name);

/* Initial values, from the counter-based RNG: element i of tensor `name` is
 * std * normal(cfg.seed, pl_rng_stream(name), i) (or 0 / 1 for biases and layernorm
 * weights), so any slice filled on its own equals that slice of the full initialisation.
 *   _slice: elements [offset, offset+n) of one tensor (its flattened index);
 *   _flat:  elements [offset, offset+n) of the flat buffer, across tensor boundaries (a
 *           ZeRO shard).
 * out is op memory. */
void pl_model_init_param_slice(const struct pl_model_layout *lay, const struct pl_param_desc *d,
                               size_t offset, size_t n, float *out);
void pl_model_init_flat(const struct pl_model_layout *lay, size_t offset, size_t n, float *out);

/* ---- per-part views ------------------------------------------------------------------------
 * Pointers into a buffer holding one part (base = its first element). Shapes follow
 * nn.Linear: a weight is [out, in]. MoE experts are stacked: w_fc [E, d_ff, C]. */
struct pl_embed_params {
    float *wte; /* [V, C] */
    float *wpe; /* [seq_len, C] */
};

struct pl_block_params {
    float *ln1_w, *ln1_b;   /* [C] */
    float *w_qkv, *b_qkv;   /* [3C, C], [3C]: rows [q | k | v] */
    float *w_proj, *b_proj; /* [C, C], [C] */
    float *ln2_w, *ln2_b;   /* [C] */
    float *w_router;        /* MoE: [E, C], no bias; NULL when dense */
    float *w_fc, *b_fc;     /* dense [F, C], [F]; MoE [E, F, C], [E, F] */
    float *w_fc2, *b_fc2;   /* dense [C, F], [C]; MoE [E, C, F], [E, C] */
};

struct pl_head_params {
    float *lnf_w, *lnf_b; /* [C] */
    float *w_head;        /* [V, C], no bias */
};

void pl_embed_bind(const struct pl_model_config *c, float *base, struct pl_embed_params *out);
void pl_block_bind(const struct pl_model_config *c, float *base, struct pl_block_params *out);
void pl_head_bind(const struct pl_model_config *c, float *base, struct pl_head_params *out);

/* ---- what a pass needs besides parameters ------------------------------------------------- */
/* train, seed, step and seq0 only choose dropout masks: with cfg.dropout 0 they change
 * nothing. */
struct pl_model_ctx {
    int train;        /* dropout on (off: an evaluation pass) */
    uint64_t seed;    /* dropout seed */
    uint64_t step;    /* optimizer step: each step draws new masks */
    int64_t seq0;     /* global index of this batch's first sequence: a rank holding sequences
                         [seq0, seq0+B) of a global batch draws the masks the whole batch
                         would on one device */
    float loss_scale; /* backward: the factor this batch's loss gradient is scaled by before
                         it is added into the gradients: d(objective)/d(this batch's loss),
                         the objective being what the accumulated gradients are of */
};
/* {train 0, seed 0, step 0, seq0 0, loss_scale 1}. */
struct pl_model_ctx pl_model_ctx_eval(void);

/* Dropout site `site` (0: attention branch, 1: MLP branch) of block `layer` at `step`: the
 * stream given to pl_dropout_*; the mask element of (row, col) of the full [B*T, C] branch
 * output uses global index ((seq0*T) + row) * C + col. */
uint64_t pl_model_dropout_stream(int layer, int site, uint64_t step);

/* ---- saved activations ----------------------------------------------------------------------
 * What each half's backward needs, for B sequences of T tokens, allocated as activations
 * (op memory). A lab keeps one per block and microbatch in flight and frees it when the
 * backward is done; the fields are for the reference's own use and for tests. */
/* Temporaries of the passes (backward gradients, branch outputs) taken in stack order
 * from one allocation of op memory (workspace), so that a step allocates nothing. A model
 * sizes one at its first forward (pl_model_scratch_need) and points every half's acts at
 * it; acts made by pl_*_acts_new have none, and their passes allocate per call. The host
 * part holds the MoE router's host copies (NULL for a dense model). */
struct pl_scratch {
    float *base;
    size_t cap, used; /* floats */
    float *host;
    size_t host_cap, host_used; /* floats */
};
/* Floats the passes of one model take at most at once, for B sequences of T tokens. */
size_t pl_model_scratch_need(const struct pl_model_config *c, int B, int T);

struct pl_attn_acts {
    int B, T;
    struct pl_scratch *scratch; /* NULL: the passes allocate their temporaries */
    float *x;               /* [N, C] the half's input */
    float *ln, *mean, *rstd;/* ln1 output [N, C], statistics [N] */
    float *qkv;             /* [N, 3C] */
    float *att;             /* [B, NH, T, T] softmax probabilities (NULL with flash) */
    float *lse;             /* flash attention only: [B, NH, T] log-sum-exp of each row of
                               scaled scores, what the backward recomputes att from */
    float *y;               /* [N, C] heads concatenated, before the projection */
    int recompute;          /* selective recomputation: att is not saved but borrowed, a
                               buffer every block shares (NULL: the passes allocate one), which
                               the forward writes and the backward rewrites from qkv */
};

struct pl_moe_routing; /* host-side routing decisions, see pl_moe_route */

struct pl_mlp_acts {
    int B, T;
    struct pl_scratch *scratch;
    float *x;
    float *ln, *mean, *rstd;
    /* dense */
    float *h;   /* [N, F] fc output, before GELU */
    float *g;   /* [N, F] GELU output */
    /* MoE: capacity slots per expert, cap = pl_moe_capacity(N, ...) */
    int cap;
    float *probs;   /* [N, E] router softmax */
    int *rows;      /* [E*cap] token row of each kept slot (op memory) */
    float *gates;   /* [E*cap] router probability of that token for that expert */
    int *iota;      /* [cap] 0, 1, 2, ... */
    float *xe;      /* [E*cap, C] gathered expert inputs */
    float *he, *ge; /* [E*cap, F] */
    float *ye;      /* [E*cap, C] expert outputs before the gate */
    struct pl_moe_routing *route; /* host copy of the decisions */
    double aux_loss; /* a*E*sum_i f_i P_i of the last forward */
};

struct pl_block_acts {
    struct pl_attn_acts attn;
    struct pl_mlp_acts mlp;
    enum pl_recompute recompute; /* what the forward saves: see "activation recomputation" */
    struct pl_block_acts *rebuild; /* full: the block the passes run in (NULL: allocated per
                                      pass), shared by every block */
};

struct pl_head_acts {
    int B, T;
    struct pl_scratch *scratch;
    float *x, *ln, *mean, *rstd;
    float *logits;  /* [N, V] */
    float *probs;   /* [N, V] */
    float *losses;  /* [N] */
    const int *targets; /* the caller's array, kept until the backward */
};

void pl_attn_acts_new(struct pl_attn_acts *a, const struct pl_model_config *c, int B, int T);
void pl_attn_acts_free(struct pl_attn_acts *a);
void pl_mlp_acts_new(struct pl_mlp_acts *a, const struct pl_model_config *c, int B, int T);
void pl_mlp_acts_free(struct pl_mlp_acts *a);
void pl_block_acts_new(struct pl_block_acts *a, const struct pl_model_config *c, int B, int T);
void pl_block_acts_free(struct pl_block_acts *a);
void pl_head_acts_new(struct pl_head_acts *a, const struct pl_model_config *c, int B, int T);
void pl_head_acts_free(struct pl_head_acts *a);

/* ---- activation recomputation (recompute.h) -------------------------------------------------
 * A block's acts made for choice r save (activation memory, PL_MEM_ACTIV):
 *   none       everything above: the default of pl_block_acts_new;
 *   selective  everything but attn.att, the [B, NH, T, T] probabilities (the only saved
 *              activation that grows with T^2): the forward writes them into a buffer the
 *              blocks share, and each attention backward first reruns the attention core
 *              (pl_attention_forward, Q K^T, softmax and att V, as Megatron-LM's checkpointed
 *              core attention and the planner's 4bs^2h count it) from its saved qkv into it;
 *   full       attn.x alone, the block's input: the forward runs in a shared block of acts
 *              saved as with none, and each block's backward first reruns the block's
 *              forward from its input into that shared block, then runs its backward there.
 * The reruns draw the same dropout masks (counter-based: by layer, step and position, never
 * by call), so the gradients are bit-identical with every choice; what differs is the
 * activation memory (pl_block_acts_bytes) and the FLOPs: selective adds one attention core
 * per block, full one forward of every block. The ledger counts the rerun FLOPs in
 * flops_recompute too (hardware FLOPs, not model FLOPs). The split backward
 * (pl_block_backward_b/_w) needs acts saved with none.
 *
 * The shared buffer, one per model or pipeline stage: pl_block_rebuild_new(w, c, B, T, r)
 * makes it (selective: w->attn.att alone; full: a whole block saved with none; none:
 * nothing), pl_block_acts_share(a, w) points a block's acts at it, pl_block_acts_free frees
 * it. Acts that share none allocate it for each pass.
 * With cfg.attention = flash there are no probabilities to save or drop: a block saves
 * attn.lse (B x NH x T floats) instead of attn.att with none and selective alike (selective
 * then equals none and shares no buffer), and full saves the block input as always. */
void pl_block_acts_new_recompute(struct pl_block_acts *a, const struct pl_model_config *c,
                                 int B, int T, enum pl_recompute r);
void pl_block_rebuild_new(struct pl_block_acts *w, const struct pl_model_config *c, int B,
                          int T, enum pl_recompute r);
void pl_block_acts_share(struct pl_block_acts *a, struct pl_block_acts *w);
/* Activation bytes, dense model (n_experts 0), for B sequences of T tokens:
 *   _acts: what one block saved with r holds (pl_block_acts_new_recompute);
 *   _rebuild: the shared buffer (pl_block_rebuild_new);
 *   pl_model_activ_bytes: all a pl_model holds after a forward with r: L blocks, the shared
 *   buffer, the residual stream and the head's acts (the tokens and targets are the
 *   caller's). Each is the sum of its buffers: the planner's per-layer term
 *   (pl_plan_activation_layer) maps onto pl_block_acts_bytes as tests/test_recompute.c
 *   states and checks. Each follows cfg.attention (flash: B x NH x T floats of lse in
 *   place of the probabilities; tests/test_flash.c checks it). */
size_t pl_block_acts_bytes(const struct pl_model_config *c, int B, int T, enum pl_recompute r);
size_t pl_block_rebuild_bytes(const struct pl_model_config *c, int B, int T,
                              enum pl_recompute r);
size_t pl_model_activ_bytes(const struct pl_model_config *c, int B, enum pl_recompute r);

/* ---- the block-level surface -----------------------------------------------------------------
 * Each forward saves what its backward needs in its acts; x and y (dy and dx) may alias.
 * `layer` picks the dropout streams. The full forward is exactly these calls in order:
 *     embed -> block 0 .. block L-1 -> head          (a block = attention half, MLP half) */
void pl_embed_forward(const struct pl_model_config *c, const struct pl_embed_params *p,
                      const int *tokens, int B, int T, float *x);
void pl_embed_backward(const struct pl_model_config *c, const struct pl_embed_params *g,
                       const int *tokens, int B, int T, const float *dx);

void pl_attn_forward(const struct pl_model_config *c, int layer, const struct pl_block_params *p,
                     struct pl_attn_acts *a, const struct pl_model_ctx *ctx, const float *x,
                     float *y);
void pl_attn_backward(const struct pl_model_config *c, int layer,
                      const struct pl_block_params *p, const struct pl_block_params *g,
                      const struct pl_attn_acts *a, const struct pl_model_ctx *ctx,
                      const float *dy, float *dx);
/* Dense or MoE by the config. The MoE forward sets a->aux_loss and the backward adds its
 * gradient (times ctx->loss_scale), so callers add a->aux_loss to the loss. */
void pl_mlp_forward(const struct pl_model_config *c, int layer, const struct pl_block_params *p,
                    struct pl_mlp_acts *a, const struct pl_model_ctx *ctx, const float *x,
                    float *y);
void pl_mlp_backward(const struct pl_model_config *c, int layer,
                     const struct pl_block_params *p, const struct pl_block_params *g,
                     const struct pl_mlp_acts *a, const struct pl_model_ctx *ctx,
                     const float *dy, float *dx);

void pl_block_forward(const struct pl_model_config *c, int layer,
                      const struct pl_block_params *p, struct pl_block_acts *a,
                      const struct pl_model_ctx *ctx, const float *x, float *y);
void pl_block_backward(const struct pl_model_config *c, int layer,
                       const struct pl_block_params *p, const struct pl_block_params *g,
                       const struct pl_block_acts *a, const struct pl_model_ctx *ctx,
                       const float *dy, float *dx);

/* ---- the backward in two calls (zero-bubble pipelines; dense blocks) ----------------------
 * pl_block_backward_b computes dx alone, the part the previous stage waits for, and keeps
 * in w the gradient at the output of each linear and layernorm; pl_block_backward_w later
 * adds the block's parameter gradients into g from w and the forward's acts, which must
 * both live until then. B then W gives bit-identical gradients to pl_block_backward, and
 * their FLOPs sum to its (the weight products and sums are W's). w is activation memory:
 * pl_block_wgrad_bytes per microbatch, B*T*(7C + F) floats, held from B to W. */
struct pl_block_wgrad {
    int B, T;
    float *d_proj, *d_qkv, *d_ln1; /* [N,C], [N,3C], [N,C]: attention's proj, qkv, ln1 */
    float *d_fc2, *d_fc, *d_ln2;   /* [N,C], [N,F], [N,C]: the MLP's fc2, fc, ln2 */
};
void pl_block_wgrad_new(struct pl_block_wgrad *w, const struct pl_model_config *c, int B, int T);
void pl_block_wgrad_free(struct pl_block_wgrad *w);
size_t pl_block_wgrad_bytes(const struct pl_model_config *c, int B, int T);
void pl_block_backward_b(const struct pl_model_config *c, int layer,
                         const struct pl_block_params *p, const struct pl_block_acts *a,
                         const struct pl_model_ctx *ctx, struct pl_block_wgrad *w,
                         const float *dy, float *dx);
void pl_block_backward_w(const struct pl_model_config *c, int layer,
                         const struct pl_block_params *p, const struct pl_block_params *g,
                         const struct pl_block_acts *a, const struct pl_block_wgrad *w);

/* Final layernorm, head, and the mean cross-entropy over the B*T positions, returned
 * (summed in double). targets NULL: logits and probs only, returns 0. */
double pl_head_forward(const struct pl_model_config *c, const struct pl_head_params *p,
                       struct pl_head_acts *a, const float *x, const int *targets);
/* dx = d(loss_scale * loss)/dx; the head's gradients accumulate into g. */
void pl_head_backward(const struct pl_model_config *c, const struct pl_head_params *p,
                      const struct pl_head_params *g, const struct pl_head_acts *a,
                      const struct pl_model_ctx *ctx, float *dx);

/* ---- mixture-of-experts routing (the reference rules the MoE lab reproduces) -------------
 * For N tokens with router probabilities p [N, E] (softmax of ln2(x) @ w_router^T):
 *   - each token picks its top_k experts by probability (ties: the lower expert index);
 *     choice j of token t has gate p[t, e];
 *   - capacity: every expert takes at most cap = pl_moe_capacity(N, E, k, cf) slots,
 *     filled choice by choice (all first choices in token order, then all second choices,
 *     ...); a choice that finds its expert full is dropped, and a token whose choices are
 *     all dropped passes through the residual only;
 *   - the MoE output of token t is sum over its kept choices of gate * expert_e(ln2(x_t)),
 *     expert_e a GELU MLP; gates are not renormalised;
 *   - load balancing: f_i = (choices of expert i, before dropping) / (N k),
 *     P_i = mean over tokens of p[t, i], aux = a * E * sum_i f_i P_i (1 * a when uniform);
 *     f is a constant in the backward.
 * Capacity, f and P are per call (per microbatch): unlike the dense model, an MoE batch
 * split into microbatches routes (and so trains) slightly differently from the whole. */
struct pl_moe_routing {
    int N, E, k, cap;
    int *expert;    /* [N*k] chosen expert of choice j of token t at t*k + j */
    float *gate;    /* [N*k] */
    int *slot;      /* [N*k] slot in the expert's buffer, -1 when dropped */
    int *count;     /* [E] kept slots per expert */
    int *rows;      /* [E*cap] token of each slot */
    float *gates;   /* [E*cap] */
    double *f;      /* [E] */
    double *P;      /* [E] */
    double aux;
    long dropped;   /* choices dropped for capacity */
};

/* ceil(capacity_factor * N * top_k / E), at least 1: a choice counts as one token for the
 * docs/design.md formula tokens/experts x capacity factor (the same thing for top-1). At most N,
 * since an expert receives at most one choice per token: a factor that asks for more (any
 * factor >= E / top_k) means no choice is ever dropped. */
int pl_moe_capacity(int N, int E, int top_k, float capacity_factor);
/* Host memory, counted by the ledger as workspace (PL_MEM_WORK): bookkeeping of the
 * routing, not activations; it is held, like the acts it belongs to, until they are freed. */
struct pl_moe_routing *pl_moe_routing_new(int N, int E, int k, int cap);
void pl_moe_routing_free(struct pl_moe_routing *r);
/* Fills r from host probs [N, E] by the rules above. */
void pl_moe_route(struct pl_moe_routing *r, const float *probs, float aux_coef);

/* ---- the whole model ----------------------------------------------------------------------- */
struct pl_model;
/* Called after a part's backward has finished writing its gradients: the head first
 * (part L), then blocks L-1 down to 0, then the embedding (part -1). */
typedef void (*pl_model_hook)(struct pl_model *m, int part, void *arg);

/* What pl_model_new allocates: a lab holding shards asks for less. */
#define PL_MODEL_PARAMS 1u
#define PL_MODEL_GRADS 2u
#define PL_MODEL_OPTIM 4u
#define PL_MODEL_ALL (PL_MODEL_PARAMS | PL_MODEL_GRADS | PL_MODEL_OPTIM)

struct pl_model {
    struct pl_model_config cfg;
    struct pl_model_layout layout;
    /* flat buffers of layout.numel floats (op memory), NULL when not allocated */
    float *params, *grads, *adam_m, *adam_v;
    int adam_t; /* optimizer steps taken */
    /* views of params and grads per part */
    struct pl_embed_params embed, embed_g;
    struct pl_block_params *blocks, *blocks_g; /* [n_layers] */
    struct pl_head_params head, head_g;
    /* activations of the last forward, for B sequences (B 0: none held) */
    int B;
    const int *tokens;
    float *x; /* [N, C] the residual stream; every block saves its own input, so one buffer
                 serves all blocks in place, and the backward reuses it for dx */
    struct pl_block_acts *acts; /* [n_layers] */
    struct pl_block_acts rebuild; /* what recomputation rebuilds, shared by the blocks */
    enum pl_recompute recompute;  /* pl_model_set_recompute; PL_RECOMPUTE_NONE by default */
    struct pl_head_acts head_acts;
    struct pl_scratch scratch; /* the passes' temporaries, sized with the activations */
    double loss_ce, loss_aux; /* of the last forward */
    pl_model_hook hook;
    void *hook_arg;
    /* bf16 (cfg.precision; NULL in fp32, see "precision" below): the bf16 working copy of
     * the parameters and the bf16 gradients (NULL with cfg.grads_fp32), and the fp32
     * buffers of the one part a pass is at (its weights, its gradients). */
    uint16_t *params16, *grads16;
    float *stage_p, *stage_g;
};

/* Allocates what `what` asks for and initialises the parameters (when allocated). */
struct pl_model *pl_model_new(const struct pl_model_config *cfg, unsigned what);
/* The same, of the ends alone (pl_model_layout_init_ends's layout): its embed / head views
 * (and _g) bound for the parts held, blocks none, the flat buffers layout.numel floats.
 * pl_parts_forward and _backward run its parts; the whole model's passes
 * (pl_model_forward, _backward, _loss) refuse it. */
struct pl_model *pl_model_new_ends(const struct pl_model_config *cfg, unsigned what,
                                   unsigned ends);
void pl_model_free(struct pl_model *m);
void pl_model_set_hook(struct pl_model *m, pl_model_hook hook, void *arg);
/* Activation recomputation for the forwards from now on (see "activation recomputation"):
 * same gradients, bit for bit, less activation memory, more FLOPs. Frees the activations
 * held, which were saved for the choice before. */
void pl_model_set_recompute(struct pl_model *m, enum pl_recompute r);

/* Forward of B sequences of cfg.seq_len tokens (op memory, [B, seq_len]; kept by pointer
 * until the backward); returns the objective: mean cross-entropy + MoE aux losses (also in
 * m->loss_ce, m->loss_aux). targets NULL: logits only (m->head_acts.logits), returns 0.
 * ctx NULL is pl_model_ctx_eval(). Activations stay until pl_model_free_acts or a forward
 * with another B. */
double pl_model_forward(struct pl_model *m, const int *tokens, const int *targets, int B,
                        const struct pl_model_ctx *ctx);
/* Accumulates d(ctx->loss_scale * objective)/d(params) into m->grads, calling the hook
 * after each part. Needs the activations of the last forward (with targets). */
void pl_model_backward(struct pl_model *m, const struct pl_model_ctx *ctx);
void pl_model_zero_grad(struct pl_model *m);
void pl_model_free_acts(struct pl_model *m);
/* The objective of a batch in evaluation mode (no dropout); activations are freed after. */
double pl_model_loss(struct pl_model *m, const int *tokens, const int *targets, int B);

/* ---- precision (cfg.precision) ---------------------------------------------------------------
 * fp32, the default: every array fp32, what the labs are graded in. bf16: mixed precision as
 * Megatron-LM and DeepSpeed train a model, in the whole model's functions (pl_model_*):
 *   params     the fp32 master weights, written by the optimizer (ledger: optim, 4 bytes
 *              per parameter; a checkpoint saves them as it saves fp32 parameters);
 *   params16   the bf16 working copy the passes compute with (params, 2 bytes), rounded
 *              from the master after each update;
 *   grads16    the bf16 gradients (grads, 2 bytes): each part's backward sums its
 *              gradients in fp32 into the part's stage, then adds them into grads16 with
 *              one rounding (as accumulating into a bf16 buffer rounds); with
 *              cfg.grads_fp32 the gradients are `grads` in fp32 (4 bytes) as in fp32;
 *   adam_m, adam_v  fp32 (optim, 8 bytes);
 * so the model state is 2 + 2 + 12 bytes per parameter (2 + 4 + 12 with grads_fp32): the
 * mixed-precision Adam of Labs 3 and 8, as the ledger measures it (tests/test_precision.c).
 * Besides, stage_p and stage_g (workspace) hold the part a pass is at, its weights read from
 * params16 and its gradients before they are added: two buffers of the largest part.
 * The products (the linear layers' and the materialised attention's) multiply bf16 inputs
 * with fp32 sums (pl_set_matmul_precision, set around the passes and put back after). Left
 * in fp32: the activations (saved and passed between parts), flash attention, layernorm,
 * softmax, GELU, the loss and the optimizer's arithmetic. No loss scaling: bf16 has fp32's
 * exponent range.
 * The views m->embed, m->blocks, m->head point at the fp32 master; with bf16 gradients
 * m->grads and the _g views are NULL (a hook reads m->grads16). The block-level surface
 * above and the labs' sharded passes are fp32 and ignore cfg.precision; pl_model_new_ends
 * refuses bf16. The CPU build runs the same mode with the same rounding (the products as
 * ops.h's PL_MATMUL_BF16 says), slower than fp32 there (the rounded copies of each
 * product's inputs). */
/* After writing m->params (a checkpoint load, a test), refreshes the bf16 working copy;
 * nothing in fp32. */
void pl_model_params_changed(struct pl_model *m);

/* ---- optimizer ----------------------------------------------------------------------------- */
struct pl_adamw_config {
    float lr, beta1, beta2, eps, weight_decay;
    float grad_clip; /* max global L2 norm; <= 0: no clipping */
};
/* lr 1e-3, betas (0.9, 0.95), eps 1e-8, weight decay 0.1, clip 1.0. */
struct pl_adamw_config pl_adamw_config_default(void);

/* AdamW step t (from 1) on the flat range [offset, offset+n) of the parameters: p, g, m, v
 * point at that range's first element (a ZeRO shard passes its own arrays). Weight decay
 * applies to the tensors whose desc says decay. Clipping is the caller's: scale g first. */
void pl_model_adamw_flat(const struct pl_model_layout *lay, size_t offset, size_t n, float *p,
                         const float *g, float *m, float *v, int t,
                         const struct pl_adamw_config *opt);
/* sqrt of the sum of squares of all gradients. */
double pl_model_grad_norm(const struct pl_model *m);
/* Clip (when opt->grad_clip > 0) and take one AdamW step on the whole model; returns the
 * gradient norm before clipping. Allocates the moments on first use. */
double pl_model_update(struct pl_model *m, const struct pl_adamw_config *opt);
/* The reference training step: zero grads, forward, backward, clip, AdamW. ctx NULL means
 * no dropout; its step field is set to the optimizer step taken. Returns the objective,
 * once the step has run (pl_ops_wait: on the GPU an event behind the update, never a
 * device-wide synchronisation), so a time taken around one step is that step's. */
double pl_model_step(struct pl_model *m, const int *tokens, const int *targets, int B,
                     const struct pl_adamw_config *opt, const struct pl_model_ctx *ctx);

#endif
