# lab.mk: Lab 8's make settings (included by grader/grader.mk). The kit's planner is the
# grader's oracle: its entry points are wrapped, so the driver sees when the code under test
# calls one (it reaches the real ones as __real_*).
GRADER_WRAP_08-placement := $(foreach f,pl_plan_memory pl_plan_time pl_plan_activation_layer \
  pl_plan_check pl_plan_search pl_plan_min_nodes pl_plan_time_links pl_plan_links \
  pl_plan_check_step pl_plan_check_placement,-Wl,--wrap=$(f))
