# lab.mk: Lab 8's make settings (included by grader/grader.mk). The kit's planner is the
# grader's oracle (GRADER_ORACLE_: the one list, grader.mk's rule): the code under test
# calling one of its entry points is refused before anything runs, and the entry points are
# also wrapped (cases.c defines the wrappers), so the driver sees a call made any other way;
# the grader reaches the real ones as __real_*.
GRADER_ORACLE_08-placement := pl_plan_memory pl_plan_time pl_plan_activation_layer \
  pl_plan_check pl_plan_search pl_plan_min_nodes pl_plan_time_links pl_plan_links \
  pl_plan_check_step pl_plan_check_placement pl_plan_pacing_stage
GRADER_ORACLE_WRAPPED_08-placement := 1
# The planner's source is in the kit, where a student can read it: code that pastes its
# estimates or its search in under other names is refused as a call is (grader/rules/copy.h).
GRADER_ORACLE_SRC_08-placement := lib/plan.c lib/plan_search.c
# The judge test's case of the planner's switches, a header it includes.
$(B)/tests/judge/08-placement: tests/judge/lab08_switches.h
