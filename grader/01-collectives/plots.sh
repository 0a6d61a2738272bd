#!/bin/sh
# plots.sh BUILD_DIR OUT_DIR labs|solutions: Lab 1's pictures (`make plots LAB=01`). Runs the
# lab's benchmark on 4 ranks (your collectives beside the library's, nccl-tests style), then
# draws busbw against message size for each collective, yours beside the library's, and fits
# the alpha-beta model to each all-reduce: time = 2(n-1) alpha + 2(n-1)/n x bytes / B, a
# weighted least-squares line through (bytes, time); yours and the library's alpha and B are
# printed one above the other. Wall-clock figures: on a shared CPU machine they are noisy.
set -e
B=$1 out=$2 v=${3:-labs}
np=4
. grader/plots_common.sh
plots_driver "$B" "$out" "$v" 01-collectives
OPENBLAS_NUM_THREADS=1 "$B/bin/launch" --timeout 300 -np $np -- "$d" --mode bench --max-mib 16 \
    >"$out/01-collectives-bench.txt"
awk -v out="$out" -v n=$np '
function flush(   f, i, x, y, W, H, L, R, T, Bm, xmin, xmax, ymax, px, py, c, k) {
    if (op == "" || rows == 0) return
    f = out "/01-collectives-busbw-" op ".svg"
    W = 640; H = 400; L = 60; R = 20; T = 30; Bm = 50
    xmin = log(size[1]) / log(2); xmax = log(size[rows]) / log(2); ymax = 0
    for (i = 1; i <= rows; i++) { if (mine[i] > ymax) ymax = mine[i]; if (lib[i] > ymax) ymax = lib[i] }
    if (ymax <= 0) ymax = 1
    if (xmax == xmin) xmax = xmin + 1
    printf "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" font-size=\"12\">\n", W, H > f
    printf "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", W, H > f
    printf "<text x=\"%d\" y=\"18\">%s on %d ranks: busbw (GB/s) vs message size, yours (blue) and the library (grey)</text>\n", L, op, n > f
    printf "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", L, H - Bm, W - R, H - Bm > f
    printf "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", L, T, L, H - Bm > f
    printf "<text x=\"%d\" y=\"%d\">%.2f</text>\n", 5, T + 4, ymax > f
    printf "<text x=\"%d\" y=\"%d\">0</text>\n", L - 15, H - Bm + 4 > f
    for (k = 0; k < 2; k++) {
        c = k == 0 ? "#1f5fbf" : "#888888"
        printf "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", c > f
        for (i = 1; i <= rows; i++) {
            x = log(size[i]) / log(2); y = k == 0 ? mine[i] : lib[i]
            px = L + (x - xmin) / (xmax - xmin) * (W - L - R); py = H - Bm - y / ymax * (H - T - Bm)
            printf "%.1f,%.1f ", px, py > f
        }
        printf "\"/>\n" > f
    }
    for (i = 1; i <= rows; i++) {
        px = L + (log(size[i]) / log(2) - xmin) / (xmax - xmin) * (W - L - R)
        printf "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", px, H - Bm + 18, label(size[i]) > f
    }
    printf "<text x=\"%d\" y=\"%d\">message size (bytes)</text>\n</svg>\n", W / 2 - 50, H - 10 > f
    close(f)
    print "wrote " f
    if (op == "all_reduce") { fit("yours", mt); fit("library", lt) }
}
function label(s) { return s >= 1048576 ? s / 1048576 "M" : s >= 1024 ? s / 1024 "K" : s }
# Least squares of time (s) on bytes, each point weighted by 1/time^2 so that the small
# messages (where alpha shows) count as much as the large ones (where B shows): intercept
# 2(n-1) alpha, slope 2(n-1)/n / B.
function fit(who, t,   i, w, sw, sx, sy, sxx, sxy, m, a, b) {
    sw = sx = sy = sxx = sxy = 0
    for (i = 1; i <= rows; i++) {
        if (t[i] <= 0) continue
        w = 1 / (t[i] * t[i])
        sw += w; sx += w * size[i]; sy += w * t[i]; sxx += w * size[i] * size[i]; sxy += w * size[i] * t[i]
    }
    m = sw * sxx - sx * sx
    if (m == 0) return
    b = (sw * sxy - sx * sy) / m; a = (sy - b * sx) / sw
    if (b <= 0) { printf "alpha-beta fit of %s all-reduce: time does not grow with size in this run (a busy machine?)\n", who; return }
    printf "alpha-beta fit of %s all-reduce on %d ranks: alpha = %.1f us, B = %.3f GB/s%s\n", who, n, 1e6 * a / (2 * (n - 1)), 2 * (n - 1) / n / b / 1e9, a < 0 ? " (alpha below what this run can resolve)" : ""
}
/^# [a-z_]+: / { flush(); op = $2; sub(":", "", op); rows = 0; next }
/^#/ { next }
NF >= 11 && $1 ~ /^[0-9]+$/ { rows++; size[rows] = $1; mt[rows] = $4 * 1e-6; mine[rows] = $6; lt[rows] = $8 * 1e-6; lib[rows] = $10 }
END { flush() }
' "$out/01-collectives-bench.txt"
