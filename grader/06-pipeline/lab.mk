# lab.mk: Lab 6's make settings (included by grader/grader.mk). The driver places every
# buffer the code under test sends or receives against the memory ledger by wrapping the
# point-to-point calls (outside.c).
GRADER_WRAP_06-pipeline := $(foreach f,send recv sendrecv isend irecv,-Wl,--wrap=pl_$(f))
# Its judge test links the verdicts' other MPI-free files: the training's wording, the
# partition's, the schedules' definitions, the grid's layout and where a buffer lies.
GRADER_JUDGE_SRC_06-pipeline := $(addprefix grader/06-pipeline/,judge_train.c partition.c \
  schedule.c grid.c) grader/common/unseen.c
