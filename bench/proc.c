/*
 * bench/proc.c — the processes kvbench starts other than kvd (sockperf,
 * redis-server, its own echo server): fork/exec with the output to a log,
 * stopping with SIGTERM and judging the exit (worded as harness/kvdrun.h
 * words kvd's); and finding and pinning the kvd binary. kvd itself is
 * started through harness/kvdrun.h.
 */
#include "proc.h"
#include "sys.h"

#include "kvdrun.h" /* the exit status and log tail in messages */

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define PROC_STOP_TIMEOUT_MS 60000 /* a process exits within this after SIGTERM */

int bench_kvd_path(const char *given, char *buf, size_t len)
{
	char self[BENCH_PATH_MAX];
	ssize_t n;
	char *slash;

	if (given != NULL) {
		if (snprintf(buf, len, "%s", given) >= (int)len)
			return -ENAMETOOLONG;
		return access(buf, X_OK) == 0 ? 0 : -errno;
	}
	if ((n = readlink("/proc/self/exe", self, sizeof self - 1)) <= 0)
		return -errno;
	self[n] = '\0';
	if ((slash = strrchr(self, '/')) != NULL)
		*slash = '\0';
	if (snprintf(buf, len, "%s/../daemon/kvd", self) >= (int)len)
		return -ENAMETOOLONG;
	if (realpath(buf, self) != NULL)
		snprintf(buf, len, "%s", self);
	return access(buf, X_OK) == 0 ? 0 : -errno;
}

int bench_proc_start(struct bench_proc *k, const char *path, const char *const *args,
                     const char *log_path, char *err, size_t errlen)
{
	const char *argv[32];
	size_t n = 0, used = 0;
	char raw[4096];
	int fd;
	pid_t pid;

	memset(k, 0, sizeof(*k));
	argv[n++] = path;
	for (size_t i = 0; args[i] != NULL && n < sizeof argv / sizeof argv[0] - 1; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	for (size_t i = 0; i < n; i++) {
		size_t l = strlen(argv[i]);
		if (used + l + 1 > sizeof raw)
			break;
		memcpy(raw + used, argv[i], l + 1);
		used += l + 1;
	}
	bench_quote_argv(k->command, sizeof k->command, raw, used);
	bench_fmt(k->log, sizeof k->log, "%s", log_path);
	if ((fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0) {
		bench_fmt(err, errlen, "%s: %s", log_path, strerror(errno));
		return -errno;
	}
	pid_t parent = getpid();
	if ((pid = fork()) < 0) {
		bench_fmt(err, errlen, "fork: %s", strerror(errno));
		close(fd);
		return -errno;
	}
	if (pid == 0) {
		/* the child: async-signal-safe calls only until exec */
		sigset_t none;
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() != parent)
			_exit(126);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		dup2(fd, STDOUT_FILENO);
		dup2(fd, STDERR_FILENO);
		execv(path, (char *const *)argv);
		_exit(127);
	}
	close(fd);
	k->pid = pid;
	k->started = bench_now();
	return 0;
}

bool bench_proc_reaped(struct bench_proc *k)
{
	int st;

	if (k->pid <= 0)
		return true;
	if (waitpid(k->pid, &st, WNOHANG) == k->pid) {
		k->status = st;
		k->pid = -k->pid;
		return true;
	}
	return false;
}

int bench_proc_stop(struct bench_proc *k, char *err, size_t errlen)
{
	double t0 = bench_now();
	bool gone = k->pid < 0; /* exited before we asked */

	if (k->pid == 0) {
		bench_fmt(err, errlen, "not started");
		return -ECHILD;
	}
	/* pid < 0: it exited already and was reaped; judge its status below */
	if (k->pid > 0 && kill(k->pid, SIGTERM) != 0 && errno != ESRCH) {
		bench_fmt(err, errlen, "kill: %s", strerror(errno));
		return -errno;
	}
	while (!bench_proc_reaped(k)) {
		if (bench_now() - t0 > PROC_STOP_TIMEOUT_MS / 1000.0) {
			kill(k->pid, SIGKILL);
			waitpid(k->pid, &k->status, 0);
			k->pid = -k->pid;
			bench_fmt(err, errlen, "did not exit within %d s of SIGTERM (killed)",
			          PROC_STOP_TIMEOUT_MS / 1000);
			return -ETIMEDOUT;
		}
		bench_sleep(0.005);
	}
	k->stop_seconds = bench_now() - t0;
	if (!WIFEXITED(k->status) || WEXITSTATUS(k->status) != 0) {
		char s[64], tail[512];
		kvd_run_status_text(k->status, s, sizeof s);
		kvd_run_log_tail(k->log, tail, sizeof tail);
		bench_fmt(err, errlen, "%s %s; log: %s", s,
		          gone ? "before SIGTERM" : "after SIGTERM", tail);
		return -ECHILD;
	}
	return 0;
}

int bench_kvd_pin(const char *src, const char *dir, char *buf, size_t len, char *err, size_t errlen)
{
	char tmp[BENCH_PATH_MAX + 16];
	int in = -1, out = -1, rv = 0;
	struct stat st;

	bench_fmt(buf, len, "%s/kvd", dir);
	bench_fmt(tmp, sizeof tmp, "%s/kvd.tmp", dir);
	if ((in = open(src, O_RDONLY | O_CLOEXEC)) < 0 || fstat(in, &st) != 0 ||
	    (out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755)) < 0) {
		rv = -errno;
		bench_fmt(err, errlen, "copying %s: %s", src, strerror(errno));
		goto out;
	}
	for (;;) {
		char chunk[65536];
		ssize_t n = read(in, chunk, sizeof chunk);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || (n > 0 && bench_write_full(out, chunk, (size_t)n) != 0)) {
			rv = -EIO;
			bench_fmt(err, errlen, "copying %s to %s: %s", src, tmp, strerror(errno));
			goto out;
		}
		if (n == 0)
			break;
	}
	if (close(out) != 0 || rename(tmp, buf) != 0) {
		out = -1;
		rv = -errno;
		bench_fmt(err, errlen, "installing %s: %s", buf, strerror(errno));
		goto out;
	}
	out = -1;
out:
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	return rv;
}
