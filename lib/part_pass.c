/* part_pass.c: the model one part at a time (part_pass.h), over model.h's block-level
 * surface: the embedding, each block and the head bound to the caller's parameters. */
#include "part_pass.h"

#include "check.h"
#include "mem.h"
#include "trace.h"

struct pl_pass {
    struct pl_model_config cfg;
    int B;                       /* sequences the activations are sized for; 0: none */
    const int *tokens, *targets;
    float *x;                    /* [B*T, C] the residual stream, and its gradient */
    struct pl_block_acts *acts;  /* [n_layers] */
    struct pl_head_acts head;
    double loss;
    int next_fwd, next_bwd;      /* the part each direction expects next, to catch a wrong
                                    order */
};

struct pl_pass *pl_pass_new(const struct pl_model_config *cfg)
{
    PL_REQUIRE(cfg->dropout == 0.0f && cfg->n_experts == 0,
               "a part-by-part pass runs the dense model without dropout (dropout=%g, "
               "n_experts=%d given; set both to 0)", (double)cfg->dropout, cfg->n_experts);
    struct pl_pass *s = pl_mem_alloc(sizeof *s, PL_MEM_WORK, PL_HOST, "part pass");
    s->cfg = *cfg;
    s->B = 0;
    return s;
}

static void free_acts(struct pl_pass *s)
{
    if (!s->B) return;
    for (int l = 0; l < s->cfg.n_layers; l++) pl_block_acts_free(&s->acts[l]);
    pl_mem_free(s->acts);
    pl_head_acts_free(&s->head);
    pl_mem_free(s->x);
    s->B = 0;
}

void pl_pass_free(struct pl_pass *s)
{
    if (!s) return;
    free_acts(s);
    pl_mem_free(s);
}

void pl_pass_begin(struct pl_pass *s, const int *tokens, const int *targets, int B)
{
    PL_REQUIRE(B > 0, "pl_pass_begin: B=%d sequences; a rank trains on at least one", B);
    const struct pl_model_config *c = &s->cfg;
    if (s->B != B) {
        free_acts(s);
        s->acts = pl_mem_alloc((size_t)c->n_layers * sizeof *s->acts, PL_MEM_ACTIV, PL_HOST,
                               "part pass block acts");
        for (int l = 0; l < c->n_layers; l++) pl_block_acts_new(&s->acts[l], c, B, c->seq_len);
        pl_head_acts_new(&s->head, c, B, c->seq_len);
        s->x = pl_mem_alloc((size_t)B * c->seq_len * c->d_model * sizeof(float), PL_MEM_ACTIV,
                            PL_DEVICE, "part pass residual stream");
        s->B = B;
    }
    s->tokens = tokens;
    s->targets = targets;
    s->loss = 0;
    s->next_fwd = PL_PART_EMBED;
    s->next_bwd = PL_PART_HEAD(c) + 1; /* no backward before the forward is done */
}

static struct pl_model_ctx train_ctx(void)
{
    struct pl_model_ctx ctx = pl_model_ctx_eval();
    ctx.train = 1;
    return ctx;
}

void pl_pass_forward(struct pl_pass *s, int part, const float *p)
{
    const struct pl_model_config *c = &s->cfg;
    PL_REQUIRE(s->B > 0, "pl_pass_forward: start the pass first (pl_pass_begin)");
    PL_REQUIRE(part == s->next_fwd, "forward of part %d: the forward runs the parts in order "
               "-1 (embedding), 0..%d (blocks), %d (head); part %d comes next", part,
               c->n_layers - 1, c->n_layers, s->next_fwd);
    float *base = (float *)p; /* the bind functions take writable views; nothing writes */
    struct pl_model_ctx ctx = train_ctx();
    if (part == PL_PART_EMBED) {
        struct pl_embed_params e;
        pl_embed_bind(c, base, &e);
        pl_embed_forward(c, &e, s->tokens, s->B, c->seq_len, s->x);
    } else if (part < c->n_layers) {
        struct pl_block_params b;
        pl_block_bind(c, base, &b);
        pl_block_forward(c, part, &b, &s->acts[part], &ctx, s->x, s->x);
    } else {
        struct pl_head_params h;
        pl_head_bind(c, base, &h);
        s->loss = pl_head_forward(c, &h, &s->head, s->x, s->targets);
        s->next_bwd = part;
    }
    s->next_fwd = part + 1;
}

double pl_pass_loss(const struct pl_pass *s)
{
    return s->loss;
}

void pl_pass_backward(struct pl_pass *s, int part, const float *p, float *g)
{
    const struct pl_model_config *c = &s->cfg;
    PL_REQUIRE(part == s->next_bwd, "backward of part %d: the backward runs after the whole "
               "forward, in order %d (head), %d..0 (blocks), -1 (embedding); part %d comes "
               "next", part, c->n_layers, c->n_layers - 1, s->next_bwd);
    float *base = (float *)p;
    struct pl_model_ctx ctx = train_ctx();
    if (part == PL_PART_HEAD(c)) {
        struct pl_head_params h, hg;
        pl_head_bind(c, base, &h);
        pl_head_bind(c, g, &hg);
        pl_head_backward(c, &h, &hg, &s->head, &ctx, s->x);
    } else if (part >= 0) {
        struct pl_block_params b, bg;
        pl_block_bind(c, base, &b);
        pl_block_bind(c, g, &bg);
        pl_block_backward(c, part, &b, &bg, &s->acts[part], &ctx, s->x, s->x);
    } else {
        struct pl_embed_params eg;
        pl_embed_bind(c, g, &eg);
        pl_embed_backward(c, &eg, s->tokens, s->B, c->seq_len, s->x);
        /* What the caller computes next (a norm, an optimizer step) is not the embedding's
         * backward: a trace would file its FLOPs there otherwise. */
        pl_span("after backward");
    }
    s->next_bwd = part - 1;
}
