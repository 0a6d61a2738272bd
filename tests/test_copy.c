/* test_copy.c: the copied-oracle rule (grader/rules/copy.h) on the kit's own files.
 * Threat: a Lab 8 submission that pastes the planner's source in under other names (no call
 * the symbol rule sees). Checks: the oracle against itself, renamed and reflowed, is all
 * the oracle's; the lab's solution and unrelated kit sources share little; the rule names
 * the copied function and the oracle's file, and passes the solution.
 * Usage: test_copy BROKEN_SRC (the oracle_copied variant's source, built by make variants). */
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

static int rule_on(const char *source, char *why, size_t len)
{
    const char *list = "build-test-copy-sources.txt";
    FILE *f = fopen(list, "w");
    if (!f) exit(2);
    fprintf(f, "%s\n", source);
    fclose(f);
    int r = gr_copy_break_rule(list, "lib/plan.c lib/plan_search.c", "RULE", why, len);
    remove(list);
    return r;
}

int main(int argc, char **argv)
{
    char *plan = slurp("lib/plan.c"), *search = slurp("lib/plan_search.c");
    char *both = malloc(strlen(plan) + strlen(search) + 1);
    strcpy(both, plan);
    strcat(both, search);
    char *sol = slurp("solutions/08-placement/placement.c"), *ops = slurp("lib/ops.c");
    char *hidden = disguise(plan);

    check(gr_copy_share(plan, plan) == 1.0, "the oracle is all the oracle's");
    double h = gr_copy_share(hidden, plan);
    printf("      renamed and reflowed: %.3f\n", h);
    check(h > 0.95, "renamed and reflowed, it is still the oracle's (above 95%)");
    check(strcmp(hidden, plan) != 0, "the disguise changed the text");
    double s = gr_copy_share(sol, both);
    printf("      the lab's solution: %.3f\n", s);
    check(s < GR_COPY_FILE_SHARE / 2, "the lab's solution shares less than half the file bound");
    double u = gr_copy_share(ops, both);
    printf("      lib/ops.c: %.3f\n", u);
    check(u < 0.05, "unrelated kit code shares almost nothing");
    check(gr_copy_share("int x;", plan) == 0.0, "a text shorter than one run shares nothing");

    char why[2048] = "";
    check(rule_on("solutions/08-placement/placement.c", why, sizeof why) == 0,
          "the rule passes the lab's solution");
    if (argc > 1) {
        why[0] = '\0';
        int r = rule_on(argv[1], why, sizeof why);
        printf("      %s\n", why);
        check(r == 1 && strstr(why, "lib/plan.c") && strstr(why, "RULE") &&
                  strstr(why, "act_layer()"),
              "the rule refuses the pasted estimate, naming the function, lib/plan.c and the rule");
    }
    why[0] = '\0';
    check(rule_on("/moved/away/solutions/08-placement/placement.c", why, sizeof why) == 0 &&
              !why[0],
          "a tree moved since its build: the source is found from the kit's root");
    check(rule_on("no/such/file.c", why, sizeof why) == 1 && strstr(why, "no/such/file.c"),
          "an unreadable source is reported, named");
    free(plan), free(search), free(both), free(sol), free(ops), free(hidden);
    printf("%d failed\n", failed);
    return failed ? 1 : 0;
}
