#!/bin/sh
# include_dag.sh: lib/ is a layered runtime. Its modules' includes form a DAG, and datasets/
# builds on lib/, never the reverse. A module is a file stem: X.c, X.h, X.cu and the private
# header X_internal.h are module X, so "X includes Y" means one of X's files includes Y's
# header. Prints each cycle as a path of modules with the include lines that close it, and
# each lib/ file that includes a datasets/ header; exits 1 on either, 0 when the graph is a
# DAG. Run from the repository root (the test harness does).
set -u
cd "$(dirname "$0")/.." || exit 2
if [ ! -d lib ] || [ ! -d datasets ]; then
    echo "include_dag.sh: run inside a paralab checkout" >&2
    exit 2
fi

# One line per quoted include: "<file> <included name>".
edges=$(for f in lib/*.c lib/*.h lib/*.cu lib/bin/*.c datasets/*.c datasets/*.h datasets/bin/*.c; do
    [ -f "$f" ] || continue
    sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f" |
        while read -r inc; do echo "$f $inc"; done
done)

echo "$edges" | awk '
function module(path,   m) {
    m = path
    sub(/^.*\//, "", m)
    sub(/\.(c|h|cu)$/, "", m)
    sub(/_internal$/, "", m)
    if (path ~ /^datasets\//) m = "datasets/" m
    return m
}
# The header a quoted include finds: lib/ first, then datasets/ (the build searches
# -Ilib -Idatasets).
function resolve(name) {
    if (name in lib_h) return "lib/" name
    if (name in ds_h) return "datasets/" name
    return ""
}
BEGIN {
    while (("ls lib/*.h 2>/dev/null" | getline p) > 0) {
        sub(/^lib\//, "", p); lib_h[p] = 1
    }
    while (("ls datasets/*.h 2>/dev/null" | getline p) > 0) {
        sub(/^datasets\//, "", p); ds_h[p] = 1
    }
    bad = 0
}
NF == 2 {
    file = $1; hdr = resolve($2)
    if (hdr == "") next  # a system or generated header
    if (file ~ /^lib\// && hdr ~ /^datasets\//) {
        printf "lib includes datasets: %s includes \"%s\" (datasets/ builds on lib/; " \
               "move the user of both to datasets/)\n", file, $2
        bad = 1
    }
    if (file ~ /\/bin\//) next  # programs are the top of the graph
    a = module(file); b = module(hdr)
    if (a == b) next
    node[a] = 1; node[b] = 1
    key = a SUBSEP b
    if (!(key in why)) { why[key] = file " includes " $2; nout[a]++; out[a, nout[a]] = b }
}
# Depth-first search with an explicit stack; a grey node met again closes a cycle.
function dfs(start,   top, u, i, v, k, path, j) {
    top = 1; stack[1] = start; idx[1] = 0; color[start] = 1
    while (top > 0) {
        u = stack[top]
        i = ++idx[top]
        if (i > nout[u]) { color[u] = 2; top--; continue }
        v = out[u, i]
        if (color[v] == 1) {
            for (k = 1; stack[k] != v; k++) ;
            path = ""
            for (j = k; j <= top; j++) path = path stack[j] " -> "
            path = path v
            if (!(path in seen)) {
                seen[path] = 1
                printf "include cycle: %s\n", path
                for (j = k; j <= top; j++)
                    printf "    %s\n", why[stack[j], (j < top ? stack[j + 1] : v)]
            }
            bad = 1
        } else if (!color[v]) {
            top++; stack[top] = v; idx[top] = 0; color[v] = 1
        }
    }
}
END {
    n = 0
    for (m in node) names[++n] = m
    # sorted, so the report is the same on every run
    for (i = 2; i <= n; i++) {
        t = names[i]
        for (j = i - 1; j >= 1 && names[j] > t; j--) names[j + 1] = names[j]
        names[j + 1] = t
    }
    for (i = 1; i <= n; i++) if (!color[names[i]]) dfs(names[i])
    if (bad) exit 1
    printf "lib include graph: %d modules, no cycle; no lib/ file includes datasets/\n", n
}'
