/* kernel_emu.cpp: runs the kernels of lib/ops_gpu.cu on the emulator's device thread (see
 * cuda_kernels.h). The first thread of a launch runs in a context of its own: if it returns
 * without reaching __syncthreads, the kernel has no barrier (every thread of a block must
 * reach the same barriers) and the other threads run one after another as plain calls.
 * Otherwise each thread of each block gets a context; the block's threads run in turn until
 * each reaches __syncthreads or returns, and again until all have returned, so a barrier
 * holds every thread until the whole block has reached it. */
#include <stdio.h>
#include <stdlib.h>
#include <ucontext.h>

#include "cuda_kernels.h"
#include "gpu_emu.h"

pl_emu_dim3 threadIdx, blockIdx, blockDim, gridDim;

#define STACK_BYTES (128 * 1024)

static struct {
    unsigned cap;     /* contexts allocated */
    unsigned current; /* the thread running now */
    char *stacks;
    int *done;
    int barrier; /* the launch's first thread reached __syncthreads */
    std::function<void()> *kernel;
#if defined(__x86_64__)
    void **sp; /* each thread's saved stack pointer */
    void *sched_sp;
#else
    ucontext_t sched;
    ucontext_t *ctx;
#endif
} K;

static void thread_main(void)
{
    (*K.kernel)();
    K.done[K.current] = 1;
}

#if defined(__x86_64__)
/* A context switch without the signal-mask system call of swapcontext, which would cost two
 * per CUDA thread and barrier: saves the callee-saved registers on the current stack, stores
 * its pointer in *from and continues on the stack to. */
extern "C" void pl_emu_switch(void **from, void *to);
__asm__(".text\n"
        ".globl pl_emu_switch\n"
        ".type pl_emu_switch, @function\n"
        "pl_emu_switch:\n"
        "    pushq %rbp\n    pushq %rbx\n    pushq %r12\n"
        "    pushq %r13\n    pushq %r14\n    pushq %r15\n"
        "    movq %rsp, (%rdi)\n"
        "    movq %rsi, %rsp\n"
        "    popq %r15\n    popq %r14\n    popq %r13\n"
        "    popq %r12\n    popq %rbx\n    popq %rbp\n"
        "    ret\n"
        ".size pl_emu_switch, .-pl_emu_switch\n");

static void entry(void)
{
    thread_main();
    pl_emu_switch(&K.sp[K.current], K.sched_sp); /* never resumed */
    abort();
}

static void start(unsigned t)
{
    /* The new stack as pl_emu_switch leaves one: six registers, then entry as the return
     * address, with the alignment of a function that was just called. */
    void **top = (void **)(K.stacks + (size_t)(t + 1) * STACK_BYTES);
    *--top = NULL;
    *--top = (void *)entry;
    for (int r = 0; r < 6; r++) *--top = NULL;
    K.sp[t] = top;
    K.done[t] = 0;
}

static void resume(unsigned t)
{
    K.current = t;
    threadIdx = {t, 0, 0};
    pl_emu_switch(&K.sched_sp, K.sp[t]);
}

void __syncthreads(void)
{
    K.barrier = 1;
    pl_emu_switch(&K.sp[K.current], K.sched_sp);
}

static int alloc_contexts(unsigned n)
{
    free(K.sp);
    K.sp = (void **)calloc(n, sizeof *K.sp);
    return K.sp != NULL;
}
#else
static void start(unsigned t)
{
    getcontext(&K.ctx[t]);
    K.ctx[t].uc_stack.ss_sp = K.stacks + (size_t)t * STACK_BYTES;
    K.ctx[t].uc_stack.ss_size = STACK_BYTES;
    K.ctx[t].uc_link = &K.sched;
    makecontext(&K.ctx[t], thread_main, 0);
    K.done[t] = 0;
}

static void resume(unsigned t)
{
    K.current = t;
    threadIdx = {t, 0, 0};
    swapcontext(&K.sched, &K.ctx[t]);
}

void __syncthreads(void)
{
    K.barrier = 1;
    swapcontext(&K.ctx[K.current], &K.sched);
}

static int alloc_contexts(unsigned n)
{
    free(K.ctx);
    K.ctx = (ucontext_t *)calloc(n, sizeof *K.ctx);
    return K.ctx != NULL;
}
#endif

/* Runs block b; from: threads below it have already run to their first barrier. */
static void run_block(unsigned b, unsigned threads, unsigned from)
{
    blockIdx = {b, 0, 0};
    for (unsigned t = from; t < threads; t++) start(t);
    for (unsigned left = threads; left; from = 0) {
        left = 0;
        for (unsigned t = from; t < threads; t++) {
            if (!K.done[t]) resume(t);
            left += !K.done[t];
        }
        for (unsigned t = 0; t < from; t++) left += !K.done[t];
    }
}

struct launch {
    unsigned grid, block;
    std::function<void()> *kernel;
};

static void run_grid(void *arg)
{
    launch *l = (launch *)arg;
    if (l->block > K.cap) {
        free(K.stacks);
        free(K.done);
        K.cap = l->block;
        K.stacks = (char *)malloc((size_t)K.cap * STACK_BYTES);
        K.done = (int *)calloc(K.cap, sizeof *K.done);
        if (!alloc_contexts(K.cap) || !K.stacks || !K.done) {
            fprintf(stderr, "gpu_emu: out of memory for a block of %u threads\n", l->block);
            abort();
        }
    }
    K.kernel = l->kernel;
    gridDim = {l->grid, 1, 1};
    blockDim = {l->block, 1, 1};
    K.barrier = 0;
    blockIdx = {0, 0, 0};
    start(0);
    resume(0);
    if (!K.barrier) {
        for (unsigned b = 0; b < l->grid; b++) {
            blockIdx = {b, 0, 0};
            for (unsigned t = b ? 0 : 1; t < l->block; t++) {
                threadIdx = {t, 0, 0};
                (*K.kernel)();
            }
        }
    } else {
        run_block(0, l->block, 1);
        for (unsigned b = 1; b < l->grid; b++) run_block(b, l->block, 0);
    }
    delete l->kernel;
    delete l;
}

void pl_emu_launch_fn(unsigned grid, unsigned block, std::function<void()> *kernel)
{
    pl_emu_note_kernel();
    pl_emu_enqueue_host(NULL, run_grid, new launch{grid, block, kernel});
}
