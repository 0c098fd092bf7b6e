#ifndef ENCFS_CURING_SHIM_H
#define ENCFS_CURING_SHIM_H

// FUSE over io_uring through raw system calls, not liburing: Debian 12's
// liburing-dev is 2.3, which knows nothing of the FUSE commands, and its
// queue helpers are inline functions and macros Swift cannot call anyway.
// What a FUSE ring needs is small (one ring per thread, URING_CMD and
// POLL_ADD submissions, a completion queue to drain), so the whole ring
// lives in the static inline helpers below and no library is linked.

#include <linux/io_uring.h>
#include <linux/fuse.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <poll.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

// The FUSE-over-io_uring ABI (FUSE 7.42, Linux 6.14), from the kernel's
// include/uapi/linux/fuse.h: Debian 12's <linux/fuse.h> is 7.38 and lacks
// it, so the layout is written out here.

// FUSE_OVER_IO_URING is bit 41 of the 64 INIT flags: bit 9 of flags2.
#define CURING_FUSE_OVER_IO_URING_FLAGS2 (1u << 9)
#define CURING_FUSE_INIT_EXT (1u << 30)
#define CURING_FUSE_MAX_PAGES (1u << 22)
#define CURING_CMD_REGISTER 1u
#define CURING_CMD_COMMIT_AND_FETCH 2u

// Written by the kernel when it hands over a request, by us on commit.
struct curing_ent_in_out {
    uint64_t flags;
    uint64_t commit_id;   // the request's unique, echoed on commit
    uint32_t payload_sz;  // bytes valid in the payload buffer
    uint32_t padding;
    uint64_t reserved;
};

// iov[0] of a registration: the request's (or reply's) headers.
struct curing_req_header {
    char in_out[128];     // fuse_in_header, then fuse_out_header
    char op_in[128];      // the opcode's fixed argument (e.g. fuse_read_in)
    struct curing_ent_in_out ring_ent_in_out;
};

// The command area of a 128-byte SQE.
struct curing_cmd_req {
    uint64_t flags;
    uint64_t commit_id;
    uint16_t qid;
    uint8_t padding[6];
};

// One io_uring, its three mappings and our private SQ tail.
struct curing_ring {
    int fd;
    unsigned sq_entries;
    unsigned sq_tail_local;
    unsigned *sq_head, *sq_tail, *sq_mask, *sq_array, *sq_flags;
    unsigned *cq_head, *cq_tail, *cq_mask;
    char *sqes;
    struct io_uring_cqe *cqes;
    void *sq_map; size_t sq_map_len;
    void *cq_map; size_t cq_map_len;
    size_t sqes_len;
};

// io_uring_setup and io_uring_enter have no glibc wrapper, and syscall()
// is variadic.
static inline int curing_sys_setup(unsigned entries, struct io_uring_params *p) {
    return (int)syscall(__NR_io_uring_setup, entries, p);
}
static inline int curing_sys_enter(int fd, unsigned submit, unsigned wait, unsigned flags) {
    return (int)syscall(__NR_io_uring_enter, fd, submit, wait, flags, NULL, 0);
}

static inline void curing_ring_close(struct curing_ring *r) {
    if (r->sqes && r->sqes != MAP_FAILED) munmap(r->sqes, r->sqes_len);
    if (r->cq_map && r->cq_map != MAP_FAILED && r->cq_map != r->sq_map) munmap(r->cq_map, r->cq_map_len);
    if (r->sq_map && r->sq_map != MAP_FAILED) munmap(r->sq_map, r->sq_map_len);
    if (r->fd >= 0) close(r->fd);
    memset(r, 0, sizeof(*r));
    r->fd = -1;
}

// A ring of `entries` 128-byte SQEs (what FUSE's commands need) and twice
// as many CQEs, created disabled: the thread that will use it enables it
// (curing_ring_enable) and becomes its only submitter. Its task work is
// deferred (DEFER_TASKRUN): the kernel writes requests into registered
// buffers only inside that thread's io_uring_enter, never between two
// instructions of it, so the thread may wipe an idle entry's buffer
// safely. TASKRUN_FLAG has the kernel raise IORING_SQ_TASKRUN in the
// shared ring memory when such work (a request for an entry, a poll that
// fired) waits for the thread: what a thread polling in user space looks
// at (curing_work_pending). 0, or -errno (ENOSYS: no io_uring; EPERM: forbidden by
// kernel.io_uring_disabled or a seccomp filter; EINVAL: a flag unknown).
static inline int curing_ring_open(struct curing_ring *r, unsigned entries) {
    struct io_uring_params p;
    memset(&p, 0, sizeof(p));
    memset(r, 0, sizeof(*r));
    r->fd = -1;
    p.flags = IORING_SETUP_SQE128 | IORING_SETUP_CQSIZE | IORING_SETUP_R_DISABLED
        | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_TASKRUN_FLAG;
    p.cq_entries = entries * 2;
    int fd = curing_sys_setup(entries, &p);
    if (fd < 0) return -errno;
    r->fd = fd;
    r->sq_entries = p.sq_entries;
    r->sq_map_len = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    r->cq_map_len = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
    int single = (p.features & IORING_FEAT_SINGLE_MMAP) != 0;
    if (single) {
        if (r->cq_map_len > r->sq_map_len) r->sq_map_len = r->cq_map_len;
        r->cq_map_len = r->sq_map_len;
    }
    r->sq_map = mmap(NULL, r->sq_map_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_SQ_RING);
    if (r->sq_map == MAP_FAILED) { int e = errno; curing_ring_close(r); return -e; }
    r->cq_map = single ? r->sq_map
        : mmap(NULL, r->cq_map_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_CQ_RING);
    if (r->cq_map == MAP_FAILED) { int e = errno; curing_ring_close(r); return -e; }
    r->sqes_len = (size_t)p.sq_entries * 128;
    r->sqes = mmap(NULL, r->sqes_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_SQES);
    if (r->sqes == MAP_FAILED) { int e = errno; curing_ring_close(r); return -e; }
    char *sq = (char *)r->sq_map, *cq = (char *)r->cq_map;
    r->sq_head = (unsigned *)(sq + p.sq_off.head);
    r->sq_tail = (unsigned *)(sq + p.sq_off.tail);
    r->sq_mask = (unsigned *)(sq + p.sq_off.ring_mask);
    r->sq_array = (unsigned *)(sq + p.sq_off.array);
    r->sq_flags = (unsigned *)(sq + p.sq_off.flags);
    r->cq_head = (unsigned *)(cq + p.cq_off.head);
    r->cq_tail = (unsigned *)(cq + p.cq_off.tail);
    r->cq_mask = (unsigned *)(cq + p.cq_off.ring_mask);
    r->cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
    r->sq_tail_local = *r->sq_tail;
    return 0;
}

// Enables a ring made by curing_ring_open; the calling thread becomes its
// only submitter. 0 or -errno.
static inline int curing_ring_enable(struct curing_ring *r) {
    int rc = (int)syscall(__NR_io_uring_register, r->fd, IORING_REGISTER_ENABLE_RINGS, NULL, 0);
    return rc < 0 ? -errno : 0;
}

// The next free SQE, zeroed, or NULL when the submission queue is full.
static inline struct io_uring_sqe *curing_get_sqe(struct curing_ring *r) {
    unsigned head = __atomic_load_n(r->sq_head, __ATOMIC_ACQUIRE);
    unsigned tail = r->sq_tail_local;
    if (tail - head >= r->sq_entries) return NULL;
    unsigned index = tail & *r->sq_mask;
    struct io_uring_sqe *sqe = (struct io_uring_sqe *)(r->sqes + (size_t)index * 128);
    memset(sqe, 0, 128);
    r->sq_array[index] = index;
    r->sq_tail_local = tail + 1;
    return sqe;
}

// Publishes the prepared SQEs and enters the kernel: submits them and,
// with wait > 0, sleeps until that many completions are there. The number
// submitted, or -errno (EINTR: a signal; nothing is lost, call again).
static inline int curing_submit_and_wait(struct curing_ring *r, unsigned wait) {
    __atomic_store_n(r->sq_tail, r->sq_tail_local, __ATOMIC_RELEASE);
    unsigned pending = r->sq_tail_local - __atomic_load_n(r->sq_head, __ATOMIC_ACQUIRE);
    if (pending == 0 && wait == 0) return 0;
    int rc = curing_sys_enter(r->fd, pending, wait, wait ? IORING_ENTER_GETEVENTS : 0);
    return rc < 0 ? -errno : rc;
}

// Whether an unseen completion carries `user_data` (a look, nothing
// consumed).
static inline int curing_has_cqe_for(struct curing_ring *r, uint64_t user_data) {
    unsigned tail = __atomic_load_n(r->cq_tail, __ATOMIC_ACQUIRE);
    for (unsigned head = *r->cq_head; head != tail; head++) {
        if (r->cqes[head & *r->cq_mask].user_data == user_data) return 1;
    }
    return 0;
}

// Whether the thread has something to collect, looked at in the shared
// ring memory without a system call: an unseen completion, or deferred
// work (IORING_SQ_TASKRUN) that its next io_uring_enter turns into one.
static inline int curing_work_pending(struct curing_ring *r) {
    if (*r->cq_head != __atomic_load_n(r->cq_tail, __ATOMIC_ACQUIRE)) return 1;
    return (__atomic_load_n(r->sq_flags, __ATOMIC_ACQUIRE) & IORING_SQ_TASKRUN) != 0;
}

// The oldest unseen completion, or NULL.
static inline struct io_uring_cqe *curing_peek_cqe(struct curing_ring *r) {
    unsigned head = *r->cq_head;
    if (head == __atomic_load_n(r->cq_tail, __ATOMIC_ACQUIRE)) return NULL;
    return &r->cqes[head & *r->cq_mask];
}
static inline void curing_cqe_seen(struct curing_ring *r) {
    __atomic_store_n(r->cq_head, *r->cq_head + 1, __ATOMIC_RELEASE);
}

// A FUSE ring command on /dev/fuse: REGISTER (with the entry's two
// buffers) or COMMIT_AND_FETCH (commit_id: the request answered).
static inline void curing_prep_fuse_cmd(struct io_uring_sqe *sqe, int fuse_fd, uint32_t cmd_op, uint16_t qid,
                                        uint64_t commit_id, const struct iovec *iov, uint64_t user_data) {
    sqe->opcode = IORING_OP_URING_CMD;
    sqe->fd = fuse_fd;
    sqe->cmd_op = cmd_op;
    if (iov) {
        sqe->addr = (uint64_t)(uintptr_t)iov;
        sqe->len = 2;
    }
    sqe->user_data = user_data;
    struct curing_cmd_req *req = (struct curing_cmd_req *)sqe->cmd;
    req->qid = qid;
    req->commit_id = commit_id;
}

// Completes once `fd` is readable: how a ring thread hears "stop" from an
// eventfd while it sleeps in io_uring_enter.
static inline void curing_prep_poll_readable(struct io_uring_sqe *sqe, int fd, uint64_t user_data) {
    sqe->opcode = IORING_OP_POLL_ADD;
    sqe->fd = fd;
    sqe->poll32_events = POLLIN;
    sqe->user_data = user_data;
}

// CPU affinity through the system calls: glibc's wrappers and CPU_*
// macros need _GNU_SOURCE, which would make this module's view of the C
// library differ from the other modules'. A mask of 1024 CPUs.
#define CURING_CPU_WORDS (1024 / (8 * sizeof(unsigned long)))
static inline int curing_pin_to_cpu(int cpu) {
    unsigned long mask[CURING_CPU_WORDS];
    if (cpu < 0 || cpu >= 1024) return -1;
    memset(mask, 0, sizeof(mask));
    mask[cpu / (8 * sizeof(unsigned long))] = 1UL << (cpu % (8 * sizeof(unsigned long)));
    return (int)syscall(__NR_sched_setaffinity, 0, sizeof(mask), mask);
}
static inline int curing_cpu_allowed(int cpu) {
    unsigned long mask[CURING_CPU_WORDS];
    if (cpu < 0 || cpu >= 1024) return 0;
    memset(mask, 0, sizeof(mask));
    if (syscall(__NR_sched_getaffinity, 0, sizeof(mask), mask) < 0) return 0;
    return (mask[cpu / (8 * sizeof(unsigned long))] >> (cpu % (8 * sizeof(unsigned long)))) & 1UL ? 1 : 0;
}
// Lets the calling thread run on every CPU it may use but `cpu`, when
// there is another: 1 done, 0 nothing to do (no other CPU allowed), -1 and
// errno on failure.
static inline int curing_avoid_cpu(int cpu) {
    unsigned long mask[CURING_CPU_WORDS];
    unsigned long others = 0;
    if (cpu < 0 || cpu >= 1024) return 0;
    memset(mask, 0, sizeof(mask));
    if (syscall(__NR_sched_getaffinity, 0, sizeof(mask), mask) < 0) return -1;
    mask[cpu / (8 * sizeof(unsigned long))] &= ~(1UL << (cpu % (8 * sizeof(unsigned long))));
    for (size_t word = 0; word < CURING_CPU_WORDS; word++) others |= mask[word];
    if (others == 0) return 0;
    return syscall(__NR_sched_setaffinity, 0, sizeof(mask), mask) < 0 ? -1 : 1;
}
static inline int curing_eventfd(void) { return eventfd(0, EFD_CLOEXEC); }

// Locks a ring entry's reply buffer page by page as it is first touched
// (mlock2 with MLOCK_ONFAULT, Linux 4.4): nothing is faulted in at INIT.
// Swift does not see mlock2 (a _GNU_SOURCE declaration). 0, or -1 and errno.
static inline int curing_mlock_on_fault(void *address, size_t length) {
    return (int)syscall(__NR_mlock2, address, length, 1 /* MLOCK_ONFAULT */);
}

#endif
