/* paralab.h: the whole runtime library in one include. */
#ifndef PARALAB_H
#define PARALAB_H

#include "check.h"
#include "comm.h"
#include "grid.h"
#include "ledger.h"
#include "mem.h"
#include "replay.h"
#include "rng.h"
#include "runtime.h"
#include "tensor.h"
#include "topo.h"
#include "trace.h"

#endif
