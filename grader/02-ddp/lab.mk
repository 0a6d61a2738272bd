# lab.mk: Lab 2's make settings (included by grader/grader.mk). The driver sees the range of
# each gradient all-reduce and where in backward it was started by wrapping the library's
# calls (calls.h).
GRADER_WRAP_02-ddp := -Wl,--wrap=pl_all_reduce -Wl,--wrap=pl_all_reduce_async \
                      -Wl,--wrap=pl_model_set_hook
#
#   make plots LAB=02     the overlapped step's modelled timeline on dgx-h100, from your own run
#                         (labs/, or solutions/ with SOLUTIONS=1), SVG in PLOTS_DIR
PLOTS_DIR ?= build/plots
plots:: all
	@case "$(LAB)" in 02* | 2 | *ddp*) \
	  sh grader/02-ddp/plots.sh $(B) $(PLOTS_DIR) $(if $(filter-out 0,$(SOLUTIONS)),solutions,labs) ;; esac
