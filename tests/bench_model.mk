# bench_model.mk: `make bench-model` (included by the Makefile), the reference step's speed
# at one thread for three model sizes against PyTorch on the CPU and against the sgemm peak
# (tests/bench_train.c --model). BENCH_ROUNDS=R rounds (median), BENCH_SECONDS=S per run.

.PHONY: bench-model
bench-model: all
	@$(B)/tests/bench_train --model --rounds $(or $(BENCH_ROUNDS),5) \
	    --seconds $(or $(BENCH_SECONDS),1)
