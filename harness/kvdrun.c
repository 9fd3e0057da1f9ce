/*
 * harness/kvdrun.c — a kvd for a benchmark or a test: settings file,
 * command line, fork/exec with the output to a log, the Health wait, the
 * stop and its verdict (kvdrun.h).
 *
 * Health is asked through libkvclient on one handle for the whole wait;
 * kvd opens its stream listeners before its nng ones, so an answer on
 * ipc:// also means every kv+ipc:// listener is up.
 */
#include "kvdrun.h"

#include "kvclient.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RUN_ARGS_MAX (16 + KVD_RUN_EXTRA_MAX) /* argv entries, with the NULL */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static void fmt(char *buf, size_t len, const char *f, ...)
{
	va_list ap;

	if (buf == NULL || len == 0)
		return;
	va_start(ap, f);
	vsnprintf(buf, len, f, ap);
	va_end(ap);
}

/* Fills an empty buffer with its default; -ENAMETOOLONG when it does not fit. */
static int fill(char *buf, size_t len, const char *f, const char *dir, const char *name)
{
	if (buf[0] != '\0')
		return 0;
	if (snprintf(buf, len, f, dir, name) >= (int)len)
		return -ENAMETOOLONG;
	return 0;
}

int kvd_run_free_port(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t al = sizeof a;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port = -EADDRNOTAVAIL;

	if (fd < 0)
		return -errno;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &al) == 0)
		port = ntohs(a.sin_port);
	close(fd);
	return port;
}

/* The URLs of r->listen left empty, and the one Health is asked on. */
static int fill_urls(struct kvd_run *r, char *err, size_t errlen)
{
	static const char *const scheme[KVD_RUN_KINDS] = {"ipc://", "tcp://", "kv+ipc://",
	                                                  "kv+tcp://"};
	static const char *const sock[KVD_RUN_KINDS] = {"kvd.sock", NULL, "kv.sock", NULL};
	static const enum kvd_run_kind probe_order[KVD_RUN_KINDS] = {KVD_RUN_IPC, KVD_RUN_KVIPC,
	                                                             KVD_RUN_TCP, KVD_RUN_KVTCP};

	if (r->listen == 0)
		r->listen = KVD_RUN_LISTEN(KVD_RUN_IPC);
	for (int k = 0; k < KVD_RUN_KINDS; k++) {
		char *u = r->url[k];
		int port;
		if (!(r->listen & KVD_RUN_LISTEN(k)) || u[0] != '\0')
			continue;
		if (sock[k] != NULL) {
			if (snprintf(u, KVD_RUN_URL_MAX, "%s%s/%s", scheme[k], r->dir, sock[k]) >=
			    KVD_RUN_URL_MAX) {
				fmt(err, errlen, "%s: path too long for a socket", r->dir);
				return -ENAMETOOLONG;
			}
			continue;
		}
		if ((port = kvd_run_free_port()) < 0) {
			fmt(err, errlen, "no free TCP port: %s", strerror(-port));
			return port;
		}
		snprintf(u, KVD_RUN_URL_MAX, "%s127.0.0.1:%d", scheme[k], port);
	}
	for (int i = 0; i < KVD_RUN_KINDS; i++) {
		if (r->listen & KVD_RUN_LISTEN(probe_order[i])) {
			r->health_url = r->url[probe_order[i]];
			break;
		}
	}
	return 0;
}

static int write_config(const struct kvd_run *r, char *err, size_t errlen)
{
	const char *text = r->config_text != NULL ? r->config_text : "";
	FILE *f = fopen(r->config, "w");
	int rv = 0;

	if (f == NULL || fputs(text, f) < 0)
		rv = -errno;
	if (f != NULL && fclose(f) != 0 && rv == 0)
		rv = -errno;
	if (rv != 0)
		fmt(err, errlen, "writing %s: %s", r->config, strerror(-rv));
	return rv;
}

size_t kvd_run_quote_word(char *buf, size_t len, size_t used, const char *a)
{
	bool plain =
	        a[0] != '\0' && strspn(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	                                  "0123456789_./=,:@%+-") == strlen(a);
	int w = snprintf(buf + used, len - used, "%s%s%s%s", used ? " " : "", plain ? "" : "'", a,
	                 plain ? "" : "'");

	return w < 0 || (size_t)w >= len - used ? len : used + (size_t)w;
}

/* The command line for a reader (kvd_run_quote_word, word by word). */
static void quote_argv(char *buf, size_t len, const char *const *argv)
{
	size_t used = 0;

	buf[0] = '\0';
	for (size_t i = 0; argv[i] != NULL && used < len; i++)
		used = kvd_run_quote_word(buf, len, used, argv[i]);
}

int kvd_run_spawn(struct kvd_run *r, char *err, size_t errlen)
{
	const char *argv[RUN_ARGS_MAX];
	char workers[16];
	size_t n = 0;
	pid_t parent = getpid();
	int fd, rv;

	r->pid = 0;
	r->status = 0;
	r->ready_seconds = r->stop_seconds = 0;
	if (r->bin == NULL || r->dir == NULL) {
		fmt(err, errlen, "no kvd binary or no directory");
		return -EINVAL;
	}
	if ((rv = fill(r->data, sizeof r->data, "%s/%s", r->dir, "data")) != 0 ||
	    (rv = fill(r->config, sizeof r->config, "%s/%s", r->dir, "kvd.conf")) != 0 ||
	    (rv = fill(r->log, sizeof r->log, "%s/%s", r->dir, "kvd.log")) != 0) {
		fmt(err, errlen, "%s: path too long", r->dir);
		return rv;
	}
	if ((rv = fill_urls(r, err, errlen)) != 0 || (rv = write_config(r, err, errlen)) != 0)
		return rv;
	argv[n++] = r->bin;
	argv[n++] = "--data-dir";
	argv[n++] = r->data;
	for (int k = 0; k < KVD_RUN_KINDS; k++) {
		if (r->listen & KVD_RUN_LISTEN(k)) {
			argv[n++] = "--listen";
			argv[n++] = r->url[k];
		}
	}
	argv[n++] = "--config";
	argv[n++] = r->config;
	if (r->workers != 0) {
		snprintf(workers, sizeof workers, "%u", r->workers);
		argv[n++] = "--workers";
		argv[n++] = workers;
	}
	for (int i = 0; i < KVD_RUN_EXTRA_MAX && r->extra[i] != NULL; i++)
		argv[n++] = r->extra[i];
	argv[n] = NULL;
	quote_argv(r->command, sizeof r->command, argv);
	fd = open(r->log, O_WRONLY | O_CREAT | O_CLOEXEC | (r->log_append ? O_APPEND : O_TRUNC),
	          0644);
	if (fd < 0) {
		rv = -errno;
		fmt(err, errlen, "%s: %s", r->log, strerror(errno));
		return rv;
	}
	if ((r->pid = fork()) < 0) {
		rv = -errno;
		r->pid = 0;
		fmt(err, errlen, "fork: %s", strerror(-rv));
		close(fd);
		return rv;
	}
	if (r->pid == 0) {
		/* the child; nothing of kvd may hold the caller's stdout (meson
		 * waits for it) */
		sigset_t none;
		if (r->die_with_parent) {
			prctl(PR_SET_PDEATHSIG, SIGTERM);
			if (getppid() != parent)
				_exit(126);
		}
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		dup2(fd, STDOUT_FILENO);
		dup2(fd, STDERR_FILENO);
		for (int i = 0; i < KVD_RUN_ENV_MAX && r->env[i] != NULL; i++)
			putenv((char *)r->env[i]);
		if (r->notify_socket != NULL)
			setenv("NOTIFY_SOCKET", r->notify_socket, 1);
		if (r->nofile != 0) {
			struct rlimit rl = {r->nofile, r->nofile};
			setrlimit(RLIMIT_NOFILE, &rl);
		}
		execv(r->bin, (char *const *)argv);
		_exit(127);
	}
	close(fd);
	r->started = now_s();
	return 0;
}

bool kvd_run_reaped(struct kvd_run *r)
{
	int st;

	if (r->pid <= 0)
		return true;
	if (waitpid(r->pid, &st, WNOHANG) == r->pid) {
		r->status = st;
		r->pid = -r->pid;
		return true;
	}
	return false;
}

void kvd_run_status_text(int st, char *buf, size_t len)
{
	if (WIFEXITED(st))
		snprintf(buf, len, "exit %d", WEXITSTATUS(st));
	else if (WIFSIGNALED(st))
		snprintf(buf, len, "killed by signal %d", WTERMSIG(st));
	else
		snprintf(buf, len, "status 0x%x", st);
}

void kvd_run_log_tail(const char *log, char *buf, size_t len)
{
	char tail[512] = "";
	FILE *f = fopen(log, "r");
	long sz;

	buf[0] = '\0';
	if (f == NULL)
		return;
	if (fseek(f, 0, SEEK_END) == 0 && (sz = ftell(f)) > 0) {
		long from = sz > (long)sizeof tail - 1 ? sz - (long)sizeof tail + 1 : 0;
		size_t n;
		fseek(f, from, SEEK_SET);
		n = fread(tail, 1, sizeof tail - 1, f);
		tail[n] = '\0';
		for (size_t i = 0; i < n; i++)
			if (tail[i] == '\n' && i + 1 < n)
				tail[i] = '|';
		tail[strcspn(tail, "\n")] = '\0';
	}
	fclose(f);
	snprintf(buf, len, "%s", tail);
}

int kvd_run_wait(struct kvd_run *r, char *err, size_t errlen)
{
	int timeout_ms = r->start_timeout_ms ? r->start_timeout_ms : KVD_RUN_START_TIMEOUT_MS;
	struct kvc_options o;
	struct kvc_health h;
	struct kvc_status st = {0};
	struct kvc_call call = {.status = &st};
	kvc *c;
	int rv;

	call.timeout_ms =
	        (uint32_t)(r->probe_timeout_ms ? r->probe_timeout_ms : KVD_RUN_PROBE_TIMEOUT_MS);
	kvc_options_init(&o);
	o.endpoint = r->health_url;
	o.contexts = 1;
	if ((rv = kvc_open(&o, &c)) != 0) {
		fmt(err, errlen, "kvc_open %s: %s", r->health_url, kvc_code_name(rv));
		return rv;
	}
	for (;;) {
		if ((rv = kvc_health(c, &call, &h)) == 0) {
			r->ready_seconds = now_s() - r->started;
			break;
		}
		if (kvd_run_reaped(r)) {
			char s[64], tail[512];
			kvd_run_status_text(r->status, s, sizeof s);
			kvd_run_log_tail(r->log, tail, sizeof tail);
			fmt(err, errlen, "kvd stopped before it answered (%s): %s", s, tail);
			rv = -ECHILD;
			break;
		}
		if (now_s() - r->started > timeout_ms / 1000.0) {
			fmt(err, errlen, "kvd did not answer Health on %s within %d s: %s",
			    r->health_url, timeout_ms / 1000, st.message);
			rv = -ETIMEDOUT;
			break;
		}
		sleep_ms(20);
	}
	kvc_close(c);
	return rv;
}

int kvd_run_start(struct kvd_run *r, char *err, size_t errlen)
{
	int rv;

	if ((rv = kvd_run_spawn(r, err, errlen)) != 0)
		return rv;
	return kvd_run_wait(r, err, errlen);
}

int kvd_run_stop(struct kvd_run *r, char *err, size_t errlen)
{
	int timeout_ms = r->stop_timeout_ms ? r->stop_timeout_ms : KVD_RUN_STOP_TIMEOUT_MS;
	double t0 = now_s();
	bool gone = r->pid < 0; /* it ended before it was asked to */

	if (r->pid == 0) {
		fmt(err, errlen, "not started");
		return -ECHILD;
	}
	if (r->pid > 0 && kill(r->pid, SIGTERM) != 0 && errno != ESRCH) {
		int rv = -errno;
		fmt(err, errlen, "kill: %s", strerror(errno));
		return rv;
	}
	while (!kvd_run_reaped(r)) {
		if (now_s() - t0 > timeout_ms / 1000.0) {
			kill(r->pid, SIGKILL);
			waitpid(r->pid, &r->status, 0);
			r->pid = -r->pid;
			fmt(err, errlen, "did not exit within %d s of SIGTERM (killed)",
			    timeout_ms / 1000);
			return -ETIMEDOUT;
		}
		sleep_ms(5);
	}
	if (!gone)
		r->stop_seconds = now_s() - t0;
	if (!WIFEXITED(r->status) || WEXITSTATUS(r->status) != 0) {
		char s[64], tail[512];
		kvd_run_status_text(r->status, s, sizeof s);
		kvd_run_log_tail(r->log, tail, sizeof tail);
		fmt(err, errlen, "%s %s; log: %s", s, gone ? "before SIGTERM" : "after SIGTERM",
		    tail);
		return -ECHILD;
	}
	return 0;
}

void kvd_run_kill(struct kvd_run *r)
{
	if (r->pid <= 0)
		return;
	kill(r->pid, SIGKILL);
	waitpid(r->pid, &r->status, 0);
	r->pid = -r->pid;
}
