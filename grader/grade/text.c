/* text.c: the orchestrator's growable text, and the files of a run: a random token, a
 * folder removed whole, a file read whole; then what a run's end says in words: Open MPI's
 * and AddressSanitizer's messages, and where each rank was (grade.h's state.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "proc.h"
#include "trace.h"
#include "state.h"
#include "../sandbox/sandbox.h"

void text_add(struct text *t, const char *data, size_t len)
{
    if (t->n + len + 1 > t->cap) {
        size_t want = t->cap ? t->cap * 2 : 256;
        while (want < t->n + len + 1) want *= 2;
        char *p = realloc(t->s, want);
        if (!p) {
            fprintf(stderr, "grade: out of memory\n");
            exit(1);
        }
        t->s = p;
        t->cap = want;
    }
    memcpy(t->s + t->n, data, len);
    t->n += len;
    t->s[t->n] = '\0';
}

void __attribute__((format(printf, 2, 3))) text_printf(struct text *t, const char *fmt,
                                                                ...)
{
    char buf[4096];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    text_add(t, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

const char *text_str(const struct text *t)
{
    return t->s ? t->s : "";
}

void random_token(char *out, size_t len)
{
    unsigned char raw[16];
    int fd = open("/dev/urandom", O_RDONLY);
    ssize_t got = fd >= 0 ? read(fd, raw, sizeof raw) : -1;
    if (fd >= 0) close(fd);
    if (got != (ssize_t)sizeof raw) {
        unsigned long x = (unsigned long)time(NULL) ^ ((unsigned long)getpid() << 16);
        for (size_t i = 0; i < sizeof raw; i++)
            raw[i] = (unsigned char)(x >> (i % 8 * 8)) ^ (unsigned char)i;
    }
    size_t k = 0;
    for (size_t i = 0; i < sizeof raw && k + 2 < len; i++)
        k += (size_t)snprintf(out + k, len - k, "%02x", raw[i]);
}

void remove_tree(const char *dir)
{
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            char p[PATH_MAX];
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            struct stat st;
            if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode)) remove_tree(p);
            else unlink(p);
        }
        closedir(d);
    }
    rmdir(dir);
}

char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    struct text t = {0};
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) text_add(&t, buf, n);
    fclose(f);
    if (len) *len = t.n;
    return t.s ? t.s : strdup("");
}

/* The last `lines` lines of out, each indented, without Open MPI's banner rules. */
void add_tail(struct text *r, const char *out, int lines)
{
    if (!out || !*out) return;
    const char *end = out + strlen(out), *p = end;
    int seen = 0;
    while (p > out && seen <= lines) {
        p--;
        if (*p == '\n' && p + 1 < end) seen++;
    }
    if (seen > lines) p++;
    text_printf(r, "output (last lines):\n");
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t l = nl ? (size_t)(nl - p) : (size_t)(end - p);
        if (l && strspn(p, "-") < l && !gr_secret_line(p, l)) {
            text_add(r, "  ", 2);
            text_add(r, p, l > 300 ? 300 : l);
            text_add(r, "\n", 1);
        }
        p += l + (nl ? 1 : 0);
    }
}

/* The line of out starting at p, without its end, into buf. */
static void line_at(const char *p, char *buf, size_t len)
{
    size_t l = strcspn(p, "\n");
    snprintf(buf, len, "%.*s", (int)(l < len ? l : len - 1), p);
}

/* "    #1 0x55e1 in ring_reduce_scatter src/collectives.c:36": "ring_reduce_scatter
 * (src/collectives.c:36)"; 0 when the line is not a frame. */
static int asan_frame(const char *line, char *out, size_t len)
{
    const char *in = strstr(line, " in ");
    if (!strstr(line, "#") || !in) return 0;
    char fn[160] = "", where[300] = "";
    if (sscanf(in, " in %159s %299s", fn, where) < 1) return 0;
    snprintf(out, len, "%s%s%s%s", fn, where[0] ? " (" : "", where, where[0] ? ")" : "");
    return 1;
}

/* AddressSanitizer's report (make grade ASAN=1), in a few lines: what went wrong, where
 * (the first frames), and where the memory came from. Returns 1 when there was one. */
static int explain_asan(struct text *r, const char *out)
{
    const char *e = strstr(out, "ERROR: AddressSanitizer: ");
    if (!e) return 0;
    char line[400], frame[480];
    line_at(e + strlen("ERROR: AddressSanitizer: "), line, sizeof line);
    char *on = strstr(line, " on address");
    if (on) *on = '\0';
    text_printf(r, "AddressSanitizer: %s", line);
    const char *rw = strstr(e, "READ of size");
    const char *wr = strstr(e, "WRITE of size");
    const char *acc = rw && (!wr || rw < wr) ? rw : wr;
    if (acc) {
        line_at(acc, line, sizeof line);
        char *at = strstr(line, " at ");
        if (at) *at = '\0';
        text_printf(r, ", a %s", line);
    }
    text_printf(r, "\n");
    const char *p = acc ? acc : e;
    int frames = 0;
    while ((p = strstr(p, "\n")) && frames < 3) {
        p++;
        line_at(p, line, sizeof line);
        if (strncmp(line, "    #", 5)) {
            if (frames) break;
            continue;
        }
        if (asan_frame(line, frame, sizeof frame))
            text_printf(r, "  %s %s\n", frames ? "called from" : "in", frame);
        frames++;
    }
    const char *loc = strstr(e, " is located ");
    if (loc) {
        line_at(loc + 1, line, sizeof line);
        char *of = strstr(line, "region");
        if (of) of[6] = '\0';
        text_printf(r, "  the address %s", line);
        const char *alloc = strstr(loc, "allocated by thread");
        const char *q = alloc;
        while (q && (q = strstr(q, "\n"))) {
            q++;
            line_at(q, line, sizeof line);
            if (strncmp(line, "    #", 5)) break;
            if (asan_frame(line, frame, sizeof frame) && !strstr(frame, "sanitizer") &&
                !strstr(frame, "lib/mem.c")) {
                text_printf(r, ", allocated in %s", frame);
                break;
            }
        }
        text_printf(r, "\n");
    }
    return 1;
}

/* A fatal message of the memory ledger that starts with key in out: the rank whose line
 * holds it (-1 when the line names none) into *who, and its words after key up to the end
 * of the first of ends[0..n) found before the line ends (another rank's output may run into
 * them), at most 900 characters, into *len; NULL when out holds no such message. */
static const char *ledger_words(const char *out, const char *key, const char *const *ends,
                                size_t n, int *who, int *len)
{
    const char *at = strstr(out, key);
    if (!at) return NULL;
    const char *from = at;
    while (from > out && from[-1] != '\n') from--;
    *who = -1;
    sscanf(from, "[rank %d]", who);
    at += strlen(key);
    size_t l = strcspn(at, "\n");
    for (size_t i = 0; i < n; i++) {
        const char *e = strstr(at, ends[i]);
        if (e && (size_t)(e - at) < l) l = (size_t)(e - at) + strlen(ends[i]);
    }
    *len = (int)(l > 900 ? 900 : l);
    return at;
}

/* After "rank R called MPI_Abort": the library's own error line of that rank, when it
 * printed one ("[rank R] error: ..."), whole, so the cause leads the report. */
static void abort_words(struct text *r, const char *out, int rank)
{
    char key[32];
    snprintf(key, sizeof key, "[rank %d] error: ", rank);
    const char *e = strstr(out, key);
    if (!e) return;
    e += strlen(key);
    int len = (int)strcspn(e, "\n");
    text_printf(r, "its error: %.*s\n", len < 900 ? len : 900, e);
}

/* What Open MPI said about the end of the job, in words. */
void explain_exit(struct text *r, const struct pl_launch_result *res,
                         const char *status_dir, int np)
{
    const char *out = res->output ? res->output : "";
    if (explain_asan(r, out)) return;
    /* The ledger's own words, whole: a device cap passed (lib/mem.h) says what was held,
     * a check at a free (a guard overwritten, a double free) names the buffer. */
    static const char *const oom_end[] = {"a larger device"};
    static const char *const free_ends[] = {"one past the last", "an index past the last",
                                            "freed since", "(double free)", "freed long ago)"};
    int who, len;
    const char *w = ledger_words(out, "out of device memory: ", oom_end, 1, &who, &len);
    if (w) {
        text_printf(r, "rank %d ran out of the device memory it was given, which ended every "
                       "rank: %.*s\n", who, len, w);
        return;
    }
    w = ledger_words(out, "fatal: pl_mem_free: ", free_ends, 5, &who, &len);
    if (w) {
        text_printf(r, "rank %d was stopped by the memory ledger at a pl_mem_free, which ended "
                       "every rank: %.*s\n", who, len, w);
        return;
    }
    const char *a = strstr(out, "MPI_ABORT was invoked on rank");
    int rank, code;
    if (a && sscanf(a, "MPI_ABORT was invoked on rank %d in communicator %*s with errorcode %d",
                    &rank, &code) == 2) {
        text_printf(r, "rank %d called MPI_Abort (error code %d), which ended every rank\n",
                    rank, code);
        abort_words(r, out, rank);
        return;
    }
    /* Open MPI's message can come out garbled; the library records the call itself. */
    for (rank = 0; rank < np; rank++) {
        char buf[512];
        const char *c;
        if (pl_trace_read_status(status_dir, rank, buf, sizeof buf) == 0 &&
            (c = strstr(buf, "called MPI_Abort (error code ")) &&
            sscanf(c, "called MPI_Abort (error code %d)", &code) == 1) {
            text_printf(r, "rank %d called MPI_Abort (error code %d), which ended every rank\n",
                        rank, code);
            abort_words(r, out, rank);
            return;
        }
    }
    const char *s = strstr(out, "exited on signal");
    if (s) {
        const char *pr = s;
        while (pr > out && strncmp(pr, "process rank", 12)) pr--;
        int sig = 0;
        char name[64] = "";
        sscanf(s, "exited on signal %d (%63[^)])", &sig, name);
        if (!strncmp(pr, "process rank", 12) && sscanf(pr, "process rank %d", &rank) == 1)
            text_printf(r, "rank %d crashed: signal %d (%s)%s\n", rank, sig, name,
                        sig == 11 ? ": a read or write outside its memory, often an index "
                                    "past the end of a buffer, a chunk offset computed "
                                    "from a negative rank, or a recursion without end. "
                                    "`make grade ASAN=1` with the same LAB and TEST names "
                                    "the bad access and its line" : "");
        else
            text_printf(r, "a rank crashed: signal %d (%s)\n", sig, name);
        return;
    }
    if (strstr(out, "was unable to launch the specified application")) {
        text_printf(r, "the launcher could not start the program (was it being rebuilt? run "
                       "make, then grade again)\n");
        return;
    }
    if (res->exit_code == 2)
        text_printf(r, "the program stopped with a usage error (exit code 2): see the output\n");
    else if (res->exit_code > 128)
        text_printf(r, "the job was killed by signal %d\n", res->exit_code - 128);
    else
        text_printf(r, "the job ended with exit code %d before reporting\n", res->exit_code);
}

/* Returns 1 when some rank had reached a communication call. */
int where_ranks_were(struct text *r, const char *status_dir, int np)
{
    int any = 0, reached = 0;
    for (int k = 0; k < np; k++) {
        char buf[512];
        if (pl_trace_read_status(status_dir, k, buf, sizeof buf) != 0) continue;
        if (!any) text_printf(r, "where each rank was (its last communication call):\n");
        any = 1;
        if (buf[0] && !strstr(buf, "before its first message")) reached = 1;
        text_printf(r, "  rank %d: %s\n", k, buf[0] ? buf : "(no call yet)");
    }
    if (!any) text_printf(r, "no rank reached a communication call\n");
    return reached;
}
