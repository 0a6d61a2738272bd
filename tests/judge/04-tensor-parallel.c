/* tests/judge/04-tensor-parallel.c: Lab 4's judges (grader/04-tensor-parallel/judge.c) run
 * alone, without mpirun, on hand-built observations and on those a check run of the
 * solution recorded (driver --record FILE):
 *
 *   04-tensor-parallel                 the hand-built cases
 *   04-tensor-parallel FILE PARTS      every case of FILE passes PARTS (comma-separated), and
 *                                      the same observations with one rank's made wrong fail
 *                                      with the reason a student would read
 *
 * Expected figures come from the formulas in code, never pasted. Exit 0 when every check
 * holds; each failed one is printed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab04.h"

static int failures;

#define CHECK(cond, ...)                                                                       \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            failures++;                                                                        \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                        \
            printf(__VA_ARGS__);                                                               \
            printf("\n");                                                                      \
        }                                                                                      \
    } while (0)

/* Judges part of case i of n on np hand-built observations; the verdict, lines in why. */
static int judge(int kind, int i, int n, const char *part, const struct l4_obs *obs, int np,
                 struct gr_why *why)
{
    struct gr_obs all = {np, sizeof *obs, (const unsigned char *)obs};
    gr_why_init(why);
    return l4_judge(kind, i, n, part, &all, why);
}

static int said(const struct gr_why *w, const char *text)
{
    for (int k = 0; k < w->n; k++)
        if (strstr(w->line[k], text)) return 1;
    return 0;
}

/* One pass of t ranks that made `made` all-reduces of count floats where it needs `need`. */
static void pass_of(struct l4_pass *p, const char *name, long need, long made, double count,
                    int t)
{
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name);
    snprintf(p->where, sizeof p->where, "g after each row-parallel linear");
    p->calls = need;
    p->count = count;
    p->t = t;
    p->tr.ar_calls = made;
    /* a ring all-reduce sends 2(t-1)/t of its buffer per rank */
    p->tr.ar_bytes = (double)made * 2.0 * (t - 1) / t * count * 4.0;
}

static void hand_built(void)
{
    enum { NP = 2 };
    static struct l4_obs obs[NP];
    struct gr_why why;
    const double count = 2.0 * 16 * 64; /* B T C */

    /* traffic: every rank right, then rank 1 one all-reduce over, then one short */
    memset(obs, 0, sizeof obs);
    for (int r = 0; r < NP; r++) {
        obs[r].npass = 1;
        pass_of(&obs[r].pass[0], "forward", 1, 1, count, NP);
    }
    snprintf(obs[0].part[L4_TRAFFIC].note, L4_TEXT, "one all-reduce forward");
    CHECK(judge(L4_MLP, 0, 3, "traffic", obs, NP, &why) && why.n == 0,
          "right traffic on a middle case passes silently (%d lines)", why.n);
    CHECK(judge(L4_MLP, 2, 3, "traffic", obs, NP, &why) && said(&why, "one all-reduce forward"),
          "right traffic on the last case says rank 0's note");
    pass_of(&obs[1].pass[0], "forward", 1, 2, count, NP);
    CHECK(!judge(L4_MLP, 0, 3, "traffic", obs, NP, &why) &&
              said(&why, "rank 1: the forward made 2 all-reduces on the TP group where it "
                         "needs 1") && said(&why, "f is the identity forward"),
          "one all-reduce too many is named with rank 1: %s", why.n ? why.line[0] : "");
    pass_of(&obs[1].pass[0], "forward", 1, 0, count, NP);
    CHECK(!judge(L4_MLP, 0, 3, "traffic", obs, NP, &why) &&
              said(&why, "rank 1: the forward made 0 all-reduces") &&
              said(&why, "leaves each rank with a partial sum"),
          "a missing all-reduce: %s", why.n ? why.line[0] : "");
    /* the right count of the wrong size */
    pass_of(&obs[1].pass[0], "forward", 1, 1, count, NP);
    obs[1].pass[0].tr.ar_bytes *= 2;
    CHECK(!judge(L4_MLP, 0, 3, "traffic", obs, NP, &why) &&
              said(&why, "reduce exactly the [N, C] activation"),
          "an all-reduce of twice the activation: %s", why.n ? why.line[0] : "");

    /* correct: the first rank that stated a failure, in rank order */
    memset(obs, 0, sizeof obs);
    obs[1].part[L4_CORRECT].failed = 1;
    snprintf(obs[1].part[L4_CORRECT].why, L4_TEXT, "TP MLP output y: relative L2 error 1.00e+00");
    CHECK(!judge(L4_MLP, 0, 3, "correct", obs, NP, &why) &&
              !strcmp(why.line[0], "rank 1: TP MLP output y: relative L2 error 1.00e+00"),
          "rank 1's perturbed output is its reason: %s", why.n ? why.line[0] : "");

    /* memory of the loss: as much as the full logits, held or hidden from the ledger */
    memset(obs, 0, sizeof obs);
    for (int r = 0; r < NP; r++) {
        obs[r].has_vocab = 1;
        obs[r].vocab = (struct l4_vocab){.t = NP, .B = 2, .T = 16, .C = 64, .V = 256};
        obs[r].vocab.held = 1024;
    }
    const double full = 4.0 * 2 * 16 * 256; /* [N, V] floats */
    char fb[32], hb[32], want[256];
    pl_format_bytes(full, fb, sizeof fb);
    pl_format_bytes(full / 2, hb, sizeof hb);
    snprintf(want, sizeof want, "below the full logits' %s", fb);
    CHECK(judge(L4_VOCAB, 2, 3, "memory", obs, NP, &why) && said(&why, want),
          "a head below the full logits passes: %s", why.n ? why.line[0] : "");
    obs[1].vocab.held = full;
    snprintf(want, sizeof want, "rank 1: your head and loss held %s at peak beyond their "
             "activations: as much as the full [N, V] logits (%s)", fb, fb);
    CHECK(!judge(L4_VOCAB, 0, 3, "memory", obs, NP, &why) && said(&why, want),
          "the full logits held: %s", why.n ? why.line[0] : "");
    obs[1].vocab.held = full / 2;
    obs[1].vocab.hidden = full / 2;
    snprintf(obs[1].vocab.hidden_region, sizeof obs[1].vocab.hidden_region,
             "in static storage (an array declared static or at file scope)");
    snprintf(obs[1].vocab.hidden_call, sizeof obs[1].vocab.hidden_call, "pl_all_gather");
    snprintf(want, sizeof want, "%s of it in static storage (an array declared static or at "
             "file scope) given to pl_all_gather", hb);
    CHECK(!judge(L4_VOCAB, 0, 3, "memory", obs, NP, &why) && said(&why, want),
          "half the logits outside the ledger: %s", why.n ? why.line[0] : "");

    /* time: between full and no marks a fraction, past no marks a failure */
    memset(obs, 0, sizeof obs);
    obs[0].has_time = 1;
    obs[0].time = (struct l4_time){.traced = 1, .t = 2, .step = 1.0, .compute = 0.5,
                                   .bound = 1.0, .split = 0.4};
    obs[0].time.ratio = (GR_BT_FULL + GR_BT_NONE) / 2;
    CHECK(judge(L4_BLOCK, 0, 3, "time", obs, NP, &why) && fabs(why.fraction - 0.5) < 1e-9,
          "halfway between the bars earns half: %g", why.fraction);
    obs[0].time.ratio = GR_BT_NONE;
    CHECK(!judge(L4_BLOCK, 0, 3, "time", obs, NP, &why) &&
              said(&why, "rank 0: your block's modelled step") &&
              said(&why, "1.25x the single device's split 2 ways"),
          "at the no-marks bar: %s", why.n ? why.line[0] : "");
    obs[0].time.traced = 0;
    snprintf(obs[0].time.err, sizeof obs[0].time.err,
             "the forward was wrong, so the backward never ran");
    CHECK(!judge(L4_BLOCK, 0, 3, "time", obs, NP, &why) &&
              said(&why, "could not be replayed: the forward was wrong"),
          "no trace: %s", why.n ? why.line[0] : "");
    CHECK(!judge(L4_BLOCK, 0, 3, "speed", obs, NP, &why) && said(&why, "no part 'speed'"),
          "an unknown part is refused");
}

/* Every case of a recorded run passes parts; then each rank's observation made wrong in
 * turn fails with that rank named. */
static void recorded(const char *path, const char *parts)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        printf("cannot read %s: give a file written by the driver's --record FILE\n", path);
        exit(2);
    }
    struct gr_record rec;
    char err[256];
    int n = 0, got, kind = -1;
    while ((got = gr_record_read(f, &rec, err, sizeof err)) == 1) {
        for (int k = 0; k <= L4_PLACE; k++)
            if (!strcmp(rec.op, L4_KIND_OPS[k])) kind = k;
        CHECK(kind >= 0, "op %s is not Lab 4's", rec.op);
        struct gr_why why;
        char list[128];
        snprintf(list, sizeof list, "%s", parts);
        for (char *p = strtok(list, ","); p; p = strtok(NULL, ",")) {
            gr_why_init(&why);
            int v = l4_judge(kind, rec.icase, rec.ncases, p, &rec.obs, &why);
            CHECK(v && why.fraction == 1, "%s case %d part %s of the solution: %s", rec.op,
                  rec.icase, p, why.n ? why.line[0] : "(no reason)");
        }
        /* the last rank's first traffic pass one all-reduce over */
        struct l4_obs *mine = malloc(rec.obs.size * (size_t)rec.obs.nranks);
        memcpy(mine, rec.obs.data, rec.obs.size * (size_t)rec.obs.nranks);
        struct l4_obs *last = &mine[rec.obs.nranks - 1];
        struct gr_obs bad = {rec.obs.nranks, rec.obs.size, (const unsigned char *)mine};
        if (last->npass > 0 && last->pass[0].t > 1) {
            last->pass[0].tr.ar_calls++;
            char want[160];
            snprintf(want, sizeof want, "rank %d: the %s made %ld all-reduce", rec.obs.nranks - 1,
                     last->pass[0].name, last->pass[0].tr.ar_calls);
            gr_why_init(&why);
            CHECK(!l4_judge(kind, rec.icase, rec.ncases, "traffic", &bad, &why) &&
                      said(&why, want),
                  "%s case %d, one all-reduce too many: %s", rec.op, rec.icase,
                  why.n ? why.line[0] : "(passed)");
            last->pass[0].tr.ar_calls--;
        }
        /* the same rank's correctness stated wrong */
        last->part[L4_CORRECT].failed = 1;
        snprintf(last->part[L4_CORRECT].why, L4_TEXT, "output perturbed");
        gr_why_init(&why);
        char want[64];
        snprintf(want, sizeof want, "rank %d: output perturbed", rec.obs.nranks - 1);
        CHECK(!l4_judge(kind, rec.icase, rec.ncases, "correct", &bad, &why) && said(&why, want),
              "%s case %d, a rank wrong: %s", rec.op, rec.icase, why.n ? why.line[0] : "");
        free(mine);
        gr_record_free(&rec);
        n++;
    }
    fclose(f);
    CHECK(got == 0, "%s: %s", path, err);
    CHECK(n > 0, "%s holds no case", path);
    printf("%s: %d recorded cases judged\n", path, n);
}

int main(int argc, char **argv)
{
    if (argc == 3) recorded(argv[1], argv[2]);
    else if (argc == 1) hand_built();
    else {
        printf("usage: %s [RECORD PARTS]\n", argv[0]);
        return 2;
    }
    printf("%s\n", failures ? "judge tests FAILED" : "judge tests passed");
    return failures ? 1 : 0;
}
