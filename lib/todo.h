/* todo.h: the stubs of a lab. Each unwritten function of a lab's handout copy calls
 * lab_todo(what, section), so it fails its tests with a pointer to the handout instead of
 * hanging or crashing; whoever runs the lab (its grader, a benchmark) asks afterwards which
 * stub was reached first. Every lab reaches this through the library, so no lab carries its
 * own copy and no student file needs anything outside lib/ and its lab folder. */
#ifndef PL_LAB_STUBS_H
#define PL_LAB_STUBS_H

/* Records the first stub reached since the last pl_todo_reset() and says once on stderr
 * (rank 0) "still a stub: WHAT: see HANDOUT section SECTION". */
void lab_todo(const char *what, const char *section);

/* The handout named in that message (default "the lab's handout"): the runner of a lab sets
 * it, e.g. "docs/labs/01-collectives.md". The string must outlive the run. */
void pl_todo_set_handout(const char *path);
const char *pl_todo_handout(void);

/* The first stub reached since the last reset (this rank), and its handout section; NULL
 * when none. pl_todo_note() sets them as if that stub had been reached here (a runner that
 * learned of it from another rank). */
const char *pl_todo_what(void);
const char *pl_todo_section(void);
void pl_todo_note(const char *what, const char *section);
void pl_todo_reset(void);

#endif
