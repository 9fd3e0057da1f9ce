/*
 * io.h — the engine's file I/O. The write path (appends of a batch, with or
 * without fdatasync) goes through an io_backend: io_uring when it can be set
 * up, pread/pwrite otherwise. Everything off the hot path (recovery scans,
 * hint files, merge output, reads) goes through the blocking io_* helpers.
 * All of it consults the optional fault hooks, so tests can inject errors and
 * lose unsynced writes where completions are reaped — io_uring requests never
 * pass through an LD_PRELOAD wrapper.
 *
 * Invariants:
 *   1. One write is in flight per backend; io_write_start() is only called
 *      after io_write_poll() reported the previous one finished.
 *   2. A write is finished only when all its bytes were written and, when
 *      sync was asked, an fdatasync submitted after that completed.
 * Threads: a backend is used by one thread at a time (the write-path driver).
 */
#ifndef KV_IO_H
#define KV_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvengine.h"

/* Test hooks. Each returns 0 to let the operation run, or a negative errno to
 * fail it as if the kernel had. on_write may return a positive n < len to
 * make it a short write of n bytes. */
struct kv_io_fault {
	int (*on_write)(void *arg, int fd, uint64_t off, size_t len);
	int (*on_sync)(void *arg, int fd);
	int (*on_read)(void *arg, int fd, uint64_t off, size_t len);
	void *arg;
};

struct io_backend;

struct io_result {
	int err;          /* 0 or -errno */
	bool sync_failed; /* err came from fdatasync: the data may be gone */
};

/* mode KV_IO_AUTO falls back to psync when io_uring setup fails; efd >= 0 is
 * signalled whenever a started write completes. */
int io_backend_open(enum kv_io mode, int efd, struct kv_io_fault *fault, struct io_backend **ret);
void io_backend_close(struct io_backend *io);
bool io_backend_is_uring(const struct io_backend *io);
/* Why io_uring was not used (0 when it is). */
int io_backend_uring_error(const struct io_backend *io);

int io_write_start(struct io_backend *io, int fd, const void *buf, size_t len, uint64_t off,
                   bool sync);
/* 1 with *ret filled when the started write finished; 0 while it runs (!wait). */
int io_write_poll(struct io_backend *io, bool wait, struct io_result *ret);

/* Reads of the log. With uring, the calling thread's own ring (set up on
 * first use, freed when the thread exits) carries them — one submission for
 * a whole batch; without it, or when the ring cannot be set up, pread. All
 * return 0 or -errno; a read past end of file is -EIO. */
struct io_rd {
	int fd;
	void *buf;
	size_t len;
	uint64_t off;
	int res; /* out: 0 or -errno */
};
int io_read(struct kv_io_fault *f, bool uring, int fd, void *buf, size_t len, uint64_t off);
/* Runs n reads; returns 0 when all succeeded, else the first error (each
 * op's res says which). */
int io_read_batch(struct kv_io_fault *f, bool uring, struct io_rd *v, size_t n);

/* Blocking helpers; all return 0 or -errno. A read past end of file is -EIO. */
int io_pread_full(struct kv_io_fault *f, int fd, void *buf, size_t len, uint64_t off);
int io_pwrite_full(struct kv_io_fault *f, int fd, const void *buf, size_t len, uint64_t off);
int io_fdatasync(struct kv_io_fault *f, int fd);
int io_fsync(struct kv_io_fault *f, int fd);

/* Backend implementations (io_uring.c, io_psync.c). */
struct io_ops {
	int (*write_start)(struct io_backend *io, int fd, const void *buf, size_t len,
	                   uint64_t off, bool sync);
	int (*write_poll)(struct io_backend *io, bool wait, struct io_result *ret);
	void (*destroy)(struct io_backend *io);
};

struct io_backend {
	const struct io_ops *ops;
	struct kv_io_fault *fault;
	int efd;
	int uring_err;
	bool uring;
};

int io_uring_backend_open(int efd, struct kv_io_fault *fault, struct io_backend **ret);
int io_psync_backend_open(int efd, struct kv_io_fault *fault, struct io_backend **ret);
void io_signal(int efd);

#endif
