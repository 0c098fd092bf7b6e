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

// fuse_session_loop_mt is a function-like macro that picks a versioned
// symbol; Swift cannot call macros, so wrap it.
static inline int cfuse_session_loop_mt(struct fuse_session *se,
                                        struct fuse_loop_config *config) {
    return fuse_session_loop_mt(se, config);
}

// prctl is variadic in glibc, which Swift cannot call.
static inline int cfuse_disable_dumpable(void) {
    return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}

#endif
