# lab.mk: Lab 1's make settings (included by grader/grader.mk). The driver counts the bytes
# each rank receives by wrapping the receiving calls of the library, and places every buffer
# handed to a message, coll_reduce (pl_accumulate) or coll_copy (pl_copy) by wrapping those.
GRADER_WRAP_01-collectives := -Wl,--wrap=pl_recv -Wl,--wrap=pl_sendrecv -Wl,--wrap=pl_irecv \
                              -Wl,--wrap=pl_send -Wl,--wrap=pl_isend \
                              -Wl,--wrap=pl_accumulate -Wl,--wrap=pl_copy

# make plots LAB=01: busbw vs message size of your collectives beside the library's, and the
# alpha-beta fit of each all-reduce (grader/01-collectives/plots.sh), SVGs in PLOTS_DIR.
PLOTS_DIR ?= build/plots
plots:: all
	@case "$(LAB)" in 01* | 1 | *collectives*) \
	  sh grader/01-collectives/plots.sh $(B) $(PLOTS_DIR) $(if $(filter-out 0,$(SOLUTIONS)),solutions,labs) ;; esac
