/* log.c — stderr with syslog priority prefixes. */
#include "log.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

/* sd-daemon's prefixes, by priority: journald reads them off a line. */
static const char *const prefixes[] = {SD_EMERG,   SD_ALERT,  SD_CRIT, SD_ERR,
                                       SD_WARNING, SD_NOTICE, SD_INFO, SD_DEBUG};

static const char *prefix(int prio)
{
	return prio >= LOG_EMERG && prio <= LOG_DEBUG ? prefixes[prio] : SD_ERR;
}

static atomic_int level = LOG_INFO;

void log_set_level(int l)
{
	atomic_store(&level, l);
}

int log_level(void)
{
	return atomic_load(&level);
}

static const char *const names[] = {"emerg", "alert", "crit", "err", "warning",
                                    "notice", "info", "debug"};

int log_level_parse(const char *s)
{
	for (int i = LOG_ERR; i <= LOG_DEBUG; i++)
		if (strcmp(s, names[i]) == 0)
			return i;
	if (strcmp(s, "error") == 0)
		return LOG_ERR;
	if (strcmp(s, "warn") == 0)
		return LOG_WARNING;
	return -1;
}

const char *log_level_name(int l)
{
	return l >= 0 && l <= LOG_DEBUG ? names[l] : "?";
}

static void vklog(int prio, unsigned long long dropped, unsigned interval_ms, const char *fmt,
                  va_list ap)
{
	char line[1024];
	int n;

	n = snprintf(line, sizeof(line), "%s", prefix(prio));
	n += vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	if (dropped > 0 && (size_t)n < sizeof(line))
		snprintf(line + n, sizeof(line) - (size_t)n,
		         " (%llu more like it in the last %u s not logged)", dropped,
		         (interval_ms + 999) / 1000);
	/* one write per line so lines of different threads never interleave */
	fprintf(stderr, "%s\n", line);
}

void klog(int prio, const char *fmt, ...)
{
	va_list ap;

	if (prio > atomic_load(&level))
		return;
	va_start(ap, fmt);
	vklog(prio, 0, 0, fmt, ap);
	va_end(ap);
}

void klog_limited(struct klog_limit *l, unsigned interval_ms, int prio, const char *fmt, ...)
{
	struct timespec ts;
	unsigned long long now, next, dropped;
	va_list ap;

	if (prio > atomic_load(&level))
		return;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (unsigned long long)ts.tv_sec * 1000 + (unsigned long long)ts.tv_nsec / 1000000;
	next = atomic_load(&l->next_ms);
	/* one thread wins the slot; the others count themselves as dropped */
	if (now < next || !atomic_compare_exchange_strong(&l->next_ms, &next, now + interval_ms)) {
		atomic_fetch_add(&l->suppressed, 1);
		return;
	}
	dropped = atomic_exchange(&l->suppressed, 0);
	va_start(ap, fmt);
	vklog(prio, dropped, interval_ms, fmt, ap);
	va_end(ap);
}

bool log_is_journal(FILE *f)
{
	const char *js = getenv("JOURNAL_STREAM");
	uintmax_t dev, ino;
	struct stat st;
	int end = 0;

	if (js == NULL || sscanf(js, "%ju:%ju%n", &dev, &ino, &end) != 2 || js[end] != '\0')
		return false;
	return fstat(fileno(f), &st) == 0 && (uintmax_t)st.st_dev == dev &&
	       (uintmax_t)st.st_ino == ino;
}

void kvd_say(FILE *to, int prio, const char *fmt, ...)
{
	char line[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(to, "%skvd: %s\n", log_is_journal(to) ? prefix(prio) : "", line);
	fflush(to);
}
