# lab.mk: Lab 3's make settings (included by grader/grader.mk). The driver reads the
# gradient each AdamW update is given by wrapping the library's call (gradients.h), where
# the pass's buffers live by wrapping the pass (unseen.c), and which of them are host memory
# from the memory ledger (on_host.h).
GRADER_WRAP_03-zero := -Wl,--wrap=pl_model_adamw_flat -Wl,--wrap=pl_pass_forward \
                       -Wl,--wrap=pl_pass_backward
# The judge test (tests/judge/03-zero.c) links judge_correct.c beside judge.c, and the
# wording of a buffer outside the ledger (unseen.c).
GRADER_JUDGE_SRC_03-zero := grader/03-zero/judge_correct.c grader/common/unseen.c
# The kit's sharded step (lib/shard_state.h, Lab 10's) trains ZeRO style and ships with lib:
# the grader's oracle here (GRADER_ORACLE_: refused before anything runs).
GRADER_ORACLE_03-zero := pl_shard_step pl_shard_state_new
