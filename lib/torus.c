/* torus.c: collectives on a torus network; see torus.h for the model. */
#include "torus.h"

#include <math.h>
#include <stdlib.h>

#include "check.h"
#include "ledger.h"

void pl_torus_shape(int n, int dims[3])
{
    PL_REQUIRE(n >= 1, "a torus of %d devices: need at least 1", n);
    dims[0] = dims[1] = 1;
    dims[2] = n;
    for (int x = 1; x * x * x <= n; x++) {
        if (n % x) continue;
        for (int y = x; x * y * y <= n; y++) {
            if ((n / x) % y) continue;
            int z = n / (x * y);
            /* the smallest longest side; on a tie the larger shortest side */
            if (z < dims[2] || (z == dims[2] && x > dims[0]))
                dims[0] = x, dims[1] = y, dims[2] = z;
        }
    }
}

void pl_torus_coords(const int dims[3], int r, int c[3])
{
    c[0] = r % dims[0];
    c[1] = (r / dims[0]) % dims[1];
    c[2] = r / (dims[0] * dims[1]);
}

/* Links between coordinates a and b along a dimension of size k: a ring of 3 or more is
 * taken the shorter way round; 2 devices share one link. */
static int dim_hops(int a, int b, int k)
{
    int d = abs(a - b);
    return k >= 3 && k - d < d ? k - d : d;
}

int pl_torus_hops(const int dims[3], int a, int b)
{
    int ca[3], cb[3], h = 0;
    pl_torus_coords(dims, a, ca);
    pl_torus_coords(dims, b, cb);
    for (int d = 0; d < 3; d++) h += dim_hops(ca[d], cb[d], dims[d]);
    return h;
}

/* The longest route between consecutive members of ranks[0..n-1], with the wrap from the
 * last to the first unless chain. */
static int longest_step(const int dims[3], const int *ranks, int n, int chain)
{
    int worst = 0;
    for (int i = 0; i + (chain ? 1 : 0) < n; i++) {
        int h = pl_torus_hops(dims, ranks[i], ranks[(i + 1) % n]);
        if (h > worst) worst = h;
    }
    return worst;
}

int pl_torus_ring_hops(const int dims[3], const int *ranks, int n)
{
    return n <= 1 ? 0 : longest_step(dims, ranks, n, 0);
}

void pl_torus_extent(const int dims[3], const int *ranks, int n, int extent[3])
{
    for (int d = 0; d < 3; d++) {
        extent[d] = 0;
        char *seen = calloc((size_t)dims[d], 1);
        PL_ASSERT(seen);
        for (int i = 0; i < n; i++) {
            int c[3];
            pl_torus_coords(dims, ranks[i], c);
            if (!seen[c[d]]) seen[c[d]] = 1, extent[d]++;
        }
        free(seen);
    }
}

static double all_to_all_time(const int dims[3], const int *ranks, int n, double S, double lat,
                              double bw)
{
    int extent[3];
    pl_torus_extent(dims, ranks, n, extent);
    int links = 0, longest = 0;
    for (int d = 0; d < 3; d++) {
        if (extent[d] > 1) links += extent[d] == 2 ? 1 : 2;
        if (extent[d] > extent[longest]) longest = d;
    }
    double inject = (double)(n - 1) / n * S / (links * bw);
    double k = extent[longest], a = floor(k / 2), b = k - a;
    int wraps = extent[longest] == dims[longest] && dims[longest] >= 3;
    double crossing = a * b * n * S / (k * k);       /* bytes each way across the cut */
    double cut_links = (double)n / k * (wraps ? 2 : 1);
    double bisect = crossing / (cut_links * bw);
    return (n - 1) * lat + fmax(inject, bisect);
}

double pl_torus_coll_time(const int dims[3], enum pl_coll_kind kind, const int *ranks, int n,
                          double S, double lat, double bw)
{
    if (n <= 1 && kind != PL_P2P) return 0.0;
    switch (kind) {
    case PL_ALL_TO_ALL:
    case PL_ALL_TO_ALL_V: return all_to_all_time(dims, ranks, n, S, lat, bw);
    case PL_P2P: return pl_coll_time(kind, 2, S, lat * pl_torus_hops(dims, ranks[0], ranks[1]), bw);
    case PL_BROADCAST:
        return pl_coll_time(kind, n, S, lat * longest_step(dims, ranks, n, 1), bw);
    default: return pl_coll_time(kind, n, S, lat * pl_torus_ring_hops(dims, ranks, n), bw);
    }
}
