#!/bin/sh
# A job that hangs must be stopped by the launcher's timeout with every rank killed, and a
# rank that crashes must fail the job without leaving the others behind.
set -u
B=$1
tag="pl-launch-check-$$"
"$B/bin/launch" -np 3 --timeout 3 -- "$B/tests/test_core" hang "$tag" >/tmp/$tag.out 2>&1
rc=$?
[ $rc -eq 124 ] || { echo "FAIL: hung job exit code $rc, expected 124"; cat /tmp/$tag.out; exit 1; }
grep -q "did not finish within 3 s" /tmp/$tag.out || { echo "FAIL: no timeout message"; exit 1; }
sleep 1
if pgrep -f "$tag" >/dev/null; then echo "FAIL: ranks left behind:"; pgrep -af "$tag"; exit 1; fi
"$B/bin/launch" -np 3 --timeout 30 -- "$B/tests/test_core" crash "$tag" >/tmp/$tag.out 2>&1
rc=$?
[ $rc -ne 0 ] || { echo "FAIL: a crashing rank gave exit code 0"; exit 1; }
sleep 1
if pgrep -f "$tag" >/dev/null; then echo "FAIL: ranks left behind after a crash"; exit 1; fi
rm -f /tmp/$tag.out
echo "launch check: timeout exit 124, crash exit $rc, no ranks left"
