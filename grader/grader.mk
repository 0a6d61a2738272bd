# grader.mk: the autograder's part of the Makefile (included by it).
#
#   make grade                      grade the student's copy in labs/
#   make grade SOLUTIONS=1          grade the reference solutions
#     LAB=01 (or a name)  TEST=text  NP=2,4  LAUNCHER="srun ..."  RESULTS=results.json
#     SEED=n  HIDDEN=1 (add the hidden suite)  TIMEOUT=s (every test)
#   make gradescope                 build/gradescope/autograder.zip
#
# Each lab NN-name has a trusted driver grader/NN-name/driver.c (plus helpers in the same
# folder) that is linked with a student file: labs/NN-name/*.c (the student's copy),
# solutions/NN-name/*.c, or one deliberately broken variant tests/broken/NN-name/X.patch. Each
# becomes build/<b>/grader/<variant>/NN-name/driver, run by build/<b>/bin/grade.

GRADER_LABS := $(patsubst grader/%/driver.c,%,$(wildcard grader/*/driver.c))

# Drivers are linked from several sources at once, so no dependency files (-MMD) here; the
# headers are listed as prerequisites instead.
GRADER_CFLAGS = $(filter-out -MMD -MP,$(ALL_CFLAGS)) -Igrader/common
# Lab 1 counts the bytes each rank receives by wrapping the receiving calls (its own link
# flags: GRADER_WRAP_<lab>).
GRADER_WRAP_01-collectives := -Wl,--wrap=pl_recv -Wl,--wrap=pl_sendrecv -Wl,--wrap=pl_irecv
# Helpers every lab's driver links (the report channel, the single-device reference, ...).
GRADER_COMMON := $(wildcard grader/common/*.c)

grader_c = $(wildcard grader/$(1)/*.c) $(GRADER_COMMON)
grader_h = $(wildcard grader/$(1)/*.h labs/$(1)/*.h grader/common/*.h)
ifeq ($(GPU),1)
grader_cu_obj = $(patsubst %.cu,$(B)/obj/%.o,$(wildcard grader/$(1)/*_gpu.cu))
else
grader_cu_obj =
endif

$(B)/obj/grader/%_gpu.o: grader/%_gpu.cu
	@mkdir -p $(@D)
	@echo "  NVCC  $<"
	$(Q)$(NVCC) $(NVCC_FLAGS) -Ilabs/$(firstword $(subst /, ,$*)) -c $< -o $@

# $(1) variant dir under $(B)/grader, $(2) lab, $(3) student sources, $(4) extra flags.
define grader_driver_rule
$(B)/grader/$(1)/$(2)/driver: $(3) $(call grader_c,$(2)) $(call grader_h,$(2)) $(call grader_cu_obj,$(2)) $(wildcard solutions/$(2)/*.c) $(LIB)
	@mkdir -p $$(@D)
	@echo "  LINK  $$@"
	$(Q)$$(CC) $$(GRADER_CFLAGS) $(4) -Ilabs/$(2) -Igrader/$(2) $(call grader_c,$(2)) $(3) $(call grader_cu_obj,$(2)) $(LIB) $$(LDLIBS) $(GRADER_WRAP_$(2)) -o $$@.new
	@mv -f $$@.new $$@
endef

# The student's copy may not compile, or may warn: its failure is written to build.log and
# reported by `make grade` as a failed lab, never as a broken build.
define grader_student_rule
$(B)/grader/labs/$(1)/driver: $(wildcard labs/$(1)/*.c) $(call grader_c,$(1)) $(call grader_h,$(1)) $(call grader_cu_obj,$(1)) $(wildcard solutions/$(1)/*.c) $(LIB)
	@mkdir -p $$(@D)
	@if $$(CC) $$(GRADER_CFLAGS) -Wno-error -Ilabs/$(1) -Igrader/$(1) $(call grader_c,$(1)) $(wildcard labs/$(1)/*.c) $(call grader_cu_obj,$(1)) $(LIB) $$(LDLIBS) $(GRADER_WRAP_$(1)) -o $$@.new >$$(@D)/build.log 2>&1; then \
	  cat $$(@D)/build.log; mv -f $$@.new $$@; \
	else \
	  cat $$(@D)/build.log; rm -f $$@ $$@.new; \
	  echo "labs/$(1) did not compile: make grade reports it as failed"; \
	fi
endef

# A broken variant is a patch on the lab's solution, so the bug is exactly the diff and the
# variant follows the solution as it changes (a patch that no longer applies fails the build).
GRADER_BROKEN := $(wildcard tests/broken/*/*.patch)
broken_name = $(basename $(notdir $(1)))
broken_lab = $(notdir $(patsubst %/,%,$(dir $(1))))
broken_src = $(B)/broken-src/$(call broken_lab,$(1))/$(call broken_name,$(1)).c

$(B)/broken-src/%.c: tests/broken/%.patch $(wildcard solutions/*/*.c)
	@mkdir -p $(@D)
	@echo "  PATCH $@"
	$(Q)patch -s -p1 -o $@ < $<

# A copy of the kit may come without solutions/ (a course's student copy). Labs whose driver
# compiles the reference solution in (grader/NN-name/reference.c: the timing baseline and
# the expected layouts) can then not be graded locally; their tests fail with "no driver"
# and docs/grader.md explains why. Lab 1 needs no reference and always builds.
GRADER_SOLVED := $(foreach l,$(GRADER_LABS),$(if $(wildcard solutions/$(l)/*.c),$(l)))
GRADER_GRADABLE := $(foreach l,$(GRADER_LABS),$(if $(or $(wildcard solutions/$(l)/*.c),$(if $(wildcard grader/$(l)/reference.c),,yes)),$(l)))

$(foreach l,$(GRADER_SOLVED),$(eval $(call grader_driver_rule,solutions,$(l),$(wildcard solutions/$(l)/*.c),)))
$(foreach l,$(GRADER_GRADABLE),$(eval $(call grader_student_rule,$(l))))
$(foreach s,$(GRADER_BROKEN),$(eval $(call grader_driver_rule,broken/$(call broken_name,$(s)),$(call broken_lab,$(s)),$(call broken_src,$(s)),)))

GRADER_DRIVERS := $(foreach l,$(GRADER_SOLVED),$(B)/grader/solutions/$(l)/driver) \
  $(foreach l,$(GRADER_GRADABLE),$(B)/grader/labs/$(l)/driver) \
  $(foreach s,$(GRADER_BROKEN),$(B)/grader/broken/$(call broken_name,$(s))/$(call broken_lab,$(s))/driver)

build-only: $(GRADER_DRIVERS)

GRADE_FLAGS = --build $(B) $(if $(filter-out 0,$(SOLUTIONS)),--solutions) \
  $(if $(LAB),--lab '$(LAB)') $(if $(TEST),--test '$(TEST)') $(if $(NP),--np '$(NP)') \
  $(if $(LAUNCHER),--launcher '$(LAUNCHER)') $(if $(RESULTS),--results '$(RESULTS)') \
  $(if $(SEED),--seed '$(SEED)') $(if $(filter-out 0,$(HIDDEN)),--hidden) \
  $(if $(TIMEOUT),--timeout '$(TIMEOUT)')

.PHONY: grade gradescope
grade: all
	@$(B)/bin/grade $(GRADE_FLAGS)

gradescope:
	@sh grader/gradescope/make_zip.sh build/gradescope
