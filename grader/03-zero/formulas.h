/* formulas.h: the ZeRO paper's memory formulas per rank (Rajbhandari et al., section 3),
 * computed, never pasted: the grader judges measured bytes against them, the memory report
 * program (grader/bin/zero_memory.c) and the handout print them.
 *
 * Stage 0 is DDP: every rank holds everything. Each stage shards one more of the three:
 *   stage 1 the optimizer state, stage 2 also the gradients, stage 3 also the parameters.
 * Two views of the bytes per parameter (params, grads, optimizer state):
 *   mixed precision: 2 (fp16 params), 2 (fp16 grads), K = 12 (fp32 master copy, m, v);
 *   this kit's fp32: 4, 4, 8 (m, v). */
#ifndef LAB03_FORMULAS_H
#define LAB03_FORMULAS_H

#define ZERO_PAPER_K 12.0

struct zero_bytes {
    double params, grads, optim;
};

static inline double zero_bytes_total(struct zero_bytes b)
{
    return b.params + b.grads + b.optim;
}

/* Bytes per rank of psi parameters on nd ranks at `stage` (0..3), with bp, bg, bo bytes per
 * parameter of parameters, gradients and optimizer state. */
static inline struct zero_bytes zero_formula(int stage, double psi, int nd, double bp,
                                             double bg, double bo)
{
    struct zero_bytes b = {bp * psi, bg * psi, bo * psi};
    if (stage >= 1) b.optim /= nd;
    if (stage >= 2) b.grads /= nd;
    if (stage >= 3) b.params /= nd;
    return b;
}

/* (2+2+K)Psi, 4Psi + K Psi/Nd, 2Psi + (2+K)Psi/Nd, (4+K)Psi/Nd. */
static inline struct zero_bytes zero_mixed(int stage, double psi, int nd, double K)
{
    return zero_formula(stage, psi, nd, 2.0, 2.0, K);
}

/* 16Psi, 8Psi + 8Psi/Nd, 4Psi + 12Psi/Nd, 16Psi/Nd. */
static inline struct zero_bytes zero_fp32(int stage, double psi, int nd)
{
    return zero_formula(stage, psi, nd, 4.0, 4.0, 8.0);
}

static inline const char *zero_stage_name(int stage)
{
    static const char *names[] = {"DDP", "ZeRO-1", "ZeRO-2", "ZeRO-3"};
    return stage >= 0 && stage <= 3 ? names[stage] : "?";
}

/* The formula of a stage's total, in the paper's words. */
static inline const char *zero_mixed_text(int stage)
{
    static const char *t[] = {"(2+2+K)Psi", "4Psi + K Psi/Nd", "2Psi + (2+K)Psi/Nd",
                              "(4+K)Psi/Nd"};
    return stage >= 0 && stage <= 3 ? t[stage] : "?";
}

static inline const char *zero_fp32_text(int stage)
{
    static const char *t[] = {"16Psi", "8Psi + 8Psi/Nd", "4Psi + 12Psi/Nd", "16Psi/Nd"};
    return stage >= 0 && stage <= 3 ? t[stage] : "?";
}

/* Bytes each rank sends per step, in units of 4Psi(n-1)/n: DDP and stages 1 and 2 move 2
 * (reduce-scatter + all-gather = all-reduce), stage 3 moves 3 (the parameters are gathered
 * for the forward and again for the backward). */
static inline double zero_comm_psi(int stage)
{
    return stage == 3 ? 3.0 : 2.0;
}

#endif
