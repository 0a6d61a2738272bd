# lab.mk: Lab 7's make settings (included by grader/grader.mk). `make plots LAB=07` draws the
# handout's figures (docs/labs/img/07-moe-*.svg) from the copy being graded: labs/, or
# solutions/ with SOLUTIONS=1. A double-colon rule, so that other labs can add their plots.
LAB07_COPY = $(if $(filter-out 0,$(SOLUTIONS)),solutions,labs)

.PHONY: plots
plots:: all
	@case "$(LAB)" in '' | 07* | 7 | *moe*) \
	  $(B)/bin/launch -np 4 -- $(B)/grader/$(LAB07_COPY)/07-moe/driver --mode bench \
	    --plots-dir docs/labs/img ;; esac
