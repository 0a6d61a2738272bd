#!/bin/sh
# The replay program on a run's own trace: the demo's step, traced on 4 ranks over 2 virtual
# nodes and read back from its Chrome trace JSON, replays to the same modelled step time as
# the demo's replay of the trace in memory, and the SVG is written. Usage: replay_cli.sh BUILD
set -e
b=$1
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
"$b/bin/launch" -np 4 -- "$b/bin/demo" --nodes 2 --gpus-per-node 2 --trace "$d/t.json" >"$d/demo.out"
"$b/bin/replay" --trace "$d/t.json" --nodes 2 --svg "$d/t.svg" >"$d/replay.out"
cat "$d/replay.out"
want=$(grep -m1 'modelled step time' "$d/demo.out")
got=$(grep -m1 'modelled step time' "$d/replay.out")
[ -n "$want" ] && [ "$want" = "$got" ] || { echo "demo: $want / replay: $got: the trace did not read back"; exit 1; }
grep -q '<svg' "$d/t.svg" || { echo "no SVG written"; exit 1; }
# the same trace on the torus profile: its 4 ranks form a 1 x 2 x 2 torus
"$b/bin/replay" --trace "$d/t.json" --profile tpu-v4 >"$d/torus.out"
grep -q 'modelled step time' "$d/torus.out" || { echo "no step time on tpu-v4"; exit 1; }
echo "replay of the trace file matches the in-memory replay: $got"
