# lab.mk: Lab 6's make settings (included by grader/grader.mk).
#
#   make plots LAB=06     the schedule pictures of your own run (labs/, or solutions/ with
#                         SOLUTIONS=1): for AFAB and 1F1B on 4 stages and every m, your
#                         trace replayed with uniform stage times beside the schedule as
#                         defined, SVGs in PLOTS_DIR (default build/plots)
# A double-colon rule, so that every lab with pictures can add its own part to `make plots`.
PLOTS_DIR ?= build/plots

.PHONY: plots
plots:: all
	@case "$(or $(LAB),06)" in 06* | 6 | *pipeline*) \
	  sh grader/06-pipeline/plots.sh $(B) $(PLOTS_DIR) $(if $(filter-out 0,$(SOLUTIONS)),solutions,labs) ;; esac
