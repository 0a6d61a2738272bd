/* recompute.c: the names of recompute.h's choices (recomputation, attention). */
#include "recompute.h"

#include <string.h>

const char *pl_recompute_name(enum pl_recompute r)
{
    switch (r) {
    case PL_RECOMPUTE_NONE: return "none";
    case PL_RECOMPUTE_SELECTIVE: return "selective";
    case PL_RECOMPUTE_FULL: return "full";
    }
    return "?";
}

int pl_recompute_parse(const char *text, enum pl_recompute *out)
{
    for (int r = PL_RECOMPUTE_NONE; r <= PL_RECOMPUTE_FULL; r++)
        if (text && !strcmp(text, pl_recompute_name((enum pl_recompute)r))) {
            *out = (enum pl_recompute)r;
            return 0;
        }
    return -1;
}

const char *pl_attention_name(enum pl_attention a)
{
    switch (a) {
    case PL_ATTENTION_MATERIALISED: return "materialised";
    case PL_ATTENTION_FLASH: return "flash";
    }
    return "?";
}

int pl_attention_parse(const char *text, enum pl_attention *out)
{
    for (int a = PL_ATTENTION_MATERIALISED; a <= PL_ATTENTION_FLASH; a++)
        if (text && !strcmp(text, pl_attention_name((enum pl_attention)a))) {
            *out = (enum pl_attention)a;
            return 0;
        }
    return -1;
}
