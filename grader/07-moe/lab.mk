# lab.mk: Lab 7's make settings (included by grader/grader.mk). The kit's single-device
# router is the grader's oracle (GRADER_ORACLE_: the one list, grader.mk's rule): the code
# under test calling it is refused before anything runs.
GRADER_ORACLE_07-moe := pl_moe_route pl_moe_capacity
