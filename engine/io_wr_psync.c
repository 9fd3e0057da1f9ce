/*
 * io_wr_psync.c — the fallback write backend: pwrite and fdatasync on the
 * calling thread. Used when io_uring cannot be set up (kernel.io_uring_disabled,
 * a seccomp filter, an old kernel) or when asked for. The write runs inside
 * io_write_start(); io_write_poll() reports its result.
 */
#include "io.h"

#include <errno.h>
#include <stdlib.h>

struct psync_backend {
	struct io_backend base;
	struct io_result res;
	bool active;
};

static int psync_write_start(struct io_backend *io, int fd, const void *buf, size_t len,
                             uint64_t off, bool sync)
{
	struct psync_backend *b = (struct psync_backend *)io;
	int rv = 0;

	b->res.err = 0;
	b->res.sync_failed = false;
	if (len > 0)
		rv = io_pwrite_full(io->fault, fd, buf, len, off);
	if (rv == 0 && sync) {
		rv = io_fdatasync(io->fault, fd);
		b->res.sync_failed = rv != 0;
	}
	b->res.err = rv;
	b->active = true;
	io_signal(io->efd);
	return 0;
}

static int psync_write_poll(struct io_backend *io, bool wait, struct io_result *ret)
{
	struct psync_backend *b = (struct psync_backend *)io;

	(void)wait;
	if (!b->active)
		return -EINVAL;
	b->active = false;
	*ret = b->res;
	return 1;
}

static void psync_destroy(struct io_backend *io)
{
	free(io);
}

static const struct io_ops psync_ops = {
	.write_start = psync_write_start,
	.write_poll = psync_write_poll,
	.destroy = psync_destroy,
};

int io_wr_psync_open(int efd, struct kv_io_fault *fault, struct io_backend **ret)
{
	struct psync_backend *b;

	if ((b = calloc(1, sizeof(*b))) == NULL)
		return -ENOMEM;
	b->base.ops = &psync_ops;
	b->base.fault = fault;
	b->base.efd = efd;
	b->base.uring = false;
	*ret = &b->base;
	return 0;
}
