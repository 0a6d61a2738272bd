/* test_replay_svg: the replayed timeline's SVG with a style (replay.h's
 * pl_replay_write_svg_styled) on a hand-built trace of 4 ranks: the collectives coloured by
 * their group's class and the unclassed ones in the default colour, the legend naming the
 * classes that occur, the sends and the compute as the style says, a short transfer drawn
 * at the least width, the sends drawn after the collectives, the note; and with no style the
 * same picture as pl_replay_write_svg. No MPI. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "paralab.h"
#include "testing.h"
#include "trace_build.h"

static void compute(struct pl_merged_trace *m, int rank, const char *label)
{
    struct pl_event *e = add(m, rank, PL_EV_COMPUTE);
    snprintf(e->label, sizeof e->label, "%s", label);
    e->flops = 1e10; /* 10 ms: every transfer is far narrower than a pixel */
}

static void all_reduce(struct pl_merged_trace *m, int rank, int group)
{
    struct pl_event *e = add(m, rank, PL_EV_ISSUE);
    e->kind = PL_ALL_REDUCE;
    e->group = group;
    e->bytes = 1e6;
}

static void p2p(struct pl_merged_trace *m, int rank, enum pl_ev_type type, int peer)
{
    struct pl_event *e = add(m, rank, type);
    e->kind = PL_P2P;
    e->peer = peer;
    e->bytes = 8;
}

/* Groups 10 {0,1} and 11 {2,3} (class 0), 12 {0,2} (class 1), 13 {1,3} (no class); each
 * rank computes F then B, all-reduces on its groups, and rank 0 sends to rank 1 at the end. */
static void build(struct pl_merged_trace *m)
{
    static const int g[4][2] = {{0, 1}, {2, 3}, {0, 2}, {1, 3}};
    trace_init(m, 4);
    for (int i = 0; i < 4; i++) add_group(m, 10 + i, 2, g[i]);
    for (int r = 0; r < 4; r++) {
        compute(m, r, "F 0");
        compute(m, r, "B 0");
        all_reduce(m, r, r < 2 ? 10 : 11);
        all_reduce(m, r, r % 2 == 0 ? 12 : 13);
    }
    p2p(m, 0, PL_EV_SEND, 1);
    p2p(m, 1, PL_EV_RECV, 0);
}

/* The whole file at path (free it). */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    char *s = calloc(1, 1 << 20);
    size_t n = f ? fread(s, 1, (1 << 20) - 1, f) : 0;
    if (f) fclose(f);
    s[n] = '\0';
    return s;
}

static int count(const char *s, const char *what)
{
    int n = 0;
    for (const char *q = s; (q = strstr(q, what)); q++) n++;
    return n;
}

/* The width of the first rect whose title starts with what, or -1. */
static double width_of(const char *svg, const char *what)
{
    const char *t = strstr(svg, what);
    if (!t) return -1;
    const char *r = t;
    while (r > svg && strncmp(r, "<rect", 5) != 0) r--;
    const char *w = strstr(r, "width=\"");
    return w && w < t ? atof(w + 7) : -1;
}

int main(void)
{
    struct pl_merged_trace m;
    build(&m);
    struct pl_replay r;
    char err[256];
    CHECK(pl_replay_run(&m, &test_profile, NULL, &r, err, sizeof err) == 0, "replay: %s", err);
    if (failures) return 1;
    char a[] = "/tmp/test_replay_svg_XXXXXX", b[] = "/tmp/test_replay_svg_XXXXXX";
    int fa = mkstemp(a), fb = mkstemp(b);
    CHECK(fa >= 0 && fb >= 0, "temporary files");
    if (fa < 0 || fb < 0) return 1;
    close(fa);
    close(fb);

    /* no style: the plain picture, byte for byte */
    CHECK(pl_replay_write_svg(&m, &r, "plain", a) == 0, "plain svg");
    CHECK(pl_replay_write_svg_styled(&m, &r, "plain", NULL, b) == 0, "styled svg, no style");
    char *plain = slurp(a), *same = slurp(b);
    CHECK(strcmp(plain, same) == 0, "no style draws what pl_replay_write_svg draws");
    CHECK(strstr(plain, "backward (B)") && strstr(plain, ">collective<") &&
              strstr(plain, ">send<"), "the plain legend: letters, collective, send");
    free(same);

    const struct pl_replay_svg_class cls[2] = {{"class A", "#111111"}, {"class B", "#222222"}};
    const int group_class[4] = {0, 0, 1, -1};
    struct pl_replay_svg_style st = {2, cls, group_class, "the sends", "all compute", 3.0,
                                     "a note <here>"};
    CHECK(pl_replay_write_svg_styled(&m, &r, "styled", &st, a) == 0, "styled svg");
    char *svg = slurp(a);
    /* 4 all-reduces on groups 10 and 11, 2 on group 12, 2 on 13; one swatch each in the
     * legend for the classes and the default */
    CHECK(count(svg, "fill=\"#111111\"") == 4 + 1, "class A: 4 spans and a swatch, got %d",
          count(svg, "fill=\"#111111\""));
    CHECK(count(svg, "fill=\"#222222\"") == 2 + 1, "class B: 2 spans and a swatch");
    CHECK(count(svg, "fill=\"#e15759\"") == 2 + 1, "no class: the default colour");
    CHECK(strstr(svg, ">class A<") && strstr(svg, ">class B<") && strstr(svg, ">collective<"),
          "the legend names both classes and the default");
    CHECK(strstr(svg, ">the sends<") && !strstr(svg, ">send<"), "the sends' name");
    CHECK(strstr(svg, ">all compute<") && !strstr(svg, "backward (B)") &&
              !strstr(svg, "forward (F)"), "one compute entry, no letters");
    CHECK(count(svg, "fill=\"#4e79a7\"") == 8 + 1, "all 8 compute spans in one colour");
    CHECK(strstr(svg, "a note &lt;here&gt;") != NULL, "the note, escaped");
    double w = width_of(svg, "<title>rank 0: send");
    CHECK(w >= 3.0 && w < 3.01, "a short send drawn 3 pixels wide, got %g", w);
    const char *send = strstr(svg, "<title>rank 0: send"), *coll = strstr(svg, "rank 1: ");
    const char *last_coll = NULL;
    for (const char *q = svg; (q = strstr(q, "<title>rank 0: all_reduce")); q++) last_coll = q;
    CHECK(send && last_coll && last_coll < send && (!coll || send < coll),
          "rank 0's send drawn after its collectives");
    free(svg);

    /* every group classed: no default entry */
    const int all_classed[4] = {0, 0, 1, 1};
    st.group_class = all_classed;
    CHECK(pl_replay_write_svg_styled(&m, &r, "styled", &st, a) == 0, "styled svg");
    svg = slurp(a);
    CHECK(!strstr(svg, ">collective<") && count(svg, "fill=\"#e15759\"") == 0,
          "every collective classed: no default colour, no entry");
    free(svg);
    free(plain);
    unlink(a);
    unlink(b);
    pl_replay_free(&r);
    pl_trace_merged_free(&m);
    if (failures) {
        printf("test_replay_svg: %d of %d checks failed\n", failures, checks);
        return 1;
    }
    printf("test_replay_svg: all %d checks passed\n", checks);
    return 0;
}
