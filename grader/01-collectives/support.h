/* support.h: what the Lab 1 driver reads from the kit's helpers (support.c): whether the
 * code under test reached a lab_todo() stub, and which one. */
#ifndef LAB01_SUPPORT_H
#define LAB01_SUPPORT_H

/* The first stub reached since the last lab01_todo_reset(); NULL when none. */
const char *lab01_todo_what(void);
const char *lab01_todo_section(void);
void lab01_todo_reset(void);

#endif
