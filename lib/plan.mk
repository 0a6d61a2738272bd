# plan.mk: the planner's part of the Makefile (included by it).
#
#   make plan ARGS="--model llama3-70b --cluster dgx-h100 --nodes 8"   run the plan tool
#   make plots LAB=08                                                 redraw Lab 8's figures
#
# The figures of docs/labs/08-placement.md come from real runs of the plan tool, so they are
# redrawn here rather than drawn by hand.
.PHONY: plan plots

plan: $(B)/bin/plan
	@$(B)/bin/plan $(ARGS)

PLOTS_08 := docs/labs/img/08-placement-space.svg

plots: $(B)/bin/plan
	@case "$(or $(LAB),08)" in 08*|8|*placement*) \
	  $(B)/bin/plan --model llama3-70b --cluster dgx-h100 --nodes 8 --svg $(PLOTS_08) >/dev/null && \
	  echo "wrote $(PLOTS_08)";; \
	  *) echo "make plots: no figures are drawn by make for LAB=$(LAB) (Lab 8 only)";; esac
