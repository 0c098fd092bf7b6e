#ifndef ENCFS_CPROCESS_SHIM_H
#define ENCFS_CPROCESS_SHIM_H

// System calls the FUSE-free targets need and Swift cannot call directly
// (variadic prctl and syscall, macros behind _GNU_SOURCE): the process
// settings every tool makes (EncFSService/ProcessHardening.swift) and the
// caller checks of the shared access policy (EncFSService/Access/). Kernel
// and libc headers only, no library: encfs-serve uses them without libfuse.

#include <sys/prctl.h>
#include <sys/syscall.h>
#include <errno.h>
#include <poll.h>
#include <unistd.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <stdint.h>
#include <sys/socket.h>

// prctl is variadic in glibc, which Swift cannot call; one helper per
// use. The process name (comm, 15 bytes at most) is what ps, pgrep and
// killall match; exec of /proc/self/exe would otherwise call it "exe".
static inline int cprocess_disable_dumpable(void) {
    return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}
static inline int cprocess_set_process_name(const char *name) {
    return prctl(PR_SET_NAME, (unsigned long)name, 0, 0, 0);
}

// pidfd_open has no wrapper before glibc 2.36 and syscall() is variadic,
// which Swift cannot call. A pidfd names one process for as long as it is
// open: reads of /proc/PID made while holding it, confirmed afterwards by
// cprocess_pidfd_has_exited, are known to be about that process and not about
// a later one that got the same pid (AccessPolicy's caller checks).
static inline int cprocess_pidfd_open(pid_t pid) {
    return (int)syscall(SYS_pidfd_open, pid, 0);
}
// 1 once the process has exited (the pidfd polls readable), 0 while it
// runs, -1 with errno when poll fails.
static inline int cprocess_pidfd_has_exited(int pidfd) {
    struct pollfd p = { .fd = pidfd, .events = POLLIN, .revents = 0 };
    int rc = poll(&p, 1, 0);
    if (rc < 0) return -1;
    return rc > 0 ? 1 : 0;
}

// O_PATH needs _GNU_SOURCE too; glibc spells it __O_PATH without it. An
// O_PATH descriptor reads nothing and needs no read permission: it only
// keeps the file's inode (an --allow-exe program's) allocated.
static inline int cprocess_open_path(const char *path) {
    return open(path, __O_PATH | O_NOFOLLOW | O_CLOEXEC);
}

// What the daemon gives up once it serves (ProcessHardening): capset has
// no glibc wrapper (libcap is not linked for three calls), and prctl is
// variadic. cprocess_keep_capabilities sets permitted and effective to
// `keep` (a mask of CAP_* bits), inheritable to none.
static inline int cprocess_set_no_new_privs(void) {
    return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
}
static inline int cprocess_drop_bounding_capability(int capability) {
    return prctl(PR_CAPBSET_DROP, capability, 0, 0, 0);
}
static inline int cprocess_clear_ambient_capabilities(void) {
    return prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
}
static inline int cprocess_keep_capabilities(uint64_t keep) {
    struct __user_cap_header_struct header = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
    struct __user_cap_data_struct data[2] = {
        { .effective = (uint32_t)keep, .permitted = (uint32_t)keep, .inheritable = 0 },
        { .effective = (uint32_t)(keep >> 32), .permitted = (uint32_t)(keep >> 32), .inheritable = 0 },
    };
    return (int)syscall(SYS_capset, &header, data);
}
// The permitted set as a mask, 0 when capget fails.
static inline uint64_t cprocess_permitted_capabilities(void) {
    struct __user_cap_header_struct header = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
    struct __user_cap_data_struct data[2];
    if (syscall(SYS_capget, &header, data) != 0) return 0;
    return (uint64_t)data[0].permitted | ((uint64_t)data[1].permitted << 32);
}

// The peer of a connected unix socket (SO_PEERCRED): struct ucred needs
// _GNU_SOURCE, which the importer does not define, so its layout is
// spelled here. Returns 0 and fills
// pid, uid and gid, or -1 with errno.
static inline int cprocess_peer_credentials(int fd, pid_t *pid, uid_t *uid, gid_t *gid) {
    struct { pid_t pid; uid_t uid; gid_t gid; } cred; // struct ucred's layout
    socklen_t length = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &length) != 0) return -1;
    *pid = cred.pid;
    *uid = cred.uid;
    *gid = cred.gid;
    return 0;
}

#endif
