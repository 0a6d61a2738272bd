/* symbols.h: a lab's rules judged from what the code under test calls, not from what it
 * leaves behind. The build lists each driver's undefined symbols of the student's sources
 * alone (nm -u, in symbols.txt beside the driver: grader/grader.mk); a lab's descriptor
 * names the patterns its code may not call (struct gr_lab's forbidden_symbols, with
 * allowed_symbols as exceptions). A call the traffic ledger cannot see (MPI_Allreduce, a
 * library collective hidden behind throw-away messages, malloc outside the kit's allocator)
 * is then caught before anything runs. */
#ifndef GR_SYMBOLS_H
#define GR_SYMBOLS_H

#include <stddef.h>

/* Patterns the labs share. Below the kit: calls the traffic ledger never sees. */
#define GR_SYMBOLS_BELOW_KIT "MPI_* PMPI_* ompi_* nccl* dlopen dlsym syscall "
/* Memory outside the kit's allocator: what the memory ledger never counts. */
#define GR_SYMBOLS_RAW_ALLOC                                                              \
    "malloc calloc realloc reallocarray posix_memalign aligned_alloc memalign valloc "    \
    "pvalloc mmap mmap64 sbrk brk "

/* Every lab's: calls that reach into the process itself (its memory protection, its loaded
 * code, another process's memory), leave code to run after main returns, start threads,
 * signal handlers or timers that would run beside the grader's own checks, point a stream
 * of its own at a descriptor it did not open (fdopen, dup), go around the grader's
 * wrappers of the kit's calls (__real_*, __wrap_*), or write the kit's own measurements
 * (the traffic and FLOP ledger, the memory peak and its watchers, the trace, the
 * communicator's checks), which the grader reads as what the code did. No lab needs one. */
#define GR_SYMBOLS_TAMPER                                                                  \
    "mprotect pkey_mprotect pkey_alloc ptrace process_vm_writev process_vm_readv "         \
    "dl_iterate_phdr dladdr dladdr1 dlinfo dlvsym dlmopen _dl_* prctl personality "        \
    "atexit on_exit __cxa_atexit at_quick_exit __cxa_thread_atexit* pthread_atfork "       \
    "pthread_create thrd_create clone clone3 __real_* __wrap_* "                           \
    "signal sigaction sigset ssignal sysv_signal bsd_signal __sysv_signal alarm ualarm "   \
    "setitimer timer_create timer_settime timerfd_* fdopen dup dup2 dup3 "                 \
    "pl_ledger_reset pl_ledger_charge pl_ledger_count_call pl_ledger_add_flops "           \
    "pl_ledger_gather pl_mem_reset_peak pl_mem_watch pl_trace_* pl_comm_set_checks "
#define GR_SYMBOLS_TAMPER_RULE                                                             \
    "a lab's code computes with the kit's calls when the grader calls it; it never changes " \
    "how its own process is protected or loaded, starts threads, signal handlers or "      \
    "timers, points streams at descriptors it did not open, goes around the grader's "     \
    "counters or writes the kit's measurements, nor leaves code to run at exit"

/* 1 when name matches one of the space-separated shell patterns (fnmatch) of list. */
int gr_symbol_listed(const char *list, const char *name);

/* Judges the symbols file (one undefined symbol a line) against the lab's rule: forbidden
 * patterns, allowed exceptions, and rule, the sentence that says why. Returns 0 when the
 * code keeps the rule; else 1, with the reason in why ("calls MPI_Allreduce, which Lab 1
 * forbids: RULE"), every offending symbol named. A missing file is a violation too (the
 * build writes one for every driver it links). */
int gr_symbols_break_rule(const char *symbols_file, const char *forbidden, const char *allowed,
                          const char *rule, char *why, size_t len);

#endif
