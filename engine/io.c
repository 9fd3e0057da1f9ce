/* io.c — backend selection and the blocking I/O helpers. */
#include "io.h"

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <linux/falloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

int io_backend_open(enum kv_io mode, int efd, struct kv_io_fault *fault, struct io_backend **ret)
{
	int uerr, rv;

	if (mode == KV_IO_PSYNC)
		return io_psync_backend_open(efd, fault, ret);
	uerr = io_uring_backend_open(efd, fault, ret);
	if (uerr == 0 || mode == KV_IO_URING)
		return uerr;
	if ((rv = io_psync_backend_open(efd, fault, ret)) != 0)
		return rv;
	(*ret)->uring_err = uerr;
	return 0;
}

void io_backend_close(struct io_backend *io)
{
	if (io != NULL)
		io->ops->destroy(io);
}

bool io_backend_is_uring(const struct io_backend *io)
{
	return io->uring;
}

int io_backend_uring_error(const struct io_backend *io)
{
	return io->uring ? 0 : io->uring_err;
}

int io_write_start(struct io_backend *io, int fd, const void *buf, size_t len, uint64_t off,
                   bool sync)
{
	return io->ops->write_start(io, fd, buf, len, off, sync);
}

int io_write_poll(struct io_backend *io, bool wait, struct io_result *ret)
{
	return io->ops->write_poll(io, wait, ret);
}

int kv_io_uring_probe(void)
{
	struct io_uring ring;
	int rv = io_uring_queue_init(2, &ring, 0);

	if (rv == 0)
		io_uring_queue_exit(&ring);
	return rv;
}

void io_signal(int efd)
{
	uint64_t one = 1;
	ssize_t n;

	if (efd < 0)
		return;
	do {
		n = write(efd, &one, sizeof(one));
	} while (n < 0 && errno == EINTR);
}

int io_pread_full(struct kv_io_fault *f, int fd, void *buf, size_t len, uint64_t off)
{
	uint8_t *p = buf;
	int rv;

	if (f != NULL && f->on_read != NULL && (rv = f->on_read(f->arg, fd, off, len)) < 0)
		return rv;
	while (len > 0) {
		ssize_t n = pread(fd, p, len, (off_t)off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

int io_pread_upto(struct kv_io_fault *f, int fd, void *buf, size_t len, uint64_t off,
                  size_t *ret_got)
{
	uint8_t *p = buf;
	size_t got = 0;
	int rv;

	if (f != NULL && f->on_read != NULL && (rv = f->on_read(f->arg, fd, off, len)) < 0)
		return rv;
	while (got < len) {
		ssize_t n = pread(fd, p + got, len - got, (off_t)(off + got));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	*ret_got = got;
	return 0;
}

static void record(struct kv_io_fault *f, const struct kv_io_event *ev)
{
	if (f != NULL && f->record != NULL)
		f->record(f->arg, ev);
}

static void record_write(struct kv_io_fault *f, int fd, uint64_t off, const void *buf, size_t len)
{
	struct kv_io_event ev = {
	        .type = KV_IO_EV_WRITE, .fd = fd, .off = off, .buf = buf, .len = len};

	if (len > 0)
		record(f, &ev);
}

void io_record_sync(struct kv_io_fault *f, int fd)
{
	struct kv_io_event ev = {.type = KV_IO_EV_SYNC, .fd = fd};

	record(f, &ev);
}

int io_pwrite_full(struct kv_io_fault *f, int fd, const void *buf, size_t len, uint64_t off)
{
	const uint8_t *p = buf;
	int rv = 0;

	if (f != NULL && f->on_write != NULL && (rv = f->on_write(f->arg, fd, off, len)) != 0) {
		if (rv < 0)
			return rv;
		if ((size_t)rv < len)
			len = (size_t)rv; /* injected short write: write part, then fail */
		rv = -EIO;
	}
	while (len > 0) {
		ssize_t n = pwrite(fd, p, len, (off_t)off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		record_write(f, fd, off, p, (size_t)n);
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return rv < 0 ? rv : 0;
}

int io_fdatasync(struct kv_io_fault *f, int fd)
{
	int rv;

	if (f != NULL && f->on_sync != NULL && (rv = f->on_sync(f->arg, fd)) < 0)
		return rv;
	if (fdatasync(fd) != 0)
		return -errno;
	io_record_sync(f, fd);
	return 0;
}

int io_fsync(struct kv_io_fault *f, int fd)
{
	int rv;

	if (f != NULL && f->on_sync != NULL && (rv = f->on_sync(f->arg, fd)) < 0)
		return rv;
	if (fsync(fd) != 0)
		return -errno;
	io_record_sync(f, fd);
	return 0;
}

static int dirop_check(struct kv_io_fault *f, const struct kv_io_event *ev)
{
	if (f != NULL && f->on_dirop != NULL)
		return f->on_dirop(f->arg, ev);
	return 0;
}

int io_create(struct kv_io_fault *f, int dirfd, const char *name, int flags, int mode)
{
	struct kv_io_event ev = {.type = KV_IO_EV_CREATE, .dirfd = dirfd, .name = name, .fd = -1};
	int fd, rv;

	if ((rv = dirop_check(f, &ev)) < 0)
		return rv;
	if ((fd = openat(dirfd, name, flags | O_CREAT, mode)) < 0)
		return -errno;
	ev.fd = fd;
	record(f, &ev);
	return fd;
}

int io_rename(struct kv_io_fault *f, int dirfd, const char *from, const char *to)
{
	struct kv_io_event ev = {
	        .type = KV_IO_EV_RENAME, .dirfd = dirfd, .name = from, .name2 = to};
	int rv;

	if ((rv = dirop_check(f, &ev)) < 0)
		return rv;
	if (renameat(dirfd, from, dirfd, to) != 0)
		return -errno;
	record(f, &ev);
	return 0;
}

int io_unlink(struct kv_io_fault *f, int dirfd, const char *name)
{
	struct kv_io_event ev = {.type = KV_IO_EV_UNLINK, .dirfd = dirfd, .name = name};
	int rv;

	if ((rv = dirop_check(f, &ev)) < 0)
		return rv;
	if (unlinkat(dirfd, name, 0) != 0)
		return -errno;
	record(f, &ev);
	return 0;
}

int io_reserve(struct kv_io_fault *f, int fd, uint64_t off, uint64_t len)
{
	struct kv_io_event ev = {.type = KV_IO_EV_TRUNCATE, .fd = fd, .off = off, .len = len};
	int rv;

	(void)ev;
	if (f != NULL && f->on_write != NULL && (rv = f->on_write(f->arg, fd, off, 0)) < 0)
		return rv;
	if (fallocate(fd, FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len) != 0)
		return -errno;
	return 0;
}

int io_truncate(struct kv_io_fault *f, int fd, uint64_t size)
{
	struct kv_io_event ev = {.type = KV_IO_EV_TRUNCATE, .fd = fd, .off = size};
	int rv;

	if ((rv = dirop_check(f, &ev)) < 0)
		return rv;
	if (ftruncate(fd, (off_t)size) != 0)
		return -errno;
	record(f, &ev);
	return 0;
}

/* ---- reads through a per-thread ring -------------------------------------- */

#define READ_RING_ENTRIES 64

struct read_ring {
	struct io_uring ring;
	int state; /* 0: not tried, 1: ready, -1: cannot be set up */
};

static __thread struct read_ring tl_ring;
static pthread_key_t ring_key;
static pthread_once_t ring_once = PTHREAD_ONCE_INIT;

static void ring_free(void *p)
{
	struct read_ring *r = p;

	if (r->state == 1)
		io_uring_queue_exit(&r->ring);
	r->state = 0;
}

/* A child of fork() must not touch its parent's ring (the rings are shared
 * memory): it starts over with a ring of its own. */
static void ring_after_fork(void)
{
	tl_ring.state = 0;
}

static void ring_key_init(void)
{
	pthread_key_create(&ring_key, ring_free);
	pthread_atfork(NULL, NULL, ring_after_fork);
}

static struct io_uring *thread_ring(void)
{
	if (tl_ring.state == 0) {
		pthread_once(&ring_once, ring_key_init);
		if (io_uring_queue_init(READ_RING_ENTRIES, &tl_ring.ring, 0) == 0) {
			io_uring_ring_dontfork(&tl_ring.ring);
			tl_ring.state = 1;
			pthread_setspecific(ring_key, &tl_ring);
		} else {
			tl_ring.state = -1;
		}
	}
	return tl_ring.state == 1 ? &tl_ring.ring : NULL;
}

/* Submits up to READ_RING_ENTRIES reads and reaps them; short reads are
 * finished with pread. */
static int ring_reads(struct io_uring *ring, struct io_rd *v, size_t n)
{
	size_t i, done = 0;
	int rv, first = 0;

	for (i = 0; i < n; i++) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
		io_uring_prep_read(sqe, v[i].fd, v[i].buf, (unsigned)v[i].len, v[i].off);
		io_uring_sqe_set_data64(sqe, i);
		v[i].res = 1; /* pending */
	}
	if ((rv = io_uring_submit_and_wait(ring, (unsigned)n)) < 0) {
		/* nothing went out: read them the plain way */
		for (i = 0; i < n; i++)
			v[i].res = 1;
		done = 0;
		goto plain;
	}
	while (done < n) {
		struct io_uring_cqe *cqe;
		if ((rv = io_uring_wait_cqe(ring, &cqe)) < 0) {
			if (rv == -EINTR)
				continue;
			return rv; /* the ring is broken; pending reads are lost */
		}
		i = (size_t)io_uring_cqe_get_data64(cqe);
		if (cqe->res < 0)
			v[i].res = cqe->res;
		else if ((size_t)cqe->res < v[i].len)
			v[i].res = io_pread_full(NULL, v[i].fd, (uint8_t *)v[i].buf + cqe->res,
			                         v[i].len - (size_t)cqe->res,
			                         v[i].off + (uint64_t)cqe->res);
		else
			v[i].res = 0;
		io_uring_cqe_seen(ring, cqe);
		done++;
	}
plain:
	for (i = 0; i < n; i++) {
		if (v[i].res == 1)
			v[i].res = io_pread_full(NULL, v[i].fd, v[i].buf, v[i].len, v[i].off);
		if (v[i].res != 0 && first == 0)
			first = v[i].res;
	}
	return first;
}

int io_read_batch(struct kv_io_fault *f, bool uring, struct io_rd *v, size_t n)
{
	struct io_uring *ring = uring ? thread_ring() : NULL;
	size_t i;
	int first = 0, rv;

	if (f != NULL && f->on_read != NULL) {
		for (i = 0; i < n; i++) {
			if ((rv = f->on_read(f->arg, v[i].fd, v[i].off, v[i].len)) < 0) {
				v[i].res = rv;
				if (first == 0)
					first = rv;
			} else {
				v[i].res = 0;
			}
		}
		if (first != 0)
			return first;
	}
	if (ring == NULL || n == 0) {
		for (i = 0; i < n; i++) {
			v[i].res = io_pread_full(NULL, v[i].fd, v[i].buf, v[i].len, v[i].off);
			if (v[i].res != 0 && first == 0)
				first = v[i].res;
		}
		return first;
	}
	for (i = 0; i < n; i += READ_RING_ENTRIES) {
		size_t m = n - i < READ_RING_ENTRIES ? n - i : READ_RING_ENTRIES;
		rv = ring_reads(ring, v + i, m);
		if (rv != 0 && first == 0)
			first = rv;
	}
	return first;
}

int io_read(struct kv_io_fault *f, bool uring, int fd, void *buf, size_t len, uint64_t off)
{
	struct io_rd r = {fd, buf, len, off, 0};

	if (!uring)
		return io_pread_full(f, fd, buf, len, off);
	return io_read_batch(f, uring, &r, 1);
}
