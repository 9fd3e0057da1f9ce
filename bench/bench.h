/*
 * bench.h — kvbench subcommands. Each takes the arguments after its name and
 * returns the process exit code.
 */
#ifndef KV_BENCH_H
#define KV_BENCH_H

#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

/* kvbench engine: db_bench-style workloads against the engine and its peers. */
int bench_engine(int argc, char **argv);

/* kvbench keydir: key-directory memory per key and operation speed. */
int bench_keydir(int argc, char **argv);

/* kvbench open: time to open a database from hint files and by log scan. */
int bench_open(int argc, char **argv);

/* kvbench merge: merge time, space reclaimed, writer latency during a merge. */
int bench_merge(int argc, char **argv);

/* kvbench rpc: Get/Put throughput and latency through a kvd it starts, with
 * nng, plain-socket, disk and sockperf baselines. */
int bench_rpc(int argc, char **argv);

/* kvbench activate: time to activate a passive tenant (hint files, log
 * replay), key-directory bytes per key, first Get through kvd. */
int bench_activate(int argc, char **argv);

/* kvbench ycsb: the YCSB core workloads A-F against kvd, Redis and the
 * embedded engines (bench/ycsb.c). */
int bench_ycsb(int argc, char **argv);

/* kvbench versions: the newest m versions of a key, kvd's Versions call
 * against a chain of keys in Redis (bench/versions.c). */
int bench_versions(int argc, char **argv);

/* kvbench durable: put throughput and latency with sync=always at several
 * client counts, kvd's group commit against Redis appendfsync always
 * (bench/durable.c). */
int bench_durable(int argc, char **argv);

/* kvbench coldstart: a new process opening a database (or connecting to
 * kvd) and doing k operations, from exec to the k-th result
 * (bench/coldstart.c). */
int bench_coldstart(int argc, char **argv);

/* ---- helpers shared by rpc.c and activate.c (defined in rpc.c) ---------- */

/* A child process (kvd, sockperf) started by bench_proc_start. */
struct bench_proc {
	pid_t pid;           /* > 0 running; < 0 reaped (-pid); 0 never started */
	int status;          /* wait status once reaped */
	double started;      /* bench_now() at fork */
	double stop_seconds; /* SIGTERM to exit */
	char command[4096];  /* the exact command line, quoted for a shell */
	char log[4096];      /* its stdout and stderr */
};

/* snprintf for messages and paths whose truncation is acceptable. */
void bench_fmt(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* CLOCK_MONOTONIC in seconds. */
double bench_now(void);

/* fork/exec of path with args (NULL-terminated, without argv[0]); stdout
 * and stderr go to log_path; the child gets SIGTERM if kvbench dies.
 * 0, or -errno with err filled. */
int bench_proc_start(struct bench_proc *k, const char *path, const char *const *args,
                     const char *log_path, char *err, size_t errlen);

/* SIGTERM, then waits (60 s at most, SIGKILL after). 0 only when it exited
 * with status 0; otherwise -ECHILD/-ETIMEDOUT with err filled (the log's
 * tail included). */
int bench_proc_stop(struct bench_proc *k, char *err, size_t errlen);

/* Waits until kvd answers Health on url (15 s at most); fails at once when
 * the process exits. */
int bench_kvd_wait_ready(struct bench_proc *k, const char *url, char *err, size_t errlen);

/* The kvd binary: given (checked executable), or ../daemon/kvd next to
 * /proc/self/exe (the build tree). 0 or -errno; buf is filled either way. */
int bench_kvd_path(const char *given, char *buf, size_t len);

/* Copies the kvd binary src to dir/kvd (path in buf), so that every kvd a
 * run starts is the same build even if the tree is rebuilt meanwhile. */
int bench_kvd_pin(const char *src, const char *dir, char *buf, size_t len, char *err,
                  size_t errlen);

/* A TCP port on 127.0.0.1 free right now, or -errno. */
int bench_free_tcp_port(void);

/* Removes path and everything below it; a missing path is fine. */
int bench_rmtree(const char *path);

/* This process's command line, quoted for a shell. */
void bench_command_line(char *buf, size_t len, int argc, char **argv);
/* raw: n bytes of NUL-separated words, quoted for a shell into buf. */
void bench_quote_argv(char *buf, size_t len, const char *raw, size_t n);
/* "CPU model, N CPUs online, Linux release". */
void bench_machine(char *buf, size_t len);
/* How kvbench (and so kvd, with the same project flags) was compiled. */
const char *bench_build(void);
/* The UTC time now, ISO 8601. */
void bench_date(char *buf, size_t len);
/* The file system type of path ("ext4", "tmpfs"…). */
void bench_fs_name(const char *path, char *buf, size_t len);
/* s as a JSON string literal. */
void bench_json_string(FILE *f, const char *s);

#endif
