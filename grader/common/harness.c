/* harness.c: the lab harness of harness.h: main, flags, modes, the case loop and the
 * verdicts every lab's driver shares. */
#include "harness.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "comm.h"
#include "runtime.h"
#include "todo.h"

#define MAX_OPS 32
#define MAX_PARTS 12 /* "correct" and the most parts a run judges (Lab 9: 8) */
#define PART_NAME 32 /* the longest part name, its terminating nul included */

/* ---- the lab's plan, as seen from its driver ---- */

static const struct gr_lab *the_lab;
static char handout[160];
static char ops[MAX_OPS][32];
static int nops;
/* The parts the plan's check tests judge, in the plan's order: what --parts accepts. */
static char known_parts[MAX_OPS][PART_NAME];
static int nknown;

void gr_register_lab(const struct gr_lab *lab)
{
    the_lab = lab;
}

/* The driver runs its plan to learn the ops its tests name: those are what --op accepts. */
void gr_add(const struct gr_spec *spec)
{
    int k = 0;
    while (k < nknown && strcmp(known_parts[k], spec->part)) k++;
    if (k == nknown && nknown < MAX_OPS && !strcmp(spec->mode, "check"))
        snprintf(known_parts[nknown++], sizeof known_parts[0], "%s", spec->part);
    for (int i = 0; i < nops; i++)
        if (!strcmp(ops[i], spec->op)) return;
    if (nops < MAX_OPS) snprintf(ops[nops++], sizeof ops[0], "%s", spec->op);
}

/* Refuses a --parts name no check test of the lab's plan judges, before the setup, naming
 * those it does: "--parts speed: Lab 1 judges correct, traffic, memory and crossover". */
static void check_known_parts(const char *list)
{
    for (const char *w = list; *w;) {
        size_t len = strcspn(w, ",");
        int known = len == 0;
        for (int k = 0; k < nknown && !known; k++)
            known = strlen(known_parts[k]) == len && !strncmp(w, known_parts[k], len);
        if (!known) {
            char names[MAX_OPS * (PART_NAME + 5)] = "";
            size_t n = 0;
            for (int k = 0; k < nknown; k++)
                n += (size_t)snprintf(names + n, sizeof names - n, "%s%s",
                                      k == 0 ? "" : k == nknown - 1 ? " and " : ", ",
                                      known_parts[k]);
            pl_usage_error_all("--parts %.*s: Lab %d judges %s", (int)len, w,
                               atoi(the_lab->dir), names);
        }
        w += len + (w[len] == ',');
    }
}

const struct gr_lab *gr_this_lab(void) { return the_lab; }
const char *gr_handout(void) { return handout; }

/* ---- verdicts ---- */

int gr_agree(int x)
{
    PL_CHECK_MPI(MPI_Bcast(&x, 1, MPI_INT, 0, MPI_COMM_WORLD));
    return x;
}

int gr_todo_any(void)
{
    /* Rank 0 may not have reached the stub another rank did: it learns the name. */
    int mine = pl_todo_what() ? pl_rank() : pl_size(), first;
    PL_CHECK_MPI(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    if (first == pl_size()) return 0;
    if (first != 0) {
        static char what[96], section[16];
        if (pl_rank() == first) {
            snprintf(what, sizeof what, "%s", pl_todo_what());
            snprintf(section, sizeof section, "%s", pl_todo_section() ? pl_todo_section() : "?");
        }
        PL_CHECK_MPI(MPI_Bcast(what, (int)sizeof what, MPI_CHAR, first, MPI_COMM_WORLD));
        PL_CHECK_MPI(MPI_Bcast(section, (int)sizeof section, MPI_CHAR, first, MPI_COMM_WORLD));
        pl_todo_note(what, section);
    }
    return 1;
}

void gr_say_stub(const char *part)
{
    gr_say(part, "still a stub: %s (see %s section %s)", pl_todo_what(), handout,
           pl_todo_section());
}

/* ---- check mode ---- */

/* Partial credit of the parts of this run (gr_partial), 1 unless a lab said less. */
static char part_name[MAX_PARTS][PART_NAME];
static double part_frac[MAX_PARTS];
static int nparts_known;

void gr_partial(const char *part, double fraction)
{
    for (int p = 0; p < nparts_known; p++)
        if (!strcmp(part_name[p], part) && fraction < part_frac[p]) part_frac[p] = fraction;
}

/* The parts asked for, "correct" first whether asked or not: nothing else is judged on a
 * wrong result. A name too long, or more parts than the table holds, is refused, never cut
 * short: a cut name would be judged as no part at all. */
static int split_parts(const char *list, char parts[MAX_PARTS][PART_NAME])
{
    int n = 1;
    snprintf(parts[0], PART_NAME, "correct");
    for (const char *w = list; *w;) {
        size_t len = strcspn(w, ",");
        if (len >= PART_NAME)
            pl_usage_error_all("--parts: '%.*s' is not a part (a part's name has at most %d "
                               "characters)", (int)len, w, PART_NAME - 1);
        if (len && !(len == strlen("correct") && !strncmp(w, "correct", len))) {
            if (n == MAX_PARTS)
                pl_usage_error_all("--parts %s: at most %d parts besides correct", list,
                                   MAX_PARTS - 1);
            memcpy(parts[n], w, len);
            parts[n++][len] = '\0';
        }
        w += len + (w[len] == ',');
    }
    return n;
}

/* Runs and judges case i: returns 0 when its result is wrong (the loop stops). */
static int check_case(const struct gr_driver *d, void *st, int i, int nparts,
                      char parts[MAX_PARTS][PART_NAME], int *ok)
{
    char what[1024];
    d->describe(st, i, what, sizeof what);
    gr_case("%s", what);
    pl_todo_reset();
    d->run(st, i);
    if (gr_todo_any()) {
        gr_say_stub("correct");
        return 0;
    }
    if (!gr_agree(d->judge(st, i, "correct"))) return 0;
    for (int p = 1; p < nparts; p++)
        if (ok[p] && !gr_agree(d->judge(st, i, parts[p]))) ok[p] = 0;
    return 1;
}

/* ---- check mode, the new shape: observe, gather once, judge on rank 0 ---- */

/* Says the judge's lines for part and applies its fraction (rank 0). */
static void emit_why(const char *part, const struct gr_why *w)
{
    for (int k = 0; k < w->n; k++) gr_say(part, "%s", w->line[k]);
    if (w->fraction < 1) gr_partial(part, w->fraction);
}

/* The record file of --record, opened by rank 0 (NULL elsewhere or without it). */
static FILE *record_open(const char *path)
{
    if (!path || pl_rank() != 0) return NULL;
    FILE *f = fopen(path, "wb");
    if (!f) pl_usage_error("--record %s: cannot write it (does the folder exist?)", path);
    return f;
}

/* Runs case i, gathers every rank's observation to rank 0 and judges it there; returns 0
 * when its result is wrong (the loop stops). */
static int observe_case(const struct gr_driver *d, void *st, int i, int ncases, int nparts,
                        char parts[MAX_PARTS][PART_NAME], int *ok, FILE *record,
                        const char *op)
{
    char what[1024];
    d->describe(st, i, what, sizeof what);
    gr_case("%s", what);
    size_t size = d->obs_size(st, i);
    unsigned char *mine = calloc(1, size ? size : 1);
    unsigned char *all = pl_rank() == 0 ? calloc((size_t)pl_size(), size ? size : 1) : NULL;
    if (!mine || (pl_rank() == 0 && !all)) pl_fatal("out of memory for %zu bytes of observations", size);
    pl_todo_reset();
    d->observe(st, i, mine);
    int right = 0;
    if (gr_todo_any()) {
        gr_say_stub("correct");
    } else {
        if (size > (size_t)0x7fffffff) pl_fatal("an observation of %zu bytes is too large to gather", size);
        PL_CHECK_MPI(MPI_Gather(mine, (int)size, MPI_BYTE, all, (int)size, MPI_BYTE, 0,
                                MPI_COMM_WORLD));
        struct gr_obs obs = {pl_size(), size, all};
        if (record && gr_record_write(record, the_lab->dir, op, i, ncases, &obs) != 0)
            pl_fatal("--record: could not write case %d", i);
        struct gr_why why;
        int v = 0;
        if (pl_rank() == 0) {
            gr_why_init(&why);
            v = d->judge_obs(st, i, "correct", &obs, &why);
            emit_why("correct", &why);
        }
        right = gr_agree(v);
        for (int p = 1; right && p < nparts; p++) {
            if (!ok[p]) continue;
            if (pl_rank() == 0) {
                gr_why_init(&why);
                v = d->judge_obs(st, i, parts[p], &obs, &why);
                emit_why(parts[p], &why);
            }
            if (!gr_agree(v)) ok[p] = 0;
        }
    }
    free(mine);
    free(all);
    return right;
}

static void check_mode(const struct gr_driver *d, void *st, const struct gr_args *a)
{
    char parts[MAX_PARTS][PART_NAME];
    int nparts = split_parts(a->parts, parts), ok[MAX_PARTS];
    for (int p = 0; p < nparts; p++) {
        ok[p] = 1;
        memcpy(part_name[p], parts[p], sizeof part_name[p]);
        part_frac[p] = 1;
    }
    nparts_known = nparts;
    double t0 = pl_clock();
    int n = d->ncases(st);
    if (d->observe) {
        FILE *record = record_open(a->record);
        for (int i = 0; i < n && ok[0]; i++)
            ok[0] = observe_case(d, st, i, n, nparts, parts, ok, record, a->op);
        if (record && fclose(record) != 0) pl_fatal("--record %s: could not write it", a->record);
    } else {
        for (int i = 0; i < n && ok[0]; i++) ok[0] = check_case(d, st, i, nparts, parts, ok);
    }
    double secs = pl_clock() - t0;
    gr_result("correct", ok[0], secs);
    for (int p = 1; p < nparts; p++) {
        if (!ok[0]) gr_say(parts[p], "not graded: %s %s", d->subject(st), d->correct_first);
        gr_result(parts[p], ok[0] && ok[p] ? part_frac[p] : 0, secs);
    }
}

/* ---- perf mode ---- */

static void perf_mode(const struct gr_driver *d, void *st)
{
    double t0 = pl_clock();
    pl_todo_reset();
    int ok = d->probe(st);
    if (gr_todo_any()) {
        gr_say_stub("perf");
        gr_result("perf", 0, 0);
        return;
    }
    if (!gr_agree(ok)) {
        gr_result("perf", 0, 0);
        return;
    }
    double fraction = d->perf(st);
    gr_result("perf", fraction, pl_clock() - t0);
}

/* ---- main ---- */

static struct gr_args args = {.mode = "check", .parts = "correct", .label = "yours", .seed = 1};

static struct pl_flag harness_flags[] = {
    {"--op", PL_FLAG_STR, &args.op, "OP", "what to grade (the plan's ops; default none)", 0},
    {"--mode", PL_FLAG_STR, &args.mode, "MODE", "check, perf or bench", 0},
    {"--parts", PL_FLAG_STR, &args.parts, "LIST", "check: the parts to judge, comma-separated", 0},
    {"--seed", PL_FLAG_U64, &args.seed, "S", "the grading seed", 0},
    {"--label", PL_FLAG_STR, &args.label, "NAME", "bench: whose code, for the title", 0},
    {"--figures", PL_FLAG_SWITCH, &args.figures, "", "bench: only the handout's figures, no "
     "wall-clock timing", 0},
    {"--record", PL_FLAG_STR, &args.record, "FILE", "check: write every case's gathered "
     "observations to FILE (a lab on the harness's new shape; for its judge tests)", 0},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: driver --op OP --mode check|perf|bench [flags]\n\n"
               "The trusted driver of %s: it runs the lab's code and reports verdicts to\n"
               "`make grade` (docs/grader.md). Ops: ", the_lab ? the_lab->dir : "a lab");
    for (int i = 0; i < nops; i++) fprintf(f, "%s%s", i ? ", " : "", ops[i]);
    fprintf(f, "\n\n");
}

static void parse(int argc, char **argv, const struct gr_driver *d)
{
    static const struct pl_flags_program prog = {"driver", usage, 1};
    /* the lab's options, parsed into args.opt (the table's ptr is ignored) */
    struct pl_flag options[GR_MAX_OPTS];
    int nopt = d->options ? d->noptions : 0;
    if (nopt > GR_MAX_OPTS) pl_fatal("the driver has %d options, at most %d", nopt, GR_MAX_OPTS);
    for (int k = 0; k < nopt; k++) {
        options[k] = d->options[k];
        options[k].ptr = &args.opt[k];
        options[k].set = 0;
    }
    struct pl_flag *tables[3] = {harness_flags};
    int n[3] = {(int)(sizeof harness_flags / sizeof harness_flags[0])}, ntables = 1;
    if (d->flags) {
        tables[ntables] = d->flags;
        n[ntables++] = d->nflags;
    }
    if (nopt) {
        tables[ntables] = options;
        n[ntables++] = nopt;
    }
    pl_flags_parse(&prog, (struct pl_flag *const *)tables, n, ntables, argc, argv);
    for (int k = 0; k < nopt; k++) args.given[k] = options[k].set;
    const char *m = args.mode;
    if (strcmp(m, "check") && strcmp(m, "perf") && strcmp(m, "bench"))
        pl_usage_error_all("--mode %s: choose check, perf or bench", m);
    if (!args.op && strcmp(m, "bench")) pl_usage_error_all("--mode %s needs --op", m);
    int known = !args.op;
    for (int i = 0; i < nops && !known; i++) known = !strcmp(ops[i], args.op);
    if (!known) {
        char list[MAX_OPS * 34] = "";
        for (int i = 0; i < nops; i++) {
            size_t l = strlen(list);
            snprintf(list + l, sizeof list - l, "%s%s", i ? ", " : "", ops[i]);
        }
        pl_usage_error_all("--op %s is not an op of %s (choose %s)", args.op, the_lab->dir, list);
    }
    if (args.record && strcmp(m, "check"))
        pl_usage_error_all("--record %s: only a check run records observations", args.record);
    if (args.record && !d->observe)
        pl_usage_error_all("--record %s: %s does not gather observations (the harness's new "
                           "shape, harness.h)", args.record, the_lab->dir);
    if ((!strcmp(m, "bench") && !d->bench) || (!strcmp(m, "perf") && !d->perf))
        pl_usage_error_all("--mode %s: %s has none", m, the_lab->dir);
}

/* The value of flag name in argv ("--op x" or "--op=x"), or NULL. */
static const char *early_flag(int argc, char **argv, const char *name)
{
    size_t n = strlen(name);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], name) && i + 1 < argc) return argv[i + 1];
        if (!strncmp(argv[i], name, n) && argv[i][n] == '=') return argv[i] + n + 1;
    }
    return NULL;
}

/* The lab's settings for the library's start (its virtual cluster, for pl_init to read from
 * the environment): the flags are parsed after the library starts, and the library needs
 * the topology to start. */
static void virtual_topology(const struct gr_driver *d, int argc, char **argv)
{
    if (!d->before_init) return;
    const char *mode = early_flag(argc, argv, "--mode");
    int nodes = 0, per_node = 0;
    d->before_init(early_flag(argc, argv, "--op"), mode ? mode : "check", &nodes, &per_node);
    if ((nodes <= 0 && per_node <= 0) || getenv("PL_NODES") || getenv("PL_GPUS_PER_NODE"))
        return;
    char v[16];
    if (nodes > 0) {
        snprintf(v, sizeof v, "%d", nodes);
        setenv("PL_NODES", v, 0);
    }
    if (per_node > 0) {
        snprintf(v, sizeof v, "%d", per_node);
        setenv("PL_GPUS_PER_NODE", v, 0);
    }
}

int main(int argc, char **argv)
{
    const struct gr_driver *d = &gr_lab_driver;
    gr_report_take_env();
    virtual_topology(d, argc, argv);
    pl_init(&argc, &argv);
    if (!the_lab) pl_fatal("the driver was linked without its lab's plan.c");
    /* The lab's whole plan, the hidden suite's included, names every op. */
    struct gr_plan_opts all = {.perf_np = 4, .hidden = 1};
    the_lab->plan(&all);
    snprintf(handout, sizeof handout, "docs/labs/%s.md", the_lab->dir);
    pl_todo_set_handout(handout);
    parse(argc, argv, d);
    gr_report_open(&args.seed);
    /* The lab's rank counts, refused before its setup in the words the orchestrator skips
     * them with. */
    char why[256];
    if (!gr_lab_runs_on(the_lab, pl_size(), why, sizeof why)) pl_usage_error_all("%s", why);
    if (!strcmp(args.mode, "check")) check_known_parts(args.parts);
    if (!strcmp(args.mode, "bench")) {
        d->bench(&args);
    } else {
        void *st = d->setup(&args);
        if (!strcmp(args.mode, "check")) check_mode(d, st, &args);
        else perf_mode(d, st);
        if (d->finish) d->finish(st);
    }
    gr_report_close();
    pl_finalize();
    return 0;
}
