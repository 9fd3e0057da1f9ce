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

/* What a change to the files did, for tests that record them (a power-cut
 * simulator rebuilds the directory from the record). */
enum kv_io_event_type {
	KV_IO_EV_WRITE = 1, /* fd, off, buf, len: bytes that reached the file */
	KV_IO_EV_SYNC,      /* fd: fdatasync/fsync of a file or a directory completed */
	KV_IO_EV_CREATE,    /* dirfd, name, fd: a new (or truncated) file */
	KV_IO_EV_RENAME,    /* dirfd, name -> name2 */
	KV_IO_EV_UNLINK,    /* dirfd, name */
	KV_IO_EV_TRUNCATE,  /* fd, off: the new size */
};

struct kv_io_event {
	enum kv_io_event_type type;
	int fd;
	int dirfd;
	const char *name;
	const char *name2;
	uint64_t off;
	const void *buf;
	size_t len;
	/* KV_IO_EV_WRITE: durable when it completed (an RWF_DSYNC write, which
	 * the kernel sends to the device as a FUA write). It says nothing of
	 * the writes before it: only a KV_IO_EV_SYNC does. */
	bool fua;
};

/* Test hooks. on_* run before an operation and return 0 to let it run, or a
 * negative errno to fail it as if the kernel had; on_write may return a
 * positive n < len to make it a short write of n bytes (then an error).
 * on_dirop covers creating, renaming, unlinking and truncating files.
 * record runs after every change that took effect. */
struct kv_io_fault {
	int (*on_write)(void *arg, int fd, uint64_t off, size_t len);
	int (*on_sync)(void *arg, int fd);
	int (*on_read)(void *arg, int fd, uint64_t off, size_t len);
	int (*on_dirop)(void *arg, const struct kv_io_event *ev);
	void (*record)(void *arg, const struct kv_io_event *ev);
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
/* Mapped reads (iomap.c). io_map_available: whether they can be used in
 * this process (installs the SIGBUS handler once). io_map_copy: len bytes
 * from a mapping; -EIO when the kernel could not produce a page (then read
 * them with pread for the real error). */
bool io_map_available(void);
int io_map_copy(void *dst, const void *src, size_t len);

/* Up to len bytes; fewer only at the end of the file (*ret_got says how
 * many). One pread for a record whose size is only guessed. */
int io_pread_upto(struct kv_io_fault *f, int fd, void *buf, size_t len, uint64_t off,
                  size_t *ret_got);
int io_pwrite_full(struct kv_io_fault *f, int fd, const void *buf, size_t len, uint64_t off);
int io_fdatasync(struct kv_io_fault *f, int fd);
int io_fsync(struct kv_io_fault *f, int fd);
/* Directory changes: openat(O_CREAT) returning the fd, renameat, unlinkat,
 * ftruncate. All return 0 (or the fd) or -errno. */
int io_create(struct kv_io_fault *f, int dirfd, const char *name, int flags, int mode);
int io_rename(struct kv_io_fault *f, int dirfd, const char *from, const char *to);
int io_unlink(struct kv_io_fault *f, int dirfd, const char *name);
int io_truncate(struct kv_io_fault *f, int fd, uint64_t size);
/* Allocates [off, off+len) without changing the file size (fallocate
 * KEEP_SIZE), so a later write there cannot fail for space — nor, with
 * delayed allocation, its fdatasync. -ENOSPC when the disk is full;
 * -EOPNOTSUPP where the file system cannot. */
int io_reserve(struct kv_io_fault *f, int fd, uint64_t off, uint64_t len);
/* Reports a completed fdatasync done outside these helpers (the ring). */
void io_record_sync(struct kv_io_fault *f, int fd);

/* Backend implementations (io_wr_uring.c, io_wr_psync.c). */
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
	bool uring;
};

int io_wr_uring_open(int efd, struct kv_io_fault *fault, struct io_backend **ret);
int io_wr_psync_open(int efd, struct kv_io_fault *fault, struct io_backend **ret);
void io_signal(int efd);

#endif
