/* statx(2) for kernels that refuse AT_NO_AUTOMOUNT with EINVAL (gVisor of late 2022).
 *
 * coreutils' ls and stat always pass that flag, so under such a kernel `ls DIR` and `stat`
 * fail for every path. The daemon preloads this library into every process where it finds
 * the refusal (statx_compat.py); the call is retried once without the flag, which changes
 * nothing in a container (no automount points). Built as a shared library that needs only
 * libc's syscall and errno, so it loads in any glibc image of the host's architecture.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

struct statx;

int statx(int dirfd, const char *path, int flags, unsigned int mask, struct statx *buf) {
    long done = syscall(SYS_statx, dirfd, path, flags, mask, buf);
    if (done == -1 && errno == EINVAL && (flags & AT_NO_AUTOMOUNT))
        done = syscall(SYS_statx, dirfd, path, flags & ~AT_NO_AUTOMOUNT, mask, buf);
    return (int)done;
}
