# lab.mk: Lab 8's make settings (included by grader/grader.mk). The kit's planner is the
# grader's oracle: its entry points are wrapped, so the driver sees when the code under test
# calls one (it reaches the real ones as __real_*).
GRADER_WRAP_08-placement := $(foreach f,pl_plan_memory pl_plan_time pl_plan_activation_layer \
  pl_plan_check pl_plan_search pl_plan_min_nodes pl_plan_time_links pl_plan_links \
  pl_plan_check_step pl_plan_check_placement,-Wl,--wrap=$(f))

#   make plots LAB=08     the configuration-space figure of docs/labs/08-placement.md, from a
#                         real run of the kit's planner (the handout's copy: PLOTS_DIR=docs/labs/img)
# A double-colon rule, so that every lab with pictures adds its own part to `make plots`.
PLOTS_DIR ?= build/plots

.PHONY: plots
plots:: all
	@case "$(LAB)" in '' | 08* | 8 | *placement*) mkdir -p $(PLOTS_DIR) && \
	  $(B)/bin/plan --model llama3-70b --cluster dgx-h100 --nodes 8 \
	    --svg $(PLOTS_DIR)/08-placement-space.svg >/dev/null && \
	  echo "wrote $(PLOTS_DIR)/08-placement-space.svg" ;; esac
