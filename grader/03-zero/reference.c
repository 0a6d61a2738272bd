/* reference.c: the reference solution (solutions/03-zero/zero.c) compiled into the driver
 * under the names of reference.h, so that it links beside the student's file and every
 * grading run can time the student's stages against it on the same machine at the same
 * moment. The solution is included, not copied, so the two can never drift apart. */
#include "reference.h"

#define zero_layout_init ref_zero_layout_init
#define zero_new ref_zero_new
#define zero_step ref_zero_step
#define zero_free ref_zero_free

#include "../../solutions/03-zero/zero.c"
