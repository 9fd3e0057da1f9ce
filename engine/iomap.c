/*
 * iomap.c — reads of log files through read-only shared mappings.
 *
 * A read of a record that is in the page cache costs a memcpy through the
 * mapping instead of a pread system call (on the guests kvd runs on, a
 * system call costs most of a microsecond; a version chain of 32 records is
 * 32 of them). The records read are always inside the file: locations come
 * from the key directory and from records whose crc held.
 *
 * What can still go wrong is a page the kernel cannot produce: an I/O error
 * reading it from the disk, or a page past the end of the file (a file
 * truncated under us, a guessed read length). The kernel reports those with
 * SIGBUS. io_map_copy turns that into -EIO: the copy runs under a
 * thread-local jump buffer, and the SIGBUS handler jumps back to it; the
 * caller then reads the same bytes with pread, which gives the real error.
 * A SIGBUS outside such a copy goes to the handler that was installed
 * before ours (or kills the process as the default action would).
 *
 * The handler is installed when a database that asks for mapped reads
 * (kv_options.mmap_reads, on by default) opens, unless it is installed
 * already; a handler set after the database opened takes SIGBUS away from
 * it, so a program with a SIGBUS handler of its own sets it first (or turns
 * mapped reads off). It runs with SA_NODEFER so that jumping out of it
 * leaves SIGBUS unblocked without a sigprocmask call per copy.
 *
 * Threads: any; the jump buffer is per thread.
 */
#include "io.h"

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>

static _Thread_local sigjmp_buf *volatile map_jump;
static struct sigaction map_prev;
static pthread_mutex_t map_mu = PTHREAD_MUTEX_INITIALIZER;
static bool map_ready;

static void map_sigbus(int sig, siginfo_t *si, void *uc)
{
	sigjmp_buf *j = map_jump;

	if (j != NULL) {
		map_jump = NULL;
		siglongjmp(*j, 1);
	}
	/* not one of our copies */
	if ((map_prev.sa_flags & SA_SIGINFO) && map_prev.sa_sigaction != NULL) {
		map_prev.sa_sigaction(sig, si, uc);
		return;
	}
	if (map_prev.sa_handler == SIG_IGN)
		return;
	if (map_prev.sa_handler != SIG_DFL && map_prev.sa_handler != NULL) {
		map_prev.sa_handler(sig);
		return;
	}
	/* the default action: the faulting access runs again and ends the
	 * process the way it would have without us */
	signal(SIGBUS, SIG_DFL);
}

/* Installs map_sigbus unless it is the handler already; the handler found
 * instead becomes the one faults outside our copies go to. */
static void map_install_locked(void)
{
	struct sigaction sa, cur;

	if (sigaction(SIGBUS, NULL, &cur) != 0) {
		map_ready = false;
		return;
	}
	if ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == map_sigbus) {
		map_ready = true;
		return;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = map_sigbus;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	map_prev = cur;
	map_ready = sigaction(SIGBUS, &sa, NULL) == 0;
}

bool io_map_available(void)
{
	bool ok;

	/* checked at every open: a program (or a test framework) may have set
	 * a SIGBUS handler of its own since */
	pthread_mutex_lock(&map_mu);
	map_install_locked();
	ok = map_ready;
	pthread_mutex_unlock(&map_mu);
	return ok;
}

int io_map_copy(void *dst, const void *src, size_t len)
{
	sigjmp_buf jump;

	if (sigsetjmp(jump, 0) != 0)
		return -EIO; /* the handler cleared map_jump */
	map_jump = &jump;
	memcpy(dst, src, len);
	map_jump = NULL;
	return 0;
}
