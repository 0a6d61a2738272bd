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

static void push(struct toks *v, uint64_t code, const char *text, int len)
{
    if (v->n == v->cap) {
        v->cap = v->cap ? 2 * v->cap : 1024;
        struct tok *t = realloc(v->t, v->cap * sizeof *t);
        if (!t) {
            fprintf(stderr, "grade: out of memory fingerprinting a source\n");
            exit(2);
        }
        v->t = t;
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

/* The winnowed fingerprint of tokens [from, to): sorted, without repeats, into *fp; returns
 * its size (0 when there is no run of K tokens). */
static size_t fingerprint(const struct toks *v, size_t from, size_t to, uint64_t **fp)
{
    *fp = NULL;
    if (to < from + GR_COPY_K) return 0;
    size_t runs = to - from - GR_COPY_K + 1, n = 0;
    uint64_t *h = malloc(runs * sizeof *h), *out = malloc(runs * sizeof *out);
    if (!h || !out) {
        fprintf(stderr, "grade: out of memory fingerprinting a source\n");
        exit(2);
    }
    for (size_t i = 0; i < runs; i++) {
        uint64_t x = PL_FNV1A_START;
        for (size_t k = 0; k < GR_COPY_K; k++)
            x = pl_fnv1a(x, &v->t[from + i + k].code, sizeof v->t[0].code);
        h[i] = x;
    }
    size_t windows = runs >= GR_COPY_W ? runs - GR_COPY_W + 1 : 1;
    for (size_t i = 0; i < windows; i++) {
        uint64_t m = h[i];
        for (size_t k = 1; k < GR_COPY_W && i + k < runs; k++)
            if (h[i + k] < m) m = h[i + k];
        out[n++] = m;
    }
    free(h);
    qsort(out, n, sizeof *out, cmp_u64);
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
    uint64_t *fa, *fb;
    size_t na = fingerprint(&a, 0, a.n, &fa), nb = fingerprint(&b, 0, b.n, &fb);
    double share = na ? (double)common(fa, na, fb, nb) / (double)na : 0.0;
    free(fa);
    free(fb);
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

/* Judges one source; 1 with why when it breaks the rule. */
static int judge_source(const char *path, const struct oracle *o, int no, const char *rule,
                        char *why, size_t len)
{
    char *text = read_moved(path);
    if (!text) {
        snprintf(why, len, "%s could not be read to compare it with the lab's oracle", path);
        return 1;
    }
    struct toks v = {0};
    tokenize(text, &v);
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    int broken = 0;
    int depth = 0;
    size_t open = 0;
    for (size_t i = 0; i < v.n && !broken; i++) {
        if (v.t[i].len != 1) continue;
        if (v.t[i].text[0] == '{' && depth++ == 0) open = i;
        if (v.t[i].text[0] != '}' || depth == 0 || --depth != 0) continue;
        if (i + 1 - open < GR_COPY_MIN_TOKENS) continue;
        uint64_t *fp;
        size_t n = fingerprint(&v, open, i + 1, &fp);
        double share;
        const struct oracle *m = best_match(o, no, fp, n, &share);
        if (n && share >= GR_COPY_FUNC_SHARE) {
            char name[128];
            body_name(&v, open, name, sizeof name);
            snprintf(why, len, "%s's %s%s (%zu tokens) is %.0f%% the token sequences of %s, "
                     "the lab's oracle, with its names and layout set aside (code written "
                     "from the handout shares short runs with it at most): %s", base,
                     name[0] ? name : "definition", name[0] ? "()" : "", i + 1 - open,
                     100.0 * share, shown(m->path), rule);
            broken = 1;
        }
        free(fp);
    }
    if (!broken) {
        uint64_t *fp;
        size_t n = fingerprint(&v, 0, v.n, &fp);
        double share;
        const struct oracle *m = best_match(o, no, fp, n, &share);
        if (n && share >= GR_COPY_FILE_SHARE) {
            snprintf(why, len, "%s is %.0f%% the token sequences of the lab's oracle (most of "
                     "them %s), with names and layout set aside (code written from the "
                     "handout shares short runs with it at most): %s", base, 100.0 * share,
                     shown(m->path), rule);
            broken = 1;
        }
        free(fp);
    }
    free(v.t);
    free(text);
    return broken;
}

int gr_copy_break_rule(const char *sources_file, const char *oracle_sources, const char *rule,
                       char *why, size_t len)
{
    enum { MAX_ORACLE = 16 };
    struct oracle o[MAX_ORACLE];
    int no = 0, broken = 0;
    for (const char *w = oracle_sources; *w && no < MAX_ORACLE;) {
        size_t n = strcspn(w, " ");
        if (n && n < sizeof o[0].path) {
            struct oracle *k = &o[no];
            memset(k, 0, sizeof *k);
            snprintf(k->path, sizeof k->path, "%.*s", (int)n, w);
            k->text = read_moved(k->path);
            if (!k->text) {
                snprintf(why, len, "the lab's oracle %s could not be read: the kit is "
                         "incomplete (every source of lib/ is part of it)", k->path);
                broken = 1;
                break;
            }
            tokenize(k->text, &k->toks);
            k->nfp = fingerprint(&k->toks, 0, k->toks.n, &k->fp);
            no++;
        }
        w += n + (w[n] == ' ');
    }
    FILE *f = broken || !no ? NULL : fopen(sources_file, "r");
    if (!broken && no && !f) {
        snprintf(why, len, "%s is missing: the build lists the sources under test there",
                 sources_file);
        broken = 1;
    }
    char line[4096];
    while (f && !broken && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (line[0]) broken = judge_source(line, o, no, rule, why, len);
    }
    if (f) fclose(f);
    for (int k = 0; k < no; k++) {
        free(o[k].text);
        free(o[k].toks.t);
        free(o[k].fp);
    }
    return broken;
}
