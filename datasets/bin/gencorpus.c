/* gencorpus: writes the synthetic corpus as a token file (and optionally as text), so a
 * lab or the trainer reads the same data on every machine without downloading anything. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "data.h"
#include "fileio.h"
#include "mem.h"

static const char *USAGE =
    "usage: gencorpus --out FILE [--tokens N] [--seed S] [--text FILE]\n"
    "\n"
    "Writes N byte tokens (default 1000000) of the synthetic language generated from seed S\n"
    "(default 1) to FILE in the paralab token format (datasets/README.md). The same seed\n"
    "always gives the same file. --text FILE also writes the corpus as plain UTF-8 text.\n";

static long long parse_count(const char *flag, const char *s, long long lo)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo)
        pl_usage_error("%s '%s' is not a whole number >= %lld\n%s", flag, s, lo, USAGE);
    return v;
}

int main(int argc, char **argv)
{
    const char *out = NULL, *text = NULL;
    long long n = 1000000, seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(USAGE, stdout);
            return 0;
        }
        if (i + 1 >= argc) pl_usage_error("%s needs a value\n%s", a, USAGE);
        const char *v = argv[++i];
        if (!strcmp(a, "--out")) out = v;
        else if (!strcmp(a, "--text")) text = v;
        else if (!strcmp(a, "--tokens")) n = parse_count(a, v, 1);
        else if (!strcmp(a, "--seed")) seed = parse_count(a, v, 0);
        else pl_usage_error("unknown flag '%s'\n%s", a, USAGE);
    }
    if (!out) pl_usage_error("--out FILE is required\n%s", USAGE);

    struct pl_tokens t = pl_corpus_tokens((uint64_t)seed, n);
    pl_tokens_write(out, &t);
    if (text) {
        char *buf = pl_mem_alloc((size_t)n, PL_MEM_WORK, PL_HOST, "corpus text");
        pl_tokens_to_bytes(&t, (unsigned char *)buf);
        pl_write_file_atomic(text, "text file", buf, (size_t)n);
        pl_mem_free(buf);
    }
    printf("gencorpus: %lld tokens (vocab %d, seed %lld) -> %s%s%s\n", n, t.vocab, seed, out,
           text ? ", text -> " : "", text ? text : "");
    pl_tokens_free(&t);
    return 0;
}
