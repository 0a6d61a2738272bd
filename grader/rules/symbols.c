/* symbols.c: a lab's symbol rules (symbols.h), judged on the list the build wrote. */
#include "symbols.h"

#include <fnmatch.h>
#include <stdio.h>
#include <string.h>

int gr_symbol_listed(const char *list, const char *name)
{
    char pat[128];
    for (const char *p = list; p && *p;) {
        p += strspn(p, " ");
        size_t l = strcspn(p, " ");
        if (l == 0) break;
        snprintf(pat, sizeof pat, "%.*s", (int)(l < sizeof pat - 1 ? l : sizeof pat - 1), p);
        if (fnmatch(pat, name, 0) == 0) return 1;
        p += l;
    }
    return 0;
}

int gr_symbols_break_rule(const char *symbols_file, const char *forbidden, const char *allowed,
                          const char *rule, char *why, size_t len)
{
    why[0] = '\0';
    FILE *f = fopen(symbols_file, "r");
    if (!f) {
        snprintf(why, len, "no list of what the code calls at %s (the build writes it beside "
                 "the driver): run `make` again\n", symbols_file);
        return 1;
    }
    char line[512], names[1024] = "";
    int bad = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (!line[0] || !gr_symbol_listed(forbidden, line)) continue;
        if (allowed && gr_symbol_listed(allowed, line)) continue;
        size_t used = strlen(names);
        if (used < sizeof names - 1)
            snprintf(names + used, sizeof names - used, "%s%s", bad ? ", " : "", line);
        bad++;
    }
    fclose(f);
    if (bad)
        snprintf(why, len, "the code calls %s, which this lab does not allow: %s (nothing "
                 "else of the lab is graded until it calls only what the rule allows)\n",
                 names, rule);
    return bad > 0;
}
