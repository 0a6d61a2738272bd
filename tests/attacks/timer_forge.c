
/* Attack 9 (appended to the stub, run by its ring_all_reduce: replay.sh): leave a timer
 * whose signal handler runs later, while the grader judges and writes its verdicts, where
 * it could rewrite the outputs just compared or race the report's write; the symbol rule
 * every lab shares refuses signal handlers and timers before anything runs. */
#include <signal.h>
#include <string.h>
#include <sys/time.h>

static void attack_late(int sig)
{
    (void)sig; /* here, beside the grader's checks: what it does no longer matters */
}

static void attack_run(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = attack_late;
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval every = {{0, 1000}, {0, 1000}};
    setitimer(ITIMER_REAL, &every, NULL);
}
