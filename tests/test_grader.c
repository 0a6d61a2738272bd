/* test_grader: runs the grader (build/<b>/bin/grade) on a set of drivers and checks what it
 * did: the closing "N passed, N failed" line and an exit code that agrees with it, the score,
 * which tests passed or failed and with what reason, and that results.json is valid JSON
 * with the fields Gradescope reads, consistent with the printed summary.
 *
 *   test_grader [--expect-full [--speed-may-vary] | --expect-zero] [--expect-fail TEXT]
 *               [--expect-pass TEXT] [--expect-text TEXT] [--expect-no-text TEXT] [--within S]
 *               -- GRADE-ARGS...
 *   test_grader --perf-judged
 * --expect-fail/--expect-pass name a test (a substring of its name); --expect-text is a
 * substring of the output, --expect-no-text one it must not hold; --within S bounds the
 * grader's wall time.
 *
 * Time scale: the bound (--within) and this program's own limit on the grader (900 s) are
 * multiplied by PL_TEST_TIME_SCALE, which the test harness sets for the build and the
 * parallelism it runs with (tests/harness.c); 1 when unset. A bound set below the grader's
 * own --timeout T (GRADE-ARGS) stays below it once scaled: it is held at 0.9 T, so a test
 * that shows a deadlock is stopped within seconds (--within 20 -- ... --timeout 60) still
 * fails a grader that waits out the whole timeout instead, at any scale.
 *
 * --perf-judged checks the common perf code (grader/common/report.c): the times a speed
 * verdict prints read as its ratio does (gr_perf_compare), and its decision
 * (gr_perf_judged): which placements can judge speed, and what the verdict line says. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launch.h"
#include "report.h"

static int failures;

static void __attribute__((format(printf, 1, 2))) fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("FAIL: ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    failures++;
}

/* ---- a small JSON reader: enough to validate results.json strictly ---- */

enum jtype { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ };

struct jv {
    enum jtype type;
    double num;
    char *str;           /* J_STR */
    int n;               /* J_ARR, J_OBJ */
    char **keys;         /* J_OBJ */
    struct jv **items;   /* J_ARR, J_OBJ */
};

struct jp {
    const char *s;
    const char *err;
    size_t pos;
};

static void ws(struct jp *p)
{
    while (p->s[p->pos] == ' ' || p->s[p->pos] == '\n' || p->s[p->pos] == '\t' ||
           p->s[p->pos] == '\r')
        p->pos++;
}

static struct jv *jnew(enum jtype t)
{
    struct jv *v = calloc(1, sizeof *v);
    v->type = t;
    return v;
}

static char *jstring(struct jp *p)
{
    if (p->s[p->pos] != '"') {
        p->err = "expected a string";
        return NULL;
    }
    p->pos++;
    size_t cap = 64, n = 0;
    char *out = malloc(cap);
    for (;;) {
        unsigned char c = (unsigned char)p->s[p->pos];
        if (c == '\0') {
            p->err = "unterminated string";
            free(out);
            return NULL;
        }
        if (c < 0x20) {
            p->err = "raw control character in a string";
            free(out);
            return NULL;
        }
        p->pos++;
        if (c == '"') break;
        if (c == '\\') {
            char e = p->s[p->pos++];
            if (e == 'u') {
                for (int k = 0; k < 4; k++)
                    if (!strchr("0123456789abcdefABCDEF", p->s[p->pos + k]) || !p->s[p->pos + k]) {
                        p->err = "bad \\u escape";
                        free(out);
                        return NULL;
                    }
                p->pos += 4;
                c = '?';
            } else if (strchr("\"\\/bfnrt", e) && e) {
                c = e == 'n' ? '\n' : e == 't' ? '\t' : (unsigned char)e;
            } else {
                p->err = "bad escape";
                free(out);
                return NULL;
            }
        }
        if (n + 2 > cap) out = realloc(out, cap *= 2);
        out[n++] = (char)c;
    }
    out[n] = '\0';
    return out;
}

static struct jv *jvalue(struct jp *p, int depth)
{
    ws(p);
    if (depth > 32) {
        p->err = "nesting too deep";
        return NULL;
    }
    char c = p->s[p->pos];
    if (c == '{' || c == '[') {
        int obj = c == '{';
        struct jv *v = jnew(obj ? J_OBJ : J_ARR);
        p->pos++;
        ws(p);
        if (p->s[p->pos] == (obj ? '}' : ']')) {
            p->pos++;
            return v;
        }
        for (;;) {
            ws(p);
            char *key = NULL;
            if (obj) {
                key = jstring(p);
                if (!key) return NULL;
                ws(p);
                if (p->s[p->pos++] != ':') {
                    p->err = "expected ':'";
                    return NULL;
                }
            }
            struct jv *item = jvalue(p, depth + 1);
            if (!item) return NULL;
            v->items = realloc(v->items, (size_t)(v->n + 1) * sizeof *v->items);
            v->keys = realloc(v->keys, (size_t)(v->n + 1) * sizeof *v->keys);
            v->items[v->n] = item;
            v->keys[v->n] = key;
            v->n++;
            ws(p);
            char d = p->s[p->pos++];
            if (d == ',') continue;
            if (d == (obj ? '}' : ']')) return v;
            p->err = obj ? "expected ',' or '}'" : "expected ',' or ']'";
            return NULL;
        }
    }
    if (c == '"') {
        struct jv *v = jnew(J_STR);
        v->str = jstring(p);
        return v->str ? v : NULL;
    }
    if (!strncmp(p->s + p->pos, "true", 4) || !strncmp(p->s + p->pos, "false", 5)) {
        p->pos += c == 't' ? 4 : 5;
        return jnew(J_BOOL);
    }
    if (!strncmp(p->s + p->pos, "null", 4)) {
        p->pos += 4;
        return jnew(J_NULL);
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        char *end;
        struct jv *v = jnew(J_NUM);
        v->num = strtod(p->s + p->pos, &end);
        p->pos = (size_t)(end - p->s);
        if (!isfinite(v->num)) {
            p->err = "number out of range";
            return NULL;
        }
        return v;
    }
    p->err = "unexpected character";
    return NULL;
}

static const struct jv *jget(const struct jv *o, const char *key)
{
    if (!o || o->type != J_OBJ) return NULL;
    for (int i = 0; i < o->n; i++)
        if (!strcmp(o->keys[i], key)) return o->items[i];
    return NULL;
}

static int one_of(const char *s, const char *const *set)
{
    for (int i = 0; set[i]; i++)
        if (!strcmp(s, set[i])) return 1;
    return 0;
}

/* Gradescope's fields, and their agreement with the printed summary. */
static void validate_results(const char *path, double score, int passed, int failed)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fail("results file %s was not written", path);
        return;
    }
    static char buf[8 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    struct jp p = {buf, NULL, 0};
    struct jv *root = jvalue(&p, 0);
    if (root) {
        ws(&p);
        if (buf[p.pos]) p.err = "text after the top-level value";
    }
    if (!root || p.err) {
        fail("%s is not valid JSON: %s at byte %zu", path, p.err ? p.err : "?", p.pos);
        return;
    }
    if (root->type != J_OBJ) {
        fail("results.json: the top level must be an object");
        return;
    }
    /* The top-level score is the total, except with hidden tests, whose outcome it would
     * show before publication: then it must be absent and Gradescope totals tests[]. */
    const struct jv *s = jget(root, "score"), *et = jget(root, "execution_time");
    const struct jv *tests = jget(root, "tests"), *summary = jget(root, "output");
    if (!et || et->type != J_NUM || et->num < 0)
        fail("results.json: \"execution_time\" missing or not a non-negative number");
    if (!tests || tests->type != J_ARR) {
        fail("results.json: \"tests\" missing or not an array");
        return;
    }
    static const char *const statuses[] = {"passed", "failed", NULL};
    static const char *const tags[] = {"correctness", "memory", "performance", "placement",
                                       "questions", "hidden", NULL};
    static const char *const vis[] = {"visible", "hidden", "after_due_date", "after_published",
                                      NULL};
    double sum = 0, vis_sum = 0, vis_max = 0;
    int np = 0, nf = 0, vis_np = 0, vis_nf = 0;
    for (int i = 0; i < tests->n; i++) {
        const struct jv *t = tests->items[i];
        const struct jv *name = jget(t, "name"), *sc = jget(t, "score"),
                        *mx = jget(t, "max_score"), *st = jget(t, "status"),
                        *out = jget(t, "output"), *tg = jget(t, "tags"),
                        *vi = jget(t, "visibility");
        const char *nm = name && name->type == J_STR ? name->str : "?";
        if (!name || name->type != J_STR) fail("results.json: test %d has no string name", i);
        if (!sc || sc->type != J_NUM || !mx || mx->type != J_NUM) {
            fail("results.json: test '%s' lacks a numeric score or max_score", nm);
            continue;
        }
        if (sc->num < 0 || sc->num > mx->num + 1e-9)
            fail("results.json: test '%s' scores %g of %g", nm, sc->num, mx->num);
        sum += sc->num;
        if (!st || st->type != J_STR || !one_of(st->str, statuses)) {
            fail("results.json: test '%s' status must be \"passed\" or \"failed\"", nm);
        } else {
            if (!strcmp(st->str, "passed")) np++;
            else nf++;
            if (!strcmp(st->str, "passed") && fabs(sc->num - mx->num) > 1e-6)
                fail("results.json: test '%s' passed with %g of %g points", nm, sc->num,
                     mx->num);
        }
        if (!out || out->type != J_STR) fail("results.json: test '%s' output is not a string", nm);
        if (!tg || tg->type != J_ARR || tg->n < 1) {
            fail("results.json: test '%s' has no tags array", nm);
        } else {
            for (int k = 0; k < tg->n; k++)
                if (tg->items[k]->type != J_STR || !one_of(tg->items[k]->str, tags))
                    fail("results.json: test '%s' has a tag outside correctness, memory, "
                         "performance, placement, questions, hidden", nm);
        }
        if (!vi || vi->type != J_STR || !one_of(vi->str, vis))
            fail("results.json: test '%s' visibility is not one Gradescope knows", nm);
        else if (!strcmp(vi->str, "visible")) {
            vis_sum += sc->num;
            vis_max += mx->num;
            if (st && st->type == J_STR && !strcmp(st->str, "passed")) vis_np++;
            else vis_nf++;
        }
    }
    if (fabs(sum - score) > 1e-2)
        fail("results.json: the tests' scores add up to %g, but the grader printed Score: %g",
             sum, score);
    int any_hidden = tests->n > 0 && vis_np + vis_nf < tests->n;
    if (any_hidden && s)
        fail("results.json: a top-level \"score\" would reveal the hidden tests' results");
    if (!any_hidden && (!s || s->type != J_NUM || fabs(s->num - sum) > 1e-2))
        fail("results.json: without hidden tests the top-level \"score\" must be the total %g",
             sum);
    /* The summary Gradescope shows at once counts the visible tests only. */
    double got_sum = -1, got_max = -1;
    int got_np = -1, got_nf = -1;
    if (!summary || summary->type != J_STR ||
        sscanf(summary->str, "Visible tests: %lf/%lf points, %d passed, %d failed", &got_sum,
               &got_max, &got_np, &got_nf) != 4)
        fail("results.json: \"output\" should begin \"Visible tests: S/M points, N passed, N "
             "failed\"");
    else if (fabs(got_sum - vis_sum) > 1e-2 || fabs(got_max - vis_max) > 1e-2 ||
             got_np != vis_np || got_nf != vis_nf)
        fail("results.json: \"output\" says %g/%g points, %d passed, %d failed; the visible "
             "tests hold %g/%g, %d passed, %d failed", got_sum, got_max, got_np, got_nf,
             vis_sum, vis_max, vis_np, vis_nf);
    if (np != passed || nf != failed)
        fail("results.json: %d passed and %d failed tests, but the grader printed %d passed, "
             "%d failed", np, nf, passed, failed);
    const struct jv *lb = jget(root, "leaderboard");
    if (lb) {
        if (lb->type != J_ARR) fail("results.json: leaderboard must be an array");
        else
            for (int i = 0; i < lb->n; i++) {
                const struct jv *e = lb->items[i], *nm = jget(e, "name"), *v = jget(e, "value");
                if (!nm || nm->type != J_STR || !v || v->type != J_NUM)
                    fail("results.json: leaderboard entry %d needs a name and a number value",
                         i);
            }
    }
}

/* ---- the run ---- */

/* The line "== lab: NAME == OK|FAIL|COLLECTED" of the test whose name contains text, or NULL. */
static const char *find_test_line(const char *out, const char *text, char *verdict, size_t len)
{
    for (const char *p = out; p && *p;) {
        const char *nl = strchr(p, '\n');
        size_t l = nl ? (size_t)(nl - p) : strlen(p);
        if (!strncmp(p, "== ", 3)) {
            char line[600];
            snprintf(line, sizeof line, "%.*s", (int)(l < 599 ? l : 599), p);
            char *mid = strstr(line + 3, " == ");
            if (mid) {
                *mid = '\0';
                if (strstr(line, text)) {
                    snprintf(verdict, len, "%s", mid + 4);
                    return p;
                }
            }
        }
        p = nl ? nl + 1 : NULL;
    }
    return NULL;
}

/* FAIL lines whose reason is only a measured speed ratio below the bar ("...: 0.61x (median
 * of 30 paired rounds, spread +-0.05); full marks from 0.70x"): on a shared machine
 * wall-clock ratios vary, and the project's tests never depend on speed, so --speed-may-vary
 * lets those pass --expect-full. */
static int count_speed_shortfalls(const char *out)
{
    int n = 0;
    for (const char *p = strstr(out, "== "); p; p = strstr(p + 1, "\n== ")) {
        const char *eol = strchr(p + 1, '\n');
        if (!eol) break;
        const char *verdict = strstr(p, " == FAIL");
        if (!verdict || verdict > eol) continue;
        const char *next = strchr(eol + 1, '\n');
        /* A partial score prints "N of M points" before the reason: read the line after. */
        if (next && strstr(eol + 1, " points\n") == next - 7) {
            eol = next;
            next = strchr(eol + 1, '\n');
        }
        size_t l = next ? (size_t)(next - eol - 1) : strlen(eol + 1);
        char reason[600];
        snprintf(reason, sizeof reason, "%.*s", (int)(l < 599 ? l : 599), eol + 1);
        if ((strstr(reason, "x; full marks from ") || strstr(reason, " paired rounds, spread")) &&
            !strstr(reason, "wrong") &&
            !strstr(reason, "crash"))
            n++;
    }
    return n;
}

/* One placement's decision: judged or not, and the text the verdict line carries. */
static void check_judged(const char *backend, int per_device, int want, const char *want_why)
{
    char why[200];
    int got = gr_perf_judged(backend, per_device, 0, why, sizeof why);
    if (got != want)
        fail("gr_perf_judged(%s, %d ranks per GPU) = %d, expected %d (%s)", backend, per_device,
             got, want, why);
    else if (strcmp(why, want_why))
        fail("gr_perf_judged(%s, %d): says '%s', expected '%s'", backend, per_device, why,
             want_why);
    else
        printf("ok: %s, %d rank(s) per GPU: %s\n", backend, per_device, why);
}

/* Scripted times for gr_perf_compare: call k of a side (k = 0 the warm-up) takes
 * PAIR_BASE[k] or PAIR_MINE[k]. */
static const double PAIR_BASE[] = {1, 13, 2, 13, 2, 3}, PAIR_MINE[] = {1, 8, 5, 5, 3, 1};
/* Four rounds whose ratios are 0.8, 1.2, 0.8 and 1.2: the median of the ratios, 1.0, is no
 * pair's. */
static const double EVEN_BASE[] = {1, 4, 6, 4, 6}, EVEN_MINE[] = {1, 5, 5, 5, 5};

static double scripted_time(void *ctx, int mine)
{
    int *calls = ctx;
    int k = calls[mine]++;
    return mine ? PAIR_MINE[k] : PAIR_BASE[k];
}

static double scripted_even(void *ctx, int mine)
{
    int *calls = ctx;
    int k = calls[mine]++;
    return mine ? EVEN_MINE[k] : EVEN_BASE[k];
}

/* The times a speed verdict prints beside its ratio read as the ratio does. Rounds whose
 * ratios base/mine are 1.625, 0.4, 2.6, 0.67 and 3 have the median ratio 1.625 ("yours
 * faster"), while each side's own median (3 and 5) says "yours slower": the verdict shows
 * the pair nearest the median ratio, 13 against 8. Stops a message that puts one side's
 * median beside the other's and contradicts its own ratio. */
static void perf_pair_checks(void)
{
    int calls[2] = {0, 0};
    struct gr_perf pf;
    gr_perf_compare(scripted_time, calls, 5, 1, &pf);
    if (fabs(pf.ratio - 1.625) > 1e-9 || pf.pairs != 5)
        fail("gr_perf_compare: median ratio %g over %d pairs, expected 1.625 over 5", pf.ratio,
             pf.pairs);
    if (pf.best_base != 13 || pf.best_mine != 8)
        fail("gr_perf_compare: shows base %g and yours %g beside the ratio %.3f, expected the "
             "pair 13 and 8 (each side's own median, 3 and 5, contradicts the ratio)",
             pf.best_base, pf.best_mine, pf.ratio);
    /* An even count: the verdict is a middle pair's, the faster for the code under test on a
     * tie, never the mean of two (a student read 1.00x beside a pair that said 1.19x). */
    calls[0] = calls[1] = 0;
    gr_perf_compare(scripted_even, calls, 4, 1, &pf);
    if (pf.pairs != 4 || fabs(pf.ratio - 1.2) > 1e-9 || pf.best_base != 6 || pf.best_mine != 5)
        fail("gr_perf_compare: 4 pairs of ratios 0.8 and 1.2 gave the verdict %.3f beside base "
             "%g and yours %g, expected 1.2 beside the pair 6 and 5", pf.ratio, pf.best_base,
             pf.best_mine);
}

/* Wall-clock speed is judged on the CPU build (no device: 0 ranks per GPU) and on one GPU
 * per rank; ranks that share a GPU (which the comm layer runs as mpi-staged) are not. */
static int perf_judged_checks(void)
{
    perf_pair_checks();
    char shared[200];
    check_judged("mpi", 0, 1, "on backend mpi");
    check_judged("mpi-staged", 0, 1, "on backend mpi-staged"); /* CPU build, forced staging */
    check_judged("nccl", 1, 1, "on backend nccl");
    check_judged("mpi-staged", 1, 1, "on backend mpi-staged"); /* own GPUs, forced staging */
    for (int per = 2; per <= 8; per *= 2) {
        snprintf(shared, sizeof shared, "not judged: %d ranks share one GPU (backend "
                 "mpi-staged); speed is judged with one GPU per rank or on the CPU build", per);
        check_judged("mpi-staged", per, 0, shared);
    }
    /* The stand-in's devices are host threads: never judged, whatever the placement. */
    char emu[200];
    for (int per = 1; per <= 2; per++)
        if (gr_perf_judged(per == 1 ? "nccl" : "mpi-staged", per, 1, emu, sizeof emu) != 0 ||
            !strstr(emu, "not judged: the GPU build runs on the CUDA stand-in"))
            fail("on the stand-in with %d rank(s) per device: judged, or says '%s'", per, emu);
    char tiny[8];
    if (gr_perf_judged("mpi-staged", 3, 0, tiny, sizeof tiny) != 0 ||
        strlen(tiny) != sizeof tiny - 1)
        fail("a short buffer gets a cut reason, '%s'", tiny);
    if (failures) printf("%d check(s) failed\n", failures);
    else printf("all checks passed\n");
    return failures ? 1 : 0;
}

/* PL_TEST_TIME_SCALE (tests/harness.c): 1 when unset; a number from 1 to 100 otherwise. */
static double time_scale(void)
{
    const char *v = getenv("PL_TEST_TIME_SCALE");
    if (!v || !*v) return 1;
    char *end = NULL;
    double s = strtod(v, &end);
    if (*end || !(s >= 1 && s <= 100)) {
        fprintf(stderr, "test_grader: PL_TEST_TIME_SCALE=%s: expected a number from 1 to 100 "
                        "(the factor on time bounds; 1 for a serial run of the CPU build)\n", v);
        exit(2);
    }
    return s;
}

int main(int argc, char **argv)
{
    int sep = -1;
    double within = 0;
    if (argc == 2 && !strcmp(argv[1], "--perf-judged")) return perf_judged_checks();
    double scale = time_scale();
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--")) {
            sep = i;
            break;
        }
    if (sep < 0) {
        fprintf(stderr, "usage: test_grader [--expect-full|--expect-zero] [--expect-fail T] "
                        "[--expect-pass T] [--expect-text T] [--expect-no-text T] [--within S] "
                        "-- GRADE-ARGS...\n"
                        "       test_grader --perf-judged\n");
        return 2;
    }

    /* build/<b>/tests/test_grader -> build/<b>/bin/grade */
    char grade[4096], results[64];
    ssize_t n = readlink("/proc/self/exe", grade, sizeof grade - 32);
    if (n <= 0) return 2;
    grade[n] = '\0';
    char *slash = strrchr(grade, '/');
    *slash = '\0';
    slash = strrchr(grade, '/');
    snprintf(slash, sizeof grade - (size_t)(slash - grade), "/bin/grade");
    snprintf(results, sizeof results, "/tmp/pl-test-grader-%d.json", (int)getpid());

    char *gargv[128];
    int g = 0;
    gargv[g++] = grade;
    for (int i = sep + 1; i < argc && g < 120; i++) gargv[g++] = argv[i];
    gargv[g++] = "--results";
    gargv[g++] = results;
    gargv[g] = NULL;

    struct pl_launch_opts o = {.np = 0, .timeout_s = 900 * scale};
    double grade_timeout = 0; /* the grader's own --timeout, when given */
    for (int i = sep + 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--timeout")) grade_timeout = atof(argv[i + 1]);
    struct pl_launch_result r;
    unlink(results);
    if (pl_launch(&o, gargv, &r) != 0) {
        printf("FAIL: could not run %s: %s\n", grade, r.output);
        return 1;
    }
    const char *out = r.output ? r.output : "";
    printf("%s", out);
    printf("---- checks (grader exit code %d, %.1f s)\n", r.exit_code, r.seconds);
    if (r.timed_out) fail("the grader did not finish within %.0f s", o.timeout_s);

    /* The closing line, exactly. */
    size_t len = strlen(out);
    while (len && out[len - 1] == '\n') len--;
    const char *last = out + len;
    while (last > out && last[-1] != '\n') last--;
    int passed = -1, failed = -1, used = 0;
    char tail[128];
    snprintf(tail, sizeof tail, "%.*s", (int)(out + len - last), last);
    if (sscanf(tail, "%d passed, %d failed%n", &passed, &failed, &used) != 2 ||
        (size_t)used != strlen(tail))
        fail("the last line is '%s', not 'N passed, N failed'", tail);
    else if ((failed > 0) != (r.exit_code != 0))
        fail("%d failed but the grader's exit code is %d", failed, r.exit_code);

    double score = -1, max = -1;
    const char *sl = strstr(out, "\nScore: ");
    if (!sl || sscanf(sl, "\nScore: %lf/%lf", &score, &max) != 2) fail("no 'Score: T/P' line");

    int speed_may_vary = 0;
    for (int i = 1; i < sep; i++)
        if (!strcmp(argv[i], "--speed-may-vary")) speed_may_vary = 1;
    for (int i = 1; i < sep; i++) {
        const char *a = argv[i], *v = i + 1 < sep ? argv[i + 1] : NULL;
        char verdict[64];
        if (!strcmp(a, "--expect-full")) {
            int slow = speed_may_vary ? count_speed_shortfalls(out) : 0;
            if (!(max > 0 && failed == slow && (score == max || slow > 0)))
                fail("expected full marks, got Score: %g/%g with %d failed", score, max, failed);
            else if (slow)
                printf("note: %d performance test(s) measured short of the bar on this machine "
                       "at this moment; speed is not what this test checks\n", slow);
        } else if (!strcmp(a, "--speed-may-vary")) {
            /* read before the loop */
        } else if (!strcmp(a, "--expect-zero")) {
            if (!(score == 0 && max > 0 && passed == 0))
                fail("expected a score of 0, got Score: %g/%g with %d passed", score, max,
                     passed);
        } else if (!strcmp(a, "--expect-fail") && v) {
            i++;
            if (!find_test_line(out, v, verdict, sizeof verdict))
                fail("no test named like '%s' was graded", v);
            else if (strncmp(verdict, "FAIL", 4))
                fail("test '%s' should FAIL, it says %s", v, verdict);
        } else if (!strcmp(a, "--expect-pass") && v) {
            i++;
            if (!find_test_line(out, v, verdict, sizeof verdict))
                fail("no test named like '%s' was graded", v);
            else if (strncmp(verdict, "OK", 2) && strncmp(verdict, "COLLECTED", 9))
                fail("test '%s' should be OK (or COLLECTED, free text), it says %s", v, verdict);
        } else if (!strcmp(a, "--expect-text") && v) {
            i++;
            if (!strstr(out, v)) fail("the output does not say '%s'", v);
        } else if (!strcmp(a, "--expect-no-text") && v) {
            i++;
            if (strstr(out, v)) fail("the output says '%s', which it must not", v);
        } else if (!strcmp(a, "--within") && v) {
            i++;
            within = atof(v);
        } else {
            fprintf(stderr, "test_grader: unknown argument '%s'\n", a);
            return 2;
        }
    }
    if (within > 0) {
        double bound = within * scale;
        if (within < grade_timeout && bound > 0.9 * grade_timeout) bound = 0.9 * grade_timeout;
        if (r.seconds > bound)
            fail("the grader took %.1f s, more than the %.0f s allowed (--within %g at time "
                 "scale %g%s)", r.seconds, bound, within, scale,
                 bound < within * scale ? ", held below the grader's --timeout" : "");
    }
    if (passed >= 0) validate_results(results, score, passed, failed);
    unlink(results);
    pl_launch_result_free(&r);
    if (failures) {
        printf("%d check(s) failed\n", failures);
        return 1;
    }
    printf("all checks passed\n");
    return 0;
}
