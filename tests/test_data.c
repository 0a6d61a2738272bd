/* test_data: the datasets module. Token files round-trip and every kind of bad file is
 * refused with its message (and exit 2 through pl_tokens_read); the loader's rank slices are
 * disjoint and concatenate to the single-device batch on 1..4 ranks; the corpus generator is
 * deterministic and its facts are true; byte tokenisation of UTF-8 round-trips. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "data.h"
#include "fileio.h"
#include "mem.h"
#include "rng.h"
#include "testing.h"

static char dir[] = "/tmp/pl-test-data-XXXXXX";

static const char *path_of(const char *name)
{
    static char buf[8][512];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, 512, "%s/%s", dir, name);
    return p;
}

static void write_raw(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    PL_ASSERT(f && fwrite(data, 1, n, f) == n);
    fclose(f);
}

static unsigned char *read_raw(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    PL_ASSERT(f);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(*n + 1);
    PL_ASSERT(b && fread(b, 1, *n, f) == *n);
    fclose(f);
    return b;
}

/* Runs fn(arg) in a child whose stderr is captured; checks it exits with `code` and says
 * `needle`. This is the real exit path of a usage error, not a mock of it. */
static void expect_exit(const char *what, void (*fn)(const void *), const void *arg, int code,
                        const char *needle)
{
    int fd[2];
    PL_ASSERT(pipe(fd) == 0);
    fflush(stdout);
    pid_t pid = fork();
    PL_ASSERT(pid >= 0);
    if (pid == 0) {
        close(fd[0]);
        dup2(fd[1], 2);
        dup2(fd[1], 1);
        fn(arg);
        _exit(0);
    }
    close(fd[1]);
    char out[4096];
    size_t n = 0;
    ssize_t r;
    while ((r = read(fd[0], out + n, sizeof out - 1 - n)) > 0) n += (size_t)r;
    out[n] = 0;
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    int got = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    CHECK(got == code, "%s: exit code %d, expected %d (output: %s)", what, got, code, out);
    CHECK(strstr(out, needle) != NULL, "%s: message \"%s\" does not contain \"%s\"", what, out,
          needle);
}

/* ------------------------------------------------------------------ format */

static struct pl_tokens random_tokens(int64_t n, int vocab, uint64_t seed)
{
    struct pl_tokens t = pl_tokens_new(n, vocab, "random");
    for (int64_t i = 0; i < n; i++) t.tok[i] = (uint16_t)(pl_rng_u64(seed, 7, (uint64_t)i) % (uint64_t)vocab);
    return t;
}

static void test_roundtrip(void)
{
    const int vocabs[] = {1, 256, 1000, PL_TOKENS_MAX_VOCAB};
    const int64_t sizes[] = {0, 1, 77777};
    for (size_t v = 0; v < sizeof vocabs / sizeof *vocabs; v++) {
        for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
            struct pl_tokens t = random_tokens(sizes[s], vocabs[v], v * 10 + s);
            const char *p = path_of("rt.tok");
            pl_tokens_write(p, &t);
            struct pl_tokens u;
            char err[1024];
            int rc = pl_tokens_read_checked(p, &u, err, sizeof err);
            CHECK(rc == 0, "round trip vocab %d n %lld: read failed: %s", vocabs[v],
                  (long long)sizes[s], err);
            if (rc == 0) {
                CHECK(u.n == t.n && u.vocab == t.vocab,
                      "round trip: got n=%lld vocab=%d, wrote n=%lld vocab=%d", (long long)u.n,
                      u.vocab, (long long)t.n, t.vocab);
                CHECK(u.n != t.n || memcmp(u.tok, t.tok, (size_t)t.n * 2) == 0,
                      "round trip vocab %d n %lld: tokens differ", vocabs[v], (long long)t.n);
                CHECK(strstr(u.source, "rt.tok") != NULL, "source '%s' should name the file",
                      u.source);
                pl_tokens_free(&u);
            }
            pl_tokens_free(&t);
        }
    }
    /* No temporary file is left beside the output by the atomic write. */
    char cmd[600];
    snprintf(cmd, sizeof cmd, "ls %s | grep -q tmp", dir);
    CHECK(system(cmd) != 0, "a temporary file was left in %s after writing", dir);

    /* The header layout documented in datasets/README.md, byte by byte. */
    struct pl_tokens t = random_tokens(5, 300, 99);
    pl_tokens_write(path_of("layout.tok"), &t);
    size_t n;
    unsigned char *b = read_raw(path_of("layout.tok"), &n);
    CHECK(n == PL_TOKENS_HEADER_BYTES + 10, "file of 5 tokens is %zu bytes, expected %d", n,
          PL_TOKENS_HEADER_BYTES + 10);
    CHECK(memcmp(b, "PLTOKENS", 8) == 0, "magic is not PLTOKENS at offset 0");
    CHECK(b[8] == PL_TOKENS_VERSION && b[12] == (300 & 0xff) && b[13] == (300 >> 8) &&
              b[16] == 2 && b[20] == PL_TOKENS_HEADER_BYTES && b[24] == 5,
          "header fields are not at their documented offsets");
    uint64_t sum = 0;
    for (int i = 0; i < 8; i++) sum |= (uint64_t)b[32 + i] << (8 * i);
    CHECK(sum == pl_tokens_checksum(t.tok, t.n), "checksum at offset 32 does not match");
    CHECK(b[64] == (t.tok[0] & 0xff) && b[65] == (t.tok[0] >> 8),
          "first token is not little-endian uint16 at offset 64");
    free(b);
    pl_tokens_free(&t);
}

static void read_or_exit(const void *path)
{
    struct pl_tokens t = pl_tokens_read((const char *)path);
    pl_tokens_free(&t);
}

/* Each corruption of a good file, refused with a message naming the file and the fault. */
static void test_bad_files(void)
{
    struct pl_tokens t = random_tokens(1000, 256, 5);
    const char *good = path_of("good.tok");
    pl_tokens_write(good, &t);
    size_t n;
    unsigned char *b = read_raw(good, &n);
    unsigned char *c = malloc(n + 16);

    const char *p;
    char err[1024];
    struct pl_tokens u;

#define BAD(label, bytes, len_, needle_)                                                      \
    do {                                                                                      \
        p = path_of(label ".tok");                                                            \
        write_raw(p, bytes, len_);                                                            \
        int rc_ = pl_tokens_read_checked(p, &u, err, sizeof err);                            \
        CHECK(rc_ == -1, "%s: a bad file was accepted", label);                               \
        if (rc_ == 0) pl_tokens_free(&u);                                                     \
        CHECK(rc_ != -1 || strstr(err, needle_), "%s: message \"%s\" lacks \"%s\"", label,     \
              err, needle_);                                                                  \
        CHECK(rc_ != -1 || strstr(err, p), "%s: message \"%s\" does not name the file",      \
              label, err);                                                                    \
        expect_exit(label " (exit path)", read_or_exit, p, PL_EXIT_USAGE, needle_);         \
    } while (0)

    memcpy(c, b, n);
    memcpy(c, "GPT2DATA", 8);
    BAD("wrong-magic", c, n, "wrong magic");
    static const char text[] = "Hello, world. This is text.\n"
                               "more text to pass the header size......\n";
    BAD("text-file", text, sizeof text - 1, "not a paralab token file");

    memcpy(c, b, n);
    c[8] = 9;
    BAD("wrong-version", c, n, "format version 9");

    BAD("short-header", b, 20, "shorter than the 64-byte header");
    BAD("truncated", b, n - 7, "truncated");

    memcpy(c, b, n);
    memset(c + n, 0, 6);
    BAD("count-mismatch", c, n + 6, "count mismatch");

    memcpy(c, b, n);
    memset(c + 12, 0, 4);
    BAD("vocab-zero", c, n, "vocab size 0");
    c[12] = 0x01, c[14] = 0x01; /* 65537 */
    BAD("vocab-large", c, n, "vocab size 65537");

    memcpy(c, b, n);
    c[64 + 2 * 10] ^= 0x01;
    BAD("checksum", c, n, "checksum");

    memcpy(c, b, n);
    c[16] = 4;
    BAD("token-width", c, n, "bytes per token");

    /* A token outside the vocabulary with a consistent checksum: caught by the range check. */
    struct pl_tokens big = random_tokens(100, 256, 6);
    big.tok[42] = 300;
    pl_tokens_write(path_of("range.tok"), &big);
    int rc = pl_tokens_read_checked(path_of("range.tok"), &u, err, sizeof err);
    CHECK(rc == -1 && strstr(err, "token 300 at index 42 is out of range"),
          "out-of-range token: rc %d, message \"%s\"", rc, err);
    if (rc == 0) pl_tokens_free(&u);
    expect_exit("out-of-range token (exit path)", read_or_exit, path_of("range.tok"),
                PL_EXIT_USAGE, "out of range");
    pl_tokens_free(&big);

    rc = pl_tokens_read_checked(path_of("missing.tok"), &u, err, sizeof err);
    CHECK(rc == -1 && strstr(err, "cannot open") && strstr(err, "missing.tok"),
          "missing file: rc %d, message \"%s\"", rc, err);
    expect_exit("missing file (exit path)", read_or_exit, path_of("missing.tok"), PL_EXIT_USAGE,
                "cannot open");
    rc = pl_tokens_read_checked(dir, &u, err, sizeof err);
    CHECK(rc == -1 && strstr(err, "not a regular file"), "directory: rc %d, message \"%s\"",
          rc, err);
#undef BAD
    free(b);
    free(c);
    pl_tokens_free(&t);
}

/* ------------------------------------------------------------------ loader */

/* ------------------------------------------------------------------ fileio.h */

static void write_or_exit(const void *path)
{
    struct pl_tokens t = random_tokens(10, 256, 1);
    pl_tokens_write(path, &t);
    pl_tokens_free(&t);
}

static void test_fileio(void)
{
    /* FNV-1a 64: the offset basis for no bytes, and the published vector for "a" */
    CHECK(pl_fnv1a(PL_FNV1A_START, "", 0) == PL_FNV1A_START, "FNV-1a of no bytes");
    CHECK(pl_fnv1a(PL_FNV1A_START, "a", 1) == 0xaf63dc4c8601ec8cULL, "FNV-1a of \"a\": %016llx",
          (unsigned long long)pl_fnv1a(PL_FNV1A_START, "a", 1));
    /* the token checksum is FNV-1a over the little-endian bytes the file holds */
    const uint16_t tok[3] = {0x0102, 0xff00, 7};
    const unsigned char le[6] = {0x02, 0x01, 0x00, 0xff, 7, 0};
    CHECK(pl_tokens_checksum(tok, 3) == pl_fnv1a(PL_FNV1A_START, le, 6),
          "pl_tokens_checksum is not FNV-1a of the little-endian tokens");
    unsigned char b[8];
    pl_put_le(b, 0x0807060504030201ULL, 8);
    CHECK(b[0] == 1 && b[7] == 8 && pl_get_le(b, 8) == 0x0807060504030201ULL &&
              pl_get_le(b, 3) == 0x030201,
          "little-endian put/get");

    /* Output paths are checked for real; a bad one is the user's error, exit 2. */
    char err[8400];
    CHECK(pl_atomic_check("/nonexistent-pl-dir/x.tok", "token file", err, sizeof err) == -1 &&
              strstr(err, "does its directory exist"),
          "a missing directory: %s", err);
    CHECK(pl_atomic_check(dir, "token file", err, sizeof err) == -1 &&
              strstr(err, "is a directory"),
          "a directory as the file: %s", err);
    const char *ok = path_of("writable.tok");
    struct stat st;
    CHECK(pl_atomic_check(ok, "token file", err, sizeof err) == 0, "writable path refused: %s",
          err);
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", ok, (long)getpid());
    CHECK(stat(ok, &st) != 0 && stat(tmp, &st) != 0, "pl_atomic_check left %s or %s behind",
          ok, tmp);
    expect_exit("token file into a missing directory", write_or_exit,
                "/nonexistent-pl-dir/x.tok", PL_EXIT_USAGE, "cannot write token file");
    expect_exit("token file over a directory", write_or_exit, dir, PL_EXIT_USAGE,
                "is a directory");
}

static void test_loader(void)
{
    const int B = 12, T = 7;
    /* W = (n-1)/T windows; 40 windows means an epoch ends inside the 4th batch. */
    struct pl_tokens data = pl_corpus_tokens(3, 40 * T + 1 + 3);
    struct pl_loader full;
    pl_loader_init(&full, &data, B, T, 0, 1, 11);
    CHECK(full.windows == 40, "windows: got %lld, expected %d", (long long)full.windows, 40);
    CHECK(full.local_B == B, "single device local batch %d, expected %d", full.local_B, B);

    int *fin = malloc(sizeof(int) * B * T), *ftg = malloc(sizeof(int) * B * T);
    int *in = malloc(sizeof(int) * B * T), *tg = malloc(sizeof(int) * B * T);

    /* Every window appears exactly once per epoch. */
    for (int64_t e = 0; e < 3; e++) {
        int seen[40] = {0};
        for (int64_t g = e * 40; g < (e + 1) * 40; g++) {
            int64_t w = pl_loader_window(&full, g);
            if (w >= 0 && w < 40) seen[w]++;
        }
        int once = 1;
        for (int w = 0; w < 40; w++) once &= seen[w] == 1;
        CHECK(once, "epoch %lld does not visit each of the 40 windows exactly once",
              (long long)e);
    }
    int differ = 0;
    for (int64_t g = 0; g < 40; g++)
        differ |= pl_loader_window(&full, g) != pl_loader_window(&full, g + 40);
    CHECK(differ, "epochs 0 and 1 have the same order: the shuffle ignores the epoch");

    for (int64_t step = 0; step < 9; step++) {
        pl_loader_batch(&full, step, fin, ftg);
        /* The single-device batch against the token stream itself. */
        for (int i = 0; i < B; i++) {
            int64_t w = pl_loader_window(&full, step * B + i);
            for (int t = 0; t < T; t++) {
                int ei = data.tok[w * T + t], et = data.tok[w * T + t + 1];
                if (fin[i * T + t] != ei || ftg[i * T + t] != et) {
                    CHECK(0, "step %lld row %d pos %d: got (%d,%d), stream has (%d,%d)",
                          (long long)step, i, t, fin[i * T + t], ftg[i * T + t], ei, et);
                    i = B;
                    break;
                }
            }
        }
        for (int R = 1; R <= 4; R++) {
            int *cat_in = malloc(sizeof(int) * B * T), *cat_tg = malloc(sizeof(int) * B * T);
            for (int r = 0; r < R; r++) {
                struct pl_loader l;
                pl_loader_init(&l, &data, B, T, r, R, 11);
                CHECK(l.local_B == B / R, "R=%d: local batch %d, expected %d", R, l.local_B,
                      B / R);
                pl_loader_batch(&l, step, in, tg);
                CHECK(pl_loader_seq0(&l, step) == step * B + (int64_t)r * (B / R),
                      "R=%d rank %d step %lld: seq0 %lld, expected %lld", R, r, (long long)step,
                      (long long)pl_loader_seq0(&l, step), (long long)(step * B + r * (B / R)));
                memcpy(cat_in + (size_t)r * l.local_B * T, in, sizeof(int) * l.local_B * T);
                memcpy(cat_tg + (size_t)r * l.local_B * T, tg, sizeof(int) * l.local_B * T);
                pl_loader_free(&l);
            }
            CHECK(memcmp(cat_in, fin, sizeof(int) * B * T) == 0 &&
                      memcmp(cat_tg, ftg, sizeof(int) * B * T) == 0,
                  "step %lld, %d ranks: the ranks' slices do not concatenate to the "
                  "single-device batch",
                  (long long)step, R);
            free(cat_in);
            free(cat_tg);
        }
    }
    /* Within an epoch the rows of a batch are distinct windows, so rank slices are disjoint
     * in content, not only in position. */
    for (int i = 0; i < B; i++)
        for (int j = i + 1; j < B; j++)
            CHECK(pl_loader_window(&full, i) != pl_loader_window(&full, j),
                  "rows %d and %d of step 0 use the same window", i, j);

    /* A fresh loader (a resumed run) gives the same batch for a late step. */
    struct pl_loader again;
    pl_loader_init(&again, &data, B, T, 0, 1, 11);
    pl_loader_batch(&full, 7, fin, ftg);
    pl_loader_batch(&again, 7, in, tg);
    CHECK(memcmp(in, fin, sizeof(int) * B * T) == 0, "a new loader gives another batch at step 7");
    pl_loader_free(&again);

    free(fin);
    free(ftg);
    free(in);
    free(tg);
    pl_loader_free(&full);
    pl_tokens_free(&data);
}

struct loader_args {
    int64_t n;
    int B, T, R;
};

static void loader_or_exit(const void *arg)
{
    const struct loader_args *a = arg;
    struct pl_tokens d = pl_corpus_tokens(1, a->n);
    struct pl_loader l;
    pl_loader_init(&l, &d, a->B, a->T, 0, a->R, 1);
    pl_loader_free(&l);
    pl_tokens_free(&d);
}

static void test_loader_errors(void)
{
    struct loader_args a = {1000, 6, 8, 4};
    expect_exit("batch not divisible by ranks", loader_or_exit, &a, PL_EXIT_USAGE,
                "batch=6 is not divisible by 4 ranks");
    struct loader_args s = {8 * 16, 8, 16, 1}; /* needs 8*16+1 */
    expect_exit("data shorter than one batch", loader_or_exit, &s, PL_EXIT_USAGE,
                "shorter than one batch");
    struct loader_args z = {1000, 0, 8, 1};
    expect_exit("zero batch", loader_or_exit, &z, PL_EXIT_USAGE, "batch=0 must be positive");
}

/* ------------------------------------------------------------------ corpus */

static void test_corpus(void)
{
    const size_t n = 200000;
    char *a = malloc(n), *b = malloc(n), *c = malloc(n);
    pl_corpus_generate(42, a, n);
    pl_corpus_generate(42, b, n);
    CHECK(memcmp(a, b, n) == 0, "seed 42 generated two different corpora");
    pl_corpus_generate(43, c, n);
    CHECK(memcmp(a, c, n) != 0, "seeds 42 and 43 generated the same corpus");
    pl_corpus_generate(42, c, 1234);
    CHECK(memcmp(a, c, 1234) == 0, "a shorter corpus is not a prefix of the longer one");
    CHECK(pl_utf8_first_invalid((unsigned char *)a, n) < 0, "the corpus is not valid UTF-8");

    /* Structure a model can learn must really be there: every arithmetic fact is true,
     * counting runs step by one, and several kinds of paragraph appear. */
    int facts = 0, wrong = 0, counts = 0, stories = 0, scenes = 0;
    char *text = malloc(n + 1);
    memcpy(text, a, n);
    text[n] = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        if ((size_t)(line - text) + strlen(line) >= n) break; /* last line may be cut */
        if (strstr(line, " gives ")) stories++;
        if (!strncmp(line, "The ", 4)) scenes++;
        if (!strncmp(line, "Count from ", 11) || !strncmp(line, "Count down from ", 16)) {
            int down = line[6] == 'd';
            char *p = strchr(line, ':') + 1;
            long prev = -1, first = strtol(line + (down ? 16 : 11), NULL, 10);
            counts++;
            for (char *end; *p && *p != '.'; p = end) {
                long v = strtol(p, &end, 10);
                if (end == p) break;
                long expect = prev < 0 ? first : prev + (down ? -1 : 1);
                if (v != expect) wrong++;
                prev = v;
            }
        }
        for (char *p = line; *p; p++) {
            int x, y, z, len = 0;
            char op;
            if ((p == line || p[-1] == ' ') &&
                sscanf(p, "%d %c %d = %d.%n", &x, &op, &y, &z, &len) == 4 && len > 0 &&
                (op == '+' || op == '-' || op == '*')) {
                facts++;
                int e = op == '+' ? x + y : op == '-' ? x - y : x * y;
                if (e != z) {
                    wrong++;
                    if (wrong < 5) printf("  false fact: %d %c %d = %d\n", x, op, y, z);
                }
                p += len - 1;
            }
        }
    }
    CHECK(wrong == 0, "%d arithmetic facts or counting steps in the corpus are wrong", wrong);
    CHECK(facts > 100 && counts > 20 && stories > 20 && scenes > 20,
          "too little structure: %d facts, %d counting runs, %d stories, %d scenes", facts,
          counts, stories, scenes);
    free(text);
    free(a);
    free(b);
    free(c);

    struct pl_tokens t = pl_corpus_tokens(42, 1000);
    CHECK(t.vocab == PL_BYTE_VOCAB && t.n == 1000, "corpus tokens: vocab %d n %lld", t.vocab,
          (long long)t.n);
    pl_tokens_free(&t);
}

/* ------------------------------------------------------------------ UTF-8 */

static void test_utf8(void)
{
    const char *text = "plain ascii, caf\xc3\xa9, \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e, "
                       "\xf0\x9f\x98\x80 and \xce\xb1\xce\xb2\xce\xb3\n";
    size_t n = strlen(text);
    CHECK(pl_utf8_first_invalid((const unsigned char *)text, n) == -1,
          "valid UTF-8 reported invalid at %lld",
          (long long)pl_utf8_first_invalid((const unsigned char *)text, n));
    write_raw(path_of("u.txt"), text, n);
    size_t m;
    unsigned char *raw = read_raw(path_of("u.txt"), &m);
    struct pl_tokens t = pl_tokens_from_bytes(raw, m, path_of("u.txt"));
    CHECK(t.n == (int64_t)n && t.vocab == 256, "byte tokens: n %lld (expected %zu) vocab %d",
          (long long)t.n, n, t.vocab);
    pl_tokens_write(path_of("u.tok"), &t);
    struct pl_tokens u = pl_tokens_read(path_of("u.tok"));
    unsigned char *back = malloc((size_t)u.n + 1);
    pl_tokens_to_bytes(&u, back);
    CHECK(u.n == (int64_t)n && memcmp(back, text, n) == 0,
          "UTF-8 text did not survive tokenize -> file -> bytes");
    free(back);
    free(raw);
    pl_tokens_free(&t);
    pl_tokens_free(&u);

    struct {
        const char *bytes;
        int64_t at;
    } bad[] = {
        {"ab\x80", 2},          /* lone continuation byte */
        {"a\xc0\x80", 1},       /* overlong NUL */
        {"\xed\xa0\x80", 0},    /* UTF-16 surrogate */
        {"xy\xe6\x97", 2},      /* truncated 3-byte sequence */
        {"\xf5\x80\x80\x80", 0},/* beyond U+10FFFF */
        {"ok\xff", 2},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int64_t got = pl_utf8_first_invalid((const unsigned char *)bad[i].bytes,
                                            strlen(bad[i].bytes));
        CHECK(got == bad[i].at, "invalid UTF-8 case %zu: first bad byte at %lld, expected %lld",
              i, (long long)got, (long long)bad[i].at);
    }
}

int main(void)
{
    if (!mkdtemp(dir)) {
        printf("FAIL: cannot make a temporary directory\n");
        return 1;
    }
    test_roundtrip();
    test_bad_files();
    test_fileio();
    test_loader();
    test_loader_errors();
    test_corpus();
    test_utf8();

    struct pl_mem_stats st;
    pl_mem_get_stats(&st);
    CHECK(st.live_allocs == 0, "%zu allocations still live at the end: a leak", st.live_allocs);

    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) printf("warning: could not remove %s\n", dir);
    printf("test_data: %d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
