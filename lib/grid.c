/* grid.c: the rank grid of grid.h. Mixed-radix arithmetic over the axes of an order string,
 * leftmost fastest, and the parsing of orders and degrees with errors that say what would
 * work. */
#include "grid.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "util.h"
#include "comm.h"

static const char *const known_axes[] = {"tp", "cp", "ep", "dp", "pp"};
#define NKNOWN ((int)(sizeof known_axes / sizeof known_axes[0]))
#define KNOWN_LIST "tp, cp, ep, dp, pp"
/* Keeps products of degrees far from int overflow; no job is this large. */
#define DEGREE_LIMIT (1 << 20)

static int known_axis(const char *name, size_t len)
{
    for (int i = 0; i < NKNOWN; i++)
        if (strlen(known_axes[i]) == len && !strncmp(known_axes[i], name, len)) return i;
    return -1;
}

static int find_axis(const struct pl_grid *g, const char *name, size_t len)
{
    for (int i = 0; i < g->naxes; i++)
        if (strlen(g->axis[i]) == len && !strncmp(g->axis[i], name, len)) return i;
    return -1;
}

/* "tp2 x pp2" for the axes given, for messages. */
static void describe_product(const struct pl_grid *g, const int *given, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; i < g->naxes && n < len; i++) {
        if (!given[i]) continue;
        n += (size_t)snprintf(buf + n, len - n, "%s%s%d", n ? " x " : "", g->axis[i], g->size[i]);
    }
    if (!buf[0]) snprintf(buf, len, "(no degrees)");
}

/* "1, 2, 3, 6" */
static void list_divisors(int n, char *buf, size_t len)
{
    size_t k = 0;
    buf[0] = '\0';
    for (int d = 1; d <= n && k < len; d++)
        if (n % d == 0) k += (size_t)snprintf(buf + k, len - k, "%s%d", k ? ", " : "", d);
}

static int parse_order(struct pl_grid *g, const char *order, char *err, size_t errlen)
{
    if (!order || !*order)
        return pl_err(err, errlen, "empty grid order; give axes joined by '-', leftmost fastest, "
                                 "e.g. \"tp-cp-ep-dp-pp\" (known axes: " KNOWN_LIST ")");
    const char *p = order;
    while (1) {
        const char *dash = strchr(p, '-');
        size_t len = dash ? (size_t)(dash - p) : strlen(p);
        if (len == 0)
            return pl_err(err, errlen, "grid order \"%s\" has an empty axis name; join axes with "
                                     "single dashes, e.g. \"tp-dp-pp\"", order);
        if (known_axis(p, len) < 0)
            return pl_err(err, errlen, "unknown axis \"%.*s\" in grid order \"%s\" (known axes: "
                                     KNOWN_LIST ")", (int)len, p, order);
        if (find_axis(g, p, len) >= 0)
            return pl_err(err, errlen, "axis \"%.*s\" appears twice in grid order \"%s\"; name "
                                     "each axis once", (int)len, p, order);
        memcpy(g->axis[g->naxes], p, len);
        g->axis[g->naxes][len] = '\0';
        g->size[g->naxes] = 0;
        g->naxes++;
        if (!dash) break;
        p = dash + 1;
    }
    return 0;
}

/* Fills g->size from "tp=2,pp=2"; given[i] marks the axes named there. */
static int parse_degrees(struct pl_grid *g, const char *order, const char *degrees, int *given,
                         char *err, size_t errlen)
{
    if (!degrees) return 0;
    const char *p = degrees;
    while (*p) {
        while (*p == ' ' || *p == ',') p++;
        if (!*p) break;
        const char *eq = p;
        while (*eq && *eq != '=' && *eq != ',' && *eq != ' ') eq++;
        size_t len = (size_t)(eq - p);
        if (*eq != '=')
            return pl_err(err, errlen, "degree \"%.*s\" in \"%s\" has no value; write axis=degree, "
                                     "e.g. \"tp=2,pp=2\"", (int)len, p, degrees);
        if (known_axis(p, len) < 0)
            return pl_err(err, errlen, "unknown axis \"%.*s\" in degrees \"%s\" (known axes: "
                                     KNOWN_LIST ")", (int)len, p, degrees);
        int a = find_axis(g, p, len);
        if (a < 0)
            return pl_err(err, errlen, "degree given for \"%.*s\", but the grid order \"%s\" has no "
                                     "%.*s axis; add it to the order or drop the degree",
                         (int)len, p, order, (int)len, p);
        if (given[a])
            return pl_err(err, errlen, "axis \"%s\" is given twice in degrees \"%s\"", g->axis[a],
                        degrees);
        char *end = NULL;
        long v = strtol(eq + 1, &end, 10);
        if (end == eq + 1 || (*end && *end != ',' && *end != ' '))
            return pl_err(err, errlen, "degree of %s in \"%s\" is not a whole number", g->axis[a],
                        degrees);
        if (v < 1)
            return pl_err(err, errlen, "%s=%ld: a degree must be at least 1 (1 means the axis is "
                                     "not split)", g->axis[a], v);
        if (v > DEGREE_LIMIT)
            return pl_err(err, errlen, "%s=%ld is larger than any job this kit runs", g->axis[a], v);
        g->size[a] = (int)v;
        given[a] = 1;
        p = end;
    }
    return 0;
}

int pl_grid_init(struct pl_grid *g, const char *order, const char *degrees, int world,
                 char *err, size_t errlen)
{
    memset(g, 0, sizeof *g);
    if (err && errlen) err[0] = '\0';
    if (world < 1) return pl_err(err, errlen, "a grid needs at least 1 rank, got %d", world);
    if (parse_order(g, order, err, errlen) != 0) return -1;
    int given[PL_GRID_MAX_AXES] = {0};
    if (parse_degrees(g, order, degrees, given, err, errlen) != 0) return -1;

    int dp = -1;
    long product = 1;
    for (int i = 0; i < g->naxes; i++) {
        if (!given[i] && !strcmp(g->axis[i], "dp")) {
            dp = i;
            continue;
        }
        if (!given[i]) g->size[i] = 1;
        product *= g->size[i];
        if (product > DEGREE_LIMIT) break;
    }
    /* The texts of the messages below, written only for a message (the planner builds
     * grids by the thousand). */
    char prod[128] = "", divs[256] = "";
    int failed = dp >= 0 ? product > world || world % product != 0 : product != world;
    if (failed && err && errlen) {
        describe_product(g, given, prod, sizeof prod);
        list_divisors(world, divs, sizeof divs);
    }
    if (dp >= 0) {
        if (failed)
            return pl_err(err, errlen, "%s = %ld does not divide %d ranks, so dp cannot be "
                                     "inferred; choose degrees whose product divides %d (%s), "
                                     "or run on a multiple of %ld ranks",
                        prod, product, world, world, divs, product);
        g->size[dp] = (int)(world / product);
    } else if (failed) {
        /* Inferring dp is only a way out when the order has a dp axis (its degree was given). */
        int has_dp = 0;
        for (int i = 0; i < g->naxes; i++) has_dp |= !strcmp(g->axis[i], "dp");
        return pl_err(err, errlen, "%s = %ld, but the job has %d ranks; the degrees must multiply "
                                   "to %d%s, or run on %ld ranks",
                      prod, product, world, world,
                      has_dp ? " (leave dp out of the degrees to have it inferred)" : "", product);
    }
    g->world = world;
    return 0;
}

void pl_grid_init_or_die(struct pl_grid *g, const char *order, const char *degrees, int world)
{
    char err[512];
    if (pl_grid_init(g, order, degrees, world, err, sizeof err) != 0) pl_usage_error_all("%s", err);
}

int pl_grid_axis(const struct pl_grid *g, const char *name)
{
    return name ? find_axis(g, name, strlen(name)) : -1;
}

int pl_grid_axis_size(const struct pl_grid *g, const char *name)
{
    int a = pl_grid_axis(g, name);
    return a < 0 ? 1 : g->size[a];
}

/* Ranks between consecutive coordinates along axis. */
static int stride(const struct pl_grid *g, int axis)
{
    int s = 1;
    for (int i = 0; i < axis; i++) s *= g->size[i];
    return s;
}

static void check_rank(const struct pl_grid *g, int rank)
{
    if (rank < 0 || rank >= g->world)
        pl_fatal("rank %d is outside the grid of %d ranks", rank, g->world);
}

static void check_axis(const struct pl_grid *g, int axis)
{
    if (axis >= g->naxes) pl_fatal("axis %d does not exist (the grid has %d)", axis, g->naxes);
}

int pl_grid_coord(const struct pl_grid *g, int rank, int axis)
{
    check_rank(g, rank);
    check_axis(g, axis);
    if (axis < 0) return 0;
    return (rank / stride(g, axis)) % g->size[axis];
}

void pl_grid_coords(const struct pl_grid *g, int rank, int *coords)
{
    check_rank(g, rank);
    for (int i = 0; i < g->naxes; i++) {
        coords[i] = rank % g->size[i];
        rank /= g->size[i];
    }
}

int pl_grid_rank(const struct pl_grid *g, const int *coords)
{
    int rank = 0;
    for (int i = g->naxes - 1; i >= 0; i--) {
        if (coords[i] < 0 || coords[i] >= g->size[i])
            pl_fatal("coordinate %d on axis %s is outside 0..%d", coords[i], g->axis[i],
                     g->size[i] - 1);
        rank = rank * g->size[i] + coords[i];
    }
    return rank;
}

int pl_grid_group(const struct pl_grid *g, int rank, int axis, int *members)
{
    check_rank(g, rank);
    check_axis(g, axis);
    if (axis < 0) {
        members[0] = rank;
        return 1;
    }
    int s = stride(g, axis);
    int base = rank - pl_grid_coord(g, rank, axis) * s;
    for (int k = 0; k < g->size[axis]; k++) members[k] = base + k * s;
    return g->size[axis];
}

int pl_grid_neighbor(const struct pl_grid *g, int rank, int axis, int delta)
{
    check_rank(g, rank);
    check_axis(g, axis);
    if (axis < 0) return -1;
    int c = pl_grid_coord(g, rank, axis) + delta;
    if (c < 0 || c >= g->size[axis]) return -1;
    return rank + delta * stride(g, axis);
}

const char *pl_grid_describe(const struct pl_grid *g, char *buf, size_t len)
{
    size_t n = 0;
    if (len) buf[0] = '\0';
    for (int i = 0; i < g->naxes && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%s%d", i ? "-" : "", g->axis[i], g->size[i]);
    return buf;
}

struct pl_comm *pl_grid_comm(const struct pl_grid *g, struct pl_comm *world, int axis)
{
    int size = pl_comm_size(world);
    char desc[128];
    if (size != g->world)
        pl_usage_error_all("the grid %s has %d ranks, but the communicator it is split from has "
                           "%d", pl_grid_describe(g, desc, sizeof desc), g->world, size);
    check_axis(g, axis);
    int rank = pl_comm_rank(world);
    if (axis < 0) return pl_comm_split(world, rank, 0, "self");
    /* The group's first member names the group: unique per group and equal on all members. */
    int s = stride(g, axis);
    int coord = pl_grid_coord(g, rank, axis);
    return pl_comm_split(world, rank - coord * s, coord, g->axis[axis]);
}
