/* ops_const.h: the constants that fix the ops' arithmetic, shared by their API (ops.h) and
 * the per-element math both backends run (kernels.h), which must not depend on each other. */
#ifndef PL_OPS_CONST_H
#define PL_OPS_CONST_H

/* Layernorm epsilon, PyTorch's default, so the reference matches nn.LayerNorm. */
#define PL_LAYERNORM_EPS 1e-5f

#endif
