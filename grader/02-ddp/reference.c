/* reference.c: the reference solution (solutions/02-ddp/ddp.c) compiled into the driver
 * under the names of reference.h, so that every grading run can time the student's step
 * against the reference's on the same machine at the same moment, and set the overlap
 * threshold from what the reference achieves. The solution is included, not copied, so the
 * two can never drift apart. */
#include "reference.h"

#define ddp_new ref_ddp_new
#define ddp_free ref_ddp_free
#define ddp_forward_backward ref_ddp_forward_backward
#define ddp_finish_gradients ref_ddp_finish_gradients
#define ddp_num_buckets ref_ddp_num_buckets
#define ddp_bucket_range ref_ddp_bucket_range
#define ddp ref_ddp

#include "../../solutions/02-ddp/ddp.c"
