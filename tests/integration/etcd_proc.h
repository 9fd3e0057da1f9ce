/*
 * etcd_proc.h — a real etcd for integration tests: started on two free
 * loopback ports with its data in a temporary directory, both removed by
 * etcd_proc_stop whatever the tests did; it dies with the test
 * (PR_SET_PDEATHSIG) if the test itself dies. Nothing waits by sleeping:
 * readiness is polled for with a deadline.
 *
 * etcd is `etcd` from PATH (Debian's etcd-server; scripts/deps.sh installs
 * it) or $ETCD_BIN; without it etcd_proc_start fails (and says why): the
 * tests that need it fail, they do not skip.
 *
 * Needs daemon/etcd.h (kvetcd) for the readiness probe; header only.
 */
#ifndef KV_TEST_ETCD_PROC_H
#define KV_TEST_ETCD_PROC_H

#include "etcd.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ETCD_PROC_READY_MS 20000 /* etcd answers within this after its start */

struct etcd_proc {
	pid_t pid;    /* -1: not running */
	char dir[64]; /* its temporary directory ("" when none) */
	char url[64]; /* its client URL, http://127.0.0.1:PORT */
	char peer[64];
	char bin[512];
};

static inline uint64_t etcd_proc_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Pauses between two polls of a condition (never as synchronisation). */
static inline void etcd_proc_pause(void)
{
	struct timespec ts = {0, 50 * 1000 * 1000};

	nanosleep(&ts, NULL);
}

/* A loopback TCP port nobody listens on now. */
static inline int etcd_proc_free_port(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;

	if (fd < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&sa, &sl) == 0)
		port = ntohs(sa.sin_port);
	close(fd);
	return port;
}

/* etcd's path: $ETCD_BIN, else `etcd` in PATH. */
static inline bool etcd_proc_find(char *out, size_t cap)
{
	const char *env = getenv("ETCD_BIN"), *path = getenv("PATH");

	if (env != NULL && *env != '\0') {
		snprintf(out, cap, "%s", env);
		return access(out, X_OK) == 0;
	}
	if (path == NULL)
		path = "/usr/bin:/bin";
	while (*path != '\0') {
		const char *end = strchr(path, ':');
		int n = end != NULL ? (int)(end - path) : (int)strlen(path);

		snprintf(out, cap, "%.*s/etcd", n, path);
		if (n > 0 && access(out, X_OK) == 0)
			return true;
		if (end == NULL)
			break;
		path = end + 1;
	}
	return false;
}

/* Prints etcd's log on stderr (after a failure). */
static inline void etcd_proc_dump_log(const struct etcd_proc *p)
{
	char path[128], line[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/etcd.log", p->dir);
	if (p->dir[0] == '\0' || (f = fopen(path, "r")) == NULL)
		return;
	fprintf(stderr, "---- %s ----\n", path);
	while (fgets(line, sizeof(line), f) != NULL)
		fputs(line, stderr);
	fclose(f);
}

static inline int etcd_proc_rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	return remove(p);
}

/* Stops etcd (SIGCONT first, in case a test paused it; SIGTERM, then
 * SIGKILL after 10 s) and removes its directory. Idempotent. */
static inline void etcd_proc_stop(struct etcd_proc *p)
{
	if (p->pid > 0) {
		uint64_t deadline = etcd_proc_now_ms() + 10000;
		int status;

		kill(p->pid, SIGCONT);
		kill(p->pid, SIGTERM);
		while (waitpid(p->pid, &status, WNOHANG) == 0) {
			if (etcd_proc_now_ms() > deadline) {
				kill(p->pid, SIGKILL);
				waitpid(p->pid, &status, 0);
				break;
			}
			etcd_proc_pause();
		}
	}
	p->pid = -1;
	if (p->dir[0] != '\0')
		nftw(p->dir, etcd_proc_rm_one, 16, FTW_DEPTH | FTW_PHYS);
	p->dir[0] = '\0';
}

static inline int etcd_proc_run(struct etcd_proc *p);

/* Starts etcd and waits until it answers: 0, or -1 with the reason (and
 * etcd's log) on stderr. */
static inline int etcd_proc_start(struct etcd_proc *p)
{
	int cport = etcd_proc_free_port(), pport = etcd_proc_free_port();

	memset(p, 0, sizeof(*p));
	p->pid = -1;
	if (!etcd_proc_find(p->bin, sizeof(p->bin))) {
		fprintf(stderr,
		        "etcd is not installed (Debian: etcd-server; scripts/deps.sh installs it), "
		        "or $ETCD_BIN is not executable: this test needs a real etcd\n");
		return -1;
	}
	snprintf(p->dir, sizeof(p->dir), "/tmp/kvd-etcd-XXXXXX");
	if (mkdtemp(p->dir) == NULL || cport <= 0 || pport <= 0 || cport == pport) {
		fprintf(stderr, "no temporary directory or free ports\n");
		p->dir[0] = '\0';
		return -1;
	}
	snprintf(p->url, sizeof(p->url), "http://127.0.0.1:%d", cport);
	snprintf(p->peer, sizeof(p->peer), "http://127.0.0.1:%d", pport);
	return etcd_proc_run(p);
}

/* SIGKILL: etcd dies at once, its data directory stays (etcd_proc_restart). */
static inline void etcd_proc_kill(struct etcd_proc *p)
{
	int status;

	if (p->pid > 0) {
		kill(p->pid, SIGKILL);
		waitpid(p->pid, &status, 0);
	}
	p->pid = -1;
}

/* The same etcd again (its data, its ports) after etcd_proc_kill. */
static inline int etcd_proc_restart(struct etcd_proc *p)
{
	return etcd_proc_run(p);
}

/* Runs etcd on p's directory and ports; waits until it answers. */
static inline int etcd_proc_run(struct etcd_proc *p)
{
	char log[128], cluster[96], data[96];
	const char *bin = p->bin, *peer = p->peer;
	uint64_t deadline;
	struct etcd *e = NULL;
	int rv;

	snprintf(cluster, sizeof(cluster), "t=%s", peer);
	snprintf(data, sizeof(data), "%s/data", p->dir);
	snprintf(log, sizeof(log), "%s/etcd.log", p->dir);
	if ((p->pid = fork()) < 0)
		return -1;
	if (p->pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execl(bin, bin, "--name", "t", "--data-dir", data, "--listen-client-urls", p->url,
		      "--advertise-client-urls", p->url, "--listen-peer-urls", peer,
		      "--initial-advertise-peer-urls", peer, "--initial-cluster", cluster,
		      (char *)NULL);
		_exit(127);
	}
	if ((rv = etcd_open(p->url, 1000, &e)) != 0) {
		fprintf(stderr, "etcd_open: %d\n", rv);
		goto fail;
	}
	deadline = etcd_proc_now_ms() + ETCD_PROC_READY_MS;
	for (;;) {
		struct etcd_kv kv;
		int status;

		rv = etcd_get(e, "/ready", 6, &kv, NULL);
		if (rv == 0)
			etcd_kv_clear(&kv);
		if (rv == 0 || rv == ETCD_ABSENT)
			break;
		if (waitpid(p->pid, &status, WNOHANG) == p->pid) {
			fprintf(stderr, "etcd exited (status %#x) before answering\n", status);
			p->pid = -1;
			goto fail;
		}
		if (etcd_proc_now_ms() > deadline) {
			fprintf(stderr, "etcd did not answer within %d ms: %s\n",
			        ETCD_PROC_READY_MS, etcd_errmsg(e));
			goto fail;
		}
		etcd_proc_pause();
	}
	etcd_close(e);
	return 0;
fail:
	etcd_proc_dump_log(p);
	etcd_close(e);
	etcd_proc_stop(p);
	return -1;
}

#endif
