/* partition.h: Lab 6's partition of the model into stages, judged and quoted. The cost of a
 * part is the kit's count of its forward and backward FLOPs (pl_part_flops); a cut is judged
 * by its largest stage against the best contiguous cut's (l6_sched_best_max), exactly: the step
 * runs at the pace of the slowest stage. */
#ifndef LAB06_PARTITION_H
#define LAB06_PARTITION_H

#include "model.h"

#include "verdict.h"

/* The other models pipe_partition is asked to cut, and the most stages of one. */
#define L6_PART_OTHERS 7
#define L6_PART_OTHER_STAGES 8

/* Other model i (of L6_PART_OTHERS): its config, stage count and microbatch B x T. */
struct pl_model_config l6_part_other(const struct pl_model_config *lab, int i, int *p, int *B,
                                     int *T);

/* The student's cut of the lab's model into p stages (stage s holds parts
 * first[s]..last[s]), costed for one sequence of c->seq_len tokens; 0 (why says it) when
 * its largest stage is larger than the best cut's. */
int l6_part_judge_lab(const int *first, const int *last, int p, const struct pl_model_config *c,
                      struct gr_why *why);

/* The student's pipe_partition of the other models than the lab's (other depths, widths,
 * vocabularies, stage counts and B x T; model i's stage s holds parts
 * first[i][s]..last[i][s]); 0 (why says it) at the first that is not a best cut. */
int l6_part_judge_others(const struct pl_model_config *lab,
                         const int (*first)[L6_PART_OTHER_STAGES],
                         const int (*last)[L6_PART_OTHER_STAGES], struct gr_why *why);

/* Rank 0: the figures handout section 2 quotes, as "# handout:" lines: the lab's parts and,
 * on the lab's model and on one of the others, each stage's FLOPs under the even split
 * (blocks split evenly, the embedding on the first stage, the head on the last) and under
 * the best cut. They are the kit's, whatever the student's code does. */
void l6_part_print_figures(const struct pl_model_config *lab);

#endif
