# lab.mk: Lab 5's make settings (included by grader/grader.mk).
# The driver sees whether the block keeps a buffer of the TP region in static storage by
# wrapping the kit's core (unseen.c).
GRADER_WRAP_05-sequence-parallel := $(foreach f,attn_core_forward attn_core_backward \
                                      mlp_core_forward mlp_core_backward,-Wl,--wrap=pl_sp_$(f))
