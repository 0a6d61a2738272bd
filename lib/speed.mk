# speed.mk: the reference step's speed (included by the Makefile).
#
# -fopenmp-simd lets the loops of lib/kernels.h and lib/ops.c marked with PL_SIMD vectorise
# at the portable -O2 (reductions included), without threads and without -ffast-math;
# -fno-math-errno lets sqrtf in those loops vectorise (nothing in the kit reads errno after
# a math call). Wider instruction sets are picked at run time (PL_CLONES in lib/ops.c).
SIMD_CFLAGS := -fopenmp-simd -fno-math-errno
ALL_CFLAGS += $(SIMD_CFLAGS)

# ops.c's loops may fuse a * b + c into one multiply-add (ISO C mode leaves that off). Only
# their x86-64-v3 and v4 builds have FMA, so those round once where the baseline build
# rounds twice: float rounding, like the order of a row's sums, and about 30% of the GELU
# and softmax loops' time (pl_k_expf's polynomial is a chain of them).
$(B)/obj/lib/ops.o: ALL_CFLAGS += -ffp-contract=fast

# `make bench-model`: the step at one thread for three model sizes against PyTorch on the
# CPU and the sgemm peak (tests/bench_train.c --model). BENCH_ROUNDS=R rounds (median of
# R interleaved kit/PyTorch runs), BENCH_SECONDS=S per run.
# `make bench-model GPU=1`: three sizes up to GPT-2 small on the GPU against PyTorch on the
# same GPU (fp32 without TF32, and bf16 with fused attention for reference); 3 rounds
# unless BENCH_ROUNDS says. Without a GPU it says so and exits 2 before building.
# BENCH_ATTENTION=flash steps the kit's model with flash attention (cfg.attention).
.PHONY: bench-model
ifeq ($(GPU),1)
bench-model:
	@sh tests/gpu_present.sh "make bench-model GPU=1" \
	    "make bench-model (the CPU build's step against PyTorch on the CPU)"
	@$(MAKE) --no-print-directory GPU=1 all
	@$(B)/tests/bench_train --model --rounds $(or $(BENCH_ROUNDS),3) \
	    --seconds $(or $(BENCH_SECONDS),1) \
	    $(if $(BENCH_ATTENTION),--attention $(BENCH_ATTENTION))
else
bench-model: all
	@$(B)/tests/bench_train --model --rounds $(or $(BENCH_ROUNDS),5) \
	    --seconds $(or $(BENCH_SECONDS),1) \
	    $(if $(BENCH_ATTENTION),--attention $(BENCH_ATTENTION))
endif
