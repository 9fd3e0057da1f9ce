/*
 * storage_file.c — the `files` storage backend (storage.h): a tenant is a
 * directory, a segment the file <id as 8 hex digits>.seg, its hint
 * <id>.hint, a metadata blob the file of its name (docs/FORMAT.md). Every
 * change goes through the fault-hooked calls of io_file.c.
 *
 * Invariants:
 *   1. A blob or hint is written to <name>.tmp and renamed over <name>, so
 *      a reader sees the old file or the new one, whole; a durable put
 *      fdatasyncs the file before the rename and fsyncs the directory after.
 *   2. An unpublished segment is <id>.seg.tmp; publishing renames it.
 *   3. Whatever ends in .tmp is what an interrupted put or create left:
 *      list reports it as KV_STOR_PARTIAL.
 * Threads: handles hold only descriptors and are safe to share.
 */
#include "storage.h"

#include "io.h"
#include "kvengine.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct file_storage {
	struct kv_storage base;
	char *root;             /* NULL: tenant names are paths */
	int rootfd;             /* AT_FDCWD when root is NULL */
	atomic_bool ring_reads; /* read_batch through each thread's io_uring ring: set once a
	                         * writer of the instance uses io_uring */
};

struct file_tenant {
	struct kv_stor_tenant base;
	int dirfd;
	int lockfd; /* LOCK while tenant_lock holds it, else -1 */
};

struct file_writer {
	struct kv_stor_writer base;
	struct io_backend *io;
};

struct file_seg {
	struct kv_stor_seg base;
	int fd;
	bool temp; /* unpublished: <id>.seg.tmp */
};

#define FILE_NAME_MAX (KV_STOR_NAME_MAX + 8)

static struct kv_io_fault *fault_of(struct kv_stor_tenant *t)
{
	return t->st->fault;
}

static int dirfd_of(struct kv_stor_tenant *t)
{
	return ((struct file_tenant *)t)->dirfd;
}

static void seg_file(char *buf, uint32_t id, const char *ext, bool temp)
{
	snprintf(buf, FILE_NAME_MAX, "%08x%s%s", id, ext, temp ? ".tmp" : "");
}

/* ---- whole small files --------------------------------------------------- */

static int put_file(struct kv_stor_tenant *t, const char *name, const void *buf, size_t len,
                    bool durable)
{
	struct kv_io_fault *f = fault_of(t);
	int dirfd = dirfd_of(t), fd, rv;
	char tmp[FILE_NAME_MAX];

	if (strlen(name) > KV_STOR_NAME_MAX || len > KV_STOR_META_MAX)
		return -EINVAL;
	snprintf(tmp, sizeof(tmp), "%s.tmp", name);
	if ((fd = io_create(f, dirfd, tmp, O_WRONLY | O_TRUNC | O_CLOEXEC, 0644)) < 0)
		return fd;
	rv = io_pwrite_full(f, fd, buf, len, 0);
	if (rv == 0 && durable)
		rv = io_fdatasync(f, fd);
	close(fd);
	if (rv == 0)
		rv = io_rename(f, dirfd, tmp, name);
	if (rv == 0 && durable)
		rv = io_fsync(f, dirfd);
	if (rv != 0)
		io_unlink(f, dirfd, tmp);
	return rv;
}

static int get_file(struct kv_stor_tenant *t, const char *name, size_t max, uint8_t **ret_buf,
                    size_t *ret_len)
{
	struct stat st;
	uint8_t *buf = NULL;
	size_t len;
	int fd, rv;

	if ((fd = openat(dirfd_of(t), name, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)) < 0)
		return -errno;
	if (fstat(fd, &st) != 0) {
		rv = -errno;
		goto out;
	}
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > max) {
		rv = KV_ECORRUPT;
		goto out;
	}
	len = (size_t)st.st_size;
	if ((buf = malloc(len ? len : 1)) == NULL) {
		rv = -ENOMEM;
		goto out;
	}
	if ((rv = io_pread_full(fault_of(t), fd, buf, len, 0)) != 0)
		goto out;
	*ret_buf = buf;
	*ret_len = len;
	buf = NULL;
out:
	free(buf);
	close(fd);
	return rv;
}

static int file_meta_put(struct kv_stor_tenant *t, const char *name, const void *buf, size_t len,
                         unsigned flags)
{
	return put_file(t, name, buf, len, (flags & KV_STOR_DURABLE) != 0);
}

static int file_meta_get(struct kv_stor_tenant *t, const char *name, size_t max, uint8_t **ret_buf,
                         size_t *ret_len)
{
	return get_file(t, name, max, ret_buf, ret_len);
}

static int file_meta_remove(struct kv_stor_tenant *t, const char *name)
{
	return io_unlink(fault_of(t), dirfd_of(t), name);
}

/* ---- hints --------------------------------------------------------------- */

static int file_hint_put(struct kv_stor_tenant *t, uint32_t id, const void *buf, size_t len)
{
	char name[FILE_NAME_MAX];

	/* Not synced: a hint is checked whole before use, and a hint that a
	 * crash left torn or empty is rejected and its segment scanned. */
	seg_file(name, id, ".hint", false);
	return put_file(t, name, buf, len, false);
}

static int file_hint_get(struct kv_stor_tenant *t, uint32_t id, size_t max, uint8_t **ret_buf,
                         size_t *ret_len)
{
	char name[FILE_NAME_MAX];

	seg_file(name, id, ".hint", false);
	return get_file(t, name, max, ret_buf, ret_len);
}

static int file_hint_remove(struct kv_stor_tenant *t, uint32_t id)
{
	char name[FILE_NAME_MAX];

	seg_file(name, id, ".hint", false);
	return io_unlink(fault_of(t), dirfd_of(t), name);
}

/* ---- listing ------------------------------------------------------------- */

/* "<8 hex digits><ext>", the id not 0. */
static bool parse_id_name(const char *name, const char *ext, uint32_t *ret)
{
	char *end;
	unsigned long v;

	if (strlen(name) != 8 + strlen(ext) || strcmp(name + 8, ext) != 0)
		return false;
	errno = 0;
	v = strtoul(name, &end, 16);
	if (errno || end != name + 8 || v == 0 || v > UINT32_MAX)
		return false;
	*ret = (uint32_t)v;
	return true;
}

static int file_list(struct kv_stor_tenant *t, kv_stor_list_fn fn, void *arg)
{
	DIR *d;
	struct dirent *de;
	int fd, rv = 0;

	if ((fd = dup(dirfd_of(t))) < 0)
		return -errno;
	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		return -errno;
	}
	rewinddir(d);
	while (rv == 0 && (de = readdir(d)) != NULL) {
		const char *n = de->d_name;
		size_t len = strlen(n);
		struct kv_stor_entry e = {.name = n};

		if (strcmp(n, ".") == 0 || strcmp(n, "..") == 0)
			continue;
		if (len > 4 && strcmp(n + len - 4, ".tmp") == 0)
			e.kind = KV_STOR_PARTIAL;
		else if (parse_id_name(n, ".seg", &e.id))
			e.kind = KV_STOR_SEGMENT;
		else if (parse_id_name(n, ".hint", &e.id))
			e.kind = KV_STOR_HINT;
		else
			e.kind = KV_STOR_META;
		if (e.kind == KV_STOR_SEGMENT || e.kind == KV_STOR_HINT)
			e.name = NULL;
		rv = fn(arg, &e);
	}
	closedir(d);
	return rv;
}

/* ---- segments ------------------------------------------------------------ */

static int seg_new(struct kv_stor_tenant *t, uint32_t id, int fd, bool temp,
                   struct kv_stor_seg **ret)
{
	struct file_seg *s;

	if ((s = calloc(1, sizeof(*s))) == NULL)
		return -ENOMEM;
	s->base.t = t;
	s->base.id = id;
	s->fd = fd;
	s->temp = temp;
	*ret = &s->base;
	return 0;
}

static int file_seg_create(struct kv_stor_tenant *t, uint32_t id, unsigned flags,
                           struct kv_stor_seg **ret)
{
	bool temp = (flags & KV_STOR_SEG_TEMP) != 0;
	char name[FILE_NAME_MAX];
	int fd, rv;

	seg_file(name, id, ".seg", temp);
	fd = io_create(fault_of(t), dirfd_of(t), name, O_RDWR | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0)
		return fd;
	if ((rv = seg_new(t, id, fd, temp, ret)) != 0) {
		close(fd);
		io_unlink(fault_of(t), dirfd_of(t), name);
	}
	return rv;
}

static int file_seg_open(struct kv_stor_tenant *t, uint32_t id, struct kv_stor_seg **ret,
                         uint64_t *ret_size)
{
	char name[FILE_NAME_MAX];
	struct stat st;
	int fd, rv;

	seg_file(name, id, ".seg", false);
	if ((fd = openat(dirfd_of(t), name, O_RDWR | O_CLOEXEC)) < 0)
		return -errno;
	if (fstat(fd, &st) != 0) {
		rv = -errno;
		close(fd);
		return rv;
	}
	if ((rv = seg_new(t, id, fd, false, ret)) != 0) {
		close(fd);
		return rv;
	}
	*ret_size = (uint64_t)st.st_size;
	return 0;
}

static int fd_of(struct kv_stor_seg *s)
{
	return ((struct file_seg *)s)->fd;
}

static int file_seg_write(struct kv_stor_seg *s, const void *buf, size_t len, uint64_t off)
{
	return io_pwrite_full(fault_of(s->t), fd_of(s), buf, len, off);
}

static int file_seg_read(struct kv_stor_seg *s, void *buf, size_t len, uint64_t off)
{
	return io_pread_full(fault_of(s->t), fd_of(s), buf, len, off);
}

static int file_seg_read_upto(struct kv_stor_seg *s, void *buf, size_t len, uint64_t off,
                              size_t *ret_got)
{
	return io_pread_upto(fault_of(s->t), fd_of(s), buf, len, off, ret_got);
}

#define READ_CHUNK 64

static int file_read_batch(struct kv_storage *st, struct kv_stor_rd *v, size_t n)
{
	struct io_rd rd[READ_CHUNK];
	bool ring = atomic_load_explicit(&((struct file_storage *)st)->ring_reads,
	                                 memory_order_relaxed);
	size_t i, j, m;
	int first = 0, rv;

	if (n == 1 && !ring) {
		v[0].res = io_pread_full(st->fault, fd_of(v[0].s), v[0].buf, v[0].len, v[0].off);
		return v[0].res;
	}
	for (i = 0; i < n; i += m) {
		m = n - i < READ_CHUNK ? n - i : READ_CHUNK;
		for (j = 0; j < m; j++)
			rd[j] = (struct io_rd){fd_of(v[i + j].s), v[i + j].buf, v[i + j].len,
			                       v[i + j].off, 0};
		rv = io_read_batch(st->fault, ring, rd, m);
		for (j = 0; j < m; j++)
			v[i + j].res = rd[j].res;
		if (rv != 0 && first == 0)
			first = rv;
	}
	return first;
}

static int file_seg_sync(struct kv_stor_seg *s)
{
	return io_fdatasync(fault_of(s->t), fd_of(s));
}

static int file_seg_truncate(struct kv_stor_seg *s, uint64_t size)
{
	return io_truncate(fault_of(s->t), fd_of(s), size);
}

static int file_seg_reserve(struct kv_stor_seg *s, uint64_t off, uint64_t len)
{
	return io_reserve(fault_of(s->t), fd_of(s), off, len);
}

static int file_seg_seal(struct kv_stor_seg *s, uint64_t size)
{
	struct stat st;
	int rv;

	if (fstat(fd_of(s), &st) != 0)
		return -errno;
	/* also at the same size: that frees what seg_reserve allocated */
	if (((uint64_t)st.st_size > size || (uint64_t)st.st_blocks * 512 > size) &&
	    (rv = file_seg_truncate(s, size)) != 0)
		return rv;
	return file_seg_sync(s);
}

static int file_seg_publish(struct kv_stor_seg *s)
{
	struct file_seg *fs = (struct file_seg *)s;
	char tmp[FILE_NAME_MAX], name[FILE_NAME_MAX];
	int rv;

	if (!fs->temp)
		return 0;
	seg_file(tmp, s->id, ".seg", true);
	seg_file(name, s->id, ".seg", false);
	if ((rv = io_rename(fault_of(s->t), dirfd_of(s->t), tmp, name)) == 0)
		fs->temp = false;
	return rv;
}

static void file_seg_close(struct kv_stor_seg *s)
{
	if (s == NULL)
		return;
	close(fd_of(s));
	free(s);
}

static int file_seg_map(struct kv_stor_seg *s, size_t len, const uint8_t **ret_map)
{
	void *p = mmap(NULL, len, PROT_READ, MAP_SHARED, fd_of(s), 0);

	if (p == MAP_FAILED)
		return -errno;
	*ret_map = p;
	return 0;
}

static void file_seg_unmap(struct kv_stor_seg *s, const uint8_t *map, size_t len)
{
	(void)s;
	munmap((void *)map, len);
}

static int file_seg_remove(struct kv_stor_tenant *t, uint32_t id, unsigned flags)
{
	char name[FILE_NAME_MAX];

	seg_file(name, id, ".seg", (flags & KV_STOR_SEG_TEMP) != 0);
	return io_unlink(fault_of(t), dirfd_of(t), name);
}

static int link_file(struct kv_stor_tenant *src, uint32_t id, const char *ext,
                     struct kv_stor_tenant *dst)
{
	char name[FILE_NAME_MAX];

	if (src->st->ops != dst->st->ops)
		return -EXDEV;
	seg_file(name, id, ext, false);
	if (linkat(dirfd_of(src), name, dirfd_of(dst), name, 0) != 0)
		return -errno;
	return 0;
}

static int file_seg_link(struct kv_stor_tenant *src, uint32_t id, struct kv_stor_tenant *dst)
{
	return link_file(src, id, ".seg", dst);
}

static int file_hint_link(struct kv_stor_tenant *src, uint32_t id, struct kv_stor_tenant *dst)
{
	return link_file(src, id, ".hint", dst);
}

/* ---- the write path's appends (io.c's write backends) -------------------- */

static int file_writer_open(struct kv_storage *st, int mode, int efd, struct kv_stor_writer **ret)
{
	struct file_writer *w;
	int rv;

	if ((w = calloc(1, sizeof(*w))) == NULL)
		return -ENOMEM;
	if ((rv = io_backend_open((enum kv_io)mode, efd, st->fault, &w->io)) != 0) {
		free(w);
		return rv;
	}
	w->base.st = st;
	/* reads go through rings where the appends can */
	if (io_backend_is_uring(w->io))
		atomic_store_explicit(&((struct file_storage *)st)->ring_reads, true,
		                      memory_order_relaxed);
	*ret = &w->base;
	return 0;
}

static void file_writer_close(struct kv_stor_writer *w)
{
	if (w == NULL)
		return;
	io_backend_close(((struct file_writer *)w)->io);
	free(w);
}

static bool file_writer_is_uring(struct kv_stor_writer *w)
{
	return io_backend_is_uring(((struct file_writer *)w)->io);
}

static int file_append_start(struct kv_stor_writer *w, struct kv_stor_seg *s, const void *buf,
                             size_t len, uint64_t off, bool sync)
{
	return io_write_start(((struct file_writer *)w)->io, fd_of(s), buf, len, off, sync);
}

static int file_append_poll(struct kv_stor_writer *w, bool wait, struct kv_stor_wres *ret)
{
	struct io_result r;
	int rv = io_write_poll(((struct file_writer *)w)->io, wait, &r);

	if (rv == 1) {
		ret->err = r.err;
		ret->sync_failed = r.sync_failed;
	}
	return rv;
}

/* ---- tenants ------------------------------------------------------------- */

static struct file_storage *fst(struct kv_storage *st)
{
	return (struct file_storage *)st;
}

/* fsync of the directory holding tenants (the instance's root; the
 * parent of a tenant named by path). */
static int sync_parent(struct kv_storage *st, const char *tenant)
{
	char *parent = NULL, *slash;
	int fd, rv;

	if (fst(st)->root != NULL) {
		fd = openat(fst(st)->rootfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	} else {
		if ((parent = strdup(tenant)) == NULL)
			return -ENOMEM;
		slash = strrchr(parent, '/');
		if (slash == NULL)
			strcpy(parent, ".");
		else if (slash == parent)
			parent[1] = '\0';
		else
			*slash = '\0';
		fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	}
	free(parent);
	if (fd < 0)
		return -errno;
	rv = io_fsync(st->fault, fd);
	close(fd);
	return rv;
}

static bool name_ok(struct kv_storage *st, const char *tenant)
{
	if (tenant == NULL || *tenant == '\0')
		return false;
	/* under a root, a tenant is one directory entry */
	return fst(st)->root == NULL || (strchr(tenant, '/') == NULL && tenant[0] != '.');
}

static int file_tenant_open(struct kv_storage *st, const char *tenant, unsigned flags,
                            struct kv_stor_tenant **ret);
static void file_tenant_close(struct kv_stor_tenant *t);

/* The directory, then the blob (durably), then the directory's entry. */
static int file_tenant_create(struct kv_storage *st, const char *tenant, const char *meta_name,
                              const void *buf, size_t len)
{
	struct kv_stor_tenant *t;
	int rv;

	if ((rv = file_tenant_open(st, tenant, KV_STOR_CREATE, &t)) != 0)
		return rv;
	rv = put_file(t, meta_name, buf, len, true);
	file_tenant_close(t);
	if (rv != 0)
		return rv;
	return sync_parent(st, tenant);
}

static int rmtree_at(int parentfd, const char *name)
{
	int fd = openat(parentfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct dirent *de;
	DIR *d;
	int rv = 0;

	if (fd < 0)
		return -errno;
	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		return -errno;
	}
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (unlinkat(dirfd(d), de->d_name, 0) != 0 && rv == 0)
			rv = -errno;
	}
	closedir(d);
	if (unlinkat(parentfd, name, AT_REMOVEDIR) != 0 && rv == 0)
		rv = -errno;
	return rv;
}

/* Renamed to .dropped-<name> first, durably, so a crash never leaves half
 * a tenant behind; then its files go. */
static int file_tenant_drop(struct kv_storage *st, const char *tenant)
{
	int rootfd = fst(st)->rootfd, rv;
	char gone[KV_TENANT_NAME_MAX + 16];

	if (!name_ok(st, tenant) || fst(st)->root == NULL)
		return -EINVAL;
	if (snprintf(gone, sizeof(gone), ".dropped-%s", tenant) >= (int)sizeof(gone))
		return -EINVAL;
	if (renameat(rootfd, tenant, rootfd, gone) != 0)
		return -errno;
	if ((rv = sync_parent(st, tenant)) != 0)
		return rv;
	return rmtree_at(rootfd, gone);
}

static int file_tenant_list(struct kv_storage *st, int (*fn)(void *arg, const char *tenant),
                            void *arg)
{
	struct dirent *de;
	DIR *d;
	int fd, rv = 0;

	if (fst(st)->root == NULL)
		return -EINVAL;
	if ((fd = openat(fst(st)->rootfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return -errno;
	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		return -errno;
	}
	while (rv == 0 && (de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (strncmp(de->d_name, ".dropped-", 9) == 0) {
			/* a drop interrupted by a crash: finish it */
			rmtree_at(fst(st)->rootfd, de->d_name);
			continue;
		}
		rv = fn(arg, de->d_name);
	}
	closedir(d);
	return rv;
}

static int file_tenant_open(struct kv_storage *st, const char *tenant, unsigned flags,
                            struct kv_stor_tenant **ret)
{
	struct file_tenant *t;
	int fd;

	if (!name_ok(st, tenant))
		return -EINVAL;
	if ((flags & KV_STOR_CREATE) && mkdirat(fst(st)->rootfd, tenant, 0755) != 0 &&
	    errno != EEXIST)
		return -errno;
	if ((fd = openat(fst(st)->rootfd, tenant, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return -errno;
	if ((t = calloc(1, sizeof(*t))) == NULL) {
		close(fd);
		return -ENOMEM;
	}
	t->base.st = st;
	t->dirfd = fd;
	t->lockfd = -1;
	*ret = &t->base;
	return 0;
}

static void file_tenant_close(struct kv_stor_tenant *t)
{
	if (t == NULL)
		return;
	if (((struct file_tenant *)t)->lockfd >= 0)
		close(((struct file_tenant *)t)->lockfd);
	close(dirfd_of(t));
	free(t);
}

static int file_tenant_lock(struct kv_stor_tenant *t, bool exclusive)
{
	struct file_tenant *ft = (struct file_tenant *)t;
	char pid[32];
	int fd, n, rv;

	if (ft->lockfd >= 0)
		return -EINVAL;
	if (exclusive)
		fd = openat(ft->dirfd, "LOCK", O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	else
		fd = openat(ft->dirfd, "LOCK", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return !exclusive && errno == ENOENT ? 0 : -errno;
	/* flock: the kernel drops it when the process dies, so a crash never
	 * leaves a lock that blocks the next start */
	if (flock(fd, exclusive ? LOCK_EX | LOCK_NB : LOCK_SH | LOCK_NB) != 0) {
		rv = errno == EWOULDBLOCK ? KV_ELOCKED : -errno;
		close(fd);
		return rv;
	}
	if (exclusive) {
		n = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
		if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)n, 0) != n) {
			rv = -errno;
			close(fd);
			return rv;
		}
	}
	ft->lockfd = fd;
	return 0;
}

static int file_tenant_sync(struct kv_stor_tenant *t)
{
	return io_fsync(fault_of(t), dirfd_of(t));
}

static void file_destroy(struct kv_storage *st)
{
	struct file_storage *s = fst(st);

	if (s == NULL)
		return;
	if (s->root != NULL)
		close(s->rootfd);
	free(s->root);
	free(s);
}

static const struct kv_storage_ops file_ops = {
        .name = "files",
        .destroy = file_destroy,
        .tenant_create = file_tenant_create,
        .tenant_drop = file_tenant_drop,
        .tenant_list = file_tenant_list,
        .tenant_open = file_tenant_open,
        .tenant_close = file_tenant_close,
        .tenant_lock = file_tenant_lock,
        .tenant_sync = file_tenant_sync,
        .list = file_list,
        .meta_put = file_meta_put,
        .meta_get = file_meta_get,
        .meta_remove = file_meta_remove,
        .hint_put = file_hint_put,
        .hint_get = file_hint_get,
        .hint_remove = file_hint_remove,
        .seg_create = file_seg_create,
        .seg_open = file_seg_open,
        .seg_write = file_seg_write,
        .seg_read = file_seg_read,
        .seg_read_upto = file_seg_read_upto,
        .read_batch = file_read_batch,
        .seg_sync = file_seg_sync,
        .seg_truncate = file_seg_truncate,
        .seg_reserve = file_seg_reserve,
        .seg_seal = file_seg_seal,
        .seg_publish = file_seg_publish,
        .seg_close = file_seg_close,
        .seg_map = file_seg_map,
        .seg_unmap = file_seg_unmap,
        .writer_open = file_writer_open,
        .writer_close = file_writer_close,
        .writer_is_uring = file_writer_is_uring,
        .append_start = file_append_start,
        .append_poll = file_append_poll,
        .seg_remove = file_seg_remove,
        .seg_link = file_seg_link,
        .hint_link = file_hint_link,
};

int kv_storage_file_open(const char *root, struct kv_io_fault *fault, struct kv_storage **ret)
{
	struct file_storage *s;

	if ((s = calloc(1, sizeof(*s))) == NULL)
		return -ENOMEM;
	s->base.ops = &file_ops;
	s->base.fault = fault;
	s->base.align = 1;
	s->base.append_reopened = true;
	s->rootfd = AT_FDCWD;
	if (root != NULL) {
		if ((s->root = strdup(root)) == NULL) {
			free(s);
			return -ENOMEM;
		}
		if ((s->rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
			int rv = -errno;
			free(s->root);
			free(s);
			return rv;
		}
	}
	*ret = &s->base;
	return 0;
}
