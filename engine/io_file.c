/*
 * io_file.c — the blocking file and directory calls of the engine, each
 * through the test hooks of struct kv_io_fault (io.h): reads and writes in
 * full, syncs, create, rename, unlink, space reservation, truncation, and
 * the event-fd signal. Every other I/O module builds on these.
 */
#include "io.h"

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <linux/falloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

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

/* fdatasync or fsync of fd, through the fault layer. */
static int sync_with(struct kv_io_fault *f, int fd, int (*sync_fn)(int))
{
	int rv;

	if (f != NULL && f->on_sync != NULL && (rv = f->on_sync(f->arg, fd)) < 0)
		return rv;
	if (sync_fn(fd) != 0)
		return -errno;
	io_record_sync(f, fd);
	return 0;
}

int io_fdatasync(struct kv_io_fault *f, int fd)
{
	return sync_with(f, fd, fdatasync);
}

int io_fsync(struct kv_io_fault *f, int fd)
{
	return sync_with(f, fd, fsync);
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
