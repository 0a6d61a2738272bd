# lab.mk: Lab 5's make settings (included by grader/grader.mk).
# The driver sees whether the block keeps a buffer of the TP region or of the conjugates in
# static storage by wrapping the kit's core, the collectives and the layout moves, and counts
# the core's FLOPs for the work bound (unseen.c); the second part's attention FLOPs are those
# the kit's block calls charge, counted at each call, and what its ring steps send is looked
# at (cases_ring.c: K or V sent back to their owner).
GRADER_WRAP_05-sequence-parallel := $(foreach f,attn_core_forward attn_core_backward \
                                      mlp_core_forward mlp_core_backward from_rank_major \
                                      to_rank_major,-Wl,--wrap=pl_sp_$(f)) \
                                    -Wl,--wrap=pl_all_gather -Wl,--wrap=pl_reduce_scatter \
                                    -Wl,--wrap=pl_attn_block_forward \
                                    -Wl,--wrap=pl_attn_block_backward \
                                    -Wl,--wrap=pl_ring_shift_start
GRADER_JUDGE_SRC_05-sequence-parallel := grader/05-sequence-parallel/judge_ring.c
# The kit's TP+SP block (lib/sp_block.h, which the 4D capstone composes) computes what this
# lab asks: the code under test calling it is refused before anything runs.
GRADER_ORACLE_05-sequence-parallel := pl_sp_block_forward pl_sp_block_backward \
                                      pl_sp_block_sync_grads pl_sp_gather pl_sp_reduce_scatter \
                                      pl_sp_block_forward_saved pl_sp_block_backward_saved
