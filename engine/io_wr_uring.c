/*
 * io_wr_uring.c — the io_uring write backend: one ring per database; a batch is
 * written with pwrite on the calling thread, and its fdatasync goes through
 * the ring, so the event loop that drives the database never waits for the
 * disk.
 *
 * Ordering: io_uring does not order independent submissions, so the
 * fdatasync is submitted only after the write returned in full (a short
 * write is finished by io_pwrite_full's loop; an error fails the batch). The
 * batch is reported done only after the fdatasync's completion was reaped.
 *
 * Why the write is not on the ring as well (linked to the fdatasync with
 * IOSQE_IO_LINK, as it first was): on ext4, io_uring hands buffered writes to
 * a kernel worker thread, and the wake-up costs more than the copy — 94k vs
 * 244k puts/s of 100-byte values under sync=none, and no difference under
 * sync=always, where the fdatasync dominates (kvbench engine --sync always
 * --threads 4: 7.9k puts/s either way).
 */
#include "io.h"

#include <errno.h>
#include <liburing.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define URING_ENTRIES 8

struct uring_backend {
	struct io_backend base;
	struct io_uring ring;
	bool active;
	bool pending; /* an fdatasync on the ring */
	int sync_fd;
	int err;
	bool sync_failed;
};

static int uring_write_start(struct io_backend *io, int fd, const void *buf, size_t len,
                             uint64_t off, bool sync)
{
	struct uring_backend *b = (struct uring_backend *)io;
	struct kv_io_fault *f = io->fault;
	struct io_uring_sqe *sqe;
	int rv;

	b->active = true;
	b->pending = false;
	b->err = 0;
	b->sync_failed = false;
	if (len > 0 && (b->err = io_pwrite_full(f, fd, buf, len, off)) != 0) {
		io_signal(io->efd);
		return 0;
	}
	if (!sync) {
		io_signal(io->efd);
		return 0;
	}
	if (f != NULL && f->on_sync != NULL && (rv = f->on_sync(f->arg, fd)) < 0) {
		b->err = rv;
		b->sync_failed = true;
		io_signal(io->efd);
		return 0;
	}
	sqe = io_uring_get_sqe(&b->ring);
	io_uring_prep_fsync(sqe, fd, IORING_FSYNC_DATASYNC);
	b->sync_fd = fd;
	if ((rv = io_uring_submit(&b->ring)) < 0) {
		/* the ring refused it: sync the plain way */
		b->err = fdatasync(fd) == 0 ? 0 : -errno;
		if (b->err == 0)
			io_record_sync(f, fd);
		b->sync_failed = b->err != 0;
		io_signal(io->efd);
		return 0;
	}
	b->pending = true;
	return 0;
}

static int uring_write_poll(struct io_backend *io, bool wait, struct io_result *ret)
{
	struct uring_backend *b = (struct uring_backend *)io;
	struct io_uring_cqe *cqe;
	int rv;

	if (!b->active)
		return -EINVAL;
	while (b->pending) {
		rv = wait ? io_uring_wait_cqe(&b->ring, &cqe) : io_uring_peek_cqe(&b->ring, &cqe);
		if (rv == -EAGAIN || rv == -EINTR) {
			if (!wait)
				return 0;
			continue;
		}
		if (rv < 0) {
			/* the ring itself failed: nothing says the data is durable */
			b->err = rv;
			b->sync_failed = true;
		} else {
			if (cqe->res < 0) {
				b->err = cqe->res;
				b->sync_failed = true;
			} else {
				io_record_sync(io->fault, b->sync_fd);
			}
			io_uring_cqe_seen(&b->ring, cqe);
		}
		b->pending = false;
	}
	b->active = false;
	ret->err = b->err;
	ret->sync_failed = b->sync_failed;
	return 1;
}

static void uring_destroy(struct io_backend *io)
{
	struct uring_backend *b = (struct uring_backend *)io;
	struct io_result r;

	if (b->active)
		uring_write_poll(io, true, &r);
	io_uring_queue_exit(&b->ring);
	free(b);
}

static const struct io_ops uring_ops = {
	.write_start = uring_write_start,
	.write_poll = uring_write_poll,
	.destroy = uring_destroy,
};

int io_wr_uring_open(int efd, struct kv_io_fault *fault, struct io_backend **ret)
{
	struct uring_backend *b;
	int rv;

	if ((b = calloc(1, sizeof(*b))) == NULL)
		return -ENOMEM;
	if ((rv = io_uring_queue_init(URING_ENTRIES, &b->ring, 0)) != 0) {
		free(b);
		return rv;
	}
	io_uring_ring_dontfork(&b->ring); /* a forked child must not share it */
	if (efd >= 0 && (rv = io_uring_register_eventfd(&b->ring, efd)) != 0) {
		io_uring_queue_exit(&b->ring);
		free(b);
		return rv;
	}
	b->base.ops = &uring_ops;
	b->base.fault = fault;
	b->base.efd = efd;
	b->base.uring = true;
	*ret = &b->base;
	return 0;
}
