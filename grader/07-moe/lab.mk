# lab.mk: Lab 7's make settings (included by grader/grader.mk).
#   make plots LAB=07     tokens per expert and step time vs routing skew from your own run
#                         (labs/, or solutions/ with SOLUTIONS=1), SVGs in PLOTS_DIR (default
#                         build/plots; the handout's are PLOTS_DIR=docs/labs/img SOLUTIONS=1)
# A double-colon rule, so that every lab with pictures can add its own part to `make plots`.
PLOTS_DIR ?= build/plots
LAB07_COPY = $(if $(filter-out 0,$(SOLUTIONS)),solutions,labs)

.PHONY: plots
plots:: all
	@case "$(LAB)" in '' | 07* | 7 | *moe*) mkdir -p $(PLOTS_DIR) && \
	  $(B)/bin/launch -np 4 -- $(B)/grader/$(LAB07_COPY)/07-moe/driver --mode bench \
	    --plots-dir $(PLOTS_DIR) ;; esac
