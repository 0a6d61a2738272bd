# lab.mk: Lab 3's make settings (included by grader/grader.mk). The driver reads the
# gradient each AdamW update is given by wrapping the library's call (gradients.h), where
# the pass's buffers live by wrapping the pass (unseen.c), and which of them are host memory
# from the memory ledger (on_host.h).
GRADER_WRAP_03-zero := -Wl,--wrap=pl_model_adamw_flat -Wl,--wrap=pl_pass_forward \
                       -Wl,--wrap=pl_pass_backward
#
#   make plots LAB=03     from your own run (labs/, or solutions/ with SOLUTIONS=1), SVG in
#                         PLOTS_DIR: the memory per rank of each stage by category, one ZeRO-3
#                         step's memory over time, its modelled timeline with and without
#                         prefetch
PLOTS_DIR ?= build/plots
plots:: all
	@case "$(LAB)" in 03* | 3 | *zero*) \
	  sh grader/03-zero/plots.sh $(B) $(PLOTS_DIR) $(if $(filter-out 0,$(SOLUTIONS)),solutions,labs) ;; esac
