/* clone-exec: the spawner and its clones as a small static program.
 *
 * spawner.py describes the scheme; this is the native form of its spawner and clones. The
 * Python forms are copies of the daemon's interpreter: making a clone copies its page
 * tables, and a clone's execve must first tear that copy down. These are a few pages, and
 * a command's set-up runs as native code, so the daemon's wait for a command is one short
 * execve.
 *
 * Run with fd 3 the daemon's socket: for each byte read, make a clone (the daemon's child,
 * by CLONE_PARENT) and send the daemon its pid and errno (two 32-bit little-endian
 * integers; errno 0: made) with the daemon's end of the clone's socket as SCM_RIGHTS;
 * ENOSYS where the kernel ignores CLONE_PARENT (gVisor: the daemon then forks clones in
 * Python itself, since a fork is on each command's path there anyway).
 *
 * Run as "clone-exec clone N" with fd 3 its socket, it is one such clone, started by the
 * daemon itself with posix_spawn (a vfork, so nothing of the daemon's memory is copied)
 * where the kernel ignores CLONE_PARENT (gVisor); N > 0 is the RLIMIT_NPROC its command
 * gets when it runs as a user other than root (pidwatch.py).
 *
 * A clone receives one request (clone_request.py has the format) with the command's
 * descriptors as SCM_RIGHTS, sets it up and execs it. It answers nothing (end of file when
 * execve closes the socket), or the failing stage (1 byte) and its errno (4 bytes,
 * little-endian).
 *
 * Built with -DCLONE_SPAWN_LIBRARY as a shared library, the same set-up runs in a child the
 * daemon makes itself with clone(CLONE_VM | CLONE_VFORK), through caisson_spawn (where the
 * kernel ignores CLONE_PARENT: gVisor, see direct_spawn.py). That child is the daemon's own,
 * and no clone is made ahead: under gVisor making one (a program's start) cost as much as the
 * command's own, on every command. The child shares the daemon's memory until its execve, so
 * it only makes system calls on a stack of its own; the daemon's thread waits meanwhile.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <grp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SYS_landlock_restrict_self
#define SYS_landlock_restrict_self 446
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif

enum { STAGE_SETUP = 1, STAGE_CHDIR, STAGE_CONFINE, STAGE_CREDS, STAGE_EXEC };
enum { HAS_STDIN = 1, HAS_RULESET = 2, HAS_CWD_FD = 4, HAS_IDS = 8, HAS_ROOT = 16 };

#define SOCK 3
#define MAX_FDS 5
#define HEADER 29 /* flags u8, then uid, gid, ngroups, argc, npaths, nenv, nfilter as u32 */
#define MAX_FILTER 4096 /* BPF_MAXINSNS */
#define MAX_REQUEST (64u << 20)

/* A failure: the stage and errno, reported where the caller of ``run`` wants them; never returns. */
typedef void (*failed_fn)(int stage, int err, void *ctx);

static uint32_t u32_at(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* A request, parsed: its strings point into the payload. */
struct request {
    unsigned flags;
    uid_t uid;
    gid_t gid;
    uint32_t ngroups, nfilter, npaths;
    gid_t *groups;
    struct sock_filter *filter;
    char *cwd, *root, **argv, **paths, **env;
    int out, err, in, ruleset, cwd_fd;
};

static void free_request(struct request *r) {
    free(r->groups), free(r->filter), free(r->argv), free(r->paths), free(r->env);
}

/* The next NUL-terminated string of [*at, end), or NULL if there is none. */
static char *next_string(char **at, char *end) {
    char *s = *at;
    char *nul = s < end ? memchr(s, 0, (size_t)(end - s)) : NULL;
    if (nul == NULL)
        return NULL;
    *at = nul + 1;
    return s;
}

/* ``n`` strings of [*at, end) as a NULL-terminated list, or NULL (*err set). */
static char **strings(char **at, char *end, uint32_t n, int *err) {
    if (n > (uint32_t)(end - *at)) {
        *err = EINVAL; /* each string takes at least its NUL */
        return NULL;
    }
    char **list = calloc((size_t)n + 1, sizeof *list);
    if (list == NULL) {
        *err = ENOMEM;
        return NULL;
    }
    for (uint32_t i = 0; i < n; i++)
        if ((list[i] = next_string(at, end)) == NULL) {
            *err = EINVAL;
            free(list);
            return NULL;
        }
    return list;
}

/* Parse the payload ``p`` (``size`` bytes, after the length) and its ``nfds`` descriptors
 * into ``r``: 0, or the errno of a malformed request (then nothing is left to free). */
static int parse(unsigned char *p, uint32_t size, const int *fds, int nfds, struct request *r) {
    memset(r, 0, sizeof *r);
    if (size < HEADER)
        return EINVAL;
    r->flags = p[0];
    r->uid = (uid_t)u32_at(p + 1);
    r->gid = (gid_t)u32_at(p + 5);
    r->ngroups = u32_at(p + 9);
    uint32_t argc = u32_at(p + 13), nenv = u32_at(p + 21);
    r->npaths = u32_at(p + 17);
    r->nfilter = u32_at(p + 25);
    char *end = (char *)p + size;
    char *at = (char *)p + HEADER;
    if (r->ngroups > 65536 || r->nfilter > MAX_FILTER || argc == 0 ||
        (size_t)r->ngroups * 4 + (size_t)r->nfilter * 8 > (size_t)(end - at))
        return EINVAL;
    r->groups = calloc((size_t)r->ngroups + 1, sizeof *r->groups);
    r->filter = calloc((size_t)r->nfilter + 1, sizeof *r->filter);
    int err = 0;
    if (r->groups == NULL || r->filter == NULL) {
        err = ENOMEM;
        goto bad;
    }
    for (uint32_t i = 0; i < r->ngroups; i++, at += 4)
        r->groups[i] = (gid_t)u32_at((unsigned char *)at);
    for (uint32_t i = 0; i < r->nfilter; i++, at += 8) { /* code u16, jt u8, jf u8, k u32: little-endian */
        const unsigned char *insn = (const unsigned char *)at;
        r->filter[i].code = (uint16_t)(insn[0] | insn[1] << 8);
        r->filter[i].jt = insn[2];
        r->filter[i].jf = insn[3];
        r->filter[i].k = u32_at(insn + 4);
    }
    err = EINVAL;
    if ((r->cwd = next_string(&at, end)) == NULL)
        goto bad;
    if (r->flags & HAS_ROOT && ((r->root = next_string(&at, end)) == NULL || r->root[0] == 0))
        goto bad;
    if ((r->argv = strings(&at, end, argc, &err)) == NULL || (r->paths = strings(&at, end, r->npaths, &err)) == NULL ||
        (r->env = strings(&at, end, nenv, &err)) == NULL)
        goto bad;
    err = EINVAL;
    if (at != end)
        goto bad; /* bytes the counts do not account for */
    int expected = 2 + !!(r->flags & HAS_STDIN) + !!(r->flags & HAS_RULESET) + !!(r->flags & HAS_CWD_FD);
    if (nfds != expected)
        goto bad;
    int next = 2;
    r->out = fds[0];
    r->err = fds[1];
    r->in = r->flags & HAS_STDIN ? fds[next++] : -1;
    r->ruleset = r->flags & HAS_RULESET ? fds[next++] : -1;
    r->cwd_fd = r->flags & HAS_CWD_FD ? fds[next++] : -1;
    if (r->root != NULL && r->cwd_fd >= 0)
        goto bad; /* a view (views.py): a directory descriptor would lead out of it */
    return 0;
bad:
    free_request(r);
    memset(r, 0, sizeof *r);
    return err;
}

/* Leave the daemon's session, be the OOM killer's first choice, keep orphans below. */
static void prepare(void) {
    (void)setsid();
    /* The OOM killer's first choice is agent work, never the daemon (raising one's own
     * score needs no privilege; the file may be missing in some sandboxes). */
    int oom = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
    if (oom >= 0) {
        (void)write(oom, "1000", 4);
        close(oom);
    }
    (void)prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
}

/* Set the command of ``r`` up and exec it (``processes``: its RLIMIT_NPROC as a user other
 * than root, 0 for none; ``close_rest``: close every descriptor above stderr first, where
 * the caller's are not all close-on-exec); on failure ``failed``. Only system calls: under CLONE_VM the
 * daemon's memory is shared (the ids change by the raw calls: libc's would signal the
 * daemon's threads to follow). Never returns. */
static void run(const struct request *r, int devnull, rlim_t processes, int close_rest, failed_fn failed, void *ctx) {
    if (r->root != NULL && chroot(r->root) != 0)
        failed(STAGE_CONFINE, errno, ctx);
    if ((r->cwd_fd >= 0 ? fchdir(r->cwd_fd) : chdir(r->cwd)) != 0)
        failed(STAGE_CHDIR, errno, ctx);
    /* The three copies carry no close-on-exec. */
    if (dup2(r->in >= 0 ? r->in : devnull, 0) < 0 || dup2(r->out, 1) < 0 || dup2(r->err, 2) < 0)
        failed(STAGE_SETUP, errno, ctx);
    if (r->ruleset >= 0) {
        /* Before the ids change: none of the command runs unconfined. */
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || syscall(SYS_landlock_restrict_self, r->ruleset, 0) != 0)
            failed(STAGE_CONFINE, errno, ctx);
    }
    /* Nothing else of the daemon's reaches the command, a descriptor it made without
     * close-on-exec included. */
    if (close_rest && syscall(SYS_close_range, 3u, 0x7fffffffu, 0u) != 0) /* gVisor refuses ~0 as the last */
        failed(STAGE_SETUP, errno, ctx);
    if (r->nfilter > 0) { /* seccomp.py: no metadata changes; before the ids change too */
        struct sock_fprog prog = {.len = (unsigned short)r->nfilter, .filter = r->filter};
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
            failed(STAGE_CONFINE, errno, ctx);
    }
    if (r->flags & HAS_IDS) {
        /* Set as root: the agent cannot raise it again. */
        struct rlimit nproc = {processes, processes};
        if (processes > 0 && r->uid != 0 && setrlimit(RLIMIT_NPROC, &nproc) != 0)
            failed(STAGE_CREDS, errno, ctx);
        if (syscall(SYS_setgroups, (size_t)r->ngroups, r->groups) != 0 ||
            syscall(SYS_setresgid, r->gid, r->gid, r->gid) != 0 || syscall(SYS_setresuid, r->uid, r->uid, r->uid) != 0)
            failed(STAGE_CREDS, errno, ctx);
    }
    int err = ENOENT, saved = 0;
    for (uint32_t i = 0; i < r->npaths; i++) { /* as execvpe: the first error other than "not there" wins */
        execve(r->paths[i], r->argv, r->env);
        err = errno;
        if (!saved && err != ENOENT && err != ENOTDIR)
            saved = err;
    }
    failed(STAGE_EXEC, saved ? saved : err, ctx);
}

#ifdef CLONE_SPAWN_LIBRARY

#define CHILD_STACK (256u << 10)

struct job {
    struct request r;
    int devnull;
    rlim_t processes;
    const int *defaults;
    int ndefaults;
    volatile int stage, err; /* written by the child, read once it is gone */
};

static void child_failed(int stage, int err, void *ctx) {
    struct job *job = ctx;
    job->err = err;
    job->stage = stage;
    _exit(127);
}

static int child(void *arg) {
    struct job *job = arg;
    /* The daemon's handlers (its copy of the table is the child's own) must not run here:
     * default, then unblocked (the command starts with an empty mask). */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    for (int i = 0; i < job->ndefaults; i++)
        (void)sigaction(job->defaults[i], &dfl, NULL);
    sigset_t none;
    sigemptyset(&none);
    (void)sigprocmask(SIG_SETMASK, &none, NULL);
    prepare();
    run(&job->r, job->devnull, job->processes, 1, child_failed, job);
    return 127;
}

/* Start the command of a request's payload (``size`` bytes, after the length) with its
 * ``nfds`` descriptors as the daemon's own child: its pid, with *stage 0 once it runs, or the
 * stage that failed and its errno (*stage set; the pid, when there is one, is a child that
 * exited). ``defaults``: the signals the daemon handles or ignores, set to default. */
int caisson_spawn(unsigned char *payload, uint32_t size, const int *fds, int nfds, int devnull,
                  unsigned long processes, const int *defaults, int ndefaults, int *stage, int *err) {
    struct job job;
    memset(&job, 0, sizeof job);
    *stage = 0;
    *err = parse(payload, size, fds, nfds, &job.r);
    if (*err != 0) {
        *stage = STAGE_SETUP;
        return 0;
    }
    job.devnull = devnull;
    job.processes = (rlim_t)processes;
    job.defaults = defaults;
    job.ndefaults = ndefaults;
    char *stack = malloc(CHILD_STACK);
    if (stack == NULL) {
        free_request(&job.r);
        *stage = STAGE_SETUP;
        *err = ENOMEM;
        return 0;
    }
    /* Blocked until the child has its own handlers: none of the daemon's runs in it. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int pid = clone(child, stack + CHILD_STACK, CLONE_VM | CLONE_VFORK | SIGCHLD, &job);
    int cloned = errno;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    free(stack);
    free_request(&job.r);
    if (pid < 0) {
        *stage = STAGE_SETUP;
        *err = cloned;
        return 0;
    }
    if (job.stage != 0) {
        *stage = job.stage;
        *err = job.err;
    }
    return pid;
}

#else

static void put_u32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)v, p[1] = (unsigned char)(v >> 8), p[2] = (unsigned char)(v >> 16), p[3] = (unsigned char)(v >> 24);
}

static void fail(int stage, int err, void *ctx) {
    (void)ctx;
    unsigned char msg[5] = {(unsigned char)stage};
    put_u32(msg + 1, (uint32_t)err);
    (void)send(SOCK, msg, sizeof msg, MSG_NOSIGNAL);
    _exit(127);
}

/* A clone, its socket on SOCK: what needs no request first, then wait for the command,
 * set it up and exec it, or report the failing stage (``processes``: its RLIMIT_NPROC as a
 * user other than root, 0 for none). Never returns. */
static void clone_main(int devnull, rlim_t processes) {
    if (fcntl(SOCK, F_SETFD, FD_CLOEXEC) != 0)
        fail(STAGE_SETUP, errno, NULL);
    prepare();

    unsigned char first[65536];
    union {
        char buf[CMSG_SPACE(MAX_FDS * sizeof(int))];
        struct cmsghdr align;
    } control;
    struct iovec iov = {first, sizeof first};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
                         .msg_controllen = sizeof control.buf};
    /* gVisor interrupts a blocked call when its container is paused (docker pause, a
     * snapshot's commit), and the call is not restarted: EINTR is no reason to give up. */
    ssize_t got;
    do
        got = recvmsg(SOCK, &msg, MSG_CMSG_CLOEXEC);
    while (got < 0 && errno == EINTR);
    if (got <= 0)
        _exit(0); /* the daemon is gone, or made this clone for nothing */

    int fds[MAX_FDS], nfds = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < n && nfds < MAX_FDS; i++)
            memcpy(&fds[nfds++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
    }
    if (msg.msg_flags & MSG_CTRUNC)
        fail(STAGE_SETUP, EINVAL, NULL);

    /* The whole request: a 4-byte length, then the payload (one request per clone). */
    while (got < 4) {
        ssize_t more = read(SOCK, first + got, sizeof first - (size_t)got);
        if (more < 0 && errno == EINTR)
            continue;
        if (more <= 0)
            _exit(0);
        got += more;
    }
    uint32_t size = u32_at(first);
    if (size < HEADER || size > MAX_REQUEST)
        fail(STAGE_SETUP, EINVAL, NULL);
    unsigned char *data = malloc((size_t)size + 4);
    if (data == NULL)
        fail(STAGE_SETUP, ENOMEM, NULL);
    size_t have = (size_t)got < (size_t)size + 4 ? (size_t)got : (size_t)size + 4;
    memcpy(data, first, have);
    while (have < (size_t)size + 4) {
        ssize_t more = read(SOCK, data + have, (size_t)size + 4 - have);
        if (more < 0 && errno == EINTR)
            continue;
        if (more <= 0)
            _exit(0);
        have += (size_t)more;
    }
    struct request r;
    int err = parse(data + 4, size, fds, nfds, &r);
    if (err != 0)
        fail(STAGE_SETUP, err, NULL);
    run(&r, devnull, processes, 0, fail, NULL); /* all it received closes on exec */
}

/* Send the daemon a clone's pid and errno, and ``fd`` (its end of the clone's socket). */
static void report(int daemon, int pid, int err, int fd) {
    unsigned char made[8];
    put_u32(made, (uint32_t)pid);
    put_u32(made + 4, (uint32_t)err);
    struct iovec iov = {made, sizeof made};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } control;
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    if (fd >= 0) {
        msg.msg_control = control.buf;
        msg.msg_controllen = sizeof control.buf;
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof fd);
    }
    if (sendmsg(daemon, &msg, MSG_NOSIGNAL) != (ssize_t)sizeof made)
        _exit(0); /* the daemon is gone */
}

/* The spawner: a clone for each byte the daemon sends, until it closes the socket. */
static void spawner_main(int devnull) {
    int daemon = fcntl(SOCK, F_DUPFD_CLOEXEC, 10);
    if (daemon < 0)
        _exit(1);
    close(SOCK);
    char byte;
    while (read(daemon, &byte, 1) == 1) {
        int pair[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
            report(daemon, 0, errno ? errno : EAGAIN, -1);
            continue;
        }
        long pid = syscall(SYS_clone, CLONE_PARENT | SIGCHLD, 0, 0, 0, 0);
        if (pid == 0) {
            close(daemon), close(pair[0]);
            if (pair[1] != SOCK) {
                if (dup2(pair[1], SOCK) != SOCK)
                    _exit(127);
                close(pair[1]);
            }
            clone_main(devnull, 0);
        }
        int err = pid < 0 ? errno : 0;
        close(pair[1]);
        if (pid > 0 && waitpid((pid_t)pid, NULL, WNOHANG) != -1) {
            /* Ours, not the daemon's: this kernel ignores CLONE_PARENT. */
            kill((pid_t)pid, SIGKILL);
            waitpid((pid_t)pid, NULL, 0);
            err = ENOSYS;
        }
        report(daemon, err ? 0 : (int)pid, err, err ? -1 : pair[0]);
        close(pair[0]);
    }
    _exit(0);
}

int main(int argc, char **argv) {
    int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (devnull < 0)
        _exit(127);
    if (argc > 2 && strcmp(argv[1], "clone") == 0)
        clone_main(devnull, (rlim_t)strtoul(argv[2], NULL, 10));
    spawner_main(devnull);
    return 0;
}

#endif
