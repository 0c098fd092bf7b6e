#ifndef ENCFS_CFUSE_SHIM_H
#define ENCFS_CFUSE_SHIM_H

// Pin the libfuse API before any include: 3.12 is the first version with
// fuse_loop_cfg_*; Debian 12 ships 3.14.
#define FUSE_USE_VERSION 312

#include <fuse3/fuse_lowlevel.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <errno.h>
#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <stdint.h>

// fuse_session_loop_mt is a function-like macro that picks a versioned
// symbol; Swift cannot call macros, so wrap it.
static inline int cfuse_session_loop_mt(struct fuse_session *se,
                                        struct fuse_loop_config *config) {
    return fuse_session_loop_mt(se, config);
}

// struct fuse_file_info keeps its flags in C bitfields; setting them from
// Swift through the importer's synthesized accessors is fragile across
// toolchains, so these helpers set exactly one flag each.
static inline void cfuse_fi_set_keep_cache(struct fuse_file_info *fi) {
    fi->keep_cache = 1;
}
static inline void cfuse_fi_set_cache_readdir(struct fuse_file_info *fi) {
    fi->cache_readdir = 1;
}
static inline void cfuse_fi_set_noflush(struct fuse_file_info *fi) {
    fi->noflush = 1;
}
static inline void cfuse_fi_set_direct_io(struct fuse_file_info *fi) {
    fi->direct_io = 1;
}

// prctl is variadic in glibc, which Swift cannot call; one helper per
// use. The process name (comm, 15 bytes at most) is what ps, pgrep and
// killall match; exec of /proc/self/exe would otherwise call it "exe".
static inline int cfuse_disable_dumpable(void) {
    return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}
static inline int cfuse_set_process_name(const char *name) {
    return prctl(PR_SET_NAME, (unsigned long)name, 0, 0, 0);
}

// pidfd_open has no wrapper before glibc 2.36 and syscall() is variadic,
// which Swift cannot call. A pidfd names one process for as long as it is
// open: reads of /proc/PID made while holding it, confirmed afterwards by
// cfuse_pidfd_has_exited, are known to be about that process and not about
// a later one that got the same pid (AccessPolicy's caller checks).
static inline int cfuse_pidfd_open(pid_t pid) {
    return (int)syscall(SYS_pidfd_open, pid, 0);
}
// 1 once the process has exited (the pidfd polls readable), 0 while it
// runs, -1 with errno when poll fails.
static inline int cfuse_pidfd_has_exited(int pidfd) {
    struct pollfd p = { .fd = pidfd, .events = POLLIN, .revents = 0 };
    int rc = poll(&p, 1, 0);
    if (rc < 0) return -1;
    return rc > 0 ? 1 : 0;
}

// RUSAGE_THREAD needs _GNU_SOURCE, which the importer does not define:
// the calling thread's involuntary context switches so far (RequestPoller
// backs off when others wanted its CPU), 0 when getrusage fails.
static inline long cfuse_thread_involuntary_switches(void) {
    struct rusage usage;
    if (getrusage(1 /* RUSAGE_THREAD */, &usage) != 0) return 0;
    return usage.ru_nivcsw;
}

// O_PATH needs _GNU_SOURCE too; glibc spells it __O_PATH without it. An
// O_PATH descriptor reads nothing and needs no read permission: it only
// keeps the file's inode (an --allow-exe program's) allocated.
static inline int cfuse_open_path(const char *path) {
    return open(path, __O_PATH | O_NOFOLLOW | O_CLOEXEC);
}

// What the daemon gives up once it serves (ProcessHardening): capset has
// no glibc wrapper (libcap is not linked for three calls), and prctl is
// variadic. cfuse_keep_capabilities sets permitted and effective to
// `keep` (a mask of CAP_* bits), inheritable to none.
static inline int cfuse_set_no_new_privs(void) {
    return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
}
static inline int cfuse_drop_bounding_capability(int capability) {
    return prctl(PR_CAPBSET_DROP, capability, 0, 0, 0);
}
static inline int cfuse_clear_ambient_capabilities(void) {
    return prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
}
static inline int cfuse_keep_capabilities(uint64_t keep) {
    struct __user_cap_header_struct header = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
    struct __user_cap_data_struct data[2] = {
        { .effective = (uint32_t)keep, .permitted = (uint32_t)keep, .inheritable = 0 },
        { .effective = (uint32_t)(keep >> 32), .permitted = (uint32_t)(keep >> 32), .inheritable = 0 },
    };
    return (int)syscall(SYS_capset, &header, data);
}
// The permitted set as a mask, 0 when capget fails.
static inline uint64_t cfuse_permitted_capabilities(void) {
    struct __user_cap_header_struct header = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
    struct __user_cap_data_struct data[2];
    if (syscall(SYS_capget, &header, data) != 0) return 0;
    return (uint64_t)data[0].permitted | ((uint64_t)data[1].permitted << 32);
}

#endif
