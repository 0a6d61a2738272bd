# robust.mk: the grader's robustness checks beside make test: the flake benchmark (how stable
# speed grading is on a busy machine). Included by the Makefile.

.PHONY: flake
flake: all
	@FLAKE_RUNS='$(RUNS)' LAB='$(LAB)' FLAKE_DRIVERS='$(DRIVERS)' sh tests/flake.sh $(B)
