/* report.c: the report channel of report.h (the verdict lines the orchestrator reads) and
 * the timing protocol of performance tests. */
#include "report.h"
#include "verdict.h"

#include <fcntl.h>
#include <math.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "comm.h"
#include "ops.h"
#include "runtime.h"

/* ---- the report channel ---- */

/* The token is kept sealed (XOR with a random key of the same length) and unsealed only on
 * the stack of emit(), wiped before it returns: a scan of the process's memory for the
 * token, or for a string shaped like one, finds neither. It is read with read(2) into the
 * stack, never through stdio (whose buffers are freed, not wiped). */
#define TOKEN_MAX 80
static unsigned char token_key[TOKEN_MAX], token_sealed[TOKEN_MAX];
static size_t token_len; /* 0: no channel was named: lines go to stdout */
static int report_fd = -1;
static char report_path[4096], token_path[4096];

/* Copies a variable's value and overwrites it in place before removing it: the strings of
 * the initial environment are what /proc/PID/environ shows, and unsetenv alone leaves them. */
static void take_var(const char *name, char *out, size_t len)
{
    char *v = getenv(name);
    snprintf(out, len, "%s", v ? v : "");
    if (v) memset(v, 'x', strlen(v));
    unsetenv(name);
}

void gr_report_take_env(void)
{
    take_var("PL_GRADE_REPORT", report_path, sizeof report_path);
    take_var("PL_GRADE_TOKEN_FILE", token_path, sizeof token_path);
}

/* The orchestrator writes the token file only once rank 0 has created TOKEN.ready, here in
 * main, after every constructor of the code under test has run: code that runs before main
 * finds no token (grader/sandbox/sandbox.h). */
static void await_token_file(void)
{
    char ready[4200];
    snprintf(ready, sizeof ready, "%s.ready", token_path);
    int fd = open(ready, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) pl_fatal("cannot tell the grader that main started (%s)", ready);
    close(fd);
    for (int waited_ms = 0; access(token_path, R_OK) != 0 && waited_ms < 30000; waited_ms += 5)
        usleep(5000);
}

/* Reads "TOKEN SEED" from the token file, removes it, seals the token; returns the seed. */
static unsigned long long take_token(void)
{
    char line[160] = "";
    int fd = open(token_path, O_RDONLY);
    ssize_t n = fd >= 0 ? read(fd, line, sizeof line - 1) : -1;
    if (fd >= 0) close(fd);
    unlink(token_path);
    char *space = n > 0 ? memchr(line, ' ', (size_t)n) : NULL;
    if (!space || space == line || space - line >= TOKEN_MAX)
        pl_fatal("cannot read the grader's token file %s", token_path);
    token_len = (size_t)(space - line);
    unsigned long long seed = strtoull(space + 1, NULL, 10);
    int rnd = open("/dev/urandom", O_RDONLY);
    if (rnd < 0 || read(rnd, token_key, token_len) != (ssize_t)token_len)
        pl_fatal("cannot read /dev/urandom to keep the grader's token");
    close(rnd);
    for (size_t i = 0; i < token_len; i++) token_sealed[i] = (unsigned char)line[i] ^ token_key[i];
    explicit_bzero(line, sizeof line);
    return seed;
}

/* The token (and the seed) is in a file only rank 0 reads, removed before any rank goes on:
 * once the broadcast is passed, no code under test can find it on disk or in the
 * environment. */
void gr_report_open(uint64_t *seed)
{
    /* given[0]: a token file was read; given[1]: the seed it carried. */
    unsigned long long given[2] = {0, 0};
    if (pl_rank() == 0 && token_path[0]) {
        await_token_file();
        given[1] = take_token();
        given[0] = 1;
    }
    memset(token_path, 0, sizeof token_path);
    if (report_path[0] && pl_rank() == 0) {
        report_fd = open(report_path, O_WRONLY | O_APPEND | O_CLOEXEC);
        if (report_fd < 0) pl_fatal("cannot open the grader's report channel %s", report_path);
    }
    memset(report_path, 0, sizeof report_path);
    PL_CHECK_MPI(MPI_Bcast(given, 2, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD));
    if (given[0]) *seed = given[1];
}

void gr_report_close(void)
{
    if (report_fd >= 0) close(report_fd);
    report_fd = -1;
}

/* One line "TOKEN word text": control characters become spaces, so a line stays a line; one
 * write of at most PIPE_BUF bytes, so lines never interleave on the channel. */
static void emit(const char *word, const char *text)
{
    if (pl_rank() != 0) return;
    char line[2400];
    size_t k = 0;
    if (report_fd >= 0)
        for (; k < token_len; k++) line[k] = (char)(token_sealed[k] ^ token_key[k]);
    int n = snprintf(line + k, sizeof line - k, "%s%s %.2048s\n", k ? " " : "", word, text);
    size_t len = k + (n > 0 && (size_t)n < sizeof line - k ? (size_t)n : sizeof line - k - 1);
    line[len - 1] = '\n';
    for (size_t i = k; i + 1 < len; i++)
        if ((unsigned char)line[i] < 32) line[i] = ' ';
    int fd = report_fd >= 0 ? report_fd : STDOUT_FILENO;
    if (fd == STDOUT_FILENO) fflush(stdout);
    for (size_t done = 0; done < len;) {
        ssize_t w = write(fd, line + done, len - done);
        if (w <= 0) break;
        done += (size_t)w;
    }
    explicit_bzero(line, k);
}

void gr_case(const char *fmt, ...)
{
    char text[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    emit("case", text);
}

void gr_say(const char *part, const char *fmt, ...)
{
    char text[2048], line[2200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    snprintf(line, sizeof line, "%s %s", part, text);
    emit("say", line);
}

void gr_result(const char *part, double fraction, double seconds)
{
    char line[256];
    snprintf(line, sizeof line, "%s %.4f %.3f", part, fraction, seconds);
    emit("result", line);
}

void gr_metric(const char *name, double value)
{
    char line[256];
    snprintf(line, sizeof line, "%s %.6g", name, value);
    emit("metric", line);
}

const char *gr_fmt_beyond(double x, double limit)
{
    static char ring[4][32];
    static int next;
    return gr_fmt_beyond_into(x, limit, ring[next++ % 4], sizeof ring[0]);
}

int gr_has_part(const char *parts, const char *p)
{
    size_t l = strlen(p);
    for (const char *s = parts; (s = strstr(s, p)); s += l)
        if ((s == parts || s[-1] == ',') && (s[l] == ',' || s[l] == '\0')) return 1;
    return 0;
}

/* ---- performance against a baseline ---- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Linear interpolation between order statistics, so that 4 rounds already give a usable
 * quartile. */
static double quantile(const double *sorted, int n, double q)
{
    double pos = q * (n - 1);
    int i = (int)pos;
    if (i + 1 >= n) return sorted[n - 1];
    return sorted[i] + (pos - i) * (sorted[i + 1] - sorted[i]);
}

double gr_median_spread(double *v, int n, double *spread)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    *spread = (quantile(v, n, 0.75) - quantile(v, n, 0.25)) / 2;
    return quantile(v, n, 0.5);
}

double gr_perf_round(void (*base)(void *), void (*mine)(void *), void *ctx, int reps,
                     int which)
{
    pl_ops_wait(); /* nothing queued before the round is counted in it */
    PL_CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    double t0 = MPI_Wtime();
    for (int r = 0; r < reps; r++) (which ? mine : base)(ctx);
    pl_ops_wait(); /* the GPU build queues ops: the round ends when the device is done */
    double t = (MPI_Wtime() - t0) / reps, tmax;
    PL_CHECK_MPI(MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    return tmax;
}

static double perf_bar = GR_PERF_FULL_RATIO;

double gr_perf_bar(void)
{
    return perf_bar;
}

void gr_perf_set_bar(double bar)
{
    perf_bar = bar;
}

int gr_perf_judged(const char *backend, int per_device, int emulated, char *why, size_t len)
{
    if (emulated) {
        snprintf(why, len, "not judged: the GPU build runs on the CUDA stand-in (backend %s), "
                 "whose devices are host threads; speed is judged on a GPU or on the CPU "
                 "build", backend);
        return 0;
    }
    if (per_device > 1) {
        snprintf(why, len, "not judged: %d ranks share one GPU (backend %s); speed is judged "
                 "with one GPU per rank or on the CPU build", per_device, backend);
        return 0;
    }
    snprintf(why, len, "on backend %s", backend);
    return 1;
}

/* Why this run's speed is not judged ("" when it is), set by gr_perf_compare. */
static char not_judged_why[200];

const char *gr_perf_bar_text(void)
{
    static char text[400];
    char why[200];
    gr_perf_judged(pl_comm_backend(), pl_comm_ranks_per_device(), pl_comm_device_emulated(),
                   why, sizeof why);
    snprintf(text, sizeof text, "full marks from %.2fx %s", gr_perf_bar(),
             not_judged_why[0] ? "where speed is judged" : why);
    return text;
}

void gr_perf_compare(double (*time)(void *ctx, int mine), void *ctx, int rounds, int batches,
                     struct gr_perf *out)
{
    double ratio[GR_PERF_MAX_PAIRS] = {0}, base[GR_PERF_MAX_PAIRS] = {0},
           mine[GR_PERF_MAX_PAIRS] = {0}, tmp[2];
    int n = 0;
    int judged = gr_perf_judged(pl_comm_backend(), pl_comm_ranks_per_device(),
                                pl_comm_device_emulated(), not_judged_why, sizeof not_judged_why);
    if (judged) not_judged_why[0] = '\0';
    time(ctx, 0); /* warm-up: first-touch pages, connection set-up, caches */
    time(ctx, 1);
    double med = 0, spread = 0;
    for (int batch = 0; batch < batches; batch++) {
        for (int r = 0; r < rounds && n < GR_PERF_MAX_PAIRS; r++, n++) {
            int first = n % 2; /* which side goes first alternates */
            tmp[first] = time(ctx, first);
            tmp[!first] = time(ctx, !first);
            base[n] = tmp[0];
            mine[n] = tmp[1];
            ratio[n] = tmp[0] / tmp[1];
        }
        double sorted[GR_PERF_MAX_PAIRS];
        memcpy(sorted, ratio, (size_t)n * sizeof *sorted);
        med = gr_median_spread(sorted, n, &spread);
        /* Decided when the whole noise band lies on one side of the threshold and that side
         * is full marks; a ratio clearly short is measured again too, in case the load
         * came in one burst. */
        if (med - spread >= gr_perf_bar()) break;
        if (n >= GR_PERF_MAX_PAIRS || !judged) break; /* not judged: one batch, for the record */
    }
    /* The verdict is one pair's, a middle one (the one nearer the median, the faster for the
     * code under test on a tie), and the times said beside the ratio are that pair's, so
     * that they read as the ratio does: each side's own median can come from rounds of
     * another load and say "yours slower" beside a ratio above 1, and with an even count
     * the median of the ratios (the mean of the two middle ones) is no pair's at all. */
    int k = 0;
    for (int i = 1; i < n; i++) {
        double d = fabs(ratio[i] - med), dk = fabs(ratio[k] - med);
        if (d < dk || (d == dk && ratio[i] > ratio[k])) k = i;
    }
    med = ratio[k];
    out->best_base = base[k];
    out->best_mine = mine[k];
    out->ratio = med;
    out->spread = spread;
    out->pairs = n;
    double bar = gr_perf_bar();
    out->not_judged = !judged;
    out->undecided = judged && med < bar && med + spread >= bar;
    out->fraction = med >= bar || out->undecided || !judged ? 1.0 : med / bar;
}

const char *gr_perf_how(const struct gr_perf *pf)
{
    static char how[400];
    snprintf(how, sizeof how, "median of %d paired rounds, spread +-%.2f%s%s%s", pf->pairs,
             pf->spread, pf->undecided ? "; within the noise of the bar on this busy machine: "
                                         "not counted against you" : "",
             pf->not_judged ? "; " : "", pf->not_judged ? not_judged_why : "");
    return how;
}

double gr_perf_report_step(const struct gr_perf *pf, double tokens, const char *baseline,
                           const char *hint, const char *metric)
{
    gr_say("perf", "yours %.3f ms per step (%.0f tokens/s), %s %.3f ms per step: %.2fx (%s); "
           "%s", 1e3 * pf->best_mine, tokens / pf->best_mine, baseline,
           1e3 * pf->best_base, pf->ratio, gr_perf_how(pf), gr_perf_bar_text());
    if (pf->fraction < 1) gr_say("perf", "%s", hint);
    gr_metric(metric, tokens / pf->best_mine);
    return pf->fraction;
}

