/*
 * nullfuse: a minimal read-only passthrough over the libfuse3 low-level API.
 *
 * The "FUSE alone, no crypto" ceiling for Scripts/bench.sh. It is configured
 * the way encfs-mount configures its own session, so that the difference
 * between the two is the daemon's work and nothing else:
 *   - low-level API, multithreaded loop with encfs-mount's default thread
 *     count (two per online CPU, at least 4), all kept once started (as many
 *     idle as threads), no clone_fd;
 *   - keep_cache on every open, cache_readdir on directories, entry, attribute
 *     and negative-lookup timeouts of one year (the tree does not change while
 *     the benchmark runs);
 *   - max_readahead asked as 1 MiB (the kernel caps it at the bdi's
 *     read_ahead_kb, 128 KiB by default), reads of up to 1 MiB (max_pages);
 *   - readdirplus, symlink caching, asynchronous reads;
 *   - read() is pread() into a per-thread buffer and fuse_reply_buf(), the
 *     same copy a decrypting daemon makes; no splice.
 * O_DIRECT is stripped from opens (like gocryptfs does): the backing file is
 * read through the page cache whatever the client asked for.
 *
 * With NULLFUSE_SKIP_OPEN=1 opens are answered ENOSYS where the kernel
 * allows it (FUSE_CAP_NO_OPEN_SUPPORT), as encfs-mount answers them: the
 * kernel then sends no more OPEN and RELEASE, and each read opens the file
 * by its path, reads and closes it. Without it a file costs the kernel two
 * more round trips (OPEN, RELEASE) than it costs encfs-mount; with it both
 * see the same requests per file (Scripts/bench/bench_tree.py counts them).
 *
 * Inodes are modelled on libfuse's example/passthrough_ll.c, deduplicated by
 * (st_dev, st_ino), the fuse ino being the node's address, freed when the
 * kernel forgets it; but a node keeps its path below SRC_DIR instead of an
 * O_PATH fd, so 20,000 remembered inodes need no 20,000 fds (the tree does
 * not change while it is mounted, so paths stay valid).
 *
 * Usage: [NULLFUSE_SKIP_OPEN=1] nullfuse SRC_DIR MOUNTPOINT [-f] [-s] [-d] [-o opt,...]
 *   (with -o max_read=N, set NULLFUSE_MAX_READ=N too: smaller requests)
 * Build: gcc -O2 -Wall nullfuse.c $(pkg-config --cflags --libs fuse3) -lpthread
 */
#define _GNU_SOURCE
#define FUSE_USE_VERSION 312

#include <fuse_lowlevel.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

/* One year: "forever" for a benchmark, and well inside what the kernel accepts. */
static const double cache_timeout = 86400.0 * 365;
static const size_t max_io = 1 << 20;

struct node {
	struct node *next;   /* hash chain */
	ino_t ino;
	dev_t dev;
	char *path;          /* relative to SRC_DIR; "." for the root */
	uint64_t nlookup;
};

struct nullfs {
	pthread_mutex_t lock; /* guards table, every next and nlookup */
	int src;              /* SRC_DIR, O_RDONLY | O_DIRECTORY */
	struct node root;
	struct node **table;
	size_t buckets;       /* a power of two */
	int skip_open;        /* NULLFUSE_SKIP_OPEN and a kernel that can skip opens; set in init */
};

struct dirstream {
	DIR *dp;
	struct dirent *entry;
	off_t offset;
};

static struct nullfs *fs_of(fuse_req_t req)
{
	return (struct nullfs *)fuse_req_userdata(req);
}

static struct node *node_of(fuse_req_t req, fuse_ino_t ino)
{
	if (ino == FUSE_ROOT_ID)
		return &fs_of(req)->root;
	return (struct node *)(uintptr_t)ino;
}

static size_t bucket_of(const struct nullfs *fs, ino_t ino, dev_t dev)
{
	uint64_t h = (uint64_t)ino * 0x9E3779B97F4A7C15ull ^ (uint64_t)dev;
	return (size_t)(h >> 16) & (fs->buckets - 1);
}

/* Looks `name` up below `parent`; on success the node's nlookup went up by one. */
static int do_lookup(fuse_req_t req, fuse_ino_t parent, const char *name, struct fuse_entry_param *e)
{
	struct nullfs *fs = fs_of(req);
	memset(e, 0, sizeof(*e));
	e->attr_timeout = cache_timeout;
	e->entry_timeout = cache_timeout;

	const char *base = node_of(req, parent)->path;
	char *path;
	if (strcmp(base, ".") == 0 ? asprintf(&path, "%s", name) < 0 : asprintf(&path, "%s/%s", base, name) < 0)
		return ENOMEM;
	if (fstatat(fs->src, path, &e->attr, AT_SYMLINK_NOFOLLOW) < 0) {
		int err = errno;
		free(path);
		return err;
	}

	pthread_mutex_lock(&fs->lock);
	size_t b = bucket_of(fs, e->attr.st_ino, e->attr.st_dev);
	struct node *n = fs->table[b];
	while (n && !(n->ino == e->attr.st_ino && n->dev == e->attr.st_dev))
		n = n->next;
	if (n) {
		n->nlookup++;
		free(path);
	} else {
		n = calloc(1, sizeof(*n));
		if (!n) {
			pthread_mutex_unlock(&fs->lock);
			free(path);
			return ENOMEM;
		}
		n->ino = e->attr.st_ino;
		n->dev = e->attr.st_dev;
		n->path = path;
		n->nlookup = 1;
		n->next = fs->table[b];
		fs->table[b] = n;
	}
	pthread_mutex_unlock(&fs->lock);
	e->ino = (uintptr_t)n;
	return 0;
}

static void forget_one(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	struct nullfs *fs = fs_of(req);
	struct node *n = node_of(req, ino);
	if (n == &fs->root)
		return;
	pthread_mutex_lock(&fs->lock);
	n->nlookup = n->nlookup > nlookup ? n->nlookup - nlookup : 0;
	if (n->nlookup == 0) {
		struct node **p = &fs->table[bucket_of(fs, n->ino, n->dev)];
		while (*p && *p != n)
			p = &(*p)->next;
		if (*p)
			*p = n->next;
		free(n->path);
		free(n);
	}
	pthread_mutex_unlock(&fs->lock);
}

static void nf_init(void *userdata, struct fuse_conn_info *conn)
{
	struct nullfs *fs = (struct nullfs *)userdata;
	const char *skip_open = getenv("NULLFUSE_SKIP_OPEN");
	fs->skip_open = skip_open && strcmp(skip_open, "1") == 0 && (conn->capable & FUSE_CAP_NO_OPEN_SUPPORT);
	conn->want |= FUSE_CAP_ASYNC_READ;
	if (conn->capable & FUSE_CAP_CACHE_SYMLINKS)
		conn->want |= FUSE_CAP_CACHE_SYMLINKS;
	conn->want &= ~FUSE_CAP_ATOMIC_O_TRUNC;
	conn->max_readahead = max_io;
	conn->time_gran = 1;
	/* -o max_read=N must be repeated here (libfuse refuses the INIT
	 * otherwise); NULLFUSE_MAX_READ carries it, to compare request sizes. */
	const char *max_read = getenv("NULLFUSE_MAX_READ");
	if (max_read)
		conn->max_read = (unsigned)strtoul(max_read, NULL, 10);
}

static void nf_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;
	int err = do_lookup(req, parent, name, &e);
	if (err == ENOENT) {
		/* Cache the negative answer as long as positive ones. */
		memset(&e, 0, sizeof(e));
		e.entry_timeout = cache_timeout;
		fuse_reply_entry(req, &e);
	} else if (err) {
		fuse_reply_err(req, err);
	} else {
		fuse_reply_entry(req, &e);
	}
}

static void nf_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	forget_one(req, ino, nlookup);
	fuse_reply_none(req);
}

static void nf_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	for (size_t i = 0; i < count; i++)
		forget_one(req, forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

static void nf_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)fi;
	struct stat st;
	if (fstatat(fs_of(req)->src, node_of(req, ino)->path, &st, AT_SYMLINK_NOFOLLOW) < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_attr(req, &st, cache_timeout);
}

static void nf_readlink(fuse_req_t req, fuse_ino_t ino)
{
	char buf[PATH_MAX + 1];
	ssize_t n = readlinkat(fs_of(req)->src, node_of(req, ino)->path, buf, sizeof(buf));
	if (n < 0)
		fuse_reply_err(req, errno);
	else if ((size_t)n >= sizeof(buf))
		fuse_reply_err(req, ENAMETOOLONG);
	else {
		buf[n] = '\0';
		fuse_reply_readlink(req, buf);
	}
}

static void nf_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & (O_TRUNC | O_CREAT))) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (fs_of(req)->skip_open) {
		fuse_reply_err(req, ENOSYS); /* no more opens: reads open by path */
		return;
	}
	/* O_DIRECT and friends dropped on purpose. */
	int fd = openat(fs_of(req)->src, node_of(req, ino)->path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		fuse_reply_err(req, errno);
		return;
	}
	fi->fh = (uint64_t)fd;
	fi->keep_cache = 1;
	fi->noflush = 1;
	if (fuse_reply_open(req, fi) != 0)
		close(fd); /* interrupted: no release follows */
}

static void nf_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	static __thread char *buf;
	static __thread size_t cap;
	if (cap < size) {
		free(buf);
		cap = size > max_io ? size : max_io;
		buf = malloc(cap);
		if (!buf) {
			cap = 0;
			fuse_reply_err(req, ENOMEM);
			return;
		}
	}
	/* Opens skipped: no handle, the file is opened for this read alone. */
	struct nullfs *fs = fs_of(req);
	int fd = fs->skip_open ? openat(fs->src, node_of(req, ino)->path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
			       : (int)fi->fh;
	if (fd < 0) {
		fuse_reply_err(req, errno);
		return;
	}
	size_t done = 0;
	int err = 0;
	while (done < size) {
		ssize_t n = pread(fd, buf + done, size - done, off + (off_t)done);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			err = errno;
			break;
		}
		if (n == 0)
			break;
		done += (size_t)n;
	}
	if (fs->skip_open)
		close(fd);
	if (err)
		fuse_reply_err(req, err);
	else
		fuse_reply_buf(req, buf, done);
}

static void nf_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	close((int)fi->fh);
	fuse_reply_err(req, 0);
}

static void nf_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct dirstream *d = calloc(1, sizeof(*d));
	if (!d) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	int fd = openat(fs_of(req)->src, node_of(req, ino)->path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || !(d->dp = fdopendir(fd))) {
		int err = errno;
		if (fd >= 0)
			close(fd);
		free(d);
		fuse_reply_err(req, err);
		return;
	}
	fi->fh = (uintptr_t)d;
	fi->keep_cache = 1;
	fi->cache_readdir = 1;
	if (fuse_reply_open(req, fi) != 0) {
		closedir(d->dp);
		free(d);
	}
}

static int is_dot_or_dotdot(const char *name)
{
	return name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'));
}

/* The kernel serializes readdir calls on one open directory, so `d` needs no lock. */
static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t offset,
		       struct fuse_file_info *fi, int plus)
{
	struct dirstream *d = (struct dirstream *)(uintptr_t)fi->fh;
	char *buf = calloc(1, size);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	char *p = buf;
	size_t rem = size;
	int err = 0;

	if (offset != d->offset) {
		seekdir(d->dp, offset);
		d->entry = NULL;
		d->offset = offset;
	}
	for (;;) {
		if (!d->entry) {
			errno = 0;
			d->entry = readdir(d->dp);
			if (!d->entry) {
				err = errno;
				break;
			}
		}
		off_t next = d->entry->d_off;
		const char *name = d->entry->d_name;
		fuse_ino_t looked_up = 0;
		size_t entsize;
		if (plus) {
			struct fuse_entry_param e;
			if (is_dot_or_dotdot(name)) {
				memset(&e, 0, sizeof(e));
				e.attr.st_ino = d->entry->d_ino;
				e.attr.st_mode = d->entry->d_type << 12;
			} else {
				err = do_lookup(req, ino, name, &e);
				if (err)
					break;
				looked_up = e.ino;
			}
			entsize = fuse_add_direntry_plus(req, p, rem, name, &e, next);
		} else {
			struct stat st;
			memset(&st, 0, sizeof(st));
			st.st_ino = d->entry->d_ino;
			st.st_mode = d->entry->d_type << 12;
			entsize = fuse_add_direntry(req, p, rem, name, &st, next);
		}
		if (entsize > rem) {
			if (looked_up)
				forget_one(req, looked_up, 1);
			break;
		}
		p += entsize;
		rem -= entsize;
		d->entry = NULL;
		d->offset = next;
	}
	if (err && rem == size)
		fuse_reply_err(req, err);
	else
		fuse_reply_buf(req, buf, size - rem);
	free(buf);
}

static void nf_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, 0);
}

static void nf_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, 1);
}

static void nf_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	struct dirstream *d = (struct dirstream *)(uintptr_t)fi->fh;
	closedir(d->dp);
	free(d);
	fuse_reply_err(req, 0);
}

static void nf_statfs(fuse_req_t req, fuse_ino_t ino)
{
	(void)ino;
	struct statvfs sv;
	if (fstatvfs(fs_of(req)->src, &sv) < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_statfs(req, &sv);
}

static void nf_erofs(fuse_req_t req)
{
	fuse_reply_err(req, EROFS);
}

static void nf_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *a, int s, struct fuse_file_info *fi)
{
	(void)ino, (void)a, (void)s, (void)fi;
	nf_erofs(req);
}

static void nf_mkdir(fuse_req_t req, fuse_ino_t p, const char *n, mode_t m)
{
	(void)p, (void)n, (void)m;
	nf_erofs(req);
}

static void nf_unlink(fuse_req_t req, fuse_ino_t p, const char *n)
{
	(void)p, (void)n;
	nf_erofs(req);
}

static void nf_create(fuse_req_t req, fuse_ino_t p, const char *n, mode_t m, struct fuse_file_info *fi)
{
	(void)p, (void)n, (void)m, (void)fi;
	nf_erofs(req);
}

static void nf_write(fuse_req_t req, fuse_ino_t ino, const char *b, size_t s, off_t o, struct fuse_file_info *fi)
{
	(void)ino, (void)b, (void)s, (void)o, (void)fi;
	nf_erofs(req);
}

/* Every operation, wired in one place. */
static void assign_operations(struct fuse_lowlevel_ops *ops)
{
	memset(ops, 0, sizeof(*ops));
	ops->init = nf_init;
	ops->lookup = nf_lookup;
	ops->forget = nf_forget;
	ops->forget_multi = nf_forget_multi;
	ops->getattr = nf_getattr;
	ops->readlink = nf_readlink;
	ops->open = nf_open;
	ops->read = nf_read;
	ops->release = nf_release;
	ops->opendir = nf_opendir;
	ops->readdir = nf_readdir;
	ops->readdirplus = nf_readdirplus;
	ops->releasedir = nf_releasedir;
	ops->statfs = nf_statfs;
	ops->setattr = nf_setattr;
	ops->mkdir = nf_mkdir;
	ops->unlink = nf_unlink;
	ops->rmdir = nf_unlink;
	ops->create = nf_create;
	ops->write = nf_write;
}

/* Every open file takes an fd: allow as many as the hard limit does. */
static void raise_fd_limit(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

int main(int argc, char *argv[])
{
	if (argc < 3 || argv[1][0] == '-') {
		fprintf(stderr, "usage: nullfuse SRC_DIR MOUNTPOINT [-f] [-s] [-d] [-o opt,...]\n");
		return 2;
	}
	static struct nullfs fs;
	pthread_mutex_init(&fs.lock, NULL);
	fs.buckets = 1 << 16;
	fs.table = calloc(fs.buckets, sizeof(*fs.table));
	fs.root.path = ".";
	fs.src = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (!fs.table || fs.src < 0) {
		fprintf(stderr, "nullfuse: error: cannot open source directory (%s): %s\n", argv[1], strerror(errno));
		return 1;
	}
	fs.root.nlookup = 2;
	raise_fd_limit();

	/* argv without SRC_DIR, plus the options every benchmark mount gets. */
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	fuse_opt_add_arg(&args, argv[0]);
	for (int i = 2; i < argc; i++)
		fuse_opt_add_arg(&args, argv[i]);
	fuse_opt_add_arg(&args, "-oro,default_permissions,fsname=nullfuse,subtype=nullfuse");

	struct fuse_cmdline_opts opts;
	if (fuse_parse_cmdline(&args, &opts) != 0 || !opts.mountpoint) {
		fprintf(stderr, "usage: nullfuse SRC_DIR MOUNTPOINT [-f] [-s] [-d] [-o opt,...]\n");
		return 2;
	}

	struct fuse_lowlevel_ops ops;
	assign_operations(&ops);
	int rc = 1;
	struct fuse_session *se = fuse_session_new(&args, &ops, sizeof(ops), &fs);
	if (!se)
		goto out;
	if (fuse_set_signal_handlers(se) != 0)
		goto out_session;
	if (fuse_session_mount(se, opts.mountpoint) != 0)
		goto out_handlers;
	/* The mount exists before the parent exits: a caller may stat it at once. */
	fuse_daemonize(opts.foreground);
	if (opts.singlethread) {
		rc = fuse_session_loop(se);
	} else {
		struct fuse_loop_config *config = fuse_loop_cfg_create();
		fuse_loop_cfg_set_clone_fd(config, 0);
		long cpus = sysconf(_SC_NPROCESSORS_ONLN);
		unsigned threads = cpus > 2 ? (unsigned)(2 * cpus) : 4;
		if (threads > 64)
			threads = 64;
		fuse_loop_cfg_set_idle_threads(config, threads);
		fuse_loop_cfg_set_max_threads(config, threads);
		rc = fuse_session_loop_mt(se, config);
		fuse_loop_cfg_destroy(config);
	}
	fuse_session_unmount(se);
out_handlers:
	fuse_remove_signal_handlers(se);
out_session:
	fuse_session_destroy(se);
out:
	free(opts.mountpoint);
	fuse_opt_free_args(&args);
	return rc ? 1 : 0;
}
