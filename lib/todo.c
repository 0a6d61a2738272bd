/* todo.c: the stub tracker of todo.h. */
#include "todo.h"

#include <stdio.h>

#include "runtime.h"

static const char *todo_what, *todo_section, *handout = "the lab's handout";

void lab_todo(const char *what, const char *section)
{
    pl_todo_note(what, section);
    static int told;
    if (!told && (!pl_initialized() || pl_rank() == 0)) {
        fprintf(stderr, "still a stub: %s: see %s section %s\n", what, handout, section);
        told = 1;
    }
}

void pl_todo_set_handout(const char *path) { handout = path; }
const char *pl_todo_handout(void) { return handout; }
const char *pl_todo_what(void) { return todo_what; }
const char *pl_todo_section(void) { return todo_section; }
void pl_todo_reset(void) { todo_what = todo_section = NULL; }

void pl_todo_note(const char *what, const char *section)
{
    if (todo_what) return;
    todo_what = what;
    todo_section = section;
}
