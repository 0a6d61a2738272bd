# lab.mk: Lab 5's make settings (included by grader/grader.mk). `make plots LAB=05` draws the
# handout's figures (05-sequence-parallel-*.svg in PLOTS_DIR, default build/plots; the
# handout's copies are PLOTS_DIR=docs/labs/img SOLUTIONS=1): the TP vs TP+SP layout, and
# activation bytes per rank against t measured from the copy being graded, labs/ or
# solutions/ with SOLUTIONS=1, with the kit's formulas. A double-colon rule, so that every
# lab with pictures adds its own part.

# The driver sees whether the block keeps a buffer of the TP region or of the conjugates in
# static storage by wrapping the kit's core, the collectives and the layout moves, and counts
# the core's FLOPs for the work bound (unseen.c).
GRADER_WRAP_05-sequence-parallel := $(foreach f,attn_core_forward attn_core_backward \
                                      mlp_core_forward mlp_core_backward from_rank_major \
                                      to_rank_major,-Wl,--wrap=pl_sp_$(f)) \
                                    -Wl,--wrap=pl_all_gather -Wl,--wrap=pl_reduce_scatter

PLOTS_DIR ?= build/plots
LAB05_COPY = $(if $(filter-out 0,$(SOLUTIONS)),solutions,labs)

.PHONY: plots
plots:: all
	@case "$(LAB)" in '' | 05* | 5 | *sequence*) mkdir -p $(PLOTS_DIR) && \
	  OPENBLAS_NUM_THREADS=1 $(B)/bin/launch -np 4 -- $(B)/grader/$(LAB05_COPY)/05-sequence-parallel/driver \
	    --mode bench --label $(LAB05_COPY)/ --plots-dir $(PLOTS_DIR) ;; esac
