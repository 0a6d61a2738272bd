# Lab 9's make settings (grader/grader.mk includes every grader/NN-name/lab.mk).
# The judge test (tests/judge/09-4d.c) links the comparisons' words (gr_rel_err) and the
# bubble, cool-down, ZeRO-1, vocabulary-parallel head and plan tests' judges, and rep.c's
# offsets, which zero.c reads.
GRADER_JUDGE_SRC_09-4d := grader/common/train.c grader/09-4d/bubble.c grader/09-4d/zero.c \
    grader/09-4d/overlap.c grader/09-4d/vocab.c grader/09-4d/planmem.c \
    grader/09-4d/rep.c
# The judge test's ZeRO-1 part, a header it includes (tests/judge/lab09_zero.h).
$(B)/tests/judge/09-4d: tests/judge/lab09_zero.h
# The DP group's all-reduces, counted during the steps for the traffic test, the batch rows
# the embedding and the head are given, for the results test, and the order of each stage's
# block calls and any collective between the last backward and the DP sum, for the bubble
# test, and the DP group's reduce-scatters and all-gathers for the ZeRO-1 test (cases.c);
# the same block calls and collectives bound and measure the head's runs (vocab_obs.c).
# AdamW's calls, its compute named by a span, which the step time's replay scales by the
# parameters rather than the tokens (plantime.c).
GRADER_WRAP_09-4d := -Wl,--wrap=pl_all_reduce -Wl,--wrap=pl_all_reduce_async \
    -Wl,--wrap=pl_reduce_scatter -Wl,--wrap=pl_reduce_scatter_async \
    -Wl,--wrap=pl_all_gather -Wl,--wrap=pl_all_gather_async \
    -Wl,--wrap=pl_parts_forward -Wl,--wrap=pl_sp_block_forward \
    -Wl,--wrap=pl_sp_block_forward_saved -Wl,--wrap=pl_sp_block_backward \
    -Wl,--wrap=pl_sp_block_backward_saved -Wl,--wrap=pl_barrier \
    -Wl,--wrap=pl_adamw_step
