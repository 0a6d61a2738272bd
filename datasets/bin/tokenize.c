/* tokenize: byte-level tokenisation of a UTF-8 text file into a token file, and back
 * (--decode), so any text can be trained on with the same 256-token vocabulary. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "data.h"
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

static void write_all(const char *path, const unsigned char *buf, size_t n)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) pl_usage_error("cannot write '%s': %s", tmp, strerror(errno));
    int ok = fwrite(buf, 1, n, f) == n;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        pl_fatal("writing '%s' failed: %s", path, strerror(errno));
    }
}

int main(int argc, char **argv)
{
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        fputs(USAGE, stdout);
        return 0;
    }
    int decode = argc == 4 && !strcmp(argv[1], "--decode");
    if (!decode && argc != 3) pl_usage_error("expected an input and an output file\n%s", USAGE);
    const char *in = argv[decode ? 2 : 1], *out = argv[decode ? 3 : 2];
    if (in[0] == '-' && in[1] == '-') pl_usage_error("unknown flag '%s'\n%s", in, USAGE);

    if (decode) {
        struct pl_tokens t = pl_tokens_read(in);
        unsigned char *buf = pl_mem_alloc((size_t)t.n, PL_MEM_WORK, PL_HOST, "text");
        pl_tokens_to_bytes(&t, buf);
        write_all(out, buf, (size_t)t.n);
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
