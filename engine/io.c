/*
 * io.c — choosing the write backend of a database: io_uring (io_wr_uring.c)
 * or pread/pwrite (io_wr_psync.c), and the calls that go through the one
 * chosen. The backends build on the fault-hooked syscalls of io_file.c;
 * reads through a per-thread ring are io_ring.c's.
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

int io_backend_open(enum kv_io mode, int efd, struct kv_io_fault *fault, struct io_backend **ret)
{
	int uerr, rv;

	if (mode == KV_IO_PSYNC)
		return io_wr_psync_open(efd, fault, ret);
	uerr = io_wr_uring_open(efd, fault, ret);
	if (uerr == 0 || mode == KV_IO_URING)
		return uerr;
	if ((rv = io_wr_psync_open(efd, fault, ret)) != 0)
		return rv;
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
