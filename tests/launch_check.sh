#!/bin/sh
# The launcher must never leave ranks behind: a job that hangs is stopped by the timeout, a
# rank that crashes fails the job, and stopping launch itself (SIGTERM, as a shell's kill or a
# batch system does) takes every rank down with it. Also: the OpenBLAS thread count each job
# gets, Open MPI's start-up settings, and the command line's --help and missing values.
set -u
B=$1
tag="pl-launch-check-$$"
out=/tmp/$tag.out
left_behind() { pgrep -f "$tag" | grep -v "^$$\$" >/dev/null; }

"$B/bin/launch" -np 3 --timeout 3 -- "$B/tests/test_core" hang "$tag" >$out 2>&1
rc=$?
[ $rc -eq 124 ] || { echo "FAIL: hung job exit code $rc, expected 124"; cat $out; exit 1; }
grep -q "did not finish within 3 s" $out || { echo "FAIL: no timeout message"; exit 1; }
sleep 1
if left_behind; then echo "FAIL: ranks left behind:"; pgrep -af "$tag"; exit 1; fi

"$B/bin/launch" -np 3 --timeout 30 -- "$B/tests/test_core" crash "$tag" >$out 2>&1
rc=$?
[ $rc -ne 0 ] || { echo "FAIL: a crashing rank gave exit code 0"; exit 1; }
sleep 1
if left_behind; then echo "FAIL: ranks left behind after a crash"; exit 1; fi
crash_rc=$rc

# SIGTERM to launch while its ranks hang: launch dies of SIGTERM and takes the ranks along.
"$B/bin/launch" -np 3 --timeout 60 -- "$B/tests/test_core" hang "$tag" >$out 2>&1 &
lpid=$!
n=0
while [ "$(pgrep -f "test_core hang $tag" | wc -l)" -lt 3 ] && [ $n -lt 100 ]; do
    sleep 0.1
    n=$((n + 1))
done
[ $n -lt 100 ] || { echo "FAIL: the 3 ranks never started"; cat $out; kill -KILL $lpid; exit 1; }
kill -TERM $lpid
wait $lpid
rc=$?
[ $rc -eq 143 ] || { echo "FAIL: launch stopped by SIGTERM exited $rc, expected 143 (128+15)"; exit 1; }
sleep 1
if left_behind; then echo "FAIL: ranks left behind after SIGTERM to launch:"; pgrep -af "$tag"; exit 1; fi

# OpenBLAS threads: the cores shared out per job, and the user's own choice kept.
cores=$(getconf _NPROCESSORS_ONLN)
for np in 1 2 4; do
    want=$((cores / np))
    [ $want -ge 1 ] || want=1
    got=$(env -u OPENBLAS_NUM_THREADS "$B/bin/launch" -np $np -- sh -c 'echo "threads=$OPENBLAS_NUM_THREADS"' | sort -u)
    [ "$got" = "threads=$want" ] || { echo "FAIL: -np $np on $cores cores gave '$got', expected threads=$want"; exit 1; }
done
got=$(OPENBLAS_NUM_THREADS=3 "$B/bin/launch" -np 2 -- sh -c 'echo "threads=$OPENBLAS_NUM_THREADS"' | sort -u)
[ "$got" = "threads=3" ] || { echo "FAIL: the user's OPENBLAS_NUM_THREADS=3 became '$got'"; exit 1; }

# Open MPI's start-up settings for a job on one machine: ob1 named and hwloc's I/O discovery
# left out; a user's OMPI_MCA_pml (a fabric between machines) keeps hwloc whole, and a
# user's HWLOC_COMPONENTS is kept.
hw() { env "$@" "$B/bin/launch" -np 2 -- sh -c 'echo "hwloc=${HWLOC_COMPONENTS:-all}"' | sort -u; }
got=$(hw -u OMPI_MCA_pml -u HWLOC_COMPONENTS)
case $got in hwloc=-linuxio,-pci,*) ;; *)
    echo "FAIL: a job on one machine kept hwloc's I/O discovery: '$got'"; exit 1 ;; esac
got=$(hw -u HWLOC_COMPONENTS OMPI_MCA_pml=ob1)
[ "$got" = "hwloc=all" ] || { echo "FAIL: with OMPI_MCA_pml chosen, HWLOC_COMPONENTS became '$got'"; exit 1; }
got=$(hw -u OMPI_MCA_pml HWLOC_COMPONENTS=-gl)
[ "$got" = "hwloc=-gl" ] || { echo "FAIL: the user's HWLOC_COMPONENTS=-gl became '$got'"; exit 1; }

# The command line.
"$B/bin/launch" --help >$out 2>&1 && grep -q "usage: launch -np N" $out ||
    { echo "FAIL: launch --help should print the usage and exit 0"; cat $out; exit 1; }
"$B/bin/launch" -np >$out 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q -- "-np needs a value" $out ||
    { echo "FAIL: 'launch -np' exited $rc without naming the missing value"; cat $out; exit 1; }

rm -f $out
echo "launch check: timeout exit 124, crash exit $crash_rc, SIGTERM exit 143, no ranks left; BLAS threads per job; hwloc without I/O unless a pml is chosen"
