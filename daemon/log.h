/*
 * log.h — kvd's log: one line per event on stderr, prefixed with its syslog
 * priority in angle brackets ("<6>listening on …", sd-daemon(3)'s SD_INFO),
 * which journald reads as the priority when kvd runs under systemd.
 * Every line kvd writes carries a priority there: the log's always, the
 * lines to whoever started it (kvd_say) when they go to the journal.
 */
#ifndef KVD_LOG_H
#define KVD_LOG_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <syslog.h>

/* Lines above this priority (LOG_ERR … LOG_DEBUG) are dropped; default LOG_INFO. */
void log_set_level(int level);
int log_level(void);
/* "err", "warning", "notice", "info", "debug" -> LOG_*; -1 if unknown. */
int log_level_parse(const char *s);
const char *log_level_name(int level);

void klog(int prio, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A line for whoever started kvd, before it serves or instead of serving
 * (a refusal to start, a bad flag, --check and --check-config results):
 * "kvd: " and the text, on `to` (stdout or stderr). Prefixed with its
 * priority ("<3>kvd: …") when that stream is the journal (JOURNAL_STREAM
 * names it), so that journald files it under that priority; plain
 * elsewhere, for a terminal or a script. Never filtered by the log level. */
void kvd_say(FILE *to, int prio, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Whether the stream is the journal: its descriptor is the device and inode
 * JOURNAL_STREAM names (systemd.exec(5)). */
bool log_is_journal(FILE *f);

/* A line that can repeat without end (accept failing with EMFILE, peers
 * refused, connections timed out): printed at most once per interval_ms
 * for each struct klog_limit (static, zero-initialised); the lines dropped
 * in between are counted and the next line printed says how many. Any
 * thread. */
struct klog_limit {
	_Atomic unsigned long long next_ms;    /* monotonic ms before which lines are dropped */
	_Atomic unsigned long long suppressed; /* dropped since the last line printed */
};
void klog_limited(struct klog_limit *l, unsigned interval_ms, int prio, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));

#endif
