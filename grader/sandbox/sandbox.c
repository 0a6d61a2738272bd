/* sandbox.c: the sandbox user, the sweep, the token handshake, secret lines and atomic
 * writes of sandbox.h. */
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <dirent.h>
#include <unistd.h>

static struct pl_contain_user user;

const struct pl_contain_user *gr_sandbox_init(void)
{
    if (pl_contain_init(&user) != 0) {
        fprintf(stderr, "grade: refusing to run student code as root without a sandbox user\n");
        exit(1);
    }
    return &user;
}

void gr_sandbox_own(const char *path)
{
    if (!user.active) return;
    if (chown(path, user.uid, user.gid) != 0 || chmod(path, 0700) != 0) {
        fprintf(stderr, "grade: cannot hand %s to %s: %s\n", path, user.name, strerror(errno));
        exit(1);
    }
}

const char *gr_sandbox_driver(const char *driver, const char *dir, char *out, size_t len)
{
    if (!user.active) return driver;
    snprintf(out, len, "%s/driver", dir);
    FILE *in = fopen(driver, "rb"), *to = fopen(out, "wbx");
    char buf[65536];
    size_t n;
    int bad = !in || !to;
    while (!bad && (n = fread(buf, 1, sizeof buf, in)) > 0) bad = fwrite(buf, 1, n, to) != n;
    if (in) fclose(in);
    if (to && fclose(to) != 0) bad = 1;
    if (bad || chmod(out, 0755) != 0) {
        fprintf(stderr, "grade: cannot copy %s to %s\n", driver, out);
        exit(1);
    }
    return out;
}

static void drop_links_in(const char *dir, int depth)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(p, &st) != 0) continue;
        if (S_ISLNK(st.st_mode)) unlink(p);
        else if (S_ISDIR(st.st_mode) && depth < 2) drop_links_in(p, depth + 1);
    }
    closedir(d);
}

void gr_sandbox_drop_links(const char *dir)
{
    drop_links_in(dir, 0);
}

int gr_sandbox_report_fifo(char *dir, size_t dir_len, char *path, size_t path_len)
{
    snprintf(dir, dir_len, "/tmp/pl-report-XXXXXX");
    if (!mkdtemp(dir) || chmod(dir, user.active ? 0711 : 0700) != 0) {
        fprintf(stderr, "grade: cannot create the report folder %s: %s\n", dir,
                strerror(errno));
        return -1;
    }
    snprintf(path, path_len, "%s/report", dir);
    if (mkfifo(path, 0600) != 0 || chmod(path, user.active ? 0622 : 0600) != 0) {
        fprintf(stderr, "grade: cannot create the report channel %s: %s\n", path,
                strerror(errno));
        return -1;
    }
    /* Non-blocking: the open does not wait for a writer, nor a read for a line. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) fprintf(stderr, "grade: cannot open %s: %s\n", path, strerror(errno));
    return fd;
}

void gr_sandbox_sweep(void)
{
    pl_contain_sweep(&user);
}

void gr_handshake_tick(void *arg)
{
    struct gr_handshake *h = arg;
    if (h->given || access(h->ready, F_OK) != 0) return;
    h->given = 1;
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.new", h->token_path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0600);
    size_t len = strlen(h->token);
    if (fd < 0 || write(fd, h->token, len) != (ssize_t)len) {
        if (fd >= 0) close(fd);
        return; /* the driver finds no token and says so: the run fails, nothing is forged */
    }
    if (user.active && fchown(fd, user.uid, user.gid) != 0) {
        close(fd);
        return;
    }
    close(fd);
    rename(tmp, h->token_path);
}

#define MAX_SECRETS 8
static char secrets[MAX_SECRETS][64];
static int nsecrets;

void gr_secret_add(const char *text)
{
    if (nsecrets < MAX_SECRETS && text && *text)
        snprintf(secrets[nsecrets++], sizeof secrets[0], "%s", text);
}

/* The lines of the grader's own files, trimmed; short ones (a brace, "fi") are left out. */
#define KIT_LINE_MIN 8
static char **kit_lines;
static size_t nkit_lines;

static void trim(const char **s, size_t *len)
{
    while (*len && (**s == ' ' || **s == '\t')) (*s)++, (*len)--;
    while (*len && strchr(" \t\r\n", (*s)[*len - 1])) (*len)--;
}

void gr_secret_add_lines(const char *path)
{
    FILE *f = fopen(path, "r");
    char line[1024];
    while (f && fgets(line, sizeof line, f)) {
        const char *s = line;
        size_t len = strlen(line);
        trim(&s, &len);
        char **more = len < KIT_LINE_MIN ? NULL
                                         : realloc(kit_lines, (nkit_lines + 1) * sizeof *more);
        if (!more) continue;
        kit_lines = more;
        if ((kit_lines[nkit_lines] = strndup(s, len))) nkit_lines++;
    }
    if (f) fclose(f);
}

int gr_secret_line(const char *line, size_t len)
{
    for (int k = 0; k < nsecrets; k++) {
        size_t sl = strlen(secrets[k]);
        for (size_t i = 0; i + sl <= len; i++)
            if (!memcmp(line + i, secrets[k], sl)) return 1;
    }
    trim(&line, &len);
    for (size_t k = 0; k < nkit_lines; k++)
        if (strlen(kit_lines[k]) == len && !memcmp(kit_lines[k], line, len)) return 1;
    return 0;
}

int gr_write_atomic(const char *path, int (*write_fn)(void *f, void *arg), void *arg)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.new", path);
    unlink(tmp);
    FILE *f = fopen(tmp, "wx");
    if (!f) {
        fprintf(stderr, "grade: cannot write %s: %s\n", tmp, strerror(errno));
        return -1;
    }
    int bad = write_fn(f, arg) != 0;
    bad |= ferror(f);
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path) != 0) {
        fprintf(stderr, "grade: writing %s failed\n", path);
        unlink(tmp);
        return -1;
    }
    return 0;
}
