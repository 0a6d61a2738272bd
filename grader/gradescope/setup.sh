#!/bin/sh
# setup.sh: Gradescope runs this once, as root, when it builds the autograder's image: the
# packages of the CPU build, then the kit and the pristine lab drivers.
set -e
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends build-essential make pkg-config \
    openmpi-bin libopenmpi-dev libopenblas-dev
cd /autograder/source
make
