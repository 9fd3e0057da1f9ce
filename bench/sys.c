/*
 * bench/sys.c — what every kvbench subcommand needs from the system: clocks,
 * removing a tree, writing a whole buffer, and the facts a report records
 * about the run (command line, machine, build, date, file system).
 */
#include "sys.h"

#include "kvdrun.h"

#include <errno.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>
void bench_fmt(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
}

void bench_thread_error(uint64_t *count, char *err, size_t cap, const char *fmt, ...)
{
	va_list ap;

	(*count)++;
	if (err[0] != '\0')
		return;
	va_start(ap, fmt);
	vsnprintf(err, cap, fmt, ap);
	va_end(ap);
}

double bench_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

uint64_t bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void bench_sleep(double s)
{
	struct timespec ts;

	if (s <= 0)
		return;
	ts.tv_sec = (time_t)s;
	ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if (flag == FTW_DP)
		return rmdir(path) == 0 || errno == ENOENT ? 0 : -1;
	return unlink(path) == 0 || errno == ENOENT ? 0 : -1;
}

int bench_rmtree(const char *path)
{
	struct stat st;

	if (lstat(path, &st) != 0)
		return errno == ENOENT ? 0 : -errno;
	return nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS) == 0 ? 0 : -errno;
}

void bench_command_line(char *buf, size_t len, int argc, char **argv)
{
	char raw[4096];
	size_t n = 0, used = 0;
	FILE *f = fopen("/proc/self/cmdline", "r");

	if (f != NULL) {
		n = fread(raw, 1, sizeof raw - 1, f);
		fclose(f);
	}
	if (n == 0) {
		used = (size_t)snprintf(raw, sizeof raw, "kvbench");
		for (int i = 0; i < argc && used + 1 < sizeof raw; i++) {
			size_t l = strlen(argv[i]);
			if (used + 1 + l + 1 > sizeof raw)
				break;
			raw[used++] = '\0';
			memcpy(raw + used, argv[i], l);
			used += l;
		}
		n = used;
	}
	raw[n] = '\0';
	bench_quote_argv(buf, len, raw, n);
}

void bench_quote_argv(char *buf, size_t len, const char *raw, size_t n)
{
	size_t used = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < n && used < len; i += strlen(raw + i) + 1)
		used = kvd_run_quote_word(buf, len, used, raw + i);
}

void bench_machine(char *buf, size_t len)
{
	char line[512], cpu[256] = "unknown CPU";
	struct utsname un;
	FILE *f = fopen("/proc/cpuinfo", "r");

	while (f != NULL && fgets(line, sizeof line, f) != NULL) {
		if (strncmp(line, "model name", 10) == 0) {
			char *c = strchr(line, ':');
			if (c != NULL) {
				c += strspn(c + 1, " \t") + 1;
				c[strcspn(c, "\n")] = '\0';
				snprintf(cpu, sizeof cpu, "%s", c);
			}
			break;
		}
	}
	if (f != NULL)
		fclose(f);
	if (uname(&un) != 0)
		snprintf(un.release, sizeof un.release, "unknown");
	snprintf(buf, len, "%s, %ld CPUs online, Linux %s", cpu, sysconf(_SC_NPROCESSORS_ONLN),
	         un.release);
}

const char *bench_build(void)
{
	/* the project's flags, so kvd's and the engine's as well */
	return
#ifdef __OPTIMIZE__
	        "optimized"
#else
	        "not optimized"
#endif
#ifdef NDEBUG
	        ", assertions off";
#else
	        ", assertions on (b_ndebug=false)";
#endif
}

void bench_date(char *buf, size_t len)
{
	time_t now = time(NULL);
	struct tm tm;

	gmtime_r(&now, &tm);
	snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02dZ", tm.tm_year + 1900, tm.tm_mon + 1,
	         tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

void bench_fs_name(const char *path, char *buf, size_t len)
{
	static const struct {
		long magic;
		const char *name;
	} known[] = {
	        {0xEF53, "ext4"},      {0x58465342, "xfs"},       {0x01021994, "tmpfs"},
	        {0x9123683E, "btrfs"}, {0x794c7630, "overlayfs"}, {0x6969, "nfs"},
	        {0x2fc12fc1, "zfs"},   {0xF2F52010, "f2fs"},
	};
	struct statfs sf;

	if (statfs(path, &sf) != 0) {
		snprintf(buf, len, "unknown");
		return;
	}
	for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
		if ((long)sf.f_type == known[i].magic) {
			snprintf(buf, len, "%s", known[i].name);
			return;
		}
	}
	snprintf(buf, len, "fs magic 0x%lx", (unsigned long)sf.f_type);
}

int bench_write_full(int fd, const void *buf, size_t n)
{
	const char *p = buf;

	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

void bench_sleep_until_ns(uint64_t t)
{
	struct timespec ts = {.tv_sec = (time_t)(t / 1000000000ull),
	                      .tv_nsec = (long)(t % 1000000000ull)};

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

bool bench_find_in_path(const char *name, char *buf, size_t len)
{
	const char *path = getenv("PATH");
	char dirs[4096];
	char *save = NULL;

	snprintf(dirs, sizeof dirs, "%s", path ? path : "/usr/bin:/bin");
	for (char *d = strtok_r(dirs, ":", &save); d != NULL; d = strtok_r(NULL, ":", &save)) {
		bench_fmt(buf, len, "%s/%s", d, name);
		if (access(buf, X_OK) == 0)
			return true;
	}
	buf[0] = '\0';
	return false;
}

void bench_grouped(char *buf, size_t len, double v)
{
	char digits[32];
	size_t n, o = 0;

	snprintf(digits, sizeof digits, "%.0f", v);
	n = strlen(digits);
	for (size_t i = 0; i < n && o + 2 < len; i++) {
		buf[o++] = digits[i];
		if (i + 1 < n && (n - i - 1) % 3 == 0 && digits[i] != '-')
			buf[o++] = ',';
	}
	buf[o] = '\0';
}
