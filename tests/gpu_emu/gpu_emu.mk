# gpu_emu.mk: `make test-gpu-emu` (run by `make test`): the GPU build's communication layer
# and memory ledger (-DPL_GPU=1: comm_nccl_gpu.c, mem.c's device allocator) compiled with the
# host compiler against the CUDA/NCCL stand-in in tests/gpu_emu instead of the real libraries,
# and run on 1..4 ranks. No GPU needed; this checks how the code uses CUDA and NCCL (stream
# order, NCCL's group rules, no device-wide synchronisation), not what a GPU computes.
# It also builds tests/gpu_emu/ungrouped_p2p.patch (the lone ncclSend/ncclRecv that the
# backend used to issue) and requires that the emulator reports it as a hang.

EMU_B := build/gpu-emu
EMU_CFLAGS = -std=c11 -D_GNU_SOURCE -O1 -g $(WARN) -DPL_GPU=1 -Itests/gpu_emu -Ilib -Idatasets \
  $(BLAS_CFLAGS) -MMD -MP
# ops.c's GPU half calls ops_gpu.cu, which has no host stand-in: the tests here link none of it.
EMU_LIB_SRC := $(filter-out lib/ops.c lib/model%.c,$(wildcard lib/*.c))
EMU_OBJ := $(EMU_LIB_SRC:%.c=$(EMU_B)/obj/%.o) $(EMU_B)/obj/gpu_emu.o
EMU_TESTS := $(EMU_B)/tests/test_comm $(EMU_B)/tests/test_gpu_emu $(EMU_B)/tests/test_comm_ungrouped

$(EMU_B)/obj/%.o: %.c
	@mkdir -p $(@D)
	@echo "  CC    $< (gpu-emu)"
	$(Q)$(CC) $(EMU_CFLAGS) -c $< -o $@

$(EMU_B)/obj/gpu_emu.o: tests/gpu_emu/gpu_emu.c
	@mkdir -p $(@D)
	@echo "  CC    $< (gpu-emu)"
	$(Q)$(CC) $(EMU_CFLAGS) -c $< -o $@

$(EMU_B)/libparalab-emu.a: $(EMU_OBJ)
	@rm -f $@
	$(Q)ar rcs $@ $^

$(EMU_B)/tests/test_comm: tests/test_comm.c $(EMU_B)/libparalab-emu.a
	@mkdir -p $(@D)
	@echo "  LINK  $@"
	$(Q)$(CC) $(EMU_CFLAGS) -Itests $< $(EMU_B)/libparalab-emu.a $(BLAS_LIBS) $(LDLIBS_BASE) -o $@

$(EMU_B)/tests/test_gpu_emu: tests/gpu_emu/test_gpu_emu.c $(EMU_B)/libparalab-emu.a
	@mkdir -p $(@D)
	@echo "  LINK  $@"
	$(Q)$(CC) $(EMU_CFLAGS) -Itests $< $(EMU_B)/libparalab-emu.a $(BLAS_LIBS) $(LDLIBS_BASE) -o $@

# The broken variant: the backend with the patch applied, linked ahead of the library.
$(EMU_B)/broken/comm_nccl_gpu.c: lib/comm_nccl_gpu.c tests/gpu_emu/ungrouped_p2p.patch
	@mkdir -p $(@D)
	$(Q)cp lib/comm_nccl_gpu.c $@
	$(Q)patch --quiet $@ tests/gpu_emu/ungrouped_p2p.patch

$(EMU_B)/tests/test_comm_ungrouped: tests/test_comm.c $(EMU_B)/broken/comm_nccl_gpu.c $(EMU_B)/libparalab-emu.a
	@mkdir -p $(@D)
	@echo "  LINK  $@ (broken variant: ungrouped point-to-point)"
	$(Q)$(CC) $(EMU_CFLAGS) -Ilib $< $(EMU_B)/broken/comm_nccl_gpu.c $(EMU_B)/libparalab-emu.a \
	  $(BLAS_LIBS) $(LDLIBS_BASE) -o $@

-include $(wildcard $(EMU_B)/obj/lib/*.d $(EMU_B)/obj/*.d)

.PHONY: test-gpu-emu
test-gpu-emu: $(EMU_TESTS) $(B)/tests/harness
	@$(B)/tests/harness --build $(EMU_B) tests/gpu_emu/gpu_emu.tests

test: test-gpu-emu
