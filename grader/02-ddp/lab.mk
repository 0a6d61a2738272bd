# lab.mk: Lab 2's make settings (included by grader/grader.mk). The driver sees the range of
# each gradient all-reduce and where in backward it was started by wrapping the library's
# calls (calls.h).
GRADER_WRAP_02-ddp := -Wl,--wrap=pl_all_reduce -Wl,--wrap=pl_all_reduce_async \
                      -Wl,--wrap=pl_model_set_hook
# The judge test (tests/judge/02-ddp.c) links the bucket plan's invariants (buckets.c), the
# uneven-batch reasons (uneven_words.c) and the names of cases and ranges (names.c) beside
# judge.c.
GRADER_JUDGE_SRC_02-ddp := grader/02-ddp/buckets.c grader/02-ddp/uneven_words.c \
                           grader/02-ddp/names.c
$(B)/tests/judge/02-ddp: grader/02-ddp/buckets.c grader/02-ddp/uneven_words.c \
                        grader/02-ddp/names.c \
                        tests/judge/lab02_buckets.h tests/judge/lab02_uneven.h
