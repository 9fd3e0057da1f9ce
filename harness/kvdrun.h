/*
 * harness/kvdrun.h — starting and stopping a real kvd, for the benchmarks
 * (kvbench) and the tests (tests/integration, tests/crash) alike.
 *
 * The caller fills a struct kvd_run: the binary, a scratch directory, the
 * settings file's text, which listeners, workers, extra arguments and
 * environment. kvd_run_start writes the settings file (always, empty when
 * there is no text: without --config kvd reads /etc/kvd/kvd.conf of the
 * machine), starts kvd with its output in a log file and waits, bounded,
 * until it answers Health. kvd_run_stop sends SIGTERM and waits, bounded,
 * judging the exit status; kvd_run_kill is SIGKILL.
 *
 * Paths and URLs are buffers in the struct: one the caller leaves empty
 * gets its default under dir when kvd starts (<dir>/kvd.conf, <dir>/kvd.log,
 * <dir>/data, <dir>/kvd.sock for ipc://, <dir>/kv.sock for kv+ipc://, a free
 * port on 127.0.0.1 for tcp:// and kv+tcp://).
 *
 * Errors: every int-returning call gives 0, or a negative errno (each call
 * lists its own) with a one-line message in err (the log's last lines
 * included when kvd ended).
 * Nothing here prints. One thread uses a struct kvd_run at a time.
 */
#ifndef KV_HARNESS_KVDRUN_H
#define KV_HARNESS_KVDRUN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/resource.h>
#include <sys/types.h>

#define KVD_RUN_PATH_MAX  1024 /* bytes of a path, with its NUL */
#define KVD_RUN_URL_MAX   (KVD_RUN_PATH_MAX + 16)
#define KVD_RUN_EXTRA_MAX 8 /* extra arguments */
#define KVD_RUN_ENV_MAX   8 /* extra environment entries */

#define KVD_RUN_START_TIMEOUT_MS 15000 /* default: kvd answers Health within this */
#define KVD_RUN_PROBE_TIMEOUT_MS 500   /* default: one Health call's timeout */
#define KVD_RUN_STOP_TIMEOUT_MS  60000 /* default: kvd exits within this after SIGTERM */

/* The kinds of listener, in the order kvd is given them. */
enum kvd_run_kind {
	KVD_RUN_IPC,   /* ipc://      nng REQ/REP over a Unix socket */
	KVD_RUN_TCP,   /* tcp://      nng REQ/REP over TCP on 127.0.0.1 */
	KVD_RUN_KVIPC, /* kv+ipc://   kvd's stream framing over a Unix socket */
	KVD_RUN_KVTCP, /* kv+tcp://   kvd's stream framing over TCP on 127.0.0.1 */
	KVD_RUN_KINDS,
};

#define KVD_RUN_LISTEN(kind) (1u << (kind))

struct kvd_run {
	/* set by the caller; zero is the default */
	const char *bin;                      /* the kvd binary (required) */
	const char *dir;                      /* scratch directory (required) */
	const char *config_text;              /* the whole settings file; NULL: an empty file */
	unsigned listen;                      /* KVD_RUN_LISTEN() bits; 0: ipc:// only */
	unsigned workers;                     /* --workers; 0: kvd's default */
	const char *extra[KVD_RUN_EXTRA_MAX]; /* more arguments, up to the first NULL */
	const char *env[KVD_RUN_ENV_MAX];     /* NAME=value for kvd, up to the first NULL */
	const char *notify_socket;            /* $NOTIFY_SOCKET for kvd */
	rlim_t nofile;                        /* RLIMIT_NOFILE for kvd; 0: inherited */
	bool log_append;      /* add to the log (a restart keeps the lines before) */
	bool die_with_parent; /* kvd gets SIGTERM when the thread that started it ends */
	int start_timeout_ms; /* 0: KVD_RUN_START_TIMEOUT_MS */
	int probe_timeout_ms; /* 0: KVD_RUN_PROBE_TIMEOUT_MS */
	int stop_timeout_ms;  /* 0: KVD_RUN_STOP_TIMEOUT_MS */

	/* given by the caller or, left empty, filled by kvd_run_start */
	char data[KVD_RUN_PATH_MAX];              /* --data-dir */
	char config[KVD_RUN_PATH_MAX];            /* --config */
	char log[KVD_RUN_PATH_MAX];               /* its stdout and stderr */
	char url[KVD_RUN_KINDS][KVD_RUN_URL_MAX]; /* the URL of each kind in listen */

	/* filled by kvd_run_spawn and after */
	const char *health_url; /* the URL Health is asked on: ipc, kv+ipc, tcp, kv+tcp */
	pid_t pid;              /* > 0 running; < 0 reaped (-pid); 0 never started */
	int status;             /* wait status once reaped */
	double started;         /* CLOCK_MONOTONIC seconds at fork */
	double ready_seconds;   /* fork to the first answered Health */
	double stop_seconds;    /* SIGTERM to exit */
	char command[4096];     /* the command line, quoted for a shell */
};

/* Fills the empty paths and URLs, writes the settings file and starts kvd
 * (no wait); r must not have a kvd running. Errors: -EINVAL (no bin or
 * dir), -ENAMETOOLONG (a path or socket name does not fit), a free port's
 * -errno, and the -errno of writing the settings file, opening the log or
 * fork. A kvd that cannot exec exits 127 (seen by kvd_run_wait). */
int kvd_run_spawn(struct kvd_run *r, char *err, size_t errlen);

/* Waits until kvd answers Health on r->health_url (start_timeout_ms at
 * most). Errors: -ECHILD when it ended first (reaped; r->status says how),
 * -ETIMEDOUT when it runs but did not answer (it is left running), or
 * kvc_open's negative KVC code when no client could be made. */
int kvd_run_wait(struct kvd_run *r, char *err, size_t errlen);

/* kvd_run_spawn, then kvd_run_wait. */
int kvd_run_start(struct kvd_run *r, char *err, size_t errlen);

/* SIGTERM, then waits (stop_timeout_ms at most, SIGKILL after). 0 only
 * when kvd exited with status 0; -ECHILD (another status, or not started)
 * or -ETIMEDOUT otherwise. r->status holds the wait status. */
int kvd_run_stop(struct kvd_run *r, char *err, size_t errlen);

/* SIGKILL and reap, when running. */
void kvd_run_kill(struct kvd_run *r);

/* Whether kvd has ended (without waiting); reaps it and fills r->status. */
bool kvd_run_reaped(struct kvd_run *r);

/* "exit 1", "killed by signal 9", for a wait status. */
void kvd_run_status_text(int status, char *buf, size_t len);

/* The last bytes of a log file (r->log, or any process's) as one line
 * ('|' between lines); "" when it cannot be read. */
void kvd_run_log_tail(const char *log, char *buf, size_t len);

/* A TCP port on 127.0.0.1 that was free a moment ago, or -errno. */
int kvd_run_free_port(void);
/* Appends word a to the command line in buf (len bytes, used of them taken):
 * after a space unless first, in single quotes when it has characters other
 * than letters, digits and _./=,:@%+-. Returns the bytes now used, or len
 * when it does not fit (buf then ends before it). */
size_t kvd_run_quote_word(char *buf, size_t len, size_t used, const char *a);

#endif
