/* io.c — backend selection and the blocking I/O helpers. */
#include "io.h"

#include <errno.h>
#include <stdint.h>
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
	return fdatasync(fd) == 0 ? 0 : -errno;
}

int io_fsync(struct kv_io_fault *f, int fd)
{
	int rv;

	if (f != NULL && f->on_sync != NULL && (rv = f->on_sync(f->arg, fd)) < 0)
		return rv;
	return fsync(fd) == 0 ? 0 : -errno;
}
