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

// RUSAGE_THREAD needs _GNU_SOURCE, which the importer does not define:
// the calling thread's involuntary context switches so far (RequestPoller
// backs off when others wanted its CPU), 0 when getrusage fails.
static inline long cfuse_thread_involuntary_switches(void) {
    struct rusage usage;
    if (getrusage(1 /* RUSAGE_THREAD */, &usage) != 0) return 0;
    return usage.ru_nivcsw;
}

#endif
