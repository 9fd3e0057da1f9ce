/*
 * dev_append.c — the device backend's appends (storage.h writer_open,
 * append_start, append_poll): one append in flight per writer, written
 * from an aligned staging buffer that starts with the block holding the
 * segment's end (storage_dev.c, invariants 1, 2 and 7).
 */
#include "dev_internal.h"

#include "io.h"

#include <errno.h>
#include <liburing.h>
#include <stdlib.h>

/* The write path's appender. With io_uring (the ring its own, the staging
 * buffer registered with it), an append is one submission: the write (from
 * the staging buffer), under sync either with RWF_DSYNC or linked to a
 * flush (enum kv_dev_sync); the driver thread never waits for the device.
 * Without (KV_IO_PSYNC, or no ring): the io_backend, write then fdatasync. */
struct dev_writer {
	struct kv_stor_writer base;
	struct io_backend *io;   /* NULL when the ring is used */
	struct io_uring ring;
	size_t registered;       /* bytes of stage registered with the ring; 0: none */
	unsigned expect;         /* completions of the append in flight still to come */
	unsigned ops;            /* completions it has in all: 1, or 2 with a linked flush */
	bool dsync;              /* its write carries RWF_DSYNC */
	int efd;                 /* signalled when an append ends without the ring */
	bool active, sync;
	int err;
	bool sync_failed;
	uint64_t dev_off;        /* where the append in flight writes */
	size_t dev_len;
	struct dev_segment *seg; /* of the append in flight */
	uint8_t *stage;
	size_t stage_cap;
	uint64_t start, end; /* the append's bytes in the segment */
};

/* The device is not registered with the ring as a fixed file: the kernel
 * drops a ring's files after io_uring_queue_exit returns, and the device's
 * lock (dev_open_locked) would outlive the store's close. */
static int ring_open(struct dev_writer *w, int efd)
{
	int rv;

	if ((rv = io_uring_queue_init(8, &w->ring, 0)) != 0)
		return rv;
	io_uring_ring_dontfork(&w->ring);
	if (efd >= 0 && (rv = io_uring_register_eventfd(&w->ring, efd)) != 0) {
		io_uring_queue_exit(&w->ring);
		return rv;
	}
	return 0;
}

int dev_writer_open(struct kv_storage *st, int mode, int efd, struct kv_stor_writer **ret)
{
	struct dev_writer *w;
	int rv = -ENOSYS;

	if ((w = calloc(1, sizeof(*w))) == NULL)
		return -ENOMEM;
	if ((enum kv_io)mode != KV_IO_PSYNC && (rv = ring_open(w, efd)) == 0) {
		w->io = NULL;
	} else if ((enum kv_io)mode == KV_IO_URING) {
		free(w);
		return rv;
	} else if ((rv = io_backend_open(KV_IO_PSYNC, efd, st->fault, &w->io)) != 0) {
		free(w);
		return rv;
	}
	w->base.st = st;
	w->efd = efd;
	*ret = &w->base;
	return 0;
}


void dev_writer_close(struct kv_stor_writer *wh)
{
	struct dev_writer *w = (struct dev_writer *)wh;
	struct kv_stor_wres r;

	if (w == NULL)
		return;
	if (w->io != NULL) {
		io_backend_close(w->io);
	} else {
		if (w->active)
			dev_append_poll(wh, true, &r);
		io_uring_queue_exit(&w->ring);
	}
	free(w->stage);
	free(w);
}

bool dev_writer_is_uring(struct kv_stor_writer *w)
{
	struct dev_writer *dw = (struct dev_writer *)w;

	return dw->io == NULL || io_backend_is_uring(dw->io);
}

/* The append on the ring: the write (a registered buffer), linked
 * to a flush under sync, in one submission. The fault hooks run before
 * (on_write, on_sync) and record after, as io_file.c's calls do. */
static int ring_start(struct dev_writer *w, struct dev_storage *d, size_t n, uint64_t at,
                      bool sync)
{
	struct kv_io_fault *f = d->base.fault;
	struct io_uring_sqe *sqe;
	int rv;

	w->active = true;
	w->err = 0;
	w->sync_failed = false;
	w->sync = sync;
	w->dev_off = at;
	w->dev_len = n;
	w->expect = 0;
	if (f != NULL && f->on_write != NULL && (rv = f->on_write(f->arg, d->fd, at, n)) != 0) {
		w->err = rv < 0 ? rv : -EIO; /* a short write is a failed one here */
		io_signal(w->efd);
		return 0;
	}
	if (sync && f != NULL && f->on_sync != NULL && (rv = f->on_sync(f->arg, d->fd)) < 0) {
		w->err = rv;
		w->sync_failed = true;
		io_signal(w->efd);
		return 0;
	}
	if (w->registered < w->stage_cap) {
		struct iovec iov = {w->stage, w->stage_cap};
		if (w->registered > 0)
			io_uring_unregister_buffers(&w->ring);
		w->registered = io_uring_register_buffers(&w->ring, &iov, 1) == 0 ? w->stage_cap : 0;
	}
	sqe = io_uring_get_sqe(&w->ring);
	if (w->registered > 0)
		io_uring_prep_write_fixed(sqe, d->fd, w->stage, (unsigned)n, at, 0);
	else
		io_uring_prep_write(sqe, d->fd, w->stage, (unsigned)n, at);
	w->dsync = sync && d->sync_mode == KV_DEV_SYNC_DSYNC;
	w->ops = sync && !w->dsync ? 2 : 1;
	if (w->dsync) {
		sqe->rw_flags = RWF_DSYNC;
	} else if (sync) {
		sqe->flags |= IOSQE_IO_LINK;
		sqe = io_uring_get_sqe(&w->ring);
		io_uring_prep_fsync(sqe, d->fd, IORING_FSYNC_DATASYNC);
	}
	if ((rv = io_uring_submit(&w->ring)) < 0) {
		w->active = false;
		return rv;
	}
	w->expect = w->ops;
	return 0;
}

/* Reaps the append's completions: 1 when all came, 0 while some run. */
static int ring_reap(struct dev_writer *w, struct dev_storage *d, bool wait)
{
	struct kv_io_fault *f = d->base.fault;
	struct io_uring_cqe *cqe;
	int rv;

	while (w->expect > 0) {
		bool is_write = w->expect == w->ops;
		rv = wait ? io_uring_wait_cqe(&w->ring, &cqe) : io_uring_peek_cqe(&w->ring, &cqe);
		if (rv == -EAGAIN || rv == -EINTR) {
			if (!wait)
				return 0;
			continue;
		}
		if (rv < 0) {
			/* the ring failed: nothing says the data is written */
			w->err = rv;
			w->sync_failed = w->sync;
			w->expect = 0;
			break;
		}
		if (is_write) {
			if (cqe->res < 0)
				w->err = cqe->res;
			else if ((size_t)cqe->res != w->dev_len)
				w->err = -EIO; /* a short direct write */
			else if (f != NULL && f->record != NULL)
				f->record(f->arg, &(struct kv_io_event){.type = KV_IO_EV_WRITE,
				                                         .fd = d->fd,
				                                         .off = w->dev_off,
				                                         .buf = w->stage,
				                                         .len = w->dev_len,
				                                         .fua = w->dsync});
			/* a failed RWF_DSYNC write may be a failed flush (where the
			 * kernel emulates FUA): the tenant must stop, as after a
			 * failed fdatasync */
			if (w->dsync && w->err != 0)
				w->sync_failed = true;
		} else if (w->err == 0) {
			if (cqe->res < 0) {
				w->err = cqe->res;
				w->sync_failed = true;
			} else {
				io_record_sync(f, d->fd);
			}
		}
		io_uring_cqe_seen(&w->ring, cqe);
		w->expect--;
	}
	return 1;
}

int dev_append_start(struct kv_stor_writer *wh, struct kv_stor_seg *sh, const void *buf,
                            size_t len, uint64_t off, bool sync)
{
	struct dev_writer *w = (struct dev_writer *)wh;
	struct dev_storage *d = dev_of(wh->st);
	struct dev_segment *s = seg_of(sh);
	size_t n;
	int rv;

	if ((rv = dev_writable(dev_ten_of(sh->t))) != 0 || sh->frozen)
		return rv != 0 ? rv : -ESTALE;
	if ((rv = dev_stage_prepare(d, s, &w->stage, &w->stage_cap, buf, len, off, &n)) != 0)
		return rv;
	w->seg = s;
	w->end = off + len;
	if (w->io == NULL)
		rv = ring_start(w, d, n, data_off(d, s->extent) + (off - off % d->B), sync);
	else
		rv = io_write_start(w->io, d->fd, w->stage, n,
		                    data_off(d, s->extent) + (off - off % d->B), sync);
	if (rv != 0)
		w->seg = NULL;
	else
		w->start = off;
	return rv;
}

int dev_append_poll(struct kv_stor_writer *wh, bool wait, struct kv_stor_wres *ret)
{
	struct dev_writer *w = (struct dev_writer *)wh;
	struct io_result r;
	int rv;

	if (w->io != NULL) {
		rv = io_write_poll(w->io, wait, &r);
	} else if (!w->active) {
		return -EINVAL;
	} else if ((rv = ring_reap(w, dev_of(wh->st), wait)) == 1) {
		w->active = false;
		r.err = w->err;
		r.sync_failed = w->sync_failed;
	}
	if (rv == 1) {
		if (r.err == 0 && w->seg != NULL)
			dev_stage_done(dev_of(wh->st), w->seg, w->stage, w->start,
			           (size_t)(w->end - w->start));
		w->seg = NULL;
		ret->err = r.err;
		ret->sync_failed = r.sync_failed;
	}
	return rv;
}
