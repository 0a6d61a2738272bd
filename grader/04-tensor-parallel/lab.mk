# lab.mk: Lab 4's make settings (included by grader/grader.mk).
# The driver sees whether the loss keeps gathered logits in a static or stack array by
# wrapping the library's collectives (unseen.c).
GRADER_WRAP_04-tensor-parallel := $(foreach f,all_reduce reduce_scatter all_gather broadcast \
                                    all_to_all all_to_all_v all_reduce_async \
                                    reduce_scatter_async all_gather_async,-Wl,--wrap=pl_$(f))
