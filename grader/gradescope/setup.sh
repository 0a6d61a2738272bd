#!/bin/sh
# setup.sh: Gradescope runs this once, as root, when it builds the autograder's image: the
# packages of the CPU build, the kit and the pristine lab drivers, then the sandbox user the
# code under test runs as. The tree is then closed to everyone but root: the sandbox user
# can read none of it (the secret seed included); the grader hands each run a copy of the
# driver. PL_AUTOGRADER stands in for /autograder (the kit's own tests replay the flow in a
# scratch folder); PL_SETUP_NO_APT=1 skips the packages (already installed).
set -e
root=${PL_AUTOGRADER:-/autograder}
if [ -z "${PL_SETUP_NO_APT:-}" ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y --no-install-recommends build-essential make pkg-config \
        openmpi-bin libopenmpi-dev libopenblas-dev
fi
cd "$root/source"
# What grading needs: the library, the grader, the drivers; of one lab's alone when the zip
# was made for one lab (make_zip.sh writes its name here).
only="@LAB@"
if [ -n "$only" ] && [ "$only" != "@""LAB@" ]; then
    make -j"$(nproc)" build/cpu/bin/grade
    labs=$(build/cpu/bin/grade --labs --lab "$only" | cut -f1 | tr '\n' ' ')
    make -j"$(nproc)" grading GRADE_ONLY="$labs"
else
    make -j"$(nproc)" grading
fi
user=${PL_SANDBOX_USER:-paralab-student}
[ "$(id -u)" != 0 ] || id "$user" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$user"
chmod 600 seed
chmod 700 "$root/source"
