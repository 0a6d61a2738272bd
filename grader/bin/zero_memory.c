/* zero_memory: the ZeRO memory report. Prints the bytes per device that DDP and each ZeRO
 * stage hold, from the formulas of grader/03-zero/formulas.h, for the ZeRO paper's example
 * (7.5B parameters on 64 devices, mixed-precision Adam, K = 12) and for a model size and rank
 * count given on the command line, in the paper's mixed-precision view and in this kit's
 * fp32 view (4 bytes of parameters, 4 of gradients, 8 of m and v per parameter).
 *
 *   zero_memory [--params N] [--ranks N] [--k K]
 * N takes a suffix K, M, B or T (10^3 .. 10^12): --params 1.3B --ranks 8. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../03-zero/formulas.h"

#define PAPER_PSI 7.5e9
#define PAPER_ND 64
#define GB 1e9

static void usage(const char *fmt, const char *arg)
{
    fprintf(stderr, "zero_memory: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nusage: zero_memory [--params N] [--ranks N] [--k K]   (N may end in K, M, "
                    "B or T, e.g. --params 1.3B --ranks 8)\n");
    exit(2);
}

/* "7.5B" -> 7.5e9. */
static double parse_count(const char *flag, const char *v)
{
    char *end;
    double x = strtod(v, &end);
    double scale = 1;
    if (*end == 'K' || *end == 'k') scale = 1e3, end++;
    else if (*end == 'M' || *end == 'm') scale = 1e6, end++;
    else if (*end == 'B' || *end == 'b' || *end == 'G' || *end == 'g') scale = 1e9, end++;
    else if (*end == 'T' || *end == 't') scale = 1e12, end++;
    if (end == v || *end != '\0' || !(x > 0)) {
        char msg[160];
        snprintf(msg, sizeof msg, "%s expects a positive number, optionally ending in K, M, B "
                 "or T, got '%%s'", flag);
        usage(msg, v);
    }
    return x * scale;
}

static void table(const char *title, double psi, int nd, double k, int fp32)
{
    printf("\n# %s: Psi = %.4g parameters, Nd = %d ranks, ", title, psi, nd);
    if (fp32) printf("fp32 (4 + 4 + 8 bytes per parameter)\n");
    else printf("mixed precision (2 + 2 + K bytes per parameter, K = %g)\n", k);
    printf("%-8s %-22s %12s %12s %12s %12s\n", "stage", "formula", "params GB", "grads GB",
           "optim GB", "total GB");
    for (int s = 0; s <= 3; s++) {
        struct zero_bytes b = fp32 ? zero_fp32(s, psi, nd) : zero_mixed(s, psi, nd, k);
        printf("%-8s %-22s %12.3f %12.3f %12.3f %12.3f\n", zero_stage_name(s),
               fp32 ? zero_fp32_text(s) : zero_mixed_text(s), b.params / GB, b.grads / GB,
               b.optim / GB, zero_bytes_total(b) / GB);
    }
}

static void report(const char *title, double psi, int nd, double k)
{
    table(title, psi, nd, k, 0);
    table(title, psi, nd, k, 1);
    /* ZeRO-3's multiple is Lab 3's question zero3_traffic_over_ddp: not printed here. */
    printf("# communication per step and rank: DDP, ZeRO-1 and ZeRO-2 %.0fPsi elements x "
           "(Nd-1)/Nd (= %.3f GB in fp16); ZeRO-3 more, as the Lab 3 handout's section 5 "
           "counts\n", zero_comm_psi(2), zero_comm_psi(2) * psi * 2 * (nd - 1) / nd / GB);
}

int main(int argc, char **argv)
{
    double psi = 0, k = ZERO_PAPER_K;
    int nd = 0;
    /* Every flag takes a value: they come in pairs. */
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) usage("%s", "the ZeRO memory formulas");
        if (!v) usage("%s needs a value", a);
        if (!strcmp(a, "--params")) {
            psi = parse_count(a, v);
        } else if (!strcmp(a, "--ranks")) {
            double r = parse_count(a, v);
            if (r != (double)(int)r || r < 1 || r > 1e7)
                usage("--ranks expects a whole number of ranks from 1 up, got '%s'", v);
            nd = (int)r;
        } else if (!strcmp(a, "--k")) {
            k = parse_count(a, v);
        } else {
            usage("unknown argument '%s'", a);
        }
    }
    if ((psi > 0) != (nd > 0))
        usage("%s", "give both --params and --ranks (or neither, for the paper's example only)");
    printf("# ZeRO memory per device (Rajbhandari et al., \"ZeRO: Memory Optimizations Toward "
           "Training Trillion Parameter Models\"), GB = 10^9 bytes\n");
    report("the paper's example", PAPER_PSI, PAPER_ND, ZERO_PAPER_K);
    if (psi > 0) report("your model", psi, nd, k);
    return 0;
}
