# replay.mk: `make replay`, a run's own trace replayed on a cluster profile (lib/bin/replay.c),
# included by the Makefile.
#
#   make replay TRACE=trace.json [PROFILE=dgx-h100] [NODES=2] [SVG=timeline.svg]
#
# Any paralab run writes its trace with PL_TRACE=FILE (or --trace FILE where it takes it).
.PHONY: replay
replay: $(B)/bin/replay
	@test -n "$(TRACE)" || { echo "which trace? make replay TRACE=trace.json (a run's --trace FILE)"; exit 2; }
	@$(B)/bin/replay --trace '$(TRACE)' --profile '$(or $(PROFILE),dgx-h100)' --nodes '$(or $(NODES),1)' \
	  --svg '$(or $(SVG),$(basename $(TRACE)).svg)'
