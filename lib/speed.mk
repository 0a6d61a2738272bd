# speed.mk: the reference step's speed (included by the Makefile).
#
# -fopenmp-simd lets the loops of lib/kernels.h and lib/ops.c marked with PL_SIMD vectorise
# at the portable -O2 (reductions included), without threads and without -ffast-math;
# -fno-math-errno lets sqrtf in those loops vectorise (nothing in the kit reads errno after
# a math call). Wider instruction sets are picked at run time (PL_CLONES in lib/ops.c).
SIMD_CFLAGS := -fopenmp-simd -fno-math-errno
ALL_CFLAGS += $(SIMD_CFLAGS)

# `make bench-model`: the step at one thread for three model sizes against PyTorch on the
# CPU and the sgemm peak (tests/bench_train.c --model). BENCH_ROUNDS=R rounds (median of
# R interleaved kit/PyTorch runs), BENCH_SECONDS=S per run.
.PHONY: bench-model
bench-model: all
	@$(B)/tests/bench_train --model --rounds $(or $(BENCH_ROUNDS),5) \
	    --seconds $(or $(BENCH_SECONDS),1)
