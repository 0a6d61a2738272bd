
/* Attack 6 (appended to the stub, run by its ring_all_reduce: replay.sh): make the
 * program's own code writable, the first step to patching the grader's checks (or its calls
 * into the C library) in memory; the symbol rule every lab shares refuses the call before
 * anything runs. */
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

static void attack_run(void)
{
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t here = (uintptr_t)&attack_run & ~(uintptr_t)(page - 1);
    mprotect((void *)here, (size_t)page, PROT_READ | PROT_WRITE | PROT_EXEC);
}
