/* log.c — stderr with syslog priority prefixes. */
#include "log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

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

void klog(int prio, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	int n;

	if (prio > atomic_load(&level))
		return;
	n = snprintf(line, sizeof(line), "<%d>", prio);
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	/* one write per line so lines of different threads never interleave */
	fprintf(stderr, "%s\n", line);
}
