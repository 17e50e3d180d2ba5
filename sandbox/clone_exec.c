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

enum { STAGE_SETUP = 1, STAGE_CHDIR, STAGE_CONFINE, STAGE_CREDS, STAGE_EXEC };
#define COMMAND_NICE 10 /* limits.COMMAND_NICE */
enum { HAS_STDIN = 1, HAS_RULESET = 2, HAS_CWD_FD = 4, HAS_IDS = 8, HAS_ROOT = 16 };

#define SOCK 3
#define MAX_FDS 5
#define HEADER 29 /* flags u8, then uid, gid, ngroups, argc, npaths, nenv, nfilter as u32 */
#define MAX_FILTER 4096 /* BPF_MAXINSNS */
#define MAX_REQUEST (64u << 20)

static void put_u32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)v, p[1] = (unsigned char)(v >> 8), p[2] = (unsigned char)(v >> 16), p[3] = (unsigned char)(v >> 24);
}

static void fail(int stage, int err) {
    unsigned char msg[5] = {(unsigned char)stage};
    put_u32(msg + 1, (uint32_t)err);
    (void)send(SOCK, msg, sizeof msg, MSG_NOSIGNAL);
    _exit(127);
}

static uint32_t u32_at(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The next NUL-terminated string of [*at, end); fails the request if there is none. */
static char *next_string(char **at, char *end) {
    char *s = *at;
    char *nul = s < end ? memchr(s, 0, (size_t)(end - s)) : NULL;
    if (nul == NULL)
        fail(STAGE_SETUP, EINVAL);
    *at = nul + 1;
    return s;
}

static char **strings(char **at, char *end, uint32_t n) {
    if (n > (uint32_t)(end - *at))
        fail(STAGE_SETUP, EINVAL); /* each string takes at least its NUL */
    char **list = calloc((size_t)n + 1, sizeof *list);
    if (list == NULL)
        fail(STAGE_SETUP, ENOMEM);
    for (uint32_t i = 0; i < n; i++)
        list[i] = next_string(at, end);
    return list;
}

/* A clone, its socket on SOCK: what needs no request first, then wait for the command,
 * set it up and exec it, or report the failing stage (``processes``: its RLIMIT_NPROC as a
 * user other than root, 0 for none). Never returns. */
static void clone_main(int devnull, rlim_t processes) {
    if (fcntl(SOCK, F_SETFD, FD_CLOEXEC) != 0)
        fail(STAGE_SETUP, errno);
    (void)setsid();
    /* The OOM killer's first choice is agent work, never the daemon (raising one's own
     * score needs no privilege; the file may be missing in some sandboxes). */
    int oom = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
    if (oom >= 0) {
        (void)write(oom, "1000", 4);
        close(oom);
    }
    (void)prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);

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
        fail(STAGE_SETUP, EINVAL);

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
        fail(STAGE_SETUP, EINVAL);
    unsigned char *data = malloc((size_t)size + 4);
    if (data == NULL)
        fail(STAGE_SETUP, ENOMEM);
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

    unsigned char *p = data + 4;
    unsigned flags = p[0];
    uid_t uid = (uid_t)u32_at(p + 1);
    gid_t gid = (gid_t)u32_at(p + 5);
    uint32_t ngroups = u32_at(p + 9), argc = u32_at(p + 13), npaths = u32_at(p + 17), nenv = u32_at(p + 21);
    uint32_t nfilter = u32_at(p + 25);
    char *end = (char *)data + 4 + size;
    char *at = (char *)p + HEADER;
    if (ngroups > 65536 || nfilter > MAX_FILTER || argc == 0 ||
        (size_t)ngroups * 4 + (size_t)nfilter * 8 > (size_t)(end - at))
        fail(STAGE_SETUP, EINVAL);
    gid_t *groups = calloc((size_t)ngroups + 1, sizeof *groups);
    struct sock_filter *filter = calloc((size_t)nfilter + 1, sizeof *filter);
    if (groups == NULL || filter == NULL)
        fail(STAGE_SETUP, ENOMEM);
    for (uint32_t i = 0; i < ngroups; i++, at += 4)
        groups[i] = (gid_t)u32_at((unsigned char *)at);
    for (uint32_t i = 0; i < nfilter; i++, at += 8) { /* code u16, jt u8, jf u8, k u32: little-endian */
        const unsigned char *insn = (const unsigned char *)at;
        filter[i].code = (uint16_t)(insn[0] | insn[1] << 8);
        filter[i].jt = insn[2];
        filter[i].jf = insn[3];
        filter[i].k = u32_at(insn + 4);
    }
    char *cwd = next_string(&at, end);
    char *root = flags & HAS_ROOT ? next_string(&at, end) : NULL;
    char **argv = strings(&at, end, argc);
    char **paths = strings(&at, end, npaths);
    char **env = strings(&at, end, nenv);
    if (at != end)
        fail(STAGE_SETUP, EINVAL); /* bytes the counts do not account for */

    int expected = 2 + !!(flags & HAS_STDIN) + !!(flags & HAS_RULESET) + !!(flags & HAS_CWD_FD);
    if (nfds != expected)
        fail(STAGE_SETUP, EINVAL);
    int next = 2;
    int in = flags & HAS_STDIN ? fds[next++] : -1;
    int ruleset = flags & HAS_RULESET ? fds[next++] : -1;
    int cwd_fd = flags & HAS_CWD_FD ? fds[next++] : -1;

    if (root != NULL) { /* a view (views.py); a directory descriptor would lead out of it */
        if (root[0] == 0 || cwd_fd >= 0)
            fail(STAGE_SETUP, EINVAL);
        if (chroot(root) != 0)
            fail(STAGE_CONFINE, errno);
    }
    if ((cwd_fd >= 0 ? fchdir(cwd_fd) : chdir(cwd)) != 0)
        fail(STAGE_CHDIR, errno);
    /* Every received descriptor carries close-on-exec; the three copies below do not. */
    if (dup2(in >= 0 ? in : devnull, 0) < 0 || dup2(fds[0], 1) < 0 || dup2(fds[1], 2) < 0)
        fail(STAGE_SETUP, errno);
    /* limits.COMMAND_NICE: the daemon is served first when the command fills the CPU. A
     * priority, not a boundary: best effort. */
    (void)setpriority(PRIO_PROCESS, 0, COMMAND_NICE);
    if (ruleset >= 0) {
        /* Before the ids change: none of the command runs unconfined. */
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || syscall(SYS_landlock_restrict_self, ruleset, 0) != 0)
            fail(STAGE_CONFINE, errno);
    }
    if (nfilter > 0) { /* seccomp.py: no metadata changes; before the ids change too */
        struct sock_fprog prog = {.len = (unsigned short)nfilter, .filter = filter};
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
            fail(STAGE_CONFINE, errno);
    }
    if (flags & HAS_IDS) {
        /* Set as root: the agent cannot raise it again. */
        struct rlimit nproc = {processes, processes};
        if (processes > 0 && uid != 0 && setrlimit(RLIMIT_NPROC, &nproc) != 0)
            fail(STAGE_CREDS, errno);
        if (setgroups(ngroups, groups) != 0 || setgid(gid) != 0 || setuid(uid) != 0)
            fail(STAGE_CREDS, errno);
    }
    int err = ENOENT, saved = 0;
    for (uint32_t i = 0; i < npaths; i++) { /* as execvpe: the first error other than "not there" wins */
        execve(paths[i], argv, env);
        err = errno;
        if (!saved && err != ENOENT && err != ENOTDIR)
            saved = err;
    }
    fail(STAGE_EXEC, saved ? saved : err);
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
