/* sandbox.h: the orchestrator's side of grading integrity (docs/grader.md, "What the sandbox
 * stops"): the code under test runs as an unprivileged user when grade runs as root, every
 * process it leaves is swept before the next run and before results are written, the report
 * token reaches the driver only after its main has started, and secrets are kept out of
 * the output shown to the student. */
#ifndef GR_SANDBOX_H
#define GR_SANDBOX_H

#include <stddef.h>

#include "contain.h"

/* Becomes a subreaper and, as root, finds or creates the sandbox user; exits with a message
 * when root cannot get one (student code never runs as root). */
const struct pl_contain_user *gr_sandbox_init(void);
/* Hands a run's folder (and its status folder) to the sandbox user, mode 0700. */
void gr_sandbox_own(const char *path);
/* The driver to launch: as the sandbox user, a copy in the run's folder DIR (the kit's tree
 * stays unreadable to that user); otherwise DRIVER itself. */
const char *gr_sandbox_driver(const char *driver, const char *dir, char *out, size_t len);
/* After the sweep: removes symbolic links the code under test left in DIR (and its status
 * folder), so that the orchestrator, reading them, never follows one to a secret. */
void gr_sandbox_drop_links(const char *dir);
/* The report channel of one run: a FIFO in a folder of its own under /tmp, made by the
 * orchestrator. As root, folder and FIFO belong to root, and the sandbox user may only
 * write the FIFO: lines reach the orchestrator as they are written, and the code under test
 * can neither read them back, edit them once written, nor replace the FIFO (/tmp is
 * sticky). Fills dir and path; returns the read end (non-blocking, close-on-exec), or -1
 * with a message on stderr. */
int gr_sandbox_report_fifo(char *dir, size_t dir_len, char *path, size_t path_len);
/* Kills whatever the last run left (every process of the sandbox user, every orphan). */
void gr_sandbox_sweep(void);

/* The token handshake: the driver's rank 0 creates READY once its main runs (after every
 * constructor of the code under test); only then is the token written to TOKEN_PATH. */
struct gr_handshake {
    const char *ready, *token_path;
    const char *token; /* the text of the token file: "TOKEN SEED" */
    int given;
};
/* pl_launch's tick: writes the token once READY exists. */
void gr_handshake_tick(void *handshake);

/* Secret strings (the hidden seed): a line of output that holds one is never shown. Nor
 * is a line that is, but for the spaces around it, a line of one of the grader's own
 * files added with gr_secret_add_lines (run_autograder, setup.sh: what code that prints
 * the files it can read would show). */
void gr_secret_add(const char *text);
void gr_secret_add_lines(const char *path);
int gr_secret_line(const char *line, size_t len);

/* Writes PATH atomically: write(f, arg) fills a temporary file beside it, renamed over PATH
 * only when complete. Returns 0, or -1 with a message on stderr. */
int gr_write_atomic(const char *path, int (*write)(void *f, void *arg), void *arg);

#endif
