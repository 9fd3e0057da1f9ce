/*
 * oom.h — allocation failure injection for unit tests: the test binary's
 * own malloc, realloc and calloc, which fail on purpose on the thread that
 * armed them (other threads, a store's or an engine's, are left alone).
 * Include it in one file of a test program. Not available under ASan or
 * TSan, which own malloc: OOM_TESTS is 0 there, and the tests that need it
 * are not built (say so on stderr).
 */
#ifndef KV_TEST_OOM_H
#define KV_TEST_OOM_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define OOM_TESTS 0
#else
#define OOM_TESTS 1

extern void *__libc_malloc(size_t n);
extern void *__libc_realloc(void *p, size_t n);
extern void *__libc_calloc(size_t n, size_t m);

/* Calls number at .. at + len - 1 (counted from oom_arm) fail; at 0: none. */
static _Thread_local unsigned oom_at, oom_len, oom_calls;
static _Thread_local unsigned oom_failed; /* failures since oom_arm */

static inline void oom_arm(unsigned at, unsigned len)
{
	oom_calls = oom_failed = 0;
	oom_len = len;
	oom_at = at;
}

static inline bool oom_now(void)
{
	if (oom_at == 0)
		return false;
	if (++oom_calls >= oom_at && oom_calls - oom_at < oom_len) {
		oom_failed++;
		errno = ENOMEM;
		return true;
	}
	return false;
}

void *malloc(size_t n)
{
	return oom_now() ? NULL : __libc_malloc(n);
}

void *realloc(void *p, size_t n)
{
	return oom_now() ? NULL : __libc_realloc(p, n);
}

void *calloc(size_t n, size_t m)
{
	return oom_now() ? NULL : __libc_calloc(n, m);
}
#endif

#endif
