# lab.mk: Lab 6's make settings (included by grader/grader.mk). The driver places every
# buffer the code under test sends or receives against the memory ledger by wrapping the
# point-to-point calls (outside.c).
GRADER_WRAP_06-pipeline := $(foreach f,send recv sendrecv isend irecv,-Wl,--wrap=pl_$(f))
