/* tokenize: byte-level tokenisation of a UTF-8 text file into a token file, and back
 * (--decode), so any text can be trained on with the same 256-token vocabulary. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "data.h"
#include "fileio.h"
#include "mem.h"

static const char *USAGE =
    "usage: tokenize INPUT.txt OUTPUT.tok       text -> token file (one token per byte)\n"
    "       tokenize --decode INPUT.tok OUTPUT.txt   token file -> text\n"
    "\n"
    "The input text must be valid UTF-8; the vocabulary is the 256 byte values, so every\n"
    "character is one to four tokens. The token format is described in datasets/README.md.\n";

static unsigned char *read_all(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) pl_usage_error("cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode))
        pl_usage_error("'%s' is not a regular file", path);
    *n = (size_t)st.st_size;
    unsigned char *buf = pl_mem_alloc(*n, PL_MEM_WORK, PL_HOST, "text");
    if (fread(buf, 1, *n, f) != *n) pl_fatal("reading '%s' failed", path);
    fclose(f);
    return buf;
}

int main(int argc, char **argv)
{
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        fputs(USAGE, stdout);
        return 0;
    }
    int decode = argc > 1 && !strcmp(argv[1], "--decode");
    if (decode && argc != 4)
        pl_usage_error("--decode needs an input token file and an output file "
                       "(tokenize --decode INPUT.tok OUTPUT.txt)\n%s", USAGE);
    for (int i = 1 + decode; i < argc; i++)
        if (argv[i][0] == '-' && argv[i][1] == '-')
            pl_usage_error("unknown flag '%s'\n%s", argv[i], USAGE);
    if (!decode && argc != 3) pl_usage_error("expected an input and an output file\n%s", USAGE);
    const char *in = argv[decode ? 2 : 1], *out = argv[decode ? 3 : 2];

    if (decode) {
        struct pl_tokens t = pl_tokens_read(in);
        unsigned char *buf = pl_mem_alloc((size_t)t.n, PL_MEM_WORK, PL_HOST, "text");
        pl_tokens_to_bytes(&t, buf);
        pl_write_file_atomic(out, "text file", buf, (size_t)t.n);
        printf("tokenize: %lld tokens from %s -> %lld bytes of text in %s\n", (long long)t.n, in,
               (long long)t.n, out);
        pl_mem_free(buf);
        pl_tokens_free(&t);
        return 0;
    }

    size_t n;
    unsigned char *buf = read_all(in, &n);
    int64_t bad = pl_utf8_first_invalid(buf, n);
    if (bad >= 0)
        pl_usage_error("'%s' is not valid UTF-8: byte 0x%02x at offset %lld does not start or "
                       "continue a character (convert it first, e.g. iconv -t UTF-8)",
                       in, buf[bad], (long long)bad);
    struct pl_tokens t = pl_tokens_from_bytes(buf, n, in);
    pl_tokens_write(out, &t);
    printf("tokenize: %zu bytes of UTF-8 from %s -> %lld tokens (vocab %d) in %s\n", n, in,
           (long long)t.n, t.vocab, out);
    pl_tokens_free(&t);
    pl_mem_free(buf);
    return 0;
}
