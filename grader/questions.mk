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
