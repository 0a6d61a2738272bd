/* test_zero_memory: checks the ZeRO memory report (build/<b>/bin/zero_memory) against the
 * ZeRO paper's formulas written out here on their own, for the paper's 7.5B-parameter,
 * 64-rank example and for a model given on the command line, in both views (mixed precision
 * with K = 12, and fp32), category by category; and that bad input is a usage error.
 *
 *   test_zero_memory PROGRAM */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include "testing.h"


static const char *STAGES[4] = {"DDP", "ZeRO-1", "ZeRO-2", "ZeRO-3"};

/* The paper's section 3 figures, bytes per device: p params, g grads, o optimizer state. */
static void expected(int stage, int fp32, double psi, double nd, double k, double out[4])
{
    double bp = fp32 ? 4 : 2, bg = fp32 ? 4 : 2, bo = fp32 ? 8 : k;
    double p = bp * psi, g = bg * psi, o = bo * psi;
    switch (stage) {
    case 0: break;                                        /* (2+2+K)Psi */
    case 1: o = bo * psi / nd; break;                     /* 4Psi + K Psi/Nd */
    case 2: g = bg * psi / nd; o = bo * psi / nd; break;  /* 2Psi + (2+K)Psi/Nd */
    default: p = bp * psi / nd; g = bg * psi / nd; o = bo * psi / nd; break; /* (4+K)Psi/Nd */
    }
    out[0] = p / 1e9;
    out[1] = g / 1e9;
    out[2] = o / 1e9;
    out[3] = (p + g + o) / 1e9;
}

/* Runs cmd and checks its four tables: (paper, mixed), (paper, fp32), then, when psi > 0,
 * (user, mixed), (user, fp32). */
static void check_run(const char *cmd, double upsi, double und)
{
    FILE *f = popen(cmd, "r");
    CHECK(f != NULL, "cannot run %s", cmd);
    if (!f) return;
    char line[512];
    int table = -1, rows[4] = {0};
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' && strstr(line, "Psi =")) {
            table++;
            continue;
        }
        int stage = -1;
        for (int s = 0; s < 4; s++) {
            size_t l = strlen(STAGES[s]);
            if (!strncmp(line, STAGES[s], l) && line[l] == ' ') stage = s;
        }
        if (stage < 0 || table < 0 || table > 3) continue;
        /* the last four numbers of the row */
        double got[4];
        char *p = line + strlen(line);
        int found = 0;
        while (found < 4 && p > line) {
            while (p > line && (p[-1] == ' ' || p[-1] == '\n')) p--;
            char *end = p;
            while (p > line && p[-1] != ' ') p--;
            char buf[64];
            snprintf(buf, sizeof buf, "%.*s", (int)(end - p), p);
            got[3 - found++] = atof(buf);
        }
        int paper = table < 2, fp32 = table % 2;
        double exp[4];
        expected(stage, fp32, paper ? 7.5e9 : upsi, paper ? 64 : und, 12, exp);
        static const char *col[4] = {"params", "grads", "optim", "total"};
        for (int c = 0; c < 4; c++)
            CHECK(fabs(got[c] - exp[c]) <= 6e-4, "%s, %s, %s %s: printed %.3f GB, the formula "
                  "gives %.4f GB", paper ? "paper's example" : "user's model",
                  fp32 ? "fp32" : "mixed precision", STAGES[stage], col[c], got[c], exp[c]);
        rows[table]++;
    }
    int rc = pclose(f);
    CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 0, "%s exited with status %d", cmd, rc);
    int want = upsi > 0 ? 4 : 2;
    CHECK(table + 1 == want, "%s printed %d tables, expected %d", cmd, table + 1, want);
    for (int t = 0; t < want; t++)
        CHECK(rows[t] == 4, "table %d has %d stage rows, expected 4 (DDP and stages 1..3)", t,
              rows[t]);
}

static void check_usage_error(const char *prog, const char *args, const char *text)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s %s 2>&1", prog, args);
    FILE *f = popen(cmd, "r");
    if (!f) return;
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    int rc = pclose(f);
    CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 2, "'%s' should be a usage error (exit 2), got "
          "status %d", args, rc);
    CHECK(strstr(buf, text) != NULL, "'%s' should say '%s', said: %s", args, text, buf);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_zero_memory PATH-TO-zero_memory\n");
        return 2;
    }
    const char *prog = argv[1];
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s", prog);
    check_run(cmd, 0, 0);
    snprintf(cmd, sizeof cmd, "%s --params 1.3B --ranks 8", prog);
    check_run(cmd, 1.3e9, 8);
    snprintf(cmd, sizeof cmd, "%s --params 175000M --ranks 1024", prog);
    check_run(cmd, 175e9, 1024);
    check_usage_error(prog, "--params many --ranks 8", "expects a positive number");
    check_usage_error(prog, "--params 1B", "give both --params and --ranks");
    check_usage_error(prog, "--params 1B --ranks 2.5", "whole number of ranks");
    if (failures) {
        printf("%d check(s) failed\n", failures);
        return 1;
    }
    printf("all checks passed: the paper's 7.5B/64 example and two user models in both views\n");
    return 0;
}
