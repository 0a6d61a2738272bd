# lab.mk: Lab 7's make settings (included by grader/grader.mk). The kit's single-device
# router is the grader's oracle (GRADER_ORACLE_: the one list, grader.mk's rule): the code
# under test calling it is refused before anything runs.
GRADER_ORACLE_07-moe := pl_moe_route pl_moe_capacity
# The router's source is in the kit, where a student can read it (pl_moe_route in
# lib/model_moe.c, its top-k and capacity rule in lib/moe_kernels.h): code that pastes it in
# under other names is refused as a call is (grader/rules/copy.h).
GRADER_ORACLE_SRC_07-moe := lib/model_moe.c lib/moe_kernels.h
