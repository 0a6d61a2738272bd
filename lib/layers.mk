# lib/layers.mk: rules that keep lib/ a layered runtime and its documentation generated.
# Included by the Makefile.

# The trainer moved from lib/bin to datasets/bin (it uses both, and lib/ never includes
# datasets/). A build directory made before the move still lists the old source in
# build/*/bin/train.d; this empty rule lets that stale line pass until the next link
# rewrites it.
lib/bin/train.c: ;

# The lab tables of README.md, docs/instructor.md and docs/grader.md, rewritten from
# `grade --labs` and each handout's "<!-- table KEY: ... -->" lines (tests/doc_tables.sh),
# and a handout's total between "<!-- lab points -->" lines, from `grade --list`;
# tests/layers.tests fails while a table or a total is out of date.
.PHONY: docs-tables
docs-tables: all
	@sh tests/doc_tables.sh --write $(B)
