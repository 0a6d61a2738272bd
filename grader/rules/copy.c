/* copy.c: the copied-oracle rule (copy.h): C tokens, hashed runs, winnowed fingerprints. */
#include "copy.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"

struct tok {
    uint64_t code;    /* what the fingerprint sees: the text of a keyword or punctuator,
                       * one code for every identifier, another for every number ... */
    const char *text; /* where it is, for naming a function */
    int len;
};

struct toks {
    struct tok *t;
    size_t n, cap;
};

static void *grow(void *p, size_t bytes)
{
    void *q = realloc(p, bytes ? bytes : 1);
    if (!q) {
        fprintf(stderr, "grade: out of memory fingerprinting a source\n");
        exit(2);
    }
    return q;
}

static void push(struct toks *v, uint64_t code, const char *text, int len)
{
    if (v->n == v->cap) {
        v->cap = v->cap ? 2 * v->cap : 1024;
        v->t = grow(v->t, v->cap * sizeof *v->t);
    }
    v->t[v->n++] = (struct tok){code, text, len};
}

static const char *const KEYWORDS[] = {
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else",
    "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long", "register",
    "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch",
    "typedef", "union", "unsigned", "void", "volatile", "while"};
/* Longest first, so that "<<=" is not read as "<<" then "=". */
static const char *const PUNCT[] = {"<<=", ">>=", "...", "->", "++", "--", "<<", ">>", "<=",
                                    ">=", "==", "!=", "&&", "||", "+=", "-=", "*=", "/=",
                                    "%=", "&=", "|=", "^="};

enum { CODE_IDENT = 1, CODE_NUMBER, CODE_STRING, CODE_CHAR };

static uint64_t text_code(const char *s, size_t n)
{
    return pl_fnv1a(PL_FNV1A_START, s, n) | 16; /* never one of the four codes above */
}

static int is_keyword(const char *s, size_t n)
{
    for (size_t k = 0; k < sizeof KEYWORDS / sizeof KEYWORDS[0]; k++)
        if (strlen(KEYWORDS[k]) == n && !memcmp(KEYWORDS[k], s, n)) return 1;
    return 0;
}

/* After an opening quote q at *p: past the closing one (or the end of the line). */
static const char *skip_quoted(const char *p, char q)
{
    for (p++; *p && *p != q && *p != '\n'; p++)
        if (*p == '\\' && p[1]) p++;
    return *p == q ? p + 1 : p;
}

static void tokenize(const char *s, struct toks *out)
{
    const char *p = s;
    int line_start = 1;
    while (*p) {
        if (*p == '\n') {
            line_start = 1;
            p++;
        } else if (isspace((unsigned char)*p)) {
            p++;
        } else if (line_start && *p == '#') { /* a preprocessor line, continuations too */
            while (*p && !(*p == '\n' && p[-1] != '\\')) p++;
        } else if (p[0] == '/' && p[1] == '/') {
            while (*p && *p != '\n') p++;
        } else if (p[0] == '/' && p[1] == '*') {
            const char *e = strstr(p + 2, "*/");
            p = e ? e + 2 : p + strlen(p);
        } else {
            line_start = 0;
            const char *b = p;
            uint64_t code;
            if (*p == '"' || *p == '\'') {
                code = *p == '"' ? CODE_STRING : CODE_CHAR;
                p = skip_quoted(p, *p);
            } else if (isdigit((unsigned char)*p) || (*p == '.' && isdigit((unsigned char)p[1]))) {
                code = CODE_NUMBER;
                while (isalnum((unsigned char)*p) || *p == '.' || *p == '_' ||
                       ((*p == '+' || *p == '-') && strchr("eEpP", p[-1])))
                    p++;
            } else if (isalpha((unsigned char)*p) || *p == '_') {
                while (isalnum((unsigned char)*p) || *p == '_') p++;
                code = is_keyword(b, (size_t)(p - b)) ? text_code(b, (size_t)(p - b))
                                                       : CODE_IDENT;
            } else {
                size_t n = 1;
                for (size_t k = 0; k < sizeof PUNCT / sizeof PUNCT[0]; k++)
                    if (!strncmp(p, PUNCT[k], strlen(PUNCT[k]))) {
                        n = strlen(PUNCT[k]);
                        break;
                    }
                p += n;
                code = text_code(b, n);
            }
            push(out, code, b, (int)(p - b));
        }
    }
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The hash of every run of K tokens in [from, to), in order, into *h; returns how many (0
 * when there is no run of K tokens). */
static size_t run_hashes(const struct toks *v, size_t from, size_t to, uint64_t **h)
{
    *h = NULL;
    if (to < from + GR_COPY_K) return 0;
    size_t runs = to - from - GR_COPY_K + 1;
    *h = grow(NULL, runs * sizeof **h);
    for (size_t i = 0; i < runs; i++) {
        uint64_t x = PL_FNV1A_START;
        for (size_t k = 0; k < GR_COPY_K; k++)
            x = pl_fnv1a(x, &v->t[from + i + k].code, sizeof v->t[0].code);
        (*h)[i] = x;
    }
    return runs;
}

/* The runs an oracle holds at two places or more, sorted: a list of frees, a column of
 * allocations, the same loop header written twice. They are the language's patterns, not
 * the oracle's work (every submission writes its own list of frees), so no fingerprint
 * holds them. */
struct boiler {
    uint64_t *h;
    size_t n;
};

static void add_runs(struct boiler *all, const struct toks *v)
{
    uint64_t *h;
    size_t n = run_hashes(v, 0, v->n, &h);
    all->h = grow(all->h, (all->n + n) * sizeof *all->h);
    if (n) memcpy(all->h + all->n, h, n * sizeof *h);
    all->n += n;
    free(h);
}

/* all (every run of the oracle's files, add_runs) becomes the runs it holds more than once. */
static void keep_repeated(struct boiler *all)
{
    size_t u = 0;
    if (all->n) qsort(all->h, all->n, sizeof *all->h, cmp_u64);
    for (size_t i = 0; i + 1 < all->n; i++)
        if (all->h[i] == all->h[i + 1] && (!u || all->h[u - 1] != all->h[i]))
            all->h[u++] = all->h[i];
    all->n = u;
}

static int is_boiler(const struct boiler *b, uint64_t x)
{
    return b && b->n && bsearch(&x, b->h, b->n, sizeof x, cmp_u64);
}

/* The winnowed fingerprint of tokens [from, to): sorted, without repeats, into *fp; returns
 * its size (0 when there is no run of K tokens, or only the boilerplate's). A boilerplate
 * run is never a window's pick, so a window that holds other runs is still sampled. *own,
 * when asked for, is the number of runs that are not boilerplate. */
static size_t fingerprint(const struct toks *v, size_t from, size_t to, const struct boiler *b,
                          uint64_t **fp, size_t *own)
{
    uint64_t *h;
    size_t runs = run_hashes(v, from, to, &h), n = 0;
    *fp = NULL;
    if (own) *own = 0;
    if (!runs) return 0;
    const uint64_t masked = UINT64_MAX;
    for (size_t i = 0; i < runs; i++) {
        if (is_boiler(b, h[i]))
            h[i] = masked;
        else if (own)
            ++*own;
    }
    uint64_t *out = grow(NULL, runs * sizeof *out);
    size_t windows = runs >= GR_COPY_W ? runs - GR_COPY_W + 1 : 1;
    for (size_t i = 0; i < windows; i++) {
        uint64_t m = h[i];
        for (size_t k = 1; k < GR_COPY_W && i + k < runs; k++)
            if (h[i + k] < m) m = h[i + k];
        if (m != masked) out[n++] = m;
    }
    free(h);
    if (n) qsort(out, n, sizeof *out, cmp_u64);
    size_t u = 0;
    for (size_t i = 0; i < n; i++)
        if (!u || out[u - 1] != out[i]) out[u++] = out[i];
    *fp = out;
    return u;
}

static size_t common(const uint64_t *a, size_t na, const uint64_t *b, size_t nb)
{
    size_t c = 0;
    for (size_t i = 0; i < na; i++)
        if (nb && bsearch(&a[i], b, nb, sizeof *b, cmp_u64)) c++;
    return c;
}

double gr_copy_share(const char *text, const char *oracle)
{
    struct toks a = {0}, b = {0};
    tokenize(text, &a);
    tokenize(oracle, &b);
    struct boiler boiler = {0};
    add_runs(&boiler, &b);
    keep_repeated(&boiler);
    uint64_t *fa, *fb;
    size_t na = fingerprint(&a, 0, a.n, &boiler, &fa, NULL);
    size_t nb = fingerprint(&b, 0, b.n, &boiler, &fb, NULL);
    double share = na ? (double)common(fa, na, fb, nb) / (double)na : 0.0;
    free(fa);
    free(fb);
    free(boiler.h);
    free(a.t);
    free(b.t);
    return share;
}

/* ------------------------------------------------------------------ the rule */

struct oracle {
    char path[512];
    char *text;
    struct toks toks;
    uint64_t *fp;
    size_t nfp;
};

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *s = malloc(cap + 1);
    for (size_t r; s && (r = fread(s + n, 1, cap - n, f)) > 0;) {
        n += r;
        if (n == cap && cap < (64u << 20)) {
            char *t = realloc(s, 2 * cap + 1);
            if (!t) break;
            s = t;
            cap *= 2;
        }
    }
    fclose(f);
    if (s) s[n] = '\0';
    return s;
}

/* path, or where a tree moved since its build holds it: the absolute paths the build wrote
 * (sources.txt, GR_LAB_ORACLE_SRC) tried from the working directory (the kit's root), one
 * leading folder dropped at a time. */
static char *read_moved(const char *path)
{
    char *s = read_all(path);
    for (const char *p = strchr(path, '/'); !s && p; p = strchr(p + 1, '/'))
        if (p[1]) s = read_all(p + 1);
    return s;
}

/* The name of the function whose body opens at token i ("{"), or "" when it is not one. */
static void body_name(const struct toks *v, size_t i, char *name, size_t len)
{
    name[0] = '\0';
    if (i < 3 || v->t[i - 1].len != 1 || v->t[i - 1].text[0] != ')') return;
    int depth = 0;
    for (size_t k = i - 1; k > 0; k--) {
        const struct tok *t = &v->t[k];
        if (t->len == 1 && t->text[0] == ')') depth++;
        if (t->len == 1 && t->text[0] == '(' && --depth == 0) {
            if (v->t[k - 1].code == CODE_IDENT)
                snprintf(name, len, "%.*s", v->t[k - 1].len, v->t[k - 1].text);
            return;
        }
    }
}

/* The oracle file sharing the most of fp, and that share of fp. */
static const struct oracle *best_match(const struct oracle *o, int no, const uint64_t *fp,
                                       size_t n, double *share)
{
    const struct oracle *best = &o[0];
    size_t most = 0, all = 0;
    for (int k = 0; k < no; k++) {
        size_t c = common(fp, n, o[k].fp, o[k].nfp);
        if (c > most) most = c, best = &o[k];
    }
    /* The share counts a run found in any of the files once. */
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < no; k++)
            if (o[k].nfp && bsearch(&fp[i], o[k].fp, o[k].nfp, sizeof *fp, cmp_u64)) {
                all++;
                break;
            }
    *share = n ? (double)all / (double)n : 0.0;
    return best;
}

/* An oracle's path as the kit names it (lib/plan.c), not where this checkout lies. */
static const char *shown(const char *path)
{
    const char *lib = strstr(path, "/lib/");
    while (lib && strstr(lib + 1, "/lib/")) lib = strstr(lib + 1, "/lib/");
    return lib ? lib + 1 : path;
}

/* The oracle's files, read and fingerprinted, and what they hold more than once. */
struct oracles {
    struct oracle o[16];
    int n;
    struct boiler boiler;
};

static void oracles_free(struct oracles *os)
{
    for (int k = 0; k < os->n; k++) {
        free(os->o[k].text);
        free(os->o[k].toks.t);
        free(os->o[k].fp);
    }
    free(os->boiler.h);
    memset(os, 0, sizeof *os);
}

/* Reads the space-separated oracle_sources into os; 0, or 1 with why when one is missing. */
static int oracles_load(struct oracles *os, const char *oracle_sources, char *why, size_t len)
{
    memset(os, 0, sizeof *os);
    const int max = (int)(sizeof os->o / sizeof os->o[0]);
    for (const char *w = oracle_sources; *w && os->n < max;) {
        size_t n = strcspn(w, " ");
        if (n && n < sizeof os->o[0].path) {
            struct oracle *k = &os->o[os->n];
            memset(k, 0, sizeof *k);
            snprintf(k->path, sizeof k->path, "%.*s", (int)n, w);
            k->text = read_moved(k->path);
            if (!k->text) {
                snprintf(why, len, "the lab's oracle %s could not be read: the kit is "
                         "incomplete (every source of lib/ is part of it)", k->path);
                oracles_free(os);
                return 1;
            }
            tokenize(k->text, &k->toks);
            os->n++;
        }
        w += n + (w[n] == ' ');
    }
    for (int k = 0; k < os->n; k++) add_runs(&os->boiler, &os->o[k].toks);
    keep_repeated(&os->boiler);
    for (int k = 0; k < os->n; k++)
        os->o[k].nfp = fingerprint(&os->o[k].toks, 0, os->o[k].toks.n, &os->boiler,
                                   &os->o[k].fp, NULL);
    return 0;
}

/* What the rule sees of one source: its file's share and the oracle file it matches most,
 * and the function judged alone that shares the most (the first of equals). */
struct measure {
    double file, func;
    const struct oracle *file_match, *func_match;
    char func_name[128];
    size_t func_tokens;
};

/* 0, or 1 when path cannot be read. */
static int measure_source(const char *path, const struct oracles *os, struct measure *m)
{
    memset(m, 0, sizeof *m);
    char *text = read_moved(path);
    if (!text) return 1;
    struct toks v = {0};
    tokenize(text, &v);
    int depth = 0;
    size_t open = 0;
    for (size_t i = 0; i < v.n; i++) {
        if (v.t[i].len != 1) continue;
        if (v.t[i].text[0] == '{' && depth++ == 0) open = i;
        if (v.t[i].text[0] != '}' || depth == 0 || --depth != 0) continue;
        if (i + 1 - open < GR_COPY_MIN_TOKENS) continue;
        /* Judged alone when it has that many tokens besides the oracle's boilerplate: a
         * list of 30 frees is long, and says nothing. */
        uint64_t *fp;
        size_t own, n = fingerprint(&v, open, i + 1, &os->boiler, &fp, &own);
        double share;
        const struct oracle *match = best_match(os->o, os->n, fp, n, &share);
        if (n && own + GR_COPY_K - 1 >= GR_COPY_MIN_TOKENS && share > m->func) {
            m->func = share;
            m->func_match = match;
            m->func_tokens = i + 1 - open;
            body_name(&v, open, m->func_name, sizeof m->func_name);
        }
        free(fp);
    }
    uint64_t *fp;
    size_t n = fingerprint(&v, 0, v.n, &os->boiler, &fp, NULL);
    m->file_match = best_match(os->o, os->n, fp, n, &m->file);
    free(fp);
    free(v.t);
    free(text);
    return 0;
}

/* Judges one source; 1 with why when it breaks the rule. */
static int judge_source(const char *path, const struct oracles *os, const char *rule, char *why,
                        size_t len)
{
    struct measure m;
    if (measure_source(path, os, &m)) {
        snprintf(why, len, "%s could not be read to compare it with the lab's oracle", path);
        return 1;
    }
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    if (m.func >= GR_COPY_FUNC_SHARE) {
        snprintf(why, len, "%s's %s%s (%zu tokens) is %.0f%% the token sequences of %s, "
                 "the lab's oracle, with its names and layout set aside (code written "
                 "from the handout shares short runs with it at most): %s", base,
                 m.func_name[0] ? m.func_name : "definition", m.func_name[0] ? "()" : "",
                 m.func_tokens, 100.0 * m.func, shown(m.func_match->path), rule);
        return 1;
    }
    if (m.file >= GR_COPY_FILE_SHARE) {
        snprintf(why, len, "%s is %.0f%% the token sequences of the lab's oracle (most of "
                 "them %s), with names and layout set aside (code written from the "
                 "handout shares short runs with it at most): %s", base, 100.0 * m.file,
                 shown(m.file_match->path), rule);
        return 1;
    }
    return 0;
}

int gr_copy_measure(const char *source, const char *oracle_sources, double *file, double *func,
                    char *func_name, size_t len)
{
    struct oracles os;
    char why[600];
    struct measure m = {0};
    int bad = oracles_load(&os, oracle_sources, why, sizeof why);
    if (!bad) {
        bad = measure_source(source, &os, &m);
        oracles_free(&os);
    }
    *file = m.file;
    *func = m.func;
    snprintf(func_name, len, "%s", m.func_name);
    return bad ? -1 : 0;
}

int gr_copy_break_rule(const char *sources_file, const char *oracle_sources, const char *rule,
                       char *why, size_t len)
{
    struct oracles os;
    if (oracles_load(&os, oracle_sources, why, len)) return 1;
    int broken = 0;
    FILE *f = os.n ? fopen(sources_file, "r") : NULL;
    if (os.n && !f) {
        snprintf(why, len, "%s is missing: the build lists the sources under test there",
                 sources_file);
        broken = 1;
    }
    char line[4096];
    while (f && !broken && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (line[0]) broken = judge_source(line, &os, rule, why, len);
    }
    if (f) fclose(f);
    oracles_free(&os);
    return broken;
}
