/* test_copy.c: the copied-oracle rule (grader/rules/copy.h) on the kit's own files.
 * Threat: a Lab 7 or Lab 8 submission that pastes the oracle's source (the router of
 * lib/model_moe.c, the planner of lib/plan*.c) in under other names, no call the symbol rule
 * sees. Checks, per lab: the oracle against itself, renamed and reflowed, is all the
 * oracle's; the lab's solution and unrelated kit sources share little, and the rule passes
 * the solution; the rule refuses the lab's oracle_copied variant, naming the copied function
 * and the oracle's file. And of the rule: a list of frees, which the oracle itself repeats,
 * counts for nothing.
 * Usage: test_copy [BROKEN_SRC...]: each a lab's oracle_copied variant's source (built by make
 * variants), .../NN-name/oracle_copied.c. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rules/copy.h"

static int failed;

static void check(int ok, const char *what)
{
    printf("%s  %s\n", ok ? "ok  " : "FAIL", what);
    if (!ok) failed++;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "test_copy: cannot read %s (run from the repository's root)\n", path);
        exit(2);
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (!s || fread(s, 1, (size_t)n, f) != (size_t)n) exit(2);
    s[n] = '\0';
    fclose(f);
    return s;
}

static int keyword(const char *s, size_t n)
{
    static const char *const kw[] = {
        "auto", "break", "case", "char", "const", "continue", "default", "do", "double",
        "else", "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long",
        "register", "restrict", "return", "short", "signed", "sizeof", "static", "struct",
        "switch", "typedef", "union", "unsigned", "void", "volatile", "while"};
    for (size_t k = 0; k < sizeof kw / sizeof kw[0]; k++)
        if (strlen(kw[k]) == n && !strncmp(kw[k], s, n)) return 1;
    return 0;
}

/* Every identifier but the keywords gets a suffix and every run of white space becomes one
 * space or one newline: the copy a student hides by renaming and reformatting (comments
 * dropped, preprocessor lines kept). */
static char *disguise(const char *s)
{
    size_t n = strlen(s);
    char *out = malloc(4 * n + 1), *o = out;
    int line_start = 1;
    for (const char *p = s; *p;) {
        if (line_start && *p == '#') { /* keep preprocessor lines as they are */
            while (*p && *p != '\n') *o++ = *p++;
            continue;
        }
        if (p[0] == '/' && p[1] == '*') {
            const char *e = strstr(p + 2, "*/");
            p = e ? e + 2 : p + strlen(p);
        } else if (p[0] == '/' && p[1] == '/') {
            while (*p && *p != '\n') p++;
        } else if (*p == '"') {
            *o++ = *p++;
            while (*p && *p != '"') {
                if (*p == '\\') *o++ = *p++;
                *o++ = *p++;
            }
            if (*p) *o++ = *p++;
        } else if (isalpha((unsigned char)*p) || *p == '_') {
            const char *b = p;
            while (isalnum((unsigned char)*p) || *p == '_') *o++ = *p++;
            if (!keyword(b, (size_t)(p - b))) {
                memcpy(o, "_q", 2);
                o += 2;
            }
        } else if (isspace((unsigned char)*p)) {
            line_start = *p == '\n';
            while (isspace((unsigned char)*p) && !(*p == '\n' && p[1] == '#')) p++;
            if (*p == '\n') {
                *o++ = *p++;
                line_start = 1;
                continue;
            }
            *o++ = line_start ? '\n' : ' ';
            continue;
        } else {
            *o++ = *p++;
        }
        line_start = 0;
    }
    *o = '\0';
    return out;
}

static int rule_on(const char *source, const char *oracles, char *why, size_t len)
{
    const char *list = "build-test-copy-sources.txt";
    FILE *f = fopen(list, "w");
    if (!f) exit(2);
    fprintf(f, "%s\n", source);
    fclose(f);
    int r = gr_copy_break_rule(list, oracles, "RULE", why, len);
    remove(list);
    return r;
}

/* A lab whose oracle's source the student can read (its lab.mk's GRADER_ORACLE_SRC_). */
struct lab {
    const char *dir;      /* tests/broken/<dir>/oracle_copied.patch is its pasted variant */
    const char *solution;
    const char *oracles;  /* as its lab.mk lists them */
    const char *pasted;   /* the function the variant pastes in, as the rule names it */
    const char *what;
};

static const struct lab LABS[] = {
    {"08-placement", "solutions/08-placement/placement.c", "lib/plan.c lib/plan_search.c",
     "act_layer()", "the pasted estimate"},
    {"07-moe", "solutions/07-moe/moe.c", "lib/model_moe.c lib/moe_kernels.h", "moe_route()",
     "the pasted router"},
};

/* The oracle's files, one text. */
static char *oracle_text(const char *oracles)
{
    char *all = calloc(1, 1), path[256];
    for (const char *w = oracles; *w;) {
        size_t n = strcspn(w, " ");
        snprintf(path, sizeof path, "%.*s", (int)n, w);
        char *t = slurp(path);
        all = realloc(all, strlen(all) + strlen(t) + 1);
        strcat(all, t);
        free(t);
        w += n + (w[n] == ' ');
    }
    return all;
}

static void check_lab(const struct lab *l, const char *ops)
{
    char first[256];
    snprintf(first, sizeof first, "%.*s", (int)strcspn(l->oracles, " "), l->oracles);
    printf("-- Lab %.2s: %s\n", l->dir, l->oracles);
    char *oracle = slurp(first), *all = oracle_text(l->oracles);
    char *hidden = disguise(oracle);
    check(gr_copy_share(oracle, oracle) == 1.0, "the oracle is all the oracle's");
    double h = gr_copy_share(hidden, oracle);
    printf("      renamed and reflowed: %.3f\n", h);
    check(h > 0.95, "renamed and reflowed, it is still the oracle's (above 95%)");
    check(strcmp(hidden, oracle) != 0, "the disguise changed the text");
    double u = gr_copy_share(ops, all);
    printf("      lib/ops.c: %.3f\n", u);
    check(u < 0.05, "unrelated kit code shares almost nothing");
    char why[2048] = "", name[128] = "";
    check(rule_on(l->solution, l->oracles, why, sizeof why) == 0,
          "the rule passes the lab's solution, function by function and whole");
    if (why[0]) printf("      %s\n", why);
    double file = 1.0, func = 1.0;
    int r = gr_copy_measure(l->solution, l->oracles, &file, &func, name, sizeof name);
    printf("      as the rule sees it: file %.3f, function %s() %.3f\n", file, name, func);
    check(r == 0 && file < GR_COPY_FILE_SHARE / 2 && func < GR_COPY_FUNC_SHARE / 2,
          "the lab's solution is under half of both bounds (file and function)");
    free(oracle), free(all), free(hidden);
}

/* The oracle_copied variant of a lab (its source, built by make variants): refused, with
 * the function, the oracle's file and the rule named. */
static void check_pasted(const struct lab *l, const char *src)
{
    char first[128], what[512], why[2048] = "";
    snprintf(first, sizeof first, "%.*s", (int)strcspn(l->oracles, " "), l->oracles);
    int r = rule_on(src, l->oracles, why, sizeof why);
    printf("      %s\n", why);
    snprintf(what, sizeof what, "Lab %.2s: the rule refuses %s, naming the function, %s and "
             "the rule", l->dir, l->what, first);
    check(r == 1 && strstr(why, first) && strstr(why, "RULE") && strstr(why, l->pasted), what);
}

int main(int argc, char **argv)
{
    char *ops = slurp("lib/ops.c");
    for (size_t k = 0; k < sizeof LABS / sizeof LABS[0]; k++) check_lab(&LABS[k], ops);
    for (int a = 1; a < argc; a++) {
        const struct lab *l = NULL;
        for (size_t k = 0; k < sizeof LABS / sizeof LABS[0]; k++) {
            char dir[64];
            snprintf(dir, sizeof dir, "/%s/", LABS[k].dir);
            if (strstr(argv[a], dir)) l = &LABS[k];
        }
        if (!l) {
            fprintf(stderr, "test_copy: %s is no lab's oracle_copied variant "
                    "(.../<lab>/oracle_copied.c)\n", argv[a]);
            return 2;
        }
        check_pasted(l, argv[a]);
    }

    printf("-- the rule itself\n");
    char *moe = oracle_text(LABS[1].oracles);
    check(gr_copy_share("int x;", moe) == 0.0, "a text shorter than one run shares nothing");
    /* Lists of frees are in every lab's code, and in the oracle more than once: a pattern of
     * the language, not the oracle's work. */
    char frees[2048] = "";
    for (int i = 0; i < 30; i++)
        snprintf(frees + strlen(frees), sizeof frees - strlen(frees),
                 "    pl_mem_free(L->buffer%d);\n", i);
    check(gr_copy_share(frees, moe) == 0.0,
          "a list of 30 frees, a pattern the oracle holds more than once, shares nothing");
    char why[2048] = "";
    check(rule_on("/moved/away/solutions/08-placement/placement.c", LABS[0].oracles, why,
                  sizeof why) == 0 && !why[0],
          "a tree moved since its build: the source is found from the kit's root");
    check(rule_on("no/such/file.c", LABS[0].oracles, why, sizeof why) == 1 &&
              strstr(why, "no/such/file.c"),
          "an unreadable source is reported, named");
    free(ops), free(moe);
    printf("%d failed\n", failed);
    return failed ? 1 : 0;
}
