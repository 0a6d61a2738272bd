/* moments.h: Lab 3's check of the averaged and clipped gradient, read from outside through
 * the AdamW moments zero.h makes part of the contract (moments.c). */
#ifndef LAB03_MOMENTS_H
#define LAB03_MOMENTS_H

#include <stddef.h>

#include "train.h"
#include "zero.h"

struct moments_verdict {
    int bad;        /* this rank's m is not (1 - beta1) x the single device's clipped gradient */
    int stopped;    /* the student's code reached a stub */
    char msg[700];
};

/* Collective. Two one-step runs of the student's stage from fresh state: clipping off, then
 * clipping on at half the first step's gradient norm. After each, this rank's m (shard
 * layout e) is compared with (1 - beta1) x the single device's clipped gradient of the
 * same elements. The first mismatch is said in v->msg, naming the mistake when the ratio
 * shows it (a sum where the average belongs; a norm over this rank's chunks alone). */
void moments_run(int stage, const struct gr_train_setup *setup, const struct zero_layout *e,
                 struct moments_verdict *v);

#endif
