# gpu_emu.mk: `make test-gpu-emu` (run by `make test`): the GPU build's library (-DPL_GPU=1:
# comm_nccl_gpu.c, mem.c's device allocator, ops_gpu.cu's kernels and cuBLAS calls) compiled
# with the host compilers against the CUDA/NCCL/cuBLAS stand-in in tests/gpu_emu instead of
# the real libraries, and run on 1..4 ranks. No GPU needed; this checks how the code uses the
# device (stream order, NCCL's group rules, no device-wide synchronisation) and that the
# kernels, run as host code, agree with the tests; not what a GPU's hardware does.
# It also builds tests/gpu_emu/ungrouped_p2p.patch (the lone ncclSend/ncclRecv that the
# backend used to issue) and requires that the emulator reports it as a hang.

EMU_B := build/gpu-emu
EMU_CFLAGS = -std=c11 -D_GNU_SOURCE -O1 -g $(SIMD_CFLAGS) $(WARN) -DPL_GPU=1 -Itests/gpu_emu -Ilib -Idatasets \
  $(BLAS_CFLAGS) -MMD -MP
EMU_LIB_SRC := $(wildcard lib/*.c datasets/*.c)
EMU_CU_SRC := $(wildcard lib/*.cu)
EMU_OBJ := $(EMU_LIB_SRC:%.c=$(EMU_B)/obj/%.o) $(EMU_B)/obj/gpu_emu.o $(EMU_B)/obj/kernel_emu.o \
  $(EMU_CU_SRC:lib/%.cu=$(EMU_B)/obj/cu/%.o)
EMU_TESTS := $(EMU_B)/tests/test_comm $(EMU_B)/tests/test_gpu_emu $(EMU_B)/tests/test_comm_ungrouped \
  $(EMU_B)/tests/test_ops $(EMU_B)/tests/test_model $(EMU_B)/tests/test_gpu_step
EMU_CXXFLAGS = -std=c++17 -O1 -g $(SIMD_CFLAGS) -Wall -Wextra $(WERROR_FLAG) -Wno-unused-parameter -DPL_GPU=1 \
  -Itests/gpu_emu -Ilib -Idatasets $(shell mpicc --showme:compile 2>/dev/null) -MMD -MP
EMU_LDLIBS = $(BLAS_LIBS) -lstdc++ $(LDLIBS_BASE)

$(EMU_B)/obj/%.o: %.c
	@mkdir -p $(@D)
	@echo "  CC    $< (gpu-emu)"
	$(Q)$(CC) $(EMU_CFLAGS) -c $< -o $@

$(EMU_B)/obj/gpu_emu.o: tests/gpu_emu/gpu_emu.c
	@mkdir -p $(@D)
	@echo "  CC    $< (gpu-emu)"
	$(Q)$(CC) $(EMU_CFLAGS) -c $< -o $@

# The kernels of every lib/*.cu as host C++: each launch k<<<grid, block>>>(args) becomes a
# queued call (tests/gpu_emu/cuda_kernels.h); #line keeps messages pointing at the .cu file.
$(EMU_B)/gen/%.cpp: lib/%.cu
	@mkdir -p $(@D)
	$(Q){ echo '#line 1 "$<"'; \
	  perl -0pe 's/(\w+)<<<(.*?)>>>\((.*?)\);/pl_emu_launch($$2, [=]() { $$1($$3); });/gs' $<; } > $@

$(EMU_B)/obj/cu/%.o: $(EMU_B)/gen/%.cpp tests/gpu_emu/cuda_kernels.h
	@mkdir -p $(@D)
	@echo "  CXX   lib/$*.cu (gpu-emu, kernels as host code)"
	$(Q)g++ $(EMU_CXXFLAGS) -include cuda_kernels.h -c $< -o $@

$(EMU_B)/obj/kernel_emu.o: tests/gpu_emu/kernel_emu.cpp
	@mkdir -p $(@D)
	@echo "  CXX   $< (gpu-emu)"
	$(Q)g++ $(EMU_CXXFLAGS) -c $< -o $@

$(EMU_B)/libparalab-emu.a: $(EMU_OBJ)
	@rm -f $@
	$(Q)ar rcs $@ $^

# test_comm, test_ops, test_model: the same programs as the project's tests.
$(EMU_B)/tests/test_%: tests/test_%.c $(EMU_B)/libparalab-emu.a
	@mkdir -p $(@D)
	@echo "  LINK  $@"
	$(Q)$(CC) $(EMU_CFLAGS) -Itests $< $(EMU_B)/libparalab-emu.a $(EMU_LDLIBS) -o $@

$(EMU_B)/tests/test_gpu_emu: tests/gpu_emu/test_gpu_emu.c $(EMU_B)/libparalab-emu.a
	@mkdir -p $(@D)
	@echo "  LINK  $@"
	$(Q)$(CC) $(EMU_CFLAGS) -Itests $< $(EMU_B)/libparalab-emu.a $(EMU_LDLIBS) -o $@

# Lab 2's reference solution as the code under test of a whole overlapped DDP step.
$(EMU_B)/tests/test_gpu_step: tests/gpu_emu/test_gpu_step.c solutions/02-ddp/ddp.c \
  solutions/03-zero/zero.c $(EMU_B)/libparalab-emu.a
	@mkdir -p $(@D)
	@echo "  LINK  $@"
	$(Q)$(CC) $(EMU_CFLAGS) -Itests -Ilabs/02-ddp -Ilabs/03-zero $< solutions/02-ddp/ddp.c \
	  solutions/03-zero/zero.c $(EMU_B)/libparalab-emu.a $(EMU_LDLIBS) -o $@

# The broken variant: the backend with the patch applied, linked ahead of the library.
$(EMU_B)/broken/comm_nccl_gpu.c: lib/comm_nccl_gpu.c tests/gpu_emu/ungrouped_p2p.patch
	@mkdir -p $(@D)
	$(Q)cp lib/comm_nccl_gpu.c $@
	$(Q)patch --quiet $@ tests/gpu_emu/ungrouped_p2p.patch

$(EMU_B)/tests/test_comm_ungrouped: tests/test_comm.c $(EMU_B)/broken/comm_nccl_gpu.c $(EMU_B)/libparalab-emu.a
	@mkdir -p $(@D)
	@echo "  LINK  $@ (broken variant: ungrouped point-to-point)"
	$(Q)$(CC) $(EMU_CFLAGS) $< $(EMU_B)/broken/comm_nccl_gpu.c $(EMU_B)/libparalab-emu.a \
	  $(EMU_LDLIBS) -o $@

-include $(wildcard $(EMU_B)/obj/lib/*.d $(EMU_B)/obj/datasets/*.d $(EMU_B)/obj/*.d \
  $(EMU_B)/obj/cu/*.d)

.PHONY: test-gpu-emu
# After `all` (which builds the harness), never beside it: both would write $(B).
test-gpu-emu: $(EMU_TESTS) all
	@$(B)/tests/harness --build $(EMU_B) tests/gpu_emu/gpu_emu.tests

test: test-gpu-emu

# The generated host C++ is kept (not an intermediate make deletes at the end, whose "rm"
# line would follow the test summary).
.SECONDARY: $(EMU_CU_SRC:lib/%.cu=$(EMU_B)/gen/%.cpp)
