/* flags.h: the kit's one command-line parser. A program describes its flags in a table
 * (name, kind, where the value goes, the value's name, a line of help); the same table
 * prints the help, so the two cannot drift apart. A misspelt flag is answered with the
 * nearest one ("did you mean --steps?"), a bad value with what would be right, exit 2. */
#ifndef PL_FLAGS_H
#define PL_FLAGS_H

#include <stdio.h>

enum pl_flag_kind {
    PL_FLAG_INT,    /* int */
    PL_FLAG_I64,    /* int64_t */
    PL_FLAG_U64,    /* uint64_t, 0 or more (seeds) */
    PL_FLAG_FLOAT,  /* float */
    PL_FLAG_DOUBLE, /* double */
    PL_FLAG_STR,    /* const char *, not empty */
    PL_FLAG_SWITCH  /* int set to 1; takes no value */
};

struct pl_flag {
    const char *name; /* "--steps" */
    enum pl_flag_kind kind;
    void *ptr;        /* where the value goes */
    const char *arg;  /* the value's name in help: "N" */
    const char *help; /* one line; "(default X)" is added unless it says "default" */
    int set;          /* given on the command line */
};

/* What a program tells the parser besides its flags. */
struct pl_flags_program {
    const char *name;            /* "train", in messages */
    void (*usage)(FILE *f);      /* prints the text before the flags (may be NULL) */
    int collective;              /* errors with pl_usage_error_all: every rank parses alike */
};

/* Parses argv[1..] ("--flag value" or "--flag=value") into the tables (n flags each, up to
 * 4 tables: a program's own and a part's). --help or -h prints the help and exits 0.
 * Any other mistake is a usage error (exit 2) naming the flag and what it expects. */
void pl_flags_parse(const struct pl_flags_program *prog, struct pl_flag *const *tables,
                    const int *n, int ntables, int argc, char **argv);
/* The help: usage text, then one line per flag with its default. */
void pl_flags_help(FILE *f, const struct pl_flags_program *prog, struct pl_flag *const *tables,
                   const int *n, int ntables);
/* 1 when the flag of that name was given. */
int pl_flag_given(const struct pl_flag *flags, int n, const char *name);

#endif
