/*
 * fault.h — one plan of injected I/O faults for the engine's unit tests,
 * set up in one place instead of in each test: fail the next n writes,
 * syncs or reads; cut the next n writes short; end the process at the n-th
 * write or sync (a crash at a chosen step); and pass syncs and every change
 * that took effect on to the test. It drives the hooks of struct
 * kv_io_fault (engine/io.h): tf_fault_init fills them, and &plan.hooks goes
 * into kv_options.fault.
 */
#ifndef KV_TEST_FAULT_H
#define KV_TEST_FAULT_H

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "io.h"

struct tf_fault {
	struct kv_io_fault hooks; /* what kv_options.fault points at */
	atomic_int fail_write;    /* fail the next n writes (reservations too) ... */
	int write_err;            /* ... with this error; 0: -EIO */
	atomic_int short_write;   /* the next n writes of more than 8 bytes write half, then fail */
	atomic_int fail_sync;     /* fail the next n syncs with -EIO */
	atomic_int fail_read;     /* fail the next n reads with -EIO */
	int crash_at;             /* armed: _exit(0) at the crash_at-th write or sync */
	bool crash_armed;
	int crash_count;
	/* Called by the hooks after the plan let an operation through: a sync
	 * about to run (return 0 or an error, as kv_io_fault's on_sync), and
	 * every change that took effect. arg is theirs. */
	int (*on_sync)(void *arg, int fd);
	void (*record)(void *arg, const struct kv_io_event *ev);
	void *arg;
};

static inline bool tf_take(atomic_int *n)
{
	int v = atomic_load(n);

	while (v > 0)
		if (atomic_compare_exchange_weak(n, &v, v - 1))
			return true;
	return false;
}

static inline void tf_crash_step(struct tf_fault *t)
{
	if (t->crash_armed && ++t->crash_count == t->crash_at)
		_exit(0);
}

static inline int tf_on_write(void *arg, int fd, uint64_t off, size_t len)
{
	struct tf_fault *t = arg;

	(void)fd;
	(void)off;
	tf_crash_step(t);
	if (tf_take(&t->fail_write))
		return t->write_err != 0 ? t->write_err : -EIO;
	if (len > 8 && tf_take(&t->short_write))
		return (int)(len / 2);
	return 0;
}

static inline int tf_on_sync(void *arg, int fd)
{
	struct tf_fault *t = arg;

	tf_crash_step(t);
	if (tf_take(&t->fail_sync))
		return -EIO;
	return t->on_sync != NULL ? t->on_sync(t->arg, fd) : 0;
}

static inline int tf_on_read(void *arg, int fd, uint64_t off, size_t len)
{
	struct tf_fault *t = arg;

	(void)fd;
	(void)off;
	(void)len;
	return tf_take(&t->fail_read) ? -EIO : 0;
}

static inline void tf_record(void *arg, const struct kv_io_event *ev)
{
	struct tf_fault *t = arg;

	if (t->record != NULL)
		t->record(t->arg, ev);
}

/* An empty plan: every operation goes through until the test asks
 * otherwise. */
static inline void tf_fault_init(struct tf_fault *t)
{
	memset(t, 0, sizeof(*t));
	t->hooks.on_write = tf_on_write;
	t->hooks.on_sync = tf_on_sync;
	t->hooks.on_read = tf_on_read;
	t->hooks.record = tf_record;
	t->hooks.arg = t;
}

#endif
