#!/bin/sh
# reuse_objects.sh BUILD TREE: when TREE (an unpacked student kit or Gradescope autograder)
# holds the sources of the repository's build BUILD byte for byte, copies BUILD's compiled
# objects into TREE/BUILD, newer than every source there. TREE's make then links every
# program, test program and driver and compiles each student file, and still needs in TREE
# every source and header an object was made from (one left out fails the build, as in a
# fresh one); compiling the same text with the same flags a second time would prove nothing
# more. BUILD must be build/cpu (the path make uses in TREE); PL_KIT_FRESH=1 copies nothing.
# Prints whether it reused the objects.
b=$1 tree=$2
if [ "$b" != build/cpu ] || [ -n "${PL_KIT_FRESH:-}" ] || [ ! -d "$b/obj/lib" ]; then
    echo "objects: compiled afresh"
    exit 0
fi
if ! (cd "$tree" && find Makefile lib grader datasets -type f) | while read -r f; do
    cmp -s "$f" "$tree/$f" || exit 1; done; then
    echo "objects: compiled afresh (the tree's sources differ from the build's)"
    exit 0
fi
mkdir -p "$tree/$b/grader"
cp -R "$b/obj" "$tree/$b/"
cp -R "$b/grader/obj" "$b/grader/trusted" "$tree/$b/grader/"
find "$tree/$b" -type f -exec touch {} +
echo "objects: the build's, reused"
