/* test_grid: the rank grid against independent arithmetic, its communicators on real MPI, and
 * the messages for grids that cannot be built.
 *     test_grid                          coords, groups, neighbours, describe, error texts
 *     test_grid mpi ORDER DEGREES        pl_grid_comm on every axis, on the launched ranks
 *     test_grid bad WORLD ORDER [DEGREES] pl_grid_init_or_die on a world of WORLD (exit 2) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paralab.h"
#include "testing.h"


#define MAXR 64

/* Every rank's coordinates, by counting: ranks are visited in order while an odometer
 * whose first digit turns fastest advances, which is what "leftmost fastest" means. */
static void odometer(const struct pl_grid *g, int coords[][PL_GRID_MAX_AXES])
{
    int c[PL_GRID_MAX_AXES] = {0};
    for (int r = 0; r < g->world; r++) {
        memcpy(coords[r], c, sizeof c);
        for (int a = 0; a < g->naxes; a++) {
            if (++c[a] < g->size[a]) break;
            c[a] = 0;
        }
    }
}

/* Does rank q share every coordinate with r except along axis? */
static int same_but(const int *cr, const int *cq, int naxes, int axis)
{
    for (int a = 0; a < naxes; a++)
        if (a != axis && cr[a] != cq[a]) return 0;
    return 1;
}

/* The members of r's group along axis, by scanning all ranks, in axis-coordinate order. */
static int expected_group(const struct pl_grid *g, int coords[][PL_GRID_MAX_AXES], int r,
                          int axis, int *members)
{
    int n = 0;
    for (int k = 0; k < g->size[axis]; k++)
        for (int q = 0; q < g->world; q++)
            if (coords[q][axis] == k && same_but(coords[r], coords[q], g->naxes, axis))
                members[n++] = q;
    return n;
}

static int expected_neighbor(const struct pl_grid *g, int coords[][PL_GRID_MAX_AXES], int r,
                             int axis, int delta)
{
    for (int q = 0; q < g->world; q++)
        if (coords[q][axis] == coords[r][axis] + delta &&
            same_but(coords[r], coords[q], g->naxes, axis))
            return q;
    return -1;
}

static void check_shape(const char *order, const char *degrees, int world, const int *want_sizes)
{
    struct pl_grid g;
    char err[512], what[160], desc[128];
    snprintf(what, sizeof what, "order %s, degrees %s, %d ranks", order, degrees, world);
    int rc = pl_grid_init(&g, order, degrees, world, err, sizeof err);
    CHECK(rc == 0, "%s: init failed: %s", what, err);
    if (rc != 0) return;
    int naxes = 1;
    for (const char *p = order; *p; p++) naxes += *p == '-';
    CHECK(g.naxes == naxes, "%s: %d axes, expected %d", what, g.naxes, naxes);
    long product = 1;
    for (int a = 0; a < g.naxes; a++) {
        CHECK(g.size[a] == want_sizes[a], "%s: axis %s has size %d, expected %d", what,
              g.axis[a], g.size[a], want_sizes[a]);
        product *= g.size[a];
    }
    CHECK(product == world, "%s: sizes multiply to %ld", what, product);

    static int coords[MAXR][PL_GRID_MAX_AXES];
    odometer(&g, coords);
    for (int r = 0; r < world; r++) {
        int c[PL_GRID_MAX_AXES];
        pl_grid_coords(&g, r, c);
        for (int a = 0; a < g.naxes; a++) {
            CHECK(c[a] == coords[r][a], "%s: rank %d coord on %s is %d, expected %d", what, r,
                  g.axis[a], c[a], coords[r][a]);
            CHECK(pl_grid_coord(&g, r, a) == coords[r][a], "%s: pl_grid_coord(%d, %s)", what, r,
                  g.axis[a]);
        }
        CHECK(pl_grid_rank(&g, coords[r]) == r, "%s: rank of rank %d's coords is %d", what, r,
              pl_grid_rank(&g, coords[r]));
        for (int a = 0; a < g.naxes; a++) {
            int got[MAXR], want[MAXR];
            int n = pl_grid_group(&g, r, a, got), wn = expected_group(&g, coords, r, a, want);
            CHECK(n == wn && !memcmp(got, want, (size_t)n * sizeof *got),
                  "%s: rank %d's %s group has %d members starting %d, expected %d starting %d",
                  what, r, g.axis[a], n, got[0], wn, want[0]);
            for (int d = -1; d <= 1; d += 2) {
                int nb = pl_grid_neighbor(&g, r, a, d), wnb = expected_neighbor(&g, coords, r, a, d);
                CHECK(nb == wnb, "%s: rank %d's neighbour %+d along %s is %d, expected %d", what,
                      r, d, g.axis[a], nb, wnb);
            }
        }
        /* An axis the order lacks behaves as an axis of size 1. */
        int self[1];
        CHECK(pl_grid_group(&g, r, -1, self) == 1 && self[0] == r, "absent axis: group of one");
        CHECK(pl_grid_neighbor(&g, r, -1, 1) == -1, "absent axis: no neighbour");
    }
    /* The pipeline's ends have no neighbour beyond them. */
    int pp = pl_grid_axis(&g, "pp");
    if (pp >= 0) {
        int first[PL_GRID_MAX_AXES] = {0}, last[PL_GRID_MAX_AXES] = {0};
        last[pp] = g.size[pp] - 1;
        CHECK(pl_grid_neighbor(&g, pl_grid_rank(&g, first), pp, -1) == -1, "%s: first stage", what);
        CHECK(pl_grid_neighbor(&g, pl_grid_rank(&g, last), pp, +1) == -1, "%s: last stage", what);
    }
    pl_grid_describe(&g, desc, sizeof desc);
    char want_desc[128] = "";
    size_t k = 0;
    for (int a = 0; a < g.naxes; a++)
        k += (size_t)snprintf(want_desc + k, sizeof want_desc - k, "%s%s%d", a ? "-" : "",
                              g.axis[a], want_sizes[a]);
    CHECK(!strcmp(desc, want_desc), "%s: describe gives %s, expected %s", what, desc, want_desc);
    for (int a = 0; a < g.naxes; a++)
        CHECK(pl_grid_axis_size(&g, g.axis[a]) == want_sizes[a], "%s: axis_size(%s)", what,
              g.axis[a]);
    CHECK(pl_grid_axis(&g, "ep") < 0 || strstr(order, "ep"), "%s: ep absent", what);
    if (!strstr(order, "ep")) CHECK(pl_grid_axis_size(&g, "ep") == 1, "absent axis size 1");
}

static void expect_error(const char *order, const char *degrees, int world, const char *must)
{
    struct pl_grid g;
    char err[512] = "";
    int rc = pl_grid_init(&g, order, degrees, world, err, sizeof err);
    CHECK(rc == -1 && strstr(err, must), "order '%s' degrees '%s' on %d ranks: expected an error "
          "containing '%s', got rc=%d '%s'", order ? order : "(null)", degrees ? degrees : "(null)",
          world, must, rc, err);
}

static int serial_checks(void)
{
    check_shape("tp-dp-pp", "tp=2,pp=2", 8, (int[]){2, 2, 2});
    check_shape("pp-dp-tp", "tp=2,dp=2,pp=2", 8, (int[]){2, 2, 2});
    check_shape("tp-cp-ep-dp-pp", "tp=2,pp=2", 8, (int[]){2, 1, 1, 2, 2});
    check_shape("tp-dp-pp", "tp=2,pp=2", 12, (int[]){2, 3, 2});
    check_shape("dp-pp-tp", "pp=2, tp=2", 12, (int[]){3, 2, 2});
    check_shape("tp-cp-ep-dp-pp", "", 1, (int[]){1, 1, 1, 1, 1});
    check_shape("tp-dp-pp", NULL, 5, (int[]){1, 5, 1});
    check_shape("pp-tp", "pp=4,tp=3", 12, (int[]){4, 3});

    expect_error("tp-xx-pp", "", 8, "unknown axis \"xx\"");
    expect_error("tp-xx-pp", "", 8, "tp, cp, ep, dp, pp");
    expect_error("tp-dp-tp", "", 8, "appears twice");
    expect_error("tp--dp", "", 8, "empty axis name");
    expect_error("", "", 8, "e.g. \"tp-cp-ep-dp-pp\"");
    expect_error(NULL, "", 8, "empty grid order");
    expect_error("tp-dp-pp", "tp=0", 8, "tp=0: a degree must be at least 1");
    expect_error("tp-dp-pp", "pp=-2", 8, "pp=-2: a degree must be at least 1");
    expect_error("tp-dp-pp", "tp=2,tp=2", 8, "given twice");
    expect_error("tp-dp-pp", "tp=x", 8, "not a whole number");
    expect_error("tp-dp-pp", "tp", 8, "has no value");
    expect_error("tp-dp-pp", "zz=2", 8, "unknown axis \"zz\"");
    expect_error("tp-dp", "pp=2", 8, "has no pp axis");
    expect_error("tp-dp-pp", "tp=2,pp=2", 6, "tp2 x pp2 = 4 does not divide 6 ranks");
    expect_error("tp-dp-pp", "tp=2,pp=2", 6, "1, 2, 3, 6");
    expect_error("tp-dp-pp", "tp=2,dp=2,pp=2", 6, "tp2 x dp2 x pp2 = 8, but the job has 6 ranks");
    expect_error("tp-pp", "tp=2", 8, "= 2, but the job has 8 ranks");
    expect_error("tp-dp-pp", "", 0, "at least 1 rank");

    if (failures) {
        printf("test_grid: %d of %d checks failed\n", failures, checks);
        return 1;
    }
    printf("test_grid: all %d checks passed\n", checks);
    return 0;
}

/* On the launched ranks: each axis' communicator has the right size, this rank's
 * coordinate as its rank, the expected world ranks, and sums over exactly its members. */
static int mpi_checks(int argc, char **argv)
{
    pl_init(&argc, &argv);
    if (argc < 4) pl_usage_error_all("usage: test_grid mpi ORDER DEGREES");
    struct pl_grid g;
    pl_grid_init_or_die(&g, argv[2], argv[3], pl_size());
    static int coords[PL_TOPO_MAX_RANKS][PL_GRID_MAX_AXES];
    if (g.world > PL_TOPO_MAX_RANKS) pl_usage_error_all("too many ranks");
    odometer(&g, coords);
    int me = pl_rank();
    for (int a = 0; a < g.naxes; a++) {
        struct pl_comm *c = pl_grid_comm(&g, pl_comm_world(), a);
        int want[PL_TOPO_MAX_RANKS];
        int n = expected_group(&g, coords, me, a, want);
        CHECK(pl_comm_size(c) == n, "%s comm has %d ranks, expected %d", g.axis[a],
              pl_comm_size(c), n);
        CHECK(pl_comm_rank(c) == coords[me][a], "rank in the %s comm is %d, expected coord %d",
              g.axis[a], pl_comm_rank(c), coords[me][a]);
        CHECK(!strcmp(pl_comm_name(c), g.axis[a]), "comm named %s, expected %s", pl_comm_name(c),
              g.axis[a]);
        for (int k = 0; k < n && k < pl_comm_size(c); k++)
            CHECK(pl_comm_world_rank(c, k) == want[k], "%s member %d is world rank %d, expected %d",
                  g.axis[a], k, pl_comm_world_rank(c, k), want[k]);
        float mine = (float)me, sum = -1.0f;
        float *buf = pl_comm_buf_alloc(1, "world rank"); /* device memory on the GPU build */
        pl_copy_from_host(buf, &mine, 1);
        pl_all_reduce(c, buf, buf, 1, PL_SUM);
        pl_copy_to_host(&sum, buf, 1);
        pl_comm_buf_free(buf);
        int want_sum = 0;
        for (int k = 0; k < n; k++) want_sum += want[k];
        CHECK(sum == (float)want_sum, "all-reduce of world ranks over %s gives %g, expected %d",
              g.axis[a], (double)sum, want_sum);
        pl_comm_free(c);
    }
    /* Every rank reports, then rank 0 gives the verdict for the whole job. */
    double total = world_sum(failures);
    char desc[128];
    pl_print0("test_grid mpi %s on %d ranks: %s\n", pl_grid_describe(&g, desc, sizeof desc),
              pl_size(), total == 0.0 ? "all checks passed" : "checks FAILED");
    pl_finalize();
    return total == 0.0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "mpi")) return mpi_checks(argc, argv);
    if (argc >= 4 && !strcmp(argv[1], "bad")) {
        struct pl_grid g;
        pl_grid_init_or_die(&g, argv[3], argc > 4 ? argv[4] : NULL, atoi(argv[2]));
        printf("grid %s was accepted\n", pl_grid_describe(&g, (char[128]){0}, 128));
        return 1;
    }
    if (argc >= 2) {
        fprintf(stderr, "usage: test_grid [mpi ORDER DEGREES | bad WORLD ORDER [DEGREES]]\n");
        return 2;
    }
    return serial_checks();
}
