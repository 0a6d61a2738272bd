/* paralab.h: the whole library in one include: the runtime, communication and accounting
 * modules, the GPT ops and reference model, checkpoints, and the launcher. */
#ifndef PARALAB_H
#define PARALAB_H

#include "check.h"
#include "checkpoint.h"
#include "comm.h"
#include "grid.h"
#include "launch.h"
#include "ledger.h"
#include "mem.h"
#include "model.h"
#include "ops.h"
#include "replay.h"
#include "ring_attn.h"
#include "rng.h"
#include "runtime.h"
#include "svg.h"
#include "tensor.h"
#include "topo.h"
#include "torus.h"
#include "trace.h"

#endif
