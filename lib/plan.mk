# plan.mk: the planner's part of the Makefile (included by it).
#
#   make plan ARGS="--model llama3-70b --cluster dgx-h100 --nodes 8"   run the plan tool
# (Lab 8's figure: grader/08-placement/plots.sh, `make plots LAB=08`.)
.PHONY: plan

plan: $(B)/bin/plan
	@$(B)/bin/plan $(ARGS)
