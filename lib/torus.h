/* torus.h: collectives on a torus network (a TPU-like pod), beside the switched profiles of
 * topo.h. The n devices of a job sit in an X x Y x Z torus (pl_torus_shape: the most cubic
 * one, X <= Y <= Z), device r at x = r % X, y = (r / X) % Y, z = r / (X Y); each is wired to
 * its neighbours only, one link each way per neighbour, bw[PL_LINK_INTRA] bytes/s per
 * direction and latency[PL_LINK_INTRA] per hop; a dimension of 3 or more wraps around (a
 * ring), one of 2 is a single link. A message between two devices follows dimension-ordered
 * routing: x first, then y, then z, the shorter way round each ring.
 *
 * What that costs, as the replay models it (pl_torus_coll_time):
 *   - a send: hops x latency + bytes / bw (cut-through: the bytes stream at link speed);
 *   - a ring collective (all-reduce, reduce-scatter, all-gather, broadcast) over the group's
 *     ranks in their order: pl_coll_time's ring formula at the link's bandwidth, with each
 *     of its steps waiting for the longest route between two consecutive members (the wrap
 *     from the last back to the first included);
 *   - an all-to-all: the larger of what each device can inject (its S (n-1)/n bytes over
 *     the links its group uses: two per dimension the group spans) and what the group's
 *     bisection carries: cut its bounding box in two across its longest dimension k, n S / 4
 *     bytes cross each way, over n / k links (2 n / k when that dimension is a whole ring of
 *     the torus, which wraps); plus (n - 1) latencies.
 * So a ring along neighbours runs at link speed on any size, while an all-to-all's time per
 * byte grows with the group's longest side: the bisection of a torus grows as n^(2/3), a
 * fat tree's as n. */
#ifndef PL_TORUS_H
#define PL_TORUS_H

#include "comm_kind.h"
#include "topo.h"

/* The torus of n devices: dims[0] <= dims[1] <= dims[2], product n, dims[2] as small as
 * possible (8: 2x2x2, 64: 4x4x4, 128: 4x4x8, 6: 1x2x3). n >= 1. */
void pl_torus_shape(int n, int dims[3]);
/* Coordinates of rank r in dims. */
void pl_torus_coords(const int dims[3], int r, int c[3]);
/* Links a message from a to b crosses (dimension-ordered, the shorter way round). */
int pl_torus_hops(const int dims[3], int a, int b);
/* The longest route between consecutive members of the ring ranks[0..n-1], the wrap from
 * the last back to the first included: what each step of a ring collective waits for. 1
 * when the group is a ring of neighbours (a whole ring of the torus, or two chips); 0 for
 * n <= 1. */
int pl_torus_ring_hops(const int dims[3], const int *ranks, int n);
/* How many distinct coordinates the ranks ranks[0..n-1] hold along each dimension: the
 * sides of the box (the sub-torus) the group spans, whose bisection bounds its all-to-all. */
void pl_torus_extent(const int dims[3], const int *ranks, int n, int extent[3]);
/* Modelled time of a collective of S bytes (as pl_coll_time counts them) over the world
 * ranks ranks[0..n-1] of a torus of dims, links of latency lat and bandwidth bw. */
double pl_torus_coll_time(const int dims[3], enum pl_coll_kind kind, const int *ranks, int n,
                          double S, double lat, double bw);

#endif
