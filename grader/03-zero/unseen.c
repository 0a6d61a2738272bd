/* unseen.c: where the buffers a ZeRO step computes on live. Every call of pl_pass_forward
 * and pl_pass_backward (zero_forward_part, zero_backward_part) and of pl_model_adamw_flat
 * (gradients.c) the code under test makes is wrapped (grader/03-zero/lab.mk), and each buffer
 * is placed against the stack and static storage (grader/common/unseen.h) and against the
 * ledger's host memory (on_host.c). */
#include <stddef.h>

#include "lab03.h"
#include "part_pass.h"
#include "unseen.h"

void __real_pl_pass_forward(struct pl_pass *s, int part, const float *p);
void __real_pl_pass_backward(struct pl_pass *s, int part, const float *p, float *g);

void __wrap_pl_pass_forward(struct pl_pass *s, int part, const float *p)
{
    gr_unseen_place(p, "zero_forward_part", "parameters", part, "PL_MEM_PARAMS");
    l3_host_place(p, "zero_forward_part", "parameters", part);
    __real_pl_pass_forward(s, part, p);
}

void __wrap_pl_pass_backward(struct pl_pass *s, int part, const float *p, float *g)
{
    gr_unseen_place(p, "zero_backward_part", "parameters", part, "PL_MEM_PARAMS");
    gr_unseen_place(g, "zero_backward_part", "gradient buffer", part, "PL_MEM_GRADS");
    l3_host_place(p, "zero_backward_part", "parameters", part);
    l3_host_place(g, "zero_backward_part", "gradient buffer", part);
    __real_pl_pass_backward(s, part, p, g);
}
