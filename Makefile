# paralab: one entry point. `make help` lists the targets.
#
#   make            build the CPU backend (gcc + Open MPI + OpenBLAS) into build/cpu
#   make GPU=1      build the CUDA backend (nvcc + cuBLAS + NCCL) into build/gpu
#   make EMU=1      the GPU build on the CUDA/NCCL stand-in of tests/gpu_emu into build/gpu-emu
#                   (host compilers, no GPU; make test-gpu-emu runs the tests on it)
#
# Sources are found by convention, so a new module needs no Makefile edit:
#   lib/*.c, datasets/*.c        -> libparalab.a (files named *_gpu.c or *.cu: GPU build only)
#   */bin/NAME.c                 -> build/<b>/bin/NAME
#   tests/test_NAME.c            -> build/<b>/tests/test_NAME  (run by tests/*.tests)
#   tests/bench_NAME.c           -> build/<b>/tests/bench_NAME (run by make bench)
# Larger parts add their own rules in a fragment: grader/grader.mk.

GPU ?= 0
# ASAN=1: the CPU build with AddressSanitizer in build/cpu-asan, for finding a bad memory
# access in a lab: `make grade ASAN=1 LAB=NN` names the rank, the access and the line.
ASAN ?= 0
EMU ?= 0
ifeq ($(GPU),1)
B := build/gpu
else ifeq ($(EMU),1)
B := build/gpu-emu
else ifeq ($(ASAN),1)
B := build/cpu-asan
else
B := build/cpu
endif
# BUILD_DIR=build/x: build into another folder (make check-compilers builds each compiler's
# copy in its own, so build/cpu and build/gpu are left as they are).
ifneq ($(BUILD_DIR),)
B := $(BUILD_DIR)
endif

# The CUDA toolkit: $CUDA_HOME, else the usual prefixes, else wherever nvcc on PATH lives.
NVCC_ON_PATH := $(shell command -v nvcc 2>/dev/null)
CUDA_HOME ?= $(firstword $(wildcard /usr/local/cuda /usr/lib/cuda) $(if $(NVCC_ON_PATH),$(patsubst %/bin/nvcc,%,$(realpath $(NVCC_ON_PATH)))))
CUDA_ARCH ?= 80 90
NP_MAX ?= 8

CC := mpicc
V ?= 0
ifeq ($(V),1)
Q :=
else
Q := @
endif
NVCC := $(CUDA_HOME)/bin/nvcc
# Users' builds print warnings and go on: a newer compiler's new warning must not stop a
# student on another distribution. WERROR=1 makes every warning an error, in every compiler
# the kit runs (mpicc, nvcc and its host compiler, the GPU stand-in's g++); CI builds so.
WERROR ?= 0
WERROR_FLAG := $(if $(filter 1,$(WERROR)),-Werror)
WARN := -Wall -Wextra $(WERROR_FLAG) -Wno-unused-parameter
CFLAGS ?= -O2 -g
# HOST_FLAGS: added to every C compile and to nvcc's host compiler (make check-compilers
# sets -D_FORTIFY_SOURCE=3 there); NVCC_CCBIN: nvcc's host compiler (default: its own).
HOST_FLAGS ?=
comma := ,
empty :=
space := $(empty) $(empty)
ALL_CFLAGS = -std=c11 -D_GNU_SOURCE $(CFLAGS) $(HOST_FLAGS) $(WARN) -Ilib -Idatasets -MMD -MP \
  $(if $(filter 1,$(ASAN)),-fsanitize=address -fno-omit-frame-pointer -Wno-error)
LDLIBS_BASE = -lm -lpthread

# What the system offers; lib/deps.sh checks (and installs) it before anything is built.
BLAS_CFLAGS := $(shell pkg-config --cflags openblas 2>/dev/null)
BLAS_LIBS := $(shell pkg-config --libs openblas 2>/dev/null)

ifeq ($(GPU),1)
# NCCL: the first of $NCCL_HOME, the CUDA prefix, /usr, /usr/local, a Python environment's
# NVIDIA NCCL wheel (lib/nccl_find.sh, the search lib/deps.sh reports). A wheel ships only
# libnccl.so.2: it is linked by its full path, with an rpath to its folder.
NCCL_FOUND := $(shell sh lib/nccl_find.sh '$(CUDA_HOME)' 2>/dev/null)
nccl_field = $(patsubst $(1)=%,%,$(filter $(1)=%,$(NCCL_FOUND)))
NCCL_INC := $(call nccl_field,include)
NCCL_LIB := $(call nccl_field,lib)
NCCL_INC_FLAGS := $(if $(filter-out $(CUDA_HOME)/include /usr/include,$(NCCL_INC)),-I$(NCCL_INC))
NCCL_LINK := $(if $(NCCL_FOUND),$(call nccl_field,link),-lnccl)
# Ahead of the CUDA prefix's rpath: that folder may hold another libnccl.so.2.
NCCL_RPATH := $(if $(call nccl_field,rpath),-Wl$(comma)-rpath$(comma)$(call nccl_field,rpath))
ALL_CFLAGS += -DPL_GPU=1 -I$(CUDA_HOME)/include $(NCCL_INC_FLAGS)
NVCC_FLAGS = -std=c++17 -O2 -g -DPL_GPU=1 -Ilib -Idatasets $(NCCL_INC_FLAGS) $(shell mpicc --showme:compile 2>/dev/null) \
  $(foreach a,$(CUDA_ARCH),-gencode arch=compute_$(a),code=sm_$(a)) \
  -gencode arch=compute_$(lastword $(CUDA_ARCH)),code=compute_$(lastword $(CUDA_ARCH)) \
  $(if $(NVCC_CCBIN),-ccbin $(NVCC_CCBIN)) $(if $(WERROR_FLAG),-Werror all-warnings) \
  -Xcompiler -Wall,-Wextra,-Wno-unused-parameter$(if $(WERROR_FLAG),$(comma)-Werror)$(if $(strip $(HOST_FLAGS)),$(comma)$(subst $(space),$(comma),$(strip $(HOST_FLAGS))))
GPU_LIBS = $(NCCL_RPATH) -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublas $(NCCL_LINK) -lcudart -lstdc++
else ifeq ($(EMU),1)
# The GPU build's sources against the stand-in's cuda_runtime.h, nccl.h and cublas_v2.h.
ALL_CFLAGS += -DPL_GPU=1 -DPL_GPU_STAND_IN=1 -Itests/gpu_emu
GPU_LIBS = -lstdc++
else
GPU_LIBS =
endif
ALL_CFLAGS += $(BLAS_CFLAGS)
LDLIBS = $(BLAS_LIBS) $(GPU_LIBS) $(LDLIBS_BASE)

# ---- sources ----
LIB_C_ALL := $(wildcard lib/*.c datasets/*.c)
LIB_C_GPU := $(filter %_gpu.c,$(LIB_C_ALL))
LIB_CU := $(wildcard lib/*.cu)
ifeq ($(GPU),1)
LIB_C := $(LIB_C_ALL)
LIB_OBJ := $(LIB_C:%.c=$(B)/obj/%.o) $(LIB_CU:%.cu=$(B)/obj/%.o)
else ifeq ($(EMU),1)
# The kernels as host C++ and the stand-in itself (rules in tests/gpu_emu/gpu_emu.mk).
LIB_C := $(LIB_C_ALL)
LIB_OBJ := $(LIB_C:%.c=$(B)/obj/%.o) $(LIB_CU:lib/%.cu=$(B)/obj/cu/%.o) \
  $(B)/obj/tests/gpu_emu/gpu_emu.o $(B)/obj/tests/gpu_emu/kernel_emu.o
else
LIB_C := $(filter-out $(LIB_C_GPU),$(LIB_C_ALL))
LIB_OBJ := $(LIB_C:%.c=$(B)/obj/%.o)
endif
LIB := $(B)/libparalab.a

BIN_SRC := $(wildcard */bin/*.c)
BINS := $(foreach s,$(BIN_SRC),$(B)/bin/$(basename $(notdir $(s))))
TEST_SRC := $(wildcard tests/test_*.c tests/harness.c)
TESTS := $(TEST_SRC:tests/%.c=$(B)/tests/%)
BENCH_SRC := $(wildcard tests/bench_*.c)
BENCHES := $(BENCH_SRC:tests/%.c=$(B)/tests/%)

.PHONY: all deps lib bins test bench demo check-gpu-build check-compilers test-gpu gpu-check clean help
.DEFAULT_GOAL := all

# The builds make, make grade, make variants and make test start in sub-makes use every core
# unless the caller chose -j itself: a plain `make test` would otherwise compile and link the
# 235 variants one at a time.
SUBMAKE_JOBS = $(if $(filter -j%,$(MAKEFLAGS)),,-j$(shell nproc 2>/dev/null || echo 1))

all: deps
	@$(MAKE) --no-print-directory $(SUBMAKE_JOBS) build-only

.PHONY: build-only
build-only: $(LIB) $(BINS) $(TESTS) $(BENCHES) $(EXTRA_TARGETS)
	@echo "built $(B): libparalab.a, $(words $(BINS)) programs, $(words $(TESTS)) test programs"

deps:
	@sh lib/deps.sh $(if $(filter 1,$(GPU)),gpu,cpu)

lib: $(LIB)

$(LIB): $(LIB_OBJ)
	@mkdir -p $(@D)
	@rm -f $@
	@echo "  AR    $@"
	$(Q)ar rcs $@ $^

$(B)/obj/%.o: %.c
	@mkdir -p $(@D)
	@echo "  CC    $<"
	$(Q)$(CC) $(ALL_CFLAGS) -c $< -o $@

$(B)/obj/%.o: %.cu
	@mkdir -p $(@D)
	@echo "  NVCC  $<"
	$(Q)$(NVCC) $(NVCC_FLAGS) -c $< -o $@

define bin_rule
$(B)/bin/$(basename $(notdir $(1))): $(1) $(LIB)
	@mkdir -p $$(@D)
	@echo "  LINK  $$@"
	$(Q)$$(CC) $$(ALL_CFLAGS) $$< $$(BIN_OBJ_$(basename $(notdir $(1)))) $(LIB) $$(LDLIBS) -o $$@
endef
$(foreach s,$(BIN_SRC),$(eval $(call bin_rule,$(s))))

$(B)/tests/%: tests/%.c $(LIB)
	@mkdir -p $(@D)
	@echo "  LINK  $@"
	$(Q)$(CC) $(ALL_CFLAGS) $< $(LIB) $(LDLIBS) -o $@

-include grader/grader.mk
-include tests/gpu_emu/gpu_emu.mk
-include lib/plan.mk
-include lib/speed.mk
-include tests/robust.mk
-include lib/layers.mk

# ---- running ----
# Up to JOBS ranks' worth of tests at once (harness -j: a test takes as many slots as it has
# ranks, the grader's 4), 10 by default: more than the 8 one test starts alone, so that 2 cores
# stay busy while jobs wait on their start-up or a timeout (on an idle 2-core machine a fresh
# clone's tests took 472 s with 10, 501 s with 8, 664 s with 6); JOBS=1 runs one at a time.
test: variants
	@$(B)/tests/harness --build $(B) -j $(or $(JOBS),10) tests/*.tests $(wildcard tests/labs/*.tests)

test-gpu:
	@$(MAKE) --no-print-directory GPU=1 variants
	@build/gpu/tests/harness --build build/gpu --gpu $(if $(JOBS),-j $(JOBS)) tests/*.tests \
	    $(wildcard tests/labs/*.tests)

# CI's check: warnings are errors here (WERROR=1), as in .ci/run.
check-gpu-build:
	@$(MAKE) --no-print-directory GPU=1 WERROR=1 all
	@echo "GPU build compiled and linked warning-free (-Werror) in build/gpu"

# A GPU node's validation in one command, under 8 minutes: deps, build, the tests in
# parallel, the solutions graded, the benchmarks; report in build/gpu/gpu-check.md
# (tests/gpu_check.sh). Without a GPU it says so and exits 2 before building.
gpu-check:
	@sh tests/gpu_check.sh

# CI's check that another compiler's warnings do not reach a user: the CPU build (and the
# GPU build where nvcc exists) with clang and with gcc -D_FORTIFY_SOURCE=3, under -Werror,
# each in its own build folder (tests/check_compilers.sh). CLANG=clang-16 by default.
check-compilers: deps
	@MAKE='$(MAKE)' CLANG='$(CLANG)' sh tests/check_compilers.sh

bench: all
	@LAB='$(LAB)' SOLUTIONS='$(SOLUTIONS)' NP='$(NP)' sh tests/bench.sh $(B)

demo: all
	@$(B)/bin/launch -np 8 -- $(B)/bin/demo --nodes 2 --gpus-per-node 4 --svg $(B)/demo-timeline.svg

clean:
	rm -rf build

help:
	@echo "paralab targets:"
	@echo "  make                 build the CPU backend into build/cpu (installs missing packages as root)"
	@echo "  make GPU=1           build the CUDA backend (nvcc, cuBLAS, NCCL) into build/gpu"
	@echo "                       (NCCL: NCCL_HOME, the CUDA prefix, /usr, or a Python NCCL wheel)"
	@echo "  make WERROR=1        any build with warnings as errors (CI's setting; users' builds warn)"
	@echo "  make demo            8 ranks on a virtual 2x4 cluster: collectives, traffic and memory report"
	@echo "  make grade           grade your labs/ (SOLUTIONS=1: the reference solutions; LAB=01 TEST=..."
	@echo "                       ASAN=1: built with AddressSanitizer, a bad memory access named with its line)"
	@echo "                       NP=2,4 LAUNCHER=srun RESULTS=results.json SEED= HIDDEN=1 SPEED=0; docs/grader.md)"
	@echo "  make grading         build only what make grade needs (the library, programs, lab drivers)"
	@echo "  make gradescope      build/gradescope/autograder-all.zip for Gradescope (LAB=NN: -NN.zip)"
	@echo "  make regrade SUBMISSIONS=dir/ CSV=grades.csv  a folder of submissions (one subfolder per"
	@echo "                       student) graded in the Gradescope sandbox, one CSV row each (LAB= SEED=)"
	@echo "  make plan ARGS=...   place a model on a cluster (ARGS=--help for the flags; Lab 8)"
	@echo "  make handout         build/handout/paralab-kit.tar.gz, the student kit (no solutions;"
	@echo "                       CAPSTONE=1: with Lab 9, released once Labs 4 and 5 are due)"
	@echo "  make test            the project's tests; ends with 'N passed, N failed' (JOBS=10 ranks at once;"
	@echo "                       PL_TEST_CPU_LOG=FILE: each test's CPU seconds appended to FILE)"
	@echo "  make variants        the broken and correct variants of tests/ (make test builds them first)"
	@echo "  make test-review     grade the reviewers' submissions in tests/review (LAB=NN one lab)"
	@echo "  make bench           benchmarks (nccl-tests style tables, ratios to baselines); LAB=NN one lab"
	@echo "  make docs-tables     rewrite the lab tables of README.md and docs from grade --labs and the handouts"
	@echo "                       (and a handout's total of points, from grade --list; the grader's size table)"
	@echo "  make plots LAB=NN    a lab's pictures drawn from your own run, SVGs in build/plots"
	@echo "                       (SOLUTIONS=1: the solutions; PLOTS_DIR=docs/labs/img: the handouts')"
	@echo "  make bench-model     the reference step at 1 thread vs PyTorch and the sgemm peak (3 sizes)"
	@echo "                       (GPU=1: up to GPT-2 small on the GPU, the kit in fp32 and in bf16"
	@echo "                       against PyTorch fp32 and bf16 autocast there;"
	@echo "                       BENCH_ATTENTION=flash: the kit's model with flash attention)"
	@echo "  make questions LAB=01 check your answers in labs/NN-name/questions.txt (SOLUTIONS=1, INSTRUCTOR=1)"
	@echo "  make replay TRACE=f  replay a run's --trace file on a cluster profile (PROFILE=dgx-h100 NODES= SVG=)"
	@echo "  make flake           speed grading's stability: the solutions graded RUNS=20 times under CPU load"
	@echo "                       (DRIVERS=build/cpu/grader/alt/NAME: a correct alternative of tests/alt)"
	@echo "  make check-gpu-build compile and link the GPU build only (no GPU needed; warnings are errors)"
	@echo "  make check-compilers what CI compiles: the CPU build (and the GPU build where nvcc is)"
	@echo "                       with clang-16 and with gcc -D_FORTIFY_SOURCE=3, warnings as errors,"
	@echo "                       into build/{cpu,gpu}-{clang,fortify} (CLANG=clang-16)"
	@echo "  make test-gpu        build with GPU=1 and run the tests on this machine's GPUs (JOBS=N at once)"
	@echo "  make gpu-check       validate a GPU node in one command (<8 min): build/gpu/gpu-check.md"
	@echo "  make test-gpu-emu    the GPU build (make EMU=1, build/gpu-emu) on a CUDA/NCCL stand-in, no GPU:"
	@echo "                       every test line a GPU runs (not [cpu]) and Lab 2's grader"
	@echo "                       (make test runs its quick part, make test-gpu-emu-quick)"
	@echo "  make deps            check and install the packages the build needs"
	@echo "  make clean           remove build/"

include lib/replay.mk
-include $(LIB_OBJ:.o=.d) $(BINS:=.d) $(TESTS:=.d) $(BENCHES:=.d)
