/*
 * kvd.h — the daemon's shared state and the pieces that move a request.
 *
 * A request's path:
 *   1. A transport takes its bytes: stream.c (kv+ipc://, kv+tcp://) on the
 *      worker that reads the connection, listener.c (nng ipc://, tcp://,
 *      tls+tcp://) on an nng thread, in an nng REP context.
 *   2. request.c decodes the envelope (the same for both transports), checks
 *      its token against the method's role (auth.c), in cluster mode asks
 *      cluster.c whether this node serves the tenant (else MOVED), and by
 *      the method's kind (server.h) answers at once (errors, Health, Stats,
 *      tenant bookkeeping), queues the job on the maintenance thread
 *      (Compact), or runs it on the worker that owns the tenant (hash of its
 *      name): at once when that is the calling thread, else through the
 *      worker's queue.
 *   3. worker.c: the owner runs reads on the spot, submits writes to the
 *      tenant's engine with kv_submit (the de-duplication table, dedup.c,
 *      first), and drives every tenant with writes in flight with kv_process
 *      when their event fds fire. A write is answered from its completion
 *      callback, after its batch is durable. Blob uploads (BlobBegin …
 *      BlobCommit) live in the owner's table (upload.c), their pieces
 *      submitted as writes.
 *   4. The reply goes back through the job's transport: stream.c writes it
 *      to the connection (or queues it behind what is queued), listener.c
 *      sends it on the same nng context, which then waits for the next
 *      request.
 *
 * Threads: the stream acceptor (stream.c), nng's (receive, decode, local
 * answers), one per worker (tenants hashed to it; the stream connections it
 * reads), one maintenance thread (interval syncs, hints, idle and memory
 * passivation, merges, Compact, sd_notify STATUS), libmicrohttpd's for the
 * metrics endpoint (metrics.c), cluster mode's etcd keepalive (cluster.c)
 * and, on a shared device, its failover thread (failover.c), and the main
 * thread (signals, the watchdog,
 * the nng ipc:// listener watch).
 *
 * Errors (the engine's convention, 0/-errno/KV_E*, is STYLE.md's; the daemon
 * adds what it owes clients and operators):
 *   - A request is answered, never returned: whoever handles a JOB_REQUEST
 *     calls job_reply (a reply rpc/server.c built) or job_reply_error(j, id,
 *     status, message) exactly once. status is a wire status (RPC_*, the
 *     gRPC codes); message is one line for the client. An engine or store
 *     error becomes both through rpc_status_of and rpc_tenant_message (or
 *     kv_strerror). Handlers are void; request_dispatch's int is the owning
 *     worker (or -1), not an error.
 *   - What no client can be told (epoll_ctl, an eventfd, a merge or tick in
 *     the maintenance thread) is logged once with klog(LOG_ERR), naming the
 *     tenant or the worker, and the loop goes on; an automatic merge that
 *     keeps failing is retried ever later and logged once per streak and
 *     error (maint.c).
 *   - Start-up functions return 0 or a negative errno; those that take
 *     (char *err, size_t errlen) also write one line there, without "kvd: "
 *     and without a newline (config_load, config_check, listeners_start,
 *     stream_start), and main says "kvd: <err>" once (kvd_say: on stderr, with
 *     its syslog priority when stderr is the journal). Their errno
 *     says what kind of failure it was, not always its cause: the listeners
 *     answer -EADDRINUSE, -EINVAL, -EIO or -ENOMEM and keep the cause
 *     (strerror, nng_strerror, gai_strerror) in err.
 *   - Exceptions, each handled where main calls it: workers_start and
 *     maint_start take no err (main says "cannot start threads"); open_store
 *     prints its own message and returns the store's KV_E* code or -errno;
 *     signals_open returns -1 with errno set, as signalfd does; parse_args
 *     prints its own message and returns an exit status (and exits by itself
 *     for --help, --version, --check and --format, the last two with
 *     device.c's status for a device). Two results are dropped: parse_args
 *     does not check config_set_listen for the default addresses (only
 *     -ENOMEM; config_check then finds fewer listeners or none), and maint.c's
 *     merge_tenant ignores kv_stats (on a failure the sizes it logs are
 *     junk).
 *   - kvd's exit status: 0 after a clean stop; 1 when the settings are wrong,
 *     start-up fails or closing the store fails; 2 for a usage error (unknown
 *     flag, stray argument, a bad --workers or --log-level, too many
 *     --listen). kvd --check: 0 nothing damaged, 1 damage found, 2 could not
 *     check.
 */
#ifndef KVD_KVD_H
#define KVD_KVD_H

#include <nng/nng.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "auth.h"
#include "config.h"
#include "kvengine.h"
#include "server.h"

struct kvd;
struct worker;
struct busy;
struct stream;
struct dedup;
struct uploads;
struct upload;

enum job_kind {
	JOB_REQUEST, /* a client request */
	JOB_ATTACH,  /* maintenance needs the owner to drive a tenant (merge barriers) */
	JOB_DETACH,
	JOB_ACTIVATED, /* activate.c: a tenant's activation ended (struct act_wait) */
};

struct job {
	enum job_kind kind;
	struct kvd *d;
	/* JOB_REQUEST: sends the reply (taking its bytes); the job is not
	 * touched by anyone after this returns. Set by the transport. */
	void (*reply)(struct job *j, struct rpc_reply *rp);
	/* JOB_REQUEST: the connection it came on, as an id that no other open
	 * connection has (for counting its unknown tokens), and in peer who is
	 * at its other end (for the log). Set by the transport. */
	uint64_t (*conn_of)(const struct job *j, char *peer, size_t len);
	void *sink;             /* the transport's: struct conn or struct sconn */
	const uint8_t *peer_cert; /* kv+tls://: the SHA-256 of the client's verified
	                             certificate (held by the connection); NULL: none */
	struct rpc_req req;
	nng_msg *msg;           /* nng: the request bytes req points into */
	uint8_t *body;          /* stream: the same, malloc'd */
	uint64_t deadline_ms;   /* monotonic; 0: none */
	/* writes */
	kv_tenant *t;
	struct busy *busy;
	struct kv_req kreq;
	struct kv_op *ops;
	size_t nops;
	struct job *dup_next;   /* repeats of this write waiting for its reply */
	struct upload *upload;  /* a blob request with the engine: its upload (upload.c) */
	bool live;              /* req and msg are held */
	bool end_conn;          /* the transport ends the connection after this reply
	                           (auth.c: too many unknown tokens) */
	/* metrics.c: when request_dispatch took it (CLOCK_MONOTONIC ns; 0: metrics are
	 * off) and its method (RPC_METHODS until the request decoded) */
	uint64_t start_ns;
	enum rpc_method mmethod;
	/* JOB_ATTACH / JOB_DETACH */
	char tenant[KV_TENANT_NAME_MAX + 1];
	sem_t *done;
	struct job *next;
};

/* What an epoll event's data.ptr points at in a worker's loop (NULL: the
 * worker's queue): the first member of whatever is watched. The loop calls
 * on_event with the events; NULL when waking the loop is all there is to do
 * (a busy tenant's engine event fd: the loop drives every busy tenant each
 * turn). The worker knows nothing else of what it watches. */
struct watch {
	void (*on_event)(struct worker *w, struct watch *self, uint32_t events);
};

/* One nng REP context: one request at a time. */
struct conn {
	struct kvd *d;
	nng_ctx ctx;
	nng_aio *aio;
	int state; /* CONN_RECV, CONN_DELAY, CONN_SEND */
	nng_msg *reply;
	struct job job;
};

struct kvd {
	struct kvd_config cfg;
	char config_path[4096];
	/* kvd --restore DIR --tenant NAME [--force] (restore.c) */
	const char *restore_dir;
	const char *restore_tenant;
	bool restore_force;
	bool config_from_file;
	bool log_level_from_flag; /* --log-level wins over the file, also on reload */
	kv_store *store;
	struct rpc_limits lim;
	struct auth auth; /* tokens and grants (auth.h); reloaded on SIGHUP */
	nng_socket sock;
	nng_listener listeners[KVD_LISTEN_MAX];
	const char *listener_url[KVD_LISTEN_MAX]; /* its address, in cfg.listen */
	int nlisteners;
	uint64_t listener_probed_ms[KVD_LISTEN_MAX]; /* last probe (listeners_watch) */
	_Atomic uint64_t listener_restarts;       /* listeners replaced (listeners_watch) */
	struct conn *conns;
	uint32_t nconns;
	struct stream *stream; /* stream.c's listeners and connections */
	struct worker *workers;
	struct activators *activators; /* activate.c */
	uint32_t nworkers;
	uint32_t nstarted; /* workers whose thread runs */
	pthread_t maint;
	bool maint_running;
	pthread_mutex_t maint_mu;
	pthread_cond_t maint_cv;
	struct job *maint_q, *maint_q_tail;
	struct merge_retry *retry; /* tenants whose automatic merges back off (maint.c) */
	size_t nretry, capretry;
	uint64_t tick_pass; /* tick_tenants passes so far */
	atomic_bool stopping;
	atomic_bool quit;       /* workers leave their loops */
	atomic_bool maint_quit; /* the maintenance thread leaves its loop */
	_Atomic uint64_t requests;
	_Atomic uint64_t in_flight;
	uint64_t start_ms;
	uint32_t reply_delay_ms; /* tests: hold every reply this long (KVD_TEST_REPLY_DELAY_MS) */
	uint32_t job_delay_ms;   /* tests: workers wait this long before each request
	                            (KVD_TEST_WORKER_DELAY_MS) */
	uint32_t compact_hold_ms; /* tests: Compact keeps its tenant attached this long
	                             before it merges (KVD_TEST_COMPACT_HOLD_MS) */
	uint32_t activate_hold_ms; /* tests: activators wait this long before each activation
	                              (KVD_TEST_ACTIVATE_HOLD_MS) */
	uint32_t write_delay_ms;  /* tests: a write of a key "kvd-test-delay..." is held this
	                             long past the fencing check (KVD_TEST_WRITE_DELAY_MS) */
	struct cluster *cluster; /* cluster.h: cluster mode; NULL: a single node */
	bool notify;            /* run by systemd (NOTIFY_SOCKET set) */
	uint64_t watchdog_usec;
};

/* The oldest time a worker last went round its loop (watchdog). */
uint64_t workers_oldest_beat(struct kvd *d);

/* listener.c */
int listeners_start(struct kvd *d, char *err, size_t errlen);
/* The open connections of each nng listen address (those of its replaced
 * ipc:// listeners still draining included), in cfg.listen order: up to
 * max; returns how many. Any thread. */
int listener_connections(struct kvd *d, const char **ret_url, uint32_t *ret_open, int max);
void listeners_close(struct kvd *d);  /* stop accepting connections */
/* Replaces listeners that stopped accepting (main thread, every second). */
void listeners_watch(struct kvd *d);
void conns_stop(struct kvd *d);       /* close the socket and free the contexts */

/* job.c */
/* Sends the job's reply through its transport (takes the reply's bytes). */
void job_reply(struct job *j, struct rpc_reply *rp);
void job_reply_error(struct job *j, uint64_t id, int status, const char *msg);
/* Frees the decoded request and its bytes (j->msg or j->body). */
void job_release(struct job *j);
/* Milliseconds of CLOCK_MONOTONIC. */
uint64_t now_ms(void);

/* request.c */
/* Decodes the request in body (which j->msg or j->body holds) and answers
 * it, queues it, or runs it at once when self (the calling worker, or
 * NULL) owns its tenant. Returns the worker that owns the request's tenant,
 * or -1 when none does (answered at once, or Compact). */
int request_dispatch(struct kvd *d, struct job *j, const void *body, size_t len,
                     struct worker *self);

/* stream.c: kvd's own framing on stream sockets (kv+ipc://, kv+tcp://) */
bool stream_url(const char *url);
/* Opens the kv+ listeners of the configuration and starts accepting. */
int stream_start(struct kvd *d, char *err, size_t errlen);
void stream_stop_accepting(struct kvd *d);
/* Flushes what is still queued (bounded) and closes every connection; after
 * workers_stop. */
void stream_stop(struct kvd *d);
/* The kv+ listeners' addresses and the connections open on each now, at
 * most max of them; returns how many (0 before stream_start). Any thread
 * while the transport runs. */
int stream_connections(struct kvd *d, const char **ret_url, uint32_t *ret_open, int max);
/* Who sent a stream job ("uid U pid P", "ADDRESS port P"), for the log;
 * valid while the job is. */

/* worker.c */
int workers_start(struct kvd *d);
void workers_stop(struct kvd *d);
uint32_t worker_of(const struct kvd *d, const char *tenant);
/* Queues a job on a worker; false when its queue is full. */
bool worker_post(struct kvd *d, uint32_t w, struct job *j);
uint32_t worker_id(const struct worker *w);
/* Runs a request now, on w's own thread (w owns its tenant). */
void worker_run(struct worker *w, struct job *j);
/* For upload.c and activate.c, on w's own thread: the daemon, the worker's
 * de-duplication table, upload table and parked requests; the busy entry of
 * t (watched, with a store reference; NULL when it cannot be watched), and a
 * write of it going in flight (+1) or answered (-1). */
struct kvd *worker_kvd(struct worker *w);
struct dedup *worker_dedup(struct worker *w);
struct uploads *worker_uploads(struct worker *w);
struct acts *worker_acts(struct worker *w); /* activate.c's */
struct busy *worker_busy(struct worker *w, kv_tenant *t);
void worker_busy_inflight(struct busy *b, int delta);
/* epoll_ctl on worker wi's loop: tag (a struct watch first) comes back to
 * its on_event. Any thread. */
int worker_watch(struct kvd *d, uint32_t wi, int op, int fd, uint32_t events, void *tag);

/* metrics.c: the Prometheus text-format endpoint (metrics_listen). The
 * counting calls are cheap and any thread's; they count nothing unless the
 * endpoint runs. */
/* Serves http://metrics_listen/metrics from its own thread; 0 at once when
 * metrics_listen is empty. On failure a one-line reason in err. */
int metrics_start(struct kvd *d, char *err, size_t errlen);
void metrics_stop(struct kvd *d);
/* A request arrived (len bytes); stamps j->start_ns. */
void metrics_request(struct job *j, size_t len);
/* Its reply (whole, about to be sent): method, status, latency, bytes. */
void metrics_reply(const struct job *j, const struct rpc_reply *rp);
/* A merge maintenance ran (ok: it finished), taking ms milliseconds. */
void metrics_merge(uint64_t ms, bool ok);
/* Blob uploads: one opened (+1) or ended (-1), and whether it was
 * aborted (by BlobAbort, idleness, its tenant's passivation, a failure). */
void metrics_upload(int open_delta, bool aborted);
/* Tenants whose automatic merges are held back after failures, now. */
void metrics_merge_backoff(uint32_t tenants);
/* The daemon-wide figures of a Stats reply (rpc_limits.figures; arg: the
 * struct kvd): connections always, requests and bytes while metrics are on. */
void metrics_figures(void *arg, struct rpc_daemon_fig *ret);

/* maint.c */
int maint_start(struct kvd *d);
void maint_stop(struct kvd *d);
void maint_post(struct kvd *d, struct job *j);

/* restore.c: kvd --restore (d->restore_dir, d->restore_tenant) on the open
 * store; the exit status (0 restored, 1 refused or failed, 2 usage). */
int restore_run(struct kvd *d);

#endif
