# lab.mk: Lab 1's make settings (included by grader/grader.mk). The driver counts the bytes
# each rank receives by wrapping the receiving calls of the library, and places every buffer
# handed to a message, coll_reduce (pl_accumulate) or coll_copy (pl_copy) by wrapping those.
GRADER_WRAP_01-collectives := -Wl,--wrap=pl_recv -Wl,--wrap=pl_sendrecv -Wl,--wrap=pl_irecv \
                              -Wl,--wrap=pl_send -Wl,--wrap=pl_isend \
                              -Wl,--wrap=pl_accumulate -Wl,--wrap=pl_copy
# judge.c words where a buffer outside the memory ledger lay with gr_unseen_where.
GRADER_JUDGE_SRC_01-collectives := grader/common/unseen.c
