# gpu_emu.mk: the GPU build on a CUDA/NCCL/cuBLAS stand-in, with no GPU.
#
#   make EMU=1          the GPU build's library (-DPL_GPU=1: comm_nccl_gpu.c, mem.c's device
#                       allocator, ops_gpu.cu's kernels and cuBLAS calls), every program, test
#                       program and reference solution's grader driver, compiled with the host
#                       compilers against tests/gpu_emu's cuda_runtime.h, nccl.h and
#                       cublas_v2.h into build/gpu-emu. Each lib/*.cu runs as host C++.
#   make test-gpu-emu   builds that, then runs the GPU build's tests on it: every line of
#                       tests/*.tests not tagged [cpu] (what `make test-gpu` runs on a GPU),
#                       and tests/gpu_emu/gpu_emu.tests (the stand-in's own checks, Lab 2's
#                       grader on its solution, and the broken variants below).
#   make test-gpu-emu-quick  (run by `make test`) gpu_emu.tests and the tp_shard, sp_shard and
#                       sp_block tests, whose host arrays a GPU (or this stand-in) once refused
#
# This checks how the code uses the device: stream order, NCCL's group rules, no device-wide
# synchronisation, and that every pointer given to a copy, a kernel, cuBLAS or NCCL is on the
# side the call needs (host memory where op memory is due fails here as on a GPU, with the
# call and the pointer named); and that the kernels, run as host code, agree with the tests.
# Not what a GPU's hardware does (speed, float rounding of its math units).
# Broken variants it must catch: tests/gpu_emu/ungrouped_p2p.patch (the lone ncclSend/ncclRecv
# the backend used to issue: a hang), tests/gpu_emu/nccl_avg.patch (PL_AVG by ncclAvg, whose
# averages the stand-in's PL_EMU_NCCL_AVG_TAIL=1 leaves unwritten at the tail, as a real
# GPU's NCCL did) and tests/gpu_emu/tp_shard_host_buffers.patch (the test_tp_shard that
# handed malloc'd host buffers to the ops: refused, naming the pointer).

EMU_B := build/gpu-emu
# The lists the two targets run. `make test` keeps to the quick one: 1 to 1.5 minutes on 2
# cores, where the full one takes about 10 (every lab's solutions graded, 5.7 of them).
EMU_TEST_FILES = tests/gpu_emu/gpu_emu.tests $(filter-out tests/gpu_emu/%,$(wildcard tests/*.tests))
EMU_QUICK_FILES = tests/gpu_emu/gpu_emu.tests tests/tp_shard.tests tests/sp_shard.tests tests/sp_block.tests

.PHONY: test-gpu-emu test-gpu-emu-quick emu-build emu-build-quick
test-gpu-emu:
	@$(MAKE) --no-print-directory $(SUBMAKE_JOBS) EMU=1 emu-build
	@$(EMU_B)/tests/harness --build $(EMU_B) --gpu $(EMU_TEST_FILES)

test-gpu-emu-quick:
	@$(MAKE) --no-print-directory $(SUBMAKE_JOBS) EMU=1 emu-build-quick
	@$(EMU_B)/tests/harness --build $(EMU_B) --gpu -j $(or $(JOBS),8) $(EMU_QUICK_FILES)

test: test-gpu-emu-quick

ifeq ($(EMU),1)
EMU_CXXFLAGS = -std=c++17 -O1 -g $(SIMD_CFLAGS) $(WARN) -DPL_GPU=1 -DPL_GPU_STAND_IN=1 -Itests/gpu_emu -Ilib -Idatasets \
  $(shell mpicc --showme:compile 2>/dev/null) -MMD -MP

# The kernels of every lib/*.cu as host C++: each launch k<<<grid, block>>>(args) becomes a
# queued call (tests/gpu_emu/cuda_kernels.h) that first checks k's pointer arguments are
# device memory; #line keeps messages pointing at the .cu file.
$(B)/gen/%.cpp: lib/%.cu tests/gpu_emu/gpu_emu.mk
	@mkdir -p $(@D)
	$(Q){ echo '#line 1 "$<"'; \
	  perl -0pe 's/(\w+)<<<(.*?)>>>\((.*?)\);/pl_emu_launch($$2, "$$1", [=]() { $$1($$3); }, $$3);/gs' $<; } > $@

$(B)/obj/cu/%.o: $(B)/gen/%.cpp tests/gpu_emu/cuda_kernels.h
	@mkdir -p $(@D)
	@echo "  CXX   lib/$*.cu (gpu-emu, kernels as host code)"
	$(Q)g++ $(EMU_CXXFLAGS) -include cuda_kernels.h -c $< -o $@

$(B)/obj/tests/gpu_emu/kernel_emu.o: tests/gpu_emu/kernel_emu.cpp
	@mkdir -p $(@D)
	@echo "  CXX   $<"
	$(Q)g++ $(EMU_CXXFLAGS) -c $< -o $@

# The stand-in's own test programs.
$(B)/tests/test_gpu_emu: tests/gpu_emu/test_gpu_emu.c $(LIB)
	@mkdir -p $(@D)
	@echo "  LINK  $@"
	$(Q)$(CC) $(ALL_CFLAGS) -Itests $< $(LIB) $(LDLIBS) -o $@

# Lab 2's reference solution as the code under test of a whole overlapped DDP step.
$(B)/tests/test_gpu_step: tests/gpu_emu/test_gpu_step.c solutions/02-ddp/ddp.c \
  solutions/03-zero/zero.c $(LIB)
	@mkdir -p $(@D)
	@echo "  LINK  $@"
	$(Q)$(CC) $(ALL_CFLAGS) -Itests -Ilabs/02-ddp -Ilabs/03-zero $< solutions/02-ddp/ddp.c \
	  solutions/03-zero/zero.c $(LIB) $(LDLIBS) -o $@

# The broken variants: the backend with its patch applied, linked ahead of the library; the
# test program with its patch applied.
$(B)/broken/comm_nccl_gpu.c: lib/comm_nccl_gpu.c tests/gpu_emu/ungrouped_p2p.patch
	@mkdir -p $(@D)
	$(Q)cp lib/comm_nccl_gpu.c $@
	$(Q)patch --quiet $@ tests/gpu_emu/ungrouped_p2p.patch

$(B)/tests/test_comm_ungrouped: tests/test_comm.c $(B)/broken/comm_nccl_gpu.c $(LIB)
	@mkdir -p $(@D)
	@echo "  LINK  $@ (broken variant: ungrouped point-to-point)"
	$(Q)$(CC) $(ALL_CFLAGS) -Itests $< $(B)/broken/comm_nccl_gpu.c $(LIB) $(LDLIBS) -o $@

# PL_AVG by ncclAvg (tests/gpu_emu/nccl_avg.patch), which the stand-in's
# PL_EMU_NCCL_AVG_TAIL=1 gets wrong at the tail as a real GPU's NCCL did.
$(B)/broken/nccl_avg/comm_nccl_gpu.c: lib/comm_nccl_gpu.c tests/gpu_emu/nccl_avg.patch
	@mkdir -p $(@D)
	$(Q)cp lib/comm_nccl_gpu.c $@
	$(Q)patch --quiet $@ tests/gpu_emu/nccl_avg.patch

$(B)/tests/test_comm_nccl_avg: tests/test_comm.c $(B)/broken/nccl_avg/comm_nccl_gpu.c $(LIB)
	@mkdir -p $(@D)
	@echo "  LINK  $@ (broken variant: PL_AVG by ncclAvg)"
	$(Q)$(CC) $(ALL_CFLAGS) -Itests $< $(B)/broken/nccl_avg/comm_nccl_gpu.c $(LIB) $(LDLIBS) -o $@

$(B)/broken/test_tp_shard.c: tests/test_tp_shard.c tests/gpu_emu/tp_shard_host_buffers.patch
	@mkdir -p $(@D)
	$(Q)cp tests/test_tp_shard.c $@
	$(Q)patch --quiet $@ tests/gpu_emu/tp_shard_host_buffers.patch

$(B)/tests/test_tp_shard_host_buffers: $(B)/broken/test_tp_shard.c $(LIB)
	@mkdir -p $(@D)
	@echo "  LINK  $@ (broken variant: host buffers given to the ops)"
	$(Q)$(CC) $(ALL_CFLAGS) -Itests $< $(LIB) $(LDLIBS) -o $@

EMU_PROGRAMS := $(B)/tests/test_gpu_emu $(B)/tests/test_gpu_step $(B)/tests/test_comm_ungrouped \
  $(B)/tests/test_comm_nccl_avg $(B)/tests/test_tp_shard_host_buffers
# What the tests run: every program and test program, and the graders' solution drivers
# (tests/grader.tests grades every lab's, a [gpu] line); not the broken and alternative
# drivers of tests/labs, which the GPU stand-in does not run.
emu-build: $(LIB) $(BINS) $(TESTS) $(EMU_PROGRAMS) \
  $(foreach l,$(GRADER_SOLVED),$(B)/grader/solutions/$(l)/driver)
# The quick part grades Lab 2 alone: the other labs' drivers are the full part's.
emu-build-quick: $(LIB) $(BINS) $(TESTS) $(EMU_PROGRAMS) \
  $(foreach l,$(filter 02-%,$(GRADER_SOLVED)),$(B)/grader/solutions/$(l)/driver)

-include $(EMU_PROGRAMS:=.d) $(wildcard $(B)/obj/cu/*.d)
# The generated host C++ is kept (not an intermediate make deletes at the end).
.SECONDARY: $(LIB_CU:lib/%.cu=$(B)/gen/%.cpp)
endif
