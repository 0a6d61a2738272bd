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

# `make grade` checks the questions of the labs it grades, after the tests (grader.mk's grade
# recipe runs this): their own score, apart from the tests' (docs/grader.md).
QUESTION_LABS := $(patsubst grader/%/questions.c,%,$(filter-out grader/bin/% grader/common/%,$(wildcard grader/*/questions.c)))
GRADE_QUESTIONS = for l in $(QUESTION_LABS); do case "$$l" in "$(LAB)"*) echo; \
  $(B)/bin/questions --lab $$l $(if $(filter-out 0,$(SOLUTIONS)),--solutions) \
  $(if $(filter-out 0,$(INSTRUCTOR)),--instructor) || true;; esac; done;
