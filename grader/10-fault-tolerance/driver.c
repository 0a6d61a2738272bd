/* driver.c: Lab 10's part of its trusted driver, on the lab harness's new shape (the
 * harness, grader/common/harness.h, owns main, flags, modes and the gather of observations).
 *
 *   resume     train, save (twice), restart a fresh run, load: the state bit for bit the
 *              one-rank reference's at that step, the next losses too; part "atomic": every
 *              file the saves made got its final name by a rename after sync and close
 *   crash      the same with the second save killed (SIGKILL) at one of five points: the
 *              load must take the first
 *   corrupt    the same with the second checkpoint damaged five ways: the first is loaded
 *              (part "correct") and the damage named (part "named")
 *   reshard    saved on n ranks, loaded on m, five pairs on 8 ranks
 *   interval   ft_interval against sqrt(2 C M)
 *
 * The state is made here on the heap; cases.c runs and observes a case into struct l10_obs;
 * judge.c gives the verdict from the observations alone; bench.c is the bench mode. */

#include "lab10.h"

/* The lab's flags: entry k's value is gr_args.opt[k] (bench.c reads them). */
static const struct pl_flag OPTIONS[] = {
    {"--svg", PL_FLAG_STR, NULL, "FILE",
     "bench: the picture of make plots LAB=10: a run killed during a save and restarted on "
     "one rank fewer, over the uninterrupted one; the time lost against the interval", 0},
};

static void *setup(const struct gr_args *a)
{
    int op = l10_find_op(a->op);
    struct l10_state *st = l10_state_new(op < 0 ? L10_NOPS : (enum l10_op)op, a->seed);
    l10_setup_cases(st);
    return st;
}

static void finish(void *st)
{
    l10_state_free(st);
}

static const char *subject(void *st)
{
    int op = ((const struct l10_state *)st)->op;
    return op < L10_NOPS ? L10_OP_FUNCS[op] : "?";
}

static int count_cases(void *st)
{
    return ((const struct l10_state *)st)->ncases;
}

static void describe(void *vst, int i, char *buf, size_t len)
{
    const struct l10_state *st = vst;
    l10_describe(&st->cases[i], st->op, buf, len);
}

static size_t obs_size(const void *st, int i)
{
    (void)st;
    (void)i;
    return sizeof(struct l10_obs);
}

static void observe(void *st, int i, void *obs)
{
    l10_observe(st, i, obs);
}

/* A damaged checkpoint's verdict names the damage: every case of that test looks alike in
 * the judge's lines. */
static int judge(const void *st, int i, const char *part, const struct gr_obs *all,
                 struct gr_why *why)
{
    const struct l10_state *s = st;
    int ok = l10_judge(s->op, part, all, why);
    if (!ok && s->op == L10_OP_CORRUPT) {
        char what[256];
        l10_describe(&s->cases[i], s->op, what, sizeof what);
        gr_why_say(why, "the case: %s", what);
    }
    return ok;
}

const struct gr_driver gr_lab_driver = {
    .setup = setup,
    .subject = subject,
    .correct_first = "must restart correctly first",
    .ncases = count_cases,
    .describe = describe,
    .obs_size = obs_size,
    .observe = observe,
    .judge_obs = judge,
    .bench = l10_bench,
    .finish = finish,
    .options = OPTIONS,
    .noptions = (int)(sizeof OPTIONS / sizeof OPTIONS[0]),
};
