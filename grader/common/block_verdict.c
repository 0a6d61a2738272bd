/* block_verdict.c: a split block's modelled-time verdict and note (block_time.h), from its
 * figures alone: no MPI, so that a lab's judge decides it on rank 0 and its test program
 * (tests/judge/NN-name.c) without mpirun. */
#include <stdio.h>

#include "block_time.h"

/* Why a block is slower than the bound: its compute against the single device's split t
 * ways. */
static void slower_because(const struct gr_bt_figures *m, const char *section, char *buf,
                           size_t len)
{
    snprintf(buf, len,
             "your compute alone is %.2f ms, %.2fx the single device's split %d "
             "ways (%.2f ms). Each rank should do the products of its own shard once: a product "
             "repeated (the forward's, again in the backward, with its activations kept) or run "
             "on zero-padded or gathered full-size tensors is paid on every rank (section %s)",
             m->compute * 1e3, m->compute / m->split, m->t, m->split * 1e3, section);
}

int gr_bt_decide(const struct gr_bt_figures *m, const char *comm, const char *section,
                 double *fraction, char *why, size_t len)
{
    char because[400];
    *fraction = 1;
    if (!m->traced) {
        snprintf(why, len, "your block's trace could not be replayed: %s", m->err);
        return 0;
    }
    if (m->ratio >= GR_BT_NONE) {
        slower_because(m, section, because, sizeof because);
        snprintf(why, len, "your block's modelled step is %.2f ms on %s at GPT-3 block scale, "
                 "%.2fx the %.2f ms a split block needs (compute/t + %s; no points from "
                 "%.2fx): %s", m->step * 1e3, GR_BT_PROFILE, m->ratio, m->bound * 1e3, comm,
                 GR_BT_NONE, because);
        return 0;
    }
    if (m->ratio > GR_BT_FULL) *fraction = (GR_BT_NONE - m->ratio) / (GR_BT_NONE - GR_BT_FULL);
    return 1;
}

void gr_bt_note(const struct gr_bt_figures *m, const char *comm, const char *section, char *buf,
                size_t len)
{
    char because[400] = "";
    buf[0] = '\0';
    if (!m->traced || m->bound <= 0) return;
    if (m->ratio > GR_BT_FULL) slower_because(m, section, because, sizeof because);
    snprintf(buf, len, "your block forward and backward, modelled on %s at GPT-3 175B block "
             "scale, takes %.2f ms: %.2fx the %.2f ms of compute/t + %s (full marks up to "
             "%.2fx, none from %.2fx)%s%s", GR_BT_PROFILE, m->step * 1e3, m->ratio,
             m->bound * 1e3, comm, GR_BT_FULL, GR_BT_NONE, because[0] ? "; " : "", because);
}
