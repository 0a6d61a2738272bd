/* checkpoint.h: saving and resuming single-device training. A checkpoint holds the model
 * config, the parameters, the AdamW moments and step count, and the training state that
 * decides what comes next (step, seeds, batch, optimizer settings, which data), so a
 * resumed run produces bit-identical losses to a run that never stopped.
 *
 * File layout (little-endian): a 512-byte header -- magic "PLCHECKP", version, the config,
 * the training state, the parameter count, a checksum of the body and a checksum of the
 * header itself -- then params, adam_m and adam_v, each numel fp32 values. */
#ifndef PL_CHECKPOINT_H
#define PL_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

#define PL_CKPT_MAGIC "PLCHECKP"
#define PL_CKPT_VERSION 1u
#define PL_CKPT_HEADER_BYTES 512

/* Everything besides the model that a resumed run must reproduce. */
struct pl_train_state {
    int64_t step;        /* optimizer steps taken; the next batch is pl_loader_batch(step) */
    uint64_t seed;       /* dropout masks and the loader's shuffle */
    int batch;           /* global batch B (sequences per step) */
    struct pl_adamw_config opt;
    /* The data: its token count and checksum (pl_tokens_checksum), and where it came from:
     * corpus_tokens > 0 means the synthetic corpus of corpus_seed, else the file data_path. */
    int64_t data_tokens;
    uint64_t data_checksum;
    int64_t corpus_tokens;
    uint64_t corpus_seed;
    char data_path[256];
};

/* Writes m (params, moments, adam_t) and st to path through a temporary file and a rename,
 * so an interrupted save leaves the previous checkpoint intact (fileio.h). Moments not yet
 * allocated (no step taken) are saved as zeros. A path that cannot be written (no such
 * directory, no permission, a directory) is the user's bad input: a usage error, exit 2;
 * check it before training with pl_atomic_check (train does, for --save). A write that
 * fails once the file exists (disk full, I/O error) is fatal, exit 1. */
void pl_checkpoint_save(const char *path, const struct pl_model *m,
                        const struct pl_train_state *st);

/* Reads and validates only the header: the config and state to build a model with.
 * Returns 0, or -1 with a message naming the file and the fault in err. */
int pl_checkpoint_peek(const char *path, struct pl_model_config *cfg, struct pl_train_state *st,
                       char *err, size_t errlen);

/* Loads the checkpoint into m, whose config must equal the checkpoint's (a mismatch names
 * the first differing field with both values); m gets params, moments and adam_t, st the
 * training state. Returns 0, or -1 with the message in err; m must have been made with
 * PL_MODEL_ALL, and after a failure it may hold part of the file: discard it. */
int pl_checkpoint_load_checked(const char *path, struct pl_model *m, struct pl_train_state *st,
                               char *err, size_t errlen);

/* Same, a bad or mismatched checkpoint being a usage error (message, exit 2). */
void pl_checkpoint_load(const char *path, struct pl_model *m, struct pl_train_state *st);

/* NULL when a and b are the same config; else a message naming the first field that differs
 * ("d_model: 64 in the checkpoint, 32 here"). */
const char *pl_checkpoint_config_diff(const struct pl_model_config *a,
                                      const struct pl_model_config *b, char *buf, size_t len);

#endif
