/*
 * bench/proc.h — starting and stopping the processes a benchmark drives
 * other than kvd (bench/proc.c; kvd: harness/kvdrun.h).
 */
#ifndef KV_BENCH_PROC_H
#define KV_BENCH_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* A child process (sockperf, redis-server, the echo server) started by
 * bench_proc_start. */
struct bench_proc {
	pid_t pid;           /* > 0 running; < 0 reaped (-pid); 0 never started */
	int status;          /* wait status once reaped */
	double started;      /* bench_now() at fork */
	double stop_seconds; /* SIGTERM to exit */
	char command[4096];  /* the exact command line, quoted for a shell */
	char log[4096];      /* its stdout and stderr */
};

/* fork/exec of path with args (NULL-terminated, without argv[0]); stdout
 * and stderr go to log_path; the child gets SIGTERM if kvbench dies.
 * 0, or -errno with err filled. */
int bench_proc_start(struct bench_proc *k, const char *path, const char *const *args,
                     const char *log_path, char *err, size_t errlen);

/* SIGTERM, then waits (60 s at most, SIGKILL after). 0 only when it exited
 * with status 0; otherwise -ECHILD/-ETIMEDOUT with err filled (the log's
 * tail included). */
int bench_proc_stop(struct bench_proc *k, char *err, size_t errlen);

/* Whether the process exited (without waiting); fills k->status. */
bool bench_proc_reaped(struct bench_proc *k);

/* The kvd binary: given (checked executable), or ../daemon/kvd next to
 * /proc/self/exe (the build tree). 0 or -errno; buf is filled either way. */
int bench_kvd_path(const char *given, char *buf, size_t len);

/* Copies the kvd binary src to dir/kvd (path in buf), so that every kvd a
 * run starts is the same build even if the tree is rebuilt meanwhile. */
int bench_kvd_pin(const char *src, const char *dir, char *buf, size_t len, char *err,
                  size_t errlen);

#endif
