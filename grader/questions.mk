# questions.mk: graded questions with numbers (grader/common/questions.h), included by
# grader.mk.
#
#   make questions LAB=01                  check labs/01-*/questions.txt
#   make questions LAB=01 SOLUTIONS=1      the solution's answers (full marks)
#     INSTRUCTOR=1 (expected values and derivations)  RESULTS=q.json
#
# The program build/<b>/bin/questions links every lab's grader/NN-name/questions.c: each
# registers its table, as plan.c registers the lab.
QUESTIONS_OBJ := $(patsubst %.c,$(B)/grader/obj/%.o,grader/common/questions.c \
  $(filter-out grader/bin/% grader/common/%,$(wildcard grader/*/questions.c)))
BIN_OBJ_questions := $(QUESTIONS_OBJ)
$(B)/bin/questions: $(QUESTIONS_OBJ)

QUESTIONS_FLAGS = $(if $(filter-out 0,$(SOLUTIONS)),--solutions) \
  $(if $(filter-out 0,$(INSTRUCTOR)),--instructor) $(if $(RESULTS),--results '$(RESULTS)')

.PHONY: questions
questions: $(B)/bin/questions
	@test -n "$(LAB)" || { echo "which lab? make questions LAB=01"; exit 2; }
	@$(B)/bin/questions --lab '$(LAB)' $(QUESTIONS_FLAGS)

# `make grade` grades the questions too: the orchestrator links every table and judges each
# question as a test of its own, tagged "questions" (docs/grader.md), so their points reach
# results.json and the leaderboard's totals like every other test's.
BIN_OBJ_grade += $(QUESTIONS_OBJ)
$(B)/bin/grade: $(QUESTIONS_OBJ)
GRADE_FLAGS += $(if $(filter-out 0,$(INSTRUCTOR)),--instructor)
