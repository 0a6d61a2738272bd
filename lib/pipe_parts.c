/* pipe_parts.c: a contiguous range of model parts run per microbatch (a pipeline stage),
 * built on model.h's block-level surface. See pipe_parts.h. */
#include "pipe_parts.h"

#include <stdio.h>
#include <string.h>

#include "check.h"
#include "ledger.h"
#include "mem.h"
#include "model_internal.h"
#include "ops.h"
#include "trace.h"

/* Names what the stage has just finished ("after F 3"), so that a rank stuck in the send or
 * receive that follows shows, in its status line, which microbatch it was passing on. */
static void done(char phase, int mb)
{
    char label[PL_LABEL_LEN];
    snprintf(label, sizeof label, "after %c %d", phase, mb);
    pl_span(label);
}

void pl_parts_check(const struct pl_model_config *c, int first, int last)
{
    int head = PL_PART_HEAD(c);
    PL_REQUIRE(first >= PL_PART_EMBED && last <= head && first <= last,
               "a stage holds parts %d..%d: that is empty or outside the model (parts run "
               "from -1, the embedding, through the %d blocks to %d, the head; every stage "
               "needs first <= last)",
               first, last, c->n_layers, head);
}

size_t pl_parts_boundary_numel(const struct pl_model_config *c, int B, int T)
{
    return (size_t)B * (size_t)T * (size_t)c->d_model;
}

/* The zero-FLOP event that tells which microbatch, and which range of parts, the compute
 * after it belongs to. */
static void mark(char phase, int mb, int first)
{
    if (!pl_trace_enabled()) return;
    struct pl_event ev;
    memset(&ev, 0, sizeof ev);
    ev.type = PL_EV_COMPUTE;
    snprintf(ev.label, sizeof ev.label, PL_PIPE_MARK "%c %d @%d", phase, mb, first);
    pl_trace_add(&ev);
}

static int holds(const struct pl_parts_acts *a, int part)
{
    return a->first <= part && part <= a->last;
}

double pl_parts_forward(struct pl_model *m, int first, int last, int mb,
                        struct pl_parts_acts *a, const struct pl_model_ctx *ctx,
                        const int *tokens, const int *targets, int B, int T,
                        const float *x_in)
{
    const struct pl_model_config *c = &m->cfg;
    pl_parts_check(c, first, last);
    for (int part = first; part <= last; part++)
        PL_REQUIRE(pl_model_layout_holds(&m->layout, part),
                   "pl_parts_forward of parts %d..%d on a model that does not hold part %d "
                   "(made by pl_model_new_ends, it holds only its ends): run the blocks on "
                   "the model (or the shards) that holds them", first, last, part);
    PL_REQUIRE(first == PL_PART_EMBED ? tokens != NULL : x_in != NULL,
               "a stage starting at part %d needs %s", first,
               first == PL_PART_EMBED ? "the tokens" : "the previous stage's activation x_in");
    PL_REQUIRE(last != PL_PART_HEAD(c) || targets != NULL,
               "the stage holding the head needs the targets to compute the loss");
    struct pl_model_ctx eval = pl_model_ctx_eval();
    if (!ctx) ctx = &eval;
    mark('F', mb, first);
    memset(a, 0, sizeof *a);
    a->first = first;
    a->last = last;
    a->B = B;
    a->T = T;
    a->mb = mb;
    size_t n = pl_parts_boundary_numel(c, B, T);
    a->x = pl_mem_alloc(n * sizeof(float), PL_MEM_ACTIV, PL_DEVICE, "stage residual");
    if (holds(a, PL_PART_EMBED)) {
        a->tokens = tokens;
        pl_embed_forward(c, &m->embed, tokens, B, T, a->x);
    } else {
        pl_copy(a->x, x_in, n);
    }
    int b0 = first < 0 ? 0 : first, b1 = last < c->n_layers ? last : c->n_layers - 1;
    if (b1 >= b0) {
        a->blocks = pl_mem_alloc((size_t)(b1 - b0 + 1) * sizeof *a->blocks, PL_MEM_WORK,
                                 PL_HOST, "stage block acts");
        for (int l = b0; l <= b1; l++) {
            pl_block_acts_new(&a->blocks[l - b0], c, B, T);
            a->nblocks++;
            pl_block_forward(c, l, &m->blocks[l], &a->blocks[l - b0], ctx, a->x, a->x);
        }
    }
    double loss = 0;
    if (holds(a, PL_PART_HEAD(c))) {
        pl_head_acts_new(&a->head, c, B, T);
        loss = pl_head_forward(c, &m->head, &a->head, a->x, targets);
    }
    done('F', mb);
    return loss;
}

void pl_parts_backward(struct pl_model *m, struct pl_parts_acts *a,
                       const struct pl_model_ctx *ctx, const float *dy)
{
    const struct pl_model_config *c = &m->cfg;
    PL_REQUIRE(a->x != NULL, "pl_parts_backward of microbatch %d: its forward has not run, "
               "or its activations were freed already", a->mb);
    PL_REQUIRE(m->grads != NULL, "pl_parts_backward needs the model's gradients");
    struct pl_model_ctx eval = pl_model_ctx_eval();
    if (!ctx) ctx = &eval;
    mark('B', a->mb, a->first);
    size_t n = pl_parts_boundary_numel(c, a->B, a->T);
    if (holds(a, PL_PART_HEAD(c))) {
        pl_head_backward(c, &m->head, &m->head_g, &a->head, ctx, a->x);
    } else {
        PL_REQUIRE(dy != NULL, "a stage without the head needs dy, the gradient the next "
                   "stage sent back");
        pl_copy(a->x, dy, n);
    }
    int b0 = a->first < 0 ? 0 : a->first;
    int b1 = a->last < c->n_layers ? a->last : c->n_layers - 1;
    for (int l = b1; l >= b0; l--)
        pl_block_backward(c, l, &m->blocks[l], &m->blocks_g[l], &a->blocks[l - b0], ctx, a->x,
                          a->x);
    if (holds(a, PL_PART_EMBED)) pl_embed_backward(c, &m->embed_g, a->tokens, a->B, a->T, a->x);
    done('B', a->mb);
}

/* The blocks a stage holds: [*b0, *b1], empty when *b1 < *b0. */
static void block_range(const struct pl_model_config *c, int first, int last, int *b0, int *b1)
{
    *b0 = first < 0 ? 0 : first;
    *b1 = last < c->n_layers ? last : c->n_layers - 1;
}

void pl_parts_backward_b(struct pl_model *m, struct pl_parts_acts *a,
                         const struct pl_model_ctx *ctx, const float *dy)
{
    const struct pl_model_config *c = &m->cfg;
    PL_REQUIRE(a->x != NULL, "pl_parts_backward_b of microbatch %d: its forward has not run, "
               "or its activations were freed already", a->mb);
    PL_REQUIRE(a->wgrad == NULL, "pl_parts_backward_b of microbatch %d: its B ran already "
               "(each microbatch runs B once, then W once)", a->mb);
    PL_REQUIRE(m->grads != NULL, "pl_parts_backward_b needs the model's gradients");
    struct pl_model_ctx eval = pl_model_ctx_eval();
    if (!ctx) ctx = &eval;
    mark('B', a->mb, a->first);
    if (holds(a, PL_PART_HEAD(c))) {
        pl_head_backward(c, &m->head, &m->head_g, &a->head, ctx, a->x);
    } else {
        PL_REQUIRE(dy != NULL, "a stage without the head needs dy, the gradient the next "
                   "stage sent back");
        pl_copy(a->x, dy, pl_parts_boundary_numel(c, a->B, a->T));
    }
    /* never empty: W's turn is how a schedule knows B ran, even on a stage without blocks */
    a->wgrad = pl_mem_alloc((size_t)(a->nblocks ? a->nblocks : 1) * sizeof *a->wgrad,
                            PL_MEM_WORK, PL_HOST, "stage W state");
    int b0, b1;
    block_range(c, a->first, a->last, &b0, &b1);
    for (int l = b1; l >= b0; l--) {
        struct pl_block_wgrad *w = &a->wgrad[l - b0];
        pl_block_wgrad_new(w, c, a->B, a->T);
        pl_block_backward_b(c, l, &m->blocks[l], &a->blocks[l - b0], ctx, w, a->x, a->x);
    }
    done('B', a->mb);
}

void pl_parts_backward_w(struct pl_model *m, struct pl_parts_acts *a)
{
    const struct pl_model_config *c = &m->cfg;
    PL_REQUIRE(a->x != NULL, "pl_parts_backward_w: the microbatch's activations were freed "
               "already (pl_parts_acts_free frees them and what its B kept, which its W reads: "
               "free them after the W)");
    PL_REQUIRE(a->wgrad != NULL, "pl_parts_backward_w of microbatch %d: its B has not run, or "
               "its W ran already (each microbatch runs B once, then W once)", a->mb);
    mark('W', a->mb, a->first);
    int b0, b1;
    block_range(c, a->first, a->last, &b0, &b1);
    for (int l = b1; l >= b0; l--) {
        pl_block_backward_w(c, l, &m->blocks[l], &m->blocks_g[l], &a->blocks[l - b0],
                            &a->wgrad[l - b0]);
        pl_block_wgrad_free(&a->wgrad[l - b0]);
    }
    pl_mem_free(a->wgrad);
    a->wgrad = NULL;
    if (holds(a, PL_PART_EMBED)) pl_embed_backward(c, &m->embed_g, a->tokens, a->B, a->T, a->x);
    done('W', a->mb);
}

size_t pl_parts_wgrad_bytes(const struct pl_model_config *c, int first, int last, int B, int T)
{
    pl_parts_check(c, first, last);
    int b0, b1;
    block_range(c, first, last, &b0, &b1);
    return b1 >= b0 ? (size_t)(b1 - b0 + 1) * pl_block_wgrad_bytes(c, B, T) : 0;
}

void pl_parts_acts_free(struct pl_parts_acts *a)
{
    if (a->wgrad) {
        for (int i = 0; i < a->nblocks; i++)
            if (a->wgrad[i].d_proj) pl_block_wgrad_free(&a->wgrad[i]);
        pl_mem_free(a->wgrad);
    }
    for (int i = 0; i < a->nblocks; i++) pl_block_acts_free(&a->blocks[i]);
    pl_mem_free(a->blocks);
    if (a->head.x) pl_head_acts_free(&a->head);
    pl_mem_free(a->x);
    memset(a, 0, sizeof *a);
}

size_t pl_parts_acts_bytes(const struct pl_model_config *c, int first, int last, int B, int T)
{
    pl_parts_check(c, first, last);
    struct pl_mem_stats before, after;
    pl_mem_get_stats(&before);
    size_t n = pl_parts_boundary_numel(c, B, T);
    float *x = pl_mem_alloc(n * sizeof(float), PL_MEM_ACTIV, PL_DEVICE, "stage residual");
    struct pl_block_acts ba;
    struct pl_head_acts ha;
    size_t per_block = 0, head = 0;
    pl_block_acts_new(&ba, c, B, T);
    pl_mem_get_stats(&after);
    per_block = after.current[PL_MEM_ACTIV] - before.current[PL_MEM_ACTIV] - n * sizeof(float);
    pl_block_acts_free(&ba);
    if (last == PL_PART_HEAD(c)) {
        pl_mem_get_stats(&before);
        pl_head_acts_new(&ha, c, B, T);
        pl_mem_get_stats(&after);
        head = after.current[PL_MEM_ACTIV] - before.current[PL_MEM_ACTIV];
        pl_head_acts_free(&ha);
    }
    pl_mem_free(x);
    int b0 = first < 0 ? 0 : first, b1 = last < c->n_layers ? last : c->n_layers - 1;
    size_t blocks = b1 >= b0 ? (size_t)(b1 - b0 + 1) : 0;
    return n * sizeof(float) + blocks * per_block + head;
}

double pl_part_flops(const struct pl_model_config *c, int part, int B, int T)
{
    PL_REQUIRE(part >= PL_PART_EMBED && part <= PL_PART_HEAD(c),
               "part %d is outside the model (-1 .. %d)", part, PL_PART_HEAD(c));
    int was = pl_trace_enabled();
    pl_trace_enable(0);
    /* A dense part's count follows from the shapes, so its parameters may stay zero; an
     * MoE block's depends on where the router sends the tokens, so it draws them. */
    struct pl_model *m =
        pl_model_new_shaped(c, PL_MODEL_PARAMS | PL_MODEL_GRADS, c->n_experts > 0);
    size_t N = (size_t)B * (size_t)T;
    int *tokens = pl_mem_alloc(N * sizeof(int), PL_MEM_WORK, PL_DEVICE, "flop count tokens");
    float *x = pl_mem_alloc(N * (size_t)c->d_model * sizeof(float), PL_MEM_WORK, PL_DEVICE,
                            "flop count input");
    struct pl_parts_acts a;
    double before = pl_ledger_flops_total();
    pl_parts_forward(m, part, part, 0, &a, NULL, tokens, tokens, B, T, x);
    pl_parts_backward(m, &a, NULL, x);
    double flops = pl_ledger_flops_total() - before;
    pl_parts_acts_free(&a);
    pl_mem_free(x);
    pl_mem_free(tokens);
    pl_model_free(m);
    pl_trace_enable(was);
    return flops;
}
