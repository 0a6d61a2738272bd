# grader.mk: the autograder's part of the Makefile (included by it).
#
#   make grade                      grade the student's copy in labs/
#   make grade SOLUTIONS=1          grade the reference solutions
#     LAB=01 (or a name, or a list: 01,03)  TEST=text  NP=2,4  LAUNCHER="srun ..."  RESULTS=results.json
#     SEED=n  HIDDEN=1 (add the hidden suite)  TIMEOUT=s (every test)  BUDGET=s (all tests)
#   make gradescope                 build/gradescope/autograder-all.zip (LAB=NN: -NN)
#   make handout                    build/handout/paralab-kit.tar.gz, the student kit
#   make regrade SUBMISSIONS=d CSV=f  every student's subfolder of d graded, one CSV row each
#
# Each lab NN-name has a descriptor and test plan grader/NN-name/plan.c (linked into the
# orchestrator: every plan.c found registers its lab) and a trusted driver: its
# grader/NN-name/driver.c with the lab harness (grader/common) linked with a student file: labs/NN-name/*.c (the student's copy),
# solutions/NN-name/*.c, or one deliberately broken variant tests/broken/NN-name/X.patch. Each
# becomes build/<b>/grader/<variant>/NN-name/driver, run by build/<b>/bin/grade.

GRADER_LABS := $(patsubst grader/%/plan.c,%,$(wildcard grader/*/plan.c))
# A lab's own make settings, if any (e.g. GRADER_WRAP_<lab>): grader/NN-name/lab.mk.
# make plots LAB=NN: the labs LAB names, chosen as `make grade` and `make bench` choose them
# (grade --labs; none: every lab; a list: LAB=01,03), each drawn by its
# grader/NN-name/plots.sh BUILD OUT labs|solutions. A LAB that names no lab stops here, with
# the labs listed (exit 2).
PLOTS_DIR ?= build/plots
.PHONY: plots
plots: all
	@$(B)/bin/grade --labs $(if $(LAB),--lab '$(LAB)') >/dev/null
	@$(B)/bin/grade --labs $(if $(LAB),--lab '$(LAB)') | cut -f1 | while read -r d; do \
	  if [ -f grader/$$d/plots.sh ]; then \
	    sh grader/$$d/plots.sh $(B) $(PLOTS_DIR) \
	      $(if $(filter-out 0,$(SOLUTIONS)),solutions,labs) </dev/null || exit 1; \
	  else echo "$$d: no pictures (grader/$$d/plots.sh)"; fi; done
-include $(wildcard grader/*/lab.mk)

# A lab's oracle, the kit functions its code is graded against (GRADER_ORACLE_<lab> in its
# lab.mk), is one list: the lab's plan.c is compiled with it as GR_LAB_ORACLE, which its
# descriptor's oracle_symbols names, so the orchestrator refuses code that calls one before
# anything runs; a lab that also intercepts the calls at run time (GRADER_ORACLE_WRAPPED_<lab>,
# its wrappers defined in its cases) gets a --wrap for each. A lab whose oracle's source the
# student can read lists it too (GRADER_ORACLE_SRC_<lab>, paths from the kit's root): plan.c
# gets their absolute paths as GR_LAB_ORACLE_SRC, and code that copies them is refused as a
# call is (grader/rules/copy.h), from the sources.txt each driver's rule writes.
$(foreach l,$(patsubst grader/%/lab.mk,%,$(wildcard grader/*/lab.mk)),$(if $(GRADER_ORACLE_$(l)),\
  $(eval $(B)/grader/obj/grader/$(l)/plan.o: grader/$(l)/lab.mk)\
  $(eval $(B)/grader/obj/grader/$(l)/plan.o: GRADER_PLAN_FLAGS := -DGR_LAB_ORACLE='"$(strip $(GRADER_ORACLE_$(l)))"'$(if $(GRADER_ORACLE_SRC_$(l)), -DGR_LAB_ORACLE_SRC='"$(strip $(abspath $(GRADER_ORACLE_SRC_$(l))))"'))\
  $(if $(GRADER_ORACLE_WRAPPED_$(l)),$(eval GRADER_WRAP_$(l) += $(foreach f,$(GRADER_ORACLE_$(l)),-Wl,--wrap=$(f))))))

# The trusted objects of a lab's driver (plan, driver part, helpers,
# grader/common) are compiled one by one, then linked into one relocatable object whose
# symbols are all made local except those the code under test legitimately uses: the
# lab's helpers (grader/NN-name/helpers*.c, what its header gives the student), what the
# lab's solution calls that the driver defines, main, and the __wrap_* counters a lab's
# lab.mk asks for. A student file that calls the harness (gr_partial) or the report
# channel (gr_result) then does not link, and `make grade` reports it as a compile failure.
GRADER_CFLAGS = $(filter-out -MMD -MP,$(ALL_CFLAGS)) -Igrader -Igrader/common
GRADER_COMMON := $(wildcard grader/common/*.c)
# Headers are few: every trusted object depends on all of them, the library's included (a
# changed struct in lib/ must rebuild the trusted objects that use it; no dependency files here).
GRADER_HEADERS := $(wildcard grader/*.h grader/*/*.h labs/*/*.h lib/*.h)

grader_obj = $(patsubst %.c,$(B)/grader/obj/%.o,$(wildcard grader/$(1)/*.c) $(GRADER_COMMON))
grader_trusted = $(B)/grader/trusted/$(1).o
ifeq ($(GPU),1)
grader_cu_obj = $(patsubst %.cu,$(B)/obj/%.o,$(wildcard grader/$(1)/*_gpu.cu))
else
grader_cu_obj =
endif
# The code under test's view of the lab: its solution's objects name what it may call.
grader_solution_obj = $(patsubst %.c,$(B)/grader/obj/%.o,$(wildcard solutions/$(1)/*.c))

$(B)/obj/grader/%_gpu.o: grader/%_gpu.cu
	@mkdir -p $(@D)
	@echo "  NVCC  $<"
	$(Q)$(NVCC) $(NVCC_FLAGS) -Ilabs/$(firstword $(subst /, ,$*)) -c $< -o $@

# grader/NN-name/x.c and solutions/NN-name/x.c see labs/NN-name and grader/NN-name.
$(B)/grader/obj/grader/%.o: grader/%.c $(GRADER_HEADERS)
	@mkdir -p $(@D)
	@echo "  CC    $<"
	$(Q)$(CC) $(GRADER_CFLAGS) $(GRADER_PLAN_FLAGS) -Ilabs/$(firstword $(subst /, ,$*)) -Igrader/$(firstword $(subst /, ,$*)) -c $< -o $@

$(B)/grader/obj/solutions/%.o: solutions/%.c $(GRADER_HEADERS)
	@mkdir -p $(@D)
	@echo "  CC    $<"
	$(Q)$(CC) $(GRADER_CFLAGS) -Ilabs/$(firstword $(subst /, ,$*)) -c $< -o $@

# The keep-list: main, __wrap_*, weak definitions (the CUDA objects' shared C++ runtime
# references, which the library's CUDA objects resolve to), what the lab's helpers
# (grader/NN-name/helpers*.c: what the lab's header declares) define, and what the solution leaves undefined (of
# which those the driver defines stay global; the rest are the library's and libc's and
# unaffected).
define grader_trusted_rule
$(call grader_trusted,$(1)): grader/grader.mk $(call grader_obj,$(1)) $(call grader_cu_obj,$(1)) $(call grader_solution_obj,$(1))
	@mkdir -p $$(@D)
	@echo "  LD -r $$@"
	$(Q)ld -r -o $$@.r $(call grader_obj,$(1)) $(call grader_cu_obj,$(1))
	$(Q){ echo main; \
	  nm -g --defined-only -P $$@.r | awk '$$$$1 ~ /^__wrap_/ || $$$$2 ~ /^[VW]$$$$/ { print $$$$1 }'; \
	  $(if $(wildcard grader/$(1)/helpers*.c),nm -g --defined-only -P $(patsubst %.c,$(B)/grader/obj/%.o,$(wildcard grader/$(1)/helpers*.c)) | awk 'NF > 1 { print $$$$1 }';) \
	  $(if $(call grader_solution_obj,$(1)),nm -u -P $(call grader_solution_obj,$(1)) | awk 'NF > 1 { print $$$$1 }';) \
	} | sort -u >$$@.keep
	$(Q)objcopy --keep-global-symbols=$$@.keep $$@.r $$@
	@rm -f $$@.r
endef

# What the code under test calls, for the lab's symbol rules (grader/rules/symbols.h): each
# source compiled alone, its undefined symbols listed, one a line, in symbols.txt beside the
# driver. The orchestrator judges the list; a source that does not compile leaves none.
grader_symbols = for f in $(1); do $(CC) $(GRADER_CFLAGS) -Wno-error -Ilabs/$(2) -c "$$$$f" \
  -o $(3)/symbols.o 2>/dev/null && nm -u -P $(3)/symbols.o; done | awk 'NF > 1 { print $$$$1 }' \
  | sort -u >$(3)/symbols.txt; rm -f $(3)/symbols.o

# $(1) variant dir under $(B)/grader, $(2) lab, $(3) the sources under test. Each source is
# compiled once: its object is linked and its undefined symbols are the symbols.txt that
# grader_symbols writes for code that may not compile (the same flags but -Werror's).
grader_objs = $(foreach f,$(1),$(2)/$(basename $(notdir $(f))).o)
define grader_driver_rule
$(B)/grader/$(1)/$(2)/driver: $(3) $(call grader_trusted,$(2)) $(LIB)
	@mkdir -p $$(@D)
	@echo "  LINK  $$@"
	$(Q)for f in $(3); do $$(CC) $$(GRADER_CFLAGS) -Ilabs/$(2) -c "$$$$f" \
	  -o "$$(@D)/$$$$(basename "$$$$f" .c).o" || exit 1; done
	$(Q)$$(CC) $$(GRADER_CFLAGS) $(call grader_objs,$(3),$$(@D)) $(call grader_trusted,$(2)) $(LIB) $$(LDLIBS) $(GRADER_WRAP_$(2)) -o $$@.new
	@nm -u -P $(call grader_objs,$(3),$$(@D)) | awk 'NF > 1 { print $$$$1 }' | sort -u >$$(@D)/symbols.txt
	@printf '%s\n' $(abspath $(3)) >$$(@D)/sources.txt
	@rm -f $(call grader_objs,$(3),$$(@D))
	@mv -f $$@.new $$@
endef

# Code that may not compile, or may warn, or may not link (the student's copy, a forgery
# variant): its failure is written to build.log and reported by `make grade` as a failed
# lab, never as a broken build.
# It is compiled in a scratch folder holding only it and the lab's headers, and may include
# nothing of the kit but lib/ and datasets/ (grader/sandbox/build_student.sh, which also
# writes its symbols.txt).
define grader_student_rule
$(B)/grader/$(1)/$(2)/driver: $(3) $(call grader_trusted,$(2)) $(LIB) grader/sandbox/build_student.sh
	@mkdir -p $$(@D)
	@printf '%s\n' $(abspath $(3)) >$$(@D)/sources.txt
	@if CC='$$(CC)' sh grader/sandbox/build_student.sh $$@.new $(2) '$$(filter-out -I%,$$(GRADER_CFLAGS)) $$(BLAS_CFLAGS)' '$(abspath $(call grader_trusted,$(2)) $(LIB)) $$(LDLIBS) $(GRADER_WRAP_$(2))' $(3) >$$(@D)/build.log 2>&1; then \
	  cat $$(@D)/build.log; mv -f $$@.new $$@; \
	else \
	  cat $$(@D)/build.log; rm -f $$@ $$@.new; \
	  echo "$(3) did not compile: make grade reports it as failed"; \
	fi
endef

# A forgery variant is meant not to link: its target is the build.log `make grade` reports,
# written once and quietly (a driver, should it link after all, is graded and scores).
define grader_forge_rule
$(B)/grader/$(1)/$(2)/build.log: $(3) $(call grader_trusted,$(2)) $(LIB)
	@mkdir -p $$(@D)
	@rm -f $$(@D)/driver
	@$$(CC) $$(GRADER_CFLAGS) -Wno-error -Ilabs/$(2) $(3) $(call grader_trusted,$(2)) $(LIB) $$(LDLIBS) $(GRADER_WRAP_$(2)) -o $$(@D)/driver >$$@.new 2>&1 || rm -f $$(@D)/driver
	@$(call grader_symbols,$(3),$(2),$$(@D))
	@printf '%s\n' $(abspath $(3)) >$$(@D)/sources.txt
	@mv -f $$@.new $$@
endef

# A broken variant is a patch on the lab's solution, so the bug is exactly the diff and the
# variant follows the solution as it changes (a patch that no longer applies fails the build).
# Variants named forge_* try to reach what the code under test must not (grader_forge_rule).
GRADER_BROKEN := $(foreach p,$(wildcard tests/broken/*/*.patch),$(if $(wildcard solutions/$(notdir $(patsubst %/,%,$(dir $(p))))/*.c),$(p)))
broken_name = $(basename $(notdir $(1)))
broken_lab = $(notdir $(patsubst %/,%,$(dir $(1))))
broken_src = $(B)/broken-src/$(call broken_lab,$(1))/$(call broken_name,$(1)).c
broken_forged = $(filter forge_%,$(call broken_name,$(1)))
broken_rule = $(if $(call broken_forged,$(1)),grader_forge_rule,grader_driver_rule)

$(B)/broken-src/%.c: tests/broken/%.patch $(wildcard solutions/*/*.c)
	@mkdir -p $(@D)
	@echo "  PATCH $@"
	$(Q)patch -s -p1 -o $@ < $<

# A correct alternative is a patch on the solution too (tests/alt/NN-name/X.patch): another
# algorithm a student may rightly choose, which must score full marks like the solution
# (its driver: build/<b>/grader/alt/X/NN-name/driver; make flake DRIVERS= times it).
GRADER_ALT := $(foreach p,$(wildcard tests/alt/*/*.patch),$(if $(wildcard solutions/$(notdir $(patsubst %/,%,$(dir $(p))))/*.c),$(p)))
alt_src = $(B)/alt-src/$(call broken_lab,$(1))/$(call broken_name,$(1)).c

$(B)/alt-src/%.c: tests/alt/%.patch $(wildcard solutions/*/*.c)
	@mkdir -p $(@D)
	@echo "  PATCH $@"
	$(Q)patch -s -p1 -o $@ < $<

# A copy of the kit may come without solutions/ (a course's student kit, `make handout`):
# every lab's driver still builds, since no driver compiles a solution in; the solution
# drivers and broken variants of a lab without its solution are skipped.
GRADER_SOLVED := $(foreach l,$(GRADER_LABS),$(if $(wildcard solutions/$(l)/*.c),$(l)))
GRADER_GRADABLE := $(GRADER_LABS)

$(foreach l,$(GRADER_GRADABLE),$(eval $(call grader_trusted_rule,$(l))))
$(foreach l,$(GRADER_SOLVED),$(eval $(call grader_driver_rule,solutions,$(l),$(wildcard solutions/$(l)/*.c))))
$(foreach l,$(GRADER_GRADABLE),$(eval $(call grader_student_rule,labs,$(l),$(wildcard labs/$(l)/*.c))))
$(foreach s,$(GRADER_BROKEN),$(eval $(call $(call broken_rule,$(s)),broken/$(call broken_name,$(s)),$(call broken_lab,$(s)),$(call broken_src,$(s)))))
$(foreach s,$(GRADER_ALT),$(eval $(call grader_driver_rule,alt/$(call broken_name,$(s)),$(call broken_lab,$(s)),$(call alt_src,$(s)))))

# The orchestrator links every lab's plan.c: that is how it knows the labs.
GRADER_PLAN_OBJ := $(patsubst %.c,$(B)/grader/obj/%.o,$(wildcard grader/*/plan.c))
# The orchestrator's sandbox (grader/sandbox: the user, the sweep, the token handshake) and
# the judge of each lab's symbol rules (grader/rules).
GRADER_SANDBOX_OBJ := $(patsubst %.c,$(B)/grader/obj/%.o,$(wildcard grader/sandbox/*.c))
GRADER_RULES_OBJ := $(patsubst %.c,$(B)/grader/obj/%.o,$(wildcard grader/rules/*.c))
# The orchestrator's own parts beside its main (grader/grade: a run, the output, the
# questions, its text helpers).
GRADER_ORCH_OBJ := $(patsubst %.c,$(B)/grader/obj/%.o,$(wildcard grader/grade/*.c))
BIN_OBJ_grade := $(GRADER_PLAN_OBJ) $(GRADER_SANDBOX_OBJ) $(GRADER_RULES_OBJ) $(GRADER_ORCH_OBJ)
$(GRADER_SANDBOX_OBJ) $(GRADER_ORCH_OBJ): $(wildcard lib/*.h)
$(B)/bin/grade: $(GRADER_PLAN_OBJ) $(GRADER_SANDBOX_OBJ) $(GRADER_RULES_OBJ) $(GRADER_ORCH_OBJ)

# `make` builds what grading needs: each lab's driver for labs/ and for solutions/. The
# broken and alternative variants of tests/ are the tests' business: `make variants`, which
# `make test` runs first.
# GRADE_ONLY (lab folders, space-separated) limits what `grading` builds to those labs' drivers:
# a one-lab Gradescope autograder builds its lab alone (grader/gradescope/setup.sh).
ifneq ($(strip $(GRADE_ONLY)),)
GRADER_BUILT := $(filter $(GRADE_ONLY),$(GRADER_GRADABLE))
ifneq ($(words $(GRADER_BUILT)),$(words $(sort $(GRADE_ONLY))))
$(error GRADE_ONLY='$(GRADE_ONLY)' names a folder that is no lab; the labs: $(GRADER_GRADABLE))
endif
else
GRADER_BUILT := $(GRADER_GRADABLE)
endif
GRADER_DRIVERS := $(foreach l,$(filter $(GRADER_BUILT),$(GRADER_SOLVED)),$(B)/grader/solutions/$(l)/driver) \
  $(foreach l,$(GRADER_BUILT),$(B)/grader/labs/$(l)/driver)
GRADER_VARIANTS := \
  $(foreach s,$(GRADER_BROKEN),$(B)/grader/broken/$(call broken_name,$(s))/$(call broken_lab,$(s))/$(if $(call broken_forged,$(s)),build.log,driver)) \
  $(foreach s,$(GRADER_ALT),$(B)/grader/alt/$(call broken_name,$(s))/$(call broken_lab,$(s))/driver)

build-only: $(GRADER_DRIVERS)

.PHONY: variants build-variants
variants: all
	@$(MAKE) --no-print-directory $(SUBMAKE_JOBS) build-variants
build-variants: $(GRADER_VARIANTS)
	@echo "built $(B): $(words $(GRADER_VARIANTS)) broken and alternative variants of tests/"

# Submissions by reviewers who had not read the grader (tests/review/NN-name/NAME.patch: a
# patch on the lab's solution, as a broken variant is, whose first line says what the grader
# must do with it), each built as a student's file is, into $(B)/grader/review/NAME/NN-name;
# `make test-review LAB=NN` grades them (tests/review.sh).
GRADER_REVIEW := $(foreach f,$(wildcard tests/review/*/*.patch),$(if $(wildcard solutions/$(call broken_lab,$(f))/*.c),$(f)))
review_src = $(B)/review-src/$(call broken_lab,$(1))/$(call broken_name,$(1)).c
$(B)/review-src/%.c: tests/review/%.patch $(wildcard solutions/*/*.c)
	@mkdir -p $(@D)
	$(Q)patch -s -p1 -o $@ < $<
$(foreach f,$(GRADER_REVIEW),$(eval $(call grader_student_rule,review/$(call broken_name,$(f)),$(call broken_lab,$(f)),$(call review_src,$(f)))))
.PHONY: test-review review-build
review-build: $(foreach f,$(GRADER_REVIEW),$(B)/grader/review/$(call broken_name,$(f))/$(call broken_lab,$(f))/driver)
test-review: all
	@$(MAKE) --no-print-directory review-build >/dev/null
	@sh tests/review.sh $(B) '$(LAB)'

GRADE_FLAGS = --build $(B) $(if $(filter-out 0,$(SOLUTIONS)),--solutions) \
  $(if $(LAB),--lab '$(LAB)') $(if $(TEST),--test '$(TEST)') $(if $(NP),--np '$(NP)') \
  $(if $(LAUNCHER),--launcher '$(LAUNCHER)') $(if $(RESULTS),--results '$(RESULTS)') \
  $(if $(SEED),--seed '$(SEED)') $(if $(filter-out 0,$(HIDDEN)),--hidden) \
  $(if $(TIMEOUT),--timeout '$(TIMEOUT)') $(if $(BUDGET),--budget '$(BUDGET)') \
  $(if $(filter 0,$(SPEED)),--no-speed)

# What grading needs and no more: the library, the programs (grade among them) and each lab's
# drivers for labs/ and solutions/. The kit's tests, benchmarks and judge tests are `make`'s;
# the broken and alternative variants, `make variants`'.
.PHONY: grading build-grading
grading: deps
	@$(MAKE) --no-print-directory $(SUBMAKE_JOBS) build-grading
build-grading: $(LIB) $(BINS) $(GRADER_DRIVERS)

.PHONY: grade gradescope handout
# ASAN=1: leaks are not reported (the MPI library's own would fill the report).
grade: grading
	@$(if $(filter 1,$(ASAN)),ASAN_OPTIONS=detect_leaks=0$(if $(ASAN_OPTIONS),:$(ASAN_OPTIONS))) \
	  $(B)/bin/grade $(GRADE_FLAGS)

gradescope:
	@sh grader/gradescope/make_zip.sh build/gradescope

handout:
	@CAPSTONE='$(CAPSTONE)' sh grader/handout.sh build/handout

# A folder of submissions, one subfolder per student, graded in the Gradescope sandbox.
.PHONY: regrade
regrade:
	@LAB='$(LAB)' SEED='$(SEED)' TEST='$(TEST)' BUDGET='$(BUDGET)' \
	    sh grader/regrade.sh '$(SUBMISSIONS)' '$(CSV)'
include grader/questions.mk

# test_grader --perf-judged calls the common perf code itself (gr_perf_judged), so it links
# report.o beside the library.
$(B)/tests/test_grader: tests/test_grader.c $(B)/grader/obj/grader/common/report.o \
  $(B)/grader/obj/grader/common/verdict.o $(LIB)
	@mkdir -p $(@D)
	@echo "  LINK  $@"
	$(Q)$(CC) $(ALL_CFLAGS) -Igrader/common $< $(B)/grader/obj/grader/common/report.o \
	  $(B)/grader/obj/grader/common/verdict.o $(LIB) $(LDLIBS) -o $@

# test_copy judges the copied-oracle rule (grader/rules/copy.c) on the kit's own files.
$(B)/tests/test_copy: tests/test_copy.c $(B)/grader/obj/grader/rules/copy.o $(LIB)
	@mkdir -p $(@D)
	@echo "  LINK  $@"
	$(Q)$(CC) $(ALL_CFLAGS) -Igrader $< $(B)/grader/obj/grader/rules/copy.o $(LIB) $(LDLIBS) -o $@

# Judge tests: tests/judge/NN-name.c is a plain program (no mpirun) linked with the lab's
# grader/NN-name/judge.c, grader/common/verdict.c and block_verdict.c alone; it feeds the
# judges hand-built observations and those a check run recorded (--record FILE). Built with
# the kit. A lab whose judge words a reason with another MPI-free file of grader/common names
# it in its lab.mk as GRADER_JUDGE_SRC_NN-name.
GRADER_JUDGE_TESTS := $(patsubst tests/judge/%.c,$(B)/tests/judge/%,$(wildcard tests/judge/*.c))
$(B)/tests/judge/%: tests/judge/%.c tests/judge/judge_test.h grader/%/judge.c grader/common/verdict.c grader/common/block_verdict.c $(GRADER_HEADERS) $(LIB)
	@mkdir -p $(@D)
	@echo "  LINK  $@"
	$(Q)$(CC) $(GRADER_CFLAGS) -Ilabs/$* -Igrader/$* tests/judge/$*.c grader/$*/judge.c grader/common/verdict.c grader/common/block_verdict.c $(GRADER_JUDGE_SRC_$*) $(LIB) $(LDLIBS) -o $@
build-only: $(GRADER_JUDGE_TESTS)
