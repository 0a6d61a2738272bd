# lab.mk: Lab 4's make settings (included by grader/grader.mk). `make plots LAB=04` draws the
# handout's figures (04-tensor-parallel-*.svg in PLOTS_DIR, default build/plots; the
# handout's copies are PLOTS_DIR=docs/labs/img SOLUTIONS=1) on 8 ranks of a virtual 2 nodes x
# 4 cluster: the f/g figure of the TP MLP and attention, and the block of the copy being
# graded (labs/, or solutions/ with SOLUTIONS=1) on the modelled timeline, with tp = 4 inside
# a node and across nodes.
# The driver sees whether the loss keeps gathered logits in a static or stack array by
# wrapping the library's collectives (unseen.c).
GRADER_WRAP_04-tensor-parallel := $(foreach f,all_reduce reduce_scatter all_gather broadcast \
                                    all_to_all all_to_all_v all_reduce_async \
                                    reduce_scatter_async all_gather_async,-Wl,--wrap=pl_$(f))

PLOTS_DIR ?= build/plots
LAB04_COPY = $(if $(filter-out 0,$(SOLUTIONS)),solutions,labs)

.PHONY: plots
plots:: all
	@case "$(LAB)" in '' | 04* | 4 | *tensor*) mkdir -p $(PLOTS_DIR) && \
	  OPENBLAS_NUM_THREADS=1 $(B)/bin/launch -np 8 -- $(B)/grader/$(LAB04_COPY)/04-tensor-parallel/driver \
	    --mode bench --label $(LAB04_COPY)/ --plots-dir $(PLOTS_DIR) ;; esac
