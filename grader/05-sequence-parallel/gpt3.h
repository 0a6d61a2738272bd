/* gpt3.h: the GPT-3 175B block that Lab 5's questions and handout figures are about (b = 1
 * sequence, s = 2048 tokens, h = 12288, 96 heads, d_ff = 4h), beside the lab's own small
 * block: one definition for questions.c and the driver's bench. */
#ifndef LAB05_GPT3_H
#define LAB05_GPT3_H

#include "model.h"

#define L5_Q_B 1
#define L5_Q_S 2048
#define L5_Q_H 12288
#define L5_Q_HEADS 96

static inline struct pl_model_config l5_gpt3_block(void)
{
    struct pl_model_config c = pl_model_config_default();
    c.d_model = L5_Q_H;
    c.n_heads = L5_Q_HEADS;
    c.d_ff = 4 * L5_Q_H;
    c.seq_len = L5_Q_S;
    return c;
}

#endif
