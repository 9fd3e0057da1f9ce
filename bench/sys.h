/*
 * bench/sys.h — clocks, files and the facts about a run that every kvbench
 * report records (bench/sys.c).
 */
#ifndef KV_BENCH_SYS_H
#define KV_BENCH_SYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define BENCH_PATH_MAX 4096 /* bytes of a path kvbench builds */

/* snprintf for messages and paths whose truncation is acceptable. */
void bench_fmt(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* A benchmark thread's error: counted in *count, the first one's text kept
 * in err (cap bytes) for the report. */
void bench_thread_error(uint64_t *count, char *err, size_t cap, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));

/* CLOCK_MONOTONIC in seconds, and in nanoseconds. */
double bench_now(void);
uint64_t bench_now_ns(void);

/* Sleeps s seconds (nothing when s <= 0), resumed after signals. */
void bench_sleep(double s);

/* Sleeps until CLOCK_MONOTONIC reaches t ns, resumed after signals. */
void bench_sleep_until_ns(uint64_t t);

/* Writes all n bytes, retrying after EINTR. 0 or -errno. */
int bench_write_full(int fd, const void *buf, size_t n);

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
/* The first executable name in $PATH (buf); false, buf empty, if none. */
bool bench_find_in_path(const char *name, char *buf, size_t len);
/* v rounded, with thousands separators: 12,345. */
void bench_grouped(char *buf, size_t len, double v);

#endif
