# lab.mk: Lab 4's make settings (included by grader/grader.mk).
# The driver sees whether the loss keeps gathered logits in a static or stack array by
# wrapping the library's collectives (unseen.c).
GRADER_WRAP_04-tensor-parallel := $(foreach f,all_reduce reduce_scatter all_gather broadcast \
                                    all_to_all all_to_all_v all_reduce_async \
                                    reduce_scatter_async all_gather_async,-Wl,--wrap=pl_$(f))
# The kit's TP+SP block (lib/sp_block.h, the 4D capstone's) gives a TP block once its input
# is sliced and its output gathered: the code under test calling it is refused before
# anything runs.
GRADER_ORACLE_04-tensor-parallel := pl_sp_block_forward pl_sp_block_backward \
                                    pl_sp_block_sync_grads pl_sp_gather pl_sp_reduce_scatter \
                                    pl_sp_block_forward_saved pl_sp_block_backward_saved
