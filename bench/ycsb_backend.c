/*
 * bench/ycsb_backend.c — kvbench ycsb's backends (see ycsb_backend.h).
 *
 * Every database is fresh: a new kvd tenant, a new redis-server with its own
 * directory, or a new embedded database directory; close removes it. What
 * each backend does per operation:
 *
 *   kvd     read: kvc_get (the value arrives in a malloc'd copy, freed);
 *           update, insert: kvc_put, unconditional; scan: kvc_scan_open
 *           from the start key with limit = page_size = count (one round
 *           trip), values included. One libkvclient handle shared by the
 *           run's threads with threads + 2 contexts, as `kvbench rpc` does
 *           (over nng one socket and connection; over kv+ipc/kv+tcp the
 *           library's pool, a connection per call in flight). The tenant is created with
 *           TenantCreate (sync=always|interval|none, sync_interval_ms) and
 *           dropped with TenantDrop.
 *   redis   read: GET; update: SET of the whole record; insert: SET and
 *           ZADD _indices 0 key, pipelined (one round trip, two replies);
 *           scan: ZRANGEBYLEX _indices [start + LIMIT 0 count, then MGET of
 *           the keys it returned (two round trips). The sorted set has one
 *           score, so it is ordered by the keys' bytes as the other
 *           backends' scans are. (YCSB's own redis binding stores a record
 *           as a hash, HMSET/HGETALL, indexes keys by the Java hashCode of
 *           the key as score, ZRANGEBYSCORE, and reads the scanned records
 *           one HGETALL at a time.) A hiredis connection per client thread.
 *   embedded  read: the peer's get (buf NULL) or get_copy; update, insert:
 *           put; scan: scan_count (engine-dev as engine, its database a
 *           store's tenant on yb_env.device). sync=interval: the engine's own
 *           KV_SYNC_INTERVAL; for the others a thread of this file calls the
 *           peer's sync (an fdatasync of its log) every sync_interval_ms.
 *
 * Threads: see ycsb_backend.h. The embedded syncer thread is the only one
 * this file starts; close joins it.
 */
#include "ycsb_backend.h"

#include "kvclient.h"
#include "peers.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifdef KVB_HAVE_HIREDIS
#include <hiredis/hiredis.h>
#endif

#define YB_CALL_TIMEOUT_MS   10000      /* every kvd and redis call's deadline */
#define YB_START_TIMEOUT_MS  15000      /* a server answers within this after its start */
#define YB_KVD_CONTEXT_SLACK 2          /* kvd: contexts = threads + this */
#define YB_REDIS_INDEX       "_indices" /* the scan index, named as YCSB's binding names it */
#define YB_REDIS_EVERYSEC_MS 1000       /* appendfsync everysec's period */

struct yb_db {
	const struct yb_backend *b;
	struct yb_env *env;
	struct yb_config cfg;
	char info[1024]; /* describe() */
	/* kvd */
	kvc *c;
	const char *url;
	char tenant[72];
	/* redis */
	struct bench_proc redis;
	bool redis_started;
	bool tcp;
	int port;
	char dir[YB_PATH_MAX];
	char sock[YB_PATH_MAX];
	/* embedded */
	const struct peer_backend *pb;
	struct peer *peer;
	pthread_t syncer;
	bool syncer_started;
	pthread_mutex_t mu; /* guards stop, syncs and sync_err */
	pthread_cond_t cv;
	bool stop;
	uint64_t syncs;
	char sync_err[YB_ERR_MAX];
};

const char *yb_sync_name(enum yb_sync s)
{
	return s == YB_SYNC_ALWAYS ? "always" : s == YB_SYNC_INTERVAL ? "interval" : "none";
}

static void yb_errf(char *err, size_t len, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

static void yb_errf(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL || len == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* ==== kvd ================================================================== */

static int kvc_connect(const char *url, uint32_t contexts, kvc **ret, char *err, size_t errlen)
{
	struct kvc_options o;
	struct kvc_status st;
	struct kvc_call call = {.timeout_ms = YB_CALL_TIMEOUT_MS, .status = &st};
	struct kvc_health h;
	kvc *c;
	int rv;

	kvc_options_init(&o);
	o.endpoint = url;
	o.timeout_ms = YB_CALL_TIMEOUT_MS;
	o.contexts = contexts;
	if ((rv = kvc_open(&o, &c)) != 0) {
		yb_errf(err, errlen, "kvc_open %s: %s", url, kvc_code_name(rv));
		return -1;
	}
	/* connected before anything is timed; a kvd given with --endpoint may
	 * still be starting */
	for (int i = 0;; i++) {
		if ((rv = kvc_health(c, &call, &h)) == 0)
			break;
		if (i * 20 >= YB_START_TIMEOUT_MS) {
			yb_errf(err, errlen, "Health on %s: %s: %s", url, kvc_code_name(rv),
			        st.message);
			kvc_close(c);
			return -1;
		}
		sleep_ms(20);
	}
	*ret = c;
	return 0;
}

/* Starts the run's kvd (once): ipc:// and tcp://127.0.0.1 listeners (nng),
 * or with env->stream kv+ipc:// and kv+tcp://127.0.0.1 (kvd's stream
 * framing); a data directory of its own, a config file that sets nothing. */
static int kvd_env_up(struct yb_env *env, char *err, size_t errlen)
{
	struct kvd_run *k = &env->kvd;
	char e[512];
	struct kvc_daemon_stats ds;
	kvc *c = NULL;

	if (env->endpoint != NULL || env->kvd_started)
		return 0;
	memset(k, 0, sizeof(*k));
	k->bin = env->kvd_path;
	k->dir = env->base;
	/* tenants are created with their settings by TenantCreate */
	k->config_text = "[kvd]\n";
	k->listen = env->stream ? KVD_RUN_LISTEN(KVD_RUN_KVIPC) | KVD_RUN_LISTEN(KVD_RUN_KVTCP)
	                        : KVD_RUN_LISTEN(KVD_RUN_IPC) | KVD_RUN_LISTEN(KVD_RUN_TCP);
	k->die_with_parent = true;
	bench_fmt(k->data, sizeof k->data, "%s/kvd-data", env->base);
	if (kvd_run_spawn(k, e, sizeof e) != 0) {
		yb_errf(err, errlen, "starting kvd: %s", e);
		return -1;
	}
	env->kvd_started = true;
	if (kvd_run_wait(k, e, sizeof e) != 0) {
		yb_errf(err, errlen, "%s", e);
		return -1;
	}
	if (kvc_connect(k->health_url, 1, &c, err, errlen) != 0)
		return -1;
	if (kvc_stats_daemon(c, NULL, &ds) == 0) {
		bench_fmt(env->kvd_version, sizeof env->kvd_version, "%s", ds.version);
		env->kvd_workers = ds.workers;
	}
	kvc_close(c);
	return 0;
}

int yb_kvd_url(struct yb_env *env, bool tcp, const char **ret, char *err, size_t errlen)
{
	if (kvd_env_up(env, err, errlen) != 0)
		return -1;
	*ret = env->endpoint != NULL ? env->endpoint
	       : tcp                 ? env->kvd.url[env->stream ? KVD_RUN_KVTCP : KVD_RUN_TCP]
	                             : env->kvd.url[env->stream ? KVD_RUN_KVIPC : KVD_RUN_IPC];
	return 0;
}

int yb_env_fini(struct yb_env *env, char *err, size_t errlen)
{
	if (!env->kvd_started)
		return 0;
	env->kvd_started = false;
	if (kvd_run_stop(&env->kvd, err, errlen) != 0)
		return -1;
	return 0;
}

static const char *kvd_unavailable(const struct yb_backend *b, const struct yb_env *env)
{
	bool ipc = strcmp(b->name, "kvd-ipc") == 0;

	if (env->endpoint != NULL) {
		bool is_ipc = strncmp(env->endpoint, "ipc://", 6) == 0 ||
		              strncmp(env->endpoint, "kv+ipc://", 9) == 0;
		if (ipc != is_ipc)
			return ipc ? "--endpoint is not an ipc:// or kv+ipc:// URL"
			           : "--endpoint is an ipc:// or kv+ipc:// URL";
		return NULL;
	}
	return env->kvd_path == NULL ? "kvd binary not found (give it with --kvd PATH)" : NULL;
}

static enum kvc_sync kvd_sync(enum yb_sync s)
{
	return s == YB_SYNC_ALWAYS     ? KVC_SYNC_ALWAYS
	       : s == YB_SYNC_INTERVAL ? KVC_SYNC_INTERVAL
	                               : KVC_SYNC_NONE;
}

static int kvd_open(const struct yb_backend *b, struct yb_env *env, const struct yb_config *cfg,
                    struct yb_db **ret, char *err, size_t errlen)
{
	struct kvc_tenant_opts to = {.sync = kvd_sync(cfg->sync)};
	struct kvc_tenant_info ti;
	struct kvc_status st;
	struct kvc_call call = {.timeout_ms = YB_CALL_TIMEOUT_MS, .status = &st};
	struct yb_db *db;
	const char *url;
	int rv;

	if (yb_kvd_url(env, strcmp(b->name, "kvd-tcp") == 0, &url, err, errlen) != 0)
		return -1;
	if ((db = calloc(1, sizeof(*db))) == NULL) {
		yb_errf(err, errlen, "out of memory");
		return -1;
	}
	db->b = b;
	db->env = env;
	db->cfg = *cfg;
	db->url = url;
	if (kvc_connect(db->url, cfg->threads + YB_KVD_CONTEXT_SLACK, &db->c, err, errlen) != 0)
		goto fail;
	bench_fmt(db->tenant, sizeof db->tenant, "%s-%ld-%u", cfg->name ? cfg->name : "ycsb",
	          (long)getpid(), ++env->seq);
	if (cfg->sync == YB_SYNC_INTERVAL)
		to.sync_interval_ms = cfg->sync_interval_ms;
	to.history = cfg->history;
	if ((rv = kvc_tenant_create(db->c, &call, db->tenant, &to)) != 0) {
		yb_errf(err, errlen, "TenantCreate %s: %s: %s", db->tenant, kvc_code_name(rv),
		        st.message);
		db->tenant[0] = '\0';
		goto fail;
	}
	if (env->kvd_version[0] == '\0') {
		struct kvc_daemon_stats ds;
		if (kvc_stats_daemon(db->c, &call, &ds) == 0) {
			bench_fmt(env->kvd_version, sizeof env->kvd_version, "%s", ds.version);
			env->kvd_workers = ds.workers;
		}
	}
	if ((rv = kvc_tenant_info(db->c, &call, db->tenant, &ti)) != 0) {
		yb_errf(err, errlen, "TenantInfo %s: %s: %s", db->tenant, kvc_code_name(rv),
		        st.message);
		goto fail;
	}
	if (ti.sync != to.sync) {
		yb_errf(err, errlen, "tenant %s has sync %d, not the %s asked for", db->tenant,
		        (int)ti.sync, yb_sync_name(cfg->sync));
		goto fail;
	}
	if (cfg->history != 0 && ti.history != cfg->history) {
		yb_errf(err, errlen, "tenant %s keeps %u versions, not the %u asked for",
		        db->tenant, ti.history, cfg->history);
		goto fail;
	}
	{
		char sync[64];
		if (cfg->sync == YB_SYNC_INTERVAL)
			bench_fmt(sync, sizeof sync, "interval, sync_interval_ms %u",
			          cfg->sync_interval_ms);
		else
			bench_fmt(sync, sizeof sync, "%s", yb_sync_name(cfg->sync));
		if (cfg->history != 0)
			bench_fmt(sync + strlen(sync), sizeof sync - strlen(sync), " history=%u",
			          cfg->history);
		bench_fmt(db->info, sizeof db->info,
		          "kvd %s on %s%s, tenant %s (TenantCreate sync=%s, confirmed by "
		          "TenantInfo); one libkvclient handle shared by %u threads, %u contexts",
		          env->kvd_version[0] ? env->kvd_version : "(given)", db->url,
		          env->endpoint != NULL ? " (--endpoint)" : "", db->tenant, sync,
		          cfg->threads, cfg->threads + YB_KVD_CONTEXT_SLACK);
	}
	*ret = db;
	return 0;
fail:
	b->close(db, NULL, 0);
	return -1;
}

static int kvd_close(struct yb_db *db, char *err, size_t errlen)
{
	struct kvc_status st;
	struct kvc_call call = {.timeout_ms = 60000, .status = &st};
	int rv = 0;

	if (db == NULL)
		return 0;
	if (db->c != NULL && db->tenant[0] != '\0' &&
	    (rv = kvc_tenant_drop(db->c, &call, db->tenant)) != 0) {
		yb_errf(err, errlen, "TenantDrop %s: %s: %s", db->tenant, kvc_code_name(rv),
		        st.message);
		rv = -1;
	}
	kvc_close(db->c);
	free(db);
	return rv;
}

static int kvd_worker_init(struct yb_worker *w)
{
	w->priv = NULL; /* the handle is the database's */
	return 0;
}

static void kvd_worker_fini(struct yb_worker *w)
{
	(void)w;
}

static int kvd_read(struct yb_worker *w, const char *key, size_t key_len, void *buf, size_t cap,
                    size_t *ret_len)
{
	struct kvc_status st;
	struct kvc_call call = {.tenant = w->db->tenant, .status = &st};
	struct kvc_value v;
	int rv = kvc_get(w->db->c, &call, key, key_len, 0, 0, &v);

	if (rv == -KVC_NOT_FOUND)
		return YB_NOTFOUND;
	if (rv != 0) {
		yb_errf(w->err, sizeof w->err, "Get: %s: %s", kvc_code_name(rv), st.message);
		return -1;
	}
	if (buf != NULL)
		memcpy(buf, v.data, v.len < cap ? v.len : cap);
	*ret_len = v.len;
	kvc_value_free(&v);
	return YB_FOUND;
}

static int kvd_write(struct yb_worker *w, const char *key, size_t key_len, const void *value,
                     size_t value_len)
{
	struct kvc_status st;
	struct kvc_call call = {.tenant = w->db->tenant, .status = &st};
	int rv = kvc_put(w->db->c, &call, key, key_len, value, value_len, NULL, NULL);

	if (rv != 0) {
		yb_errf(w->err, sizeof w->err, "Put: %s: %s", kvc_code_name(rv), st.message);
		return -1;
	}
	return 0;
}

static int kvd_scan(struct yb_worker *w, const char *start, size_t start_len, uint64_t count,
                    size_t value_size, uint64_t *ret_records, uint64_t *ret_wrong)
{
	struct kvc_status st;
	struct kvc_call call = {.tenant = w->db->tenant, .status = &st};
	struct kvc_scan_opts o = {
	        .start = start,
	        .start_len = start_len,
	        .limit = count,
	        .page_size = count > UINT32_MAX ? UINT32_MAX : (uint32_t)count,
	};
	struct kvc_item it;
	uint64_t n = 0, wrong = 0;
	kvc_iter *iter;
	int rv;

	if ((rv = kvc_scan_open(w->db->c, &call, &o, &iter)) != 0) {
		yb_errf(w->err, sizeof w->err, "Scan: %s: %s", kvc_code_name(rv), st.message);
		return -1;
	}
	while ((rv = kvc_scan_next(iter, &it)) == 0) {
		n++;
		if (it.value_len != value_size)
			wrong++;
	}
	kvc_scan_close(iter);
	if (rv < 0) {
		yb_errf(w->err, sizeof w->err, "Scan: %s", kvc_code_name(rv));
		return -1;
	}
	*ret_records = n;
	*ret_wrong = wrong;
	return 0;
}

static int kvd_versions(struct yb_worker *w, const char *key, size_t key_len, uint32_t m,
                        size_t value_size, void *buf, uint32_t *ret_count, uint32_t *ret_wrong)
{
	struct kvc_status st;
	struct kvc_call call = {.tenant = w->db->tenant, .status = &st};
	struct kvc_version *list = NULL;
	uint32_t wrong = 0;
	size_t n = 0;
	int rv = kvc_versions(w->db->c, &call, key, key_len, m, 0, true, &list, &n, NULL);

	if (rv != 0) {
		yb_errf(w->err, sizeof w->err, "Versions: %s: %s", kvc_code_name(rv), st.message);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		if (i >= m || list[i].deleted || list[i].data == NULL || list[i].len != value_size)
			wrong++;
		else
			memcpy((char *)buf + i * value_size, list[i].data, value_size);
	}
	kvc_versions_free(list, n);
	*ret_count = n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
	*ret_wrong = wrong;
	return 0;
}

static int kvd_counters(struct yb_db *db, struct yb_counters *ret, char *err, size_t errlen)
{
	struct kvc_status st;
	struct kvc_call call = {.tenant = db->tenant, .status = &st};
	struct kvc_tenant_info ti;
	int rv = kvc_stats(db->c, &call, &ti);

	if (rv != 0) {
		yb_errf(err, errlen, "Stats %s: %s: %s", db->tenant, kvc_code_name(rv), st.message);
		return -1;
	}
	ret->batches = ti.batches;
	ret->writes = ti.batched_writes;
	ret->syncs = ti.syncs;
	return 0;
}

/* ==== redis =================================================================== */

#ifdef KVB_HAVE_HIREDIS

/* Whether the process exited (reaps it, as rpc.c's helper does). */
static bool proc_gone(struct bench_proc *p)
{
	int st;

	if (p->pid <= 0)
		return true;
	if (waitpid(p->pid, &st, WNOHANG) == p->pid) {
		p->status = st;
		p->pid = -p->pid;
		return true;
	}
	return false;
}

struct redis_worker {
	redisContext *rc;
	const char **argv; /* MGET arguments */
	size_t *argvlen;
	size_t cap;
};

static redisContext *redis_connect(const struct yb_db *db, char *err, size_t errlen)
{
	struct timeval tv = {.tv_sec = YB_CALL_TIMEOUT_MS / 1000};
	redisContext *rc = db->tcp ? redisConnectWithTimeout("127.0.0.1", db->port, tv)
	                           : redisConnectUnixWithTimeout(db->sock, tv);

	if (rc == NULL) {
		yb_errf(err, errlen, "redis: out of memory");
		return NULL;
	}
	if (rc->err != 0) {
		yb_errf(err, errlen, "redis connect %s: %s", db->tcp ? "tcp" : db->sock,
		        rc->errstr);
		redisFree(rc);
		return NULL;
	}
	if (redisSetTimeout(rc, tv) != REDIS_OK) {
		yb_errf(err, errlen, "redisSetTimeout: %s", rc->errstr);
		redisFree(rc);
		return NULL;
	}
	return rc;
}

/* A reply's error in err; frees it. Returns -1. */
static int redis_fail(redisContext *rc, redisReply *r, const char *what, char *err, size_t errlen)
{
	if (r == NULL)
		yb_errf(err, errlen, "redis %s: %s", what, rc->errstr[0] ? rc->errstr : "no reply");
	else if (r->type == REDIS_REPLY_ERROR)
		yb_errf(err, errlen, "redis %s: %s", what, r->str);
	else
		yb_errf(err, errlen, "redis %s: unexpected reply type %d", what, r->type);
	if (r != NULL)
		freeReplyObject(r);
	return -1;
}

static const char *redis_unavailable(const struct yb_backend *b, const struct yb_env *env)
{
	(void)b;
	return env->redis_path == NULL
	               ? "not found (no redis-server in PATH; give it with --redis-server PATH)"
	               : NULL;
}

static const char *redis_appendfsync(enum yb_sync s)
{
	return s == YB_SYNC_ALWAYS ? "always" : s == YB_SYNC_INTERVAL ? "everysec" : "no";
}

static int redis_close(struct yb_db *db, char *err, size_t errlen)
{
	int rv = 0;

	if (db == NULL)
		return 0;
	if (db->redis_started) {
		char e[512];
		if (bench_proc_stop(&db->redis, e, sizeof e) != 0) {
			yb_errf(err, errlen, "redis-server: %s", e);
			rv = -1;
		}
	}
	if (db->dir[0] != '\0')
		bench_rmtree(db->dir);
	if (db->sock[0] != '\0')
		unlink(db->sock);
	free(db);
	return rv;
}

static int redis_open(const struct yb_backend *b, struct yb_env *env, const struct yb_config *cfg,
                      struct yb_db **ret, char *err, size_t errlen)
{
	char port[16], log[YB_PATH_MAX + 16], e[512];
	const char *args[24];
	redisContext *rc = NULL;
	redisReply *r = NULL;
	struct yb_db *db;
	size_t n = 0;

	if (cfg->sync == YB_SYNC_INTERVAL && cfg->sync_interval_ms != YB_REDIS_EVERYSEC_MS) {
		yb_errf(err, errlen,
		        "redis syncs every %d ms (appendfsync everysec), not every %u ms",
		        YB_REDIS_EVERYSEC_MS, cfg->sync_interval_ms);
		return -1;
	}
	if ((db = calloc(1, sizeof(*db))) == NULL) {
		yb_errf(err, errlen, "out of memory");
		return -1;
	}
	db->b = b;
	db->env = env;
	db->cfg = *cfg;
	db->tcp = strcmp(b->name, "redis-tcp") == 0;
	if ((db->port = kvd_run_free_port()) < 0) {
		yb_errf(err, errlen, "no free TCP port: %s", strerror(-db->port));
		goto fail;
	}
	env->seq++;
	bench_fmt(db->dir, sizeof db->dir, "%s/redis-%u", env->base, env->seq);
	bench_fmt(db->sock, sizeof db->sock, "%s/redis-%u.sock", env->base, env->seq);
	bench_fmt(log, sizeof log, "%s/redis-%u.log", env->base, env->seq);
	if (mkdir(db->dir, 0755) != 0) {
		yb_errf(err, errlen, "mkdir %s: %s", db->dir, strerror(errno));
		db->dir[0] = '\0';
		goto fail;
	}
	bench_fmt(port, sizeof port, "%d", db->port);
	args[n++] = "--port";
	args[n++] = port;
	args[n++] = "--bind";
	args[n++] = "127.0.0.1";
	args[n++] = "--unixsocket";
	args[n++] = db->sock;
	args[n++] = "--unixsocketperm";
	args[n++] = "700";
	args[n++] = "--dir";
	args[n++] = db->dir;
	args[n++] = "--appendonly";
	args[n++] = "yes";
	args[n++] = "--appendfsync";
	args[n++] = redis_appendfsync(cfg->sync);
	args[n++] = "--save";
	args[n++] = "";
	args[n++] = "--daemonize";
	args[n++] = "no";
	args[n] = NULL;
	if (bench_proc_start(&db->redis, env->redis_path, args, log, e, sizeof e) != 0) {
		yb_errf(err, errlen, "starting redis-server: %s", e);
		goto fail;
	}
	db->redis_started = true;
	bench_fmt(env->redis_command, sizeof env->redis_command, "%s", db->redis.command);
	/* ready when it answers PING on the socket the workers will use */
	for (int i = 0;; i++) {
		if (proc_gone(&db->redis)) {
			yb_errf(err, errlen, "redis-server exited at start (log: %s)", log);
			goto fail;
		}
		if ((rc = redis_connect(db, e, sizeof e)) != NULL) {
			r = redisCommand(rc, "PING");
			if (r != NULL && r->type == REDIS_REPLY_STATUS &&
			    strcmp(r->str, "PONG") == 0)
				break;
			if (r != NULL)
				freeReplyObject(r);
			r = NULL;
			redisFree(rc);
			rc = NULL;
		}
		if (i * 20 >= YB_START_TIMEOUT_MS) {
			yb_errf(err, errlen, "redis-server did not answer PING within %d s: %s",
			        YB_START_TIMEOUT_MS / 1000, e);
			goto fail;
		}
		sleep_ms(20);
	}
	freeReplyObject(r);
	r = redisCommand(rc, "INFO server");
	if (r != NULL && r->type == REDIS_REPLY_STRING) {
		const char *v = strstr(r->str, "redis_version:");
		if (v != NULL) {
			v += strlen("redis_version:");
			bench_fmt(env->redis_version, sizeof env->redis_version, "%.*s",
			          (int)strcspn(v, "\r\n"), v);
		}
	}
	if (r != NULL)
		freeReplyObject(r);
	redisFree(rc);
	bench_fmt(db->info, sizeof db->info,
	          "redis-server %s (appendonly yes, appendfsync %s, no RDB snapshots, other "
	          "settings default): %s; hiredis %d.%d.%d, a connection per client thread "
	          "over %s",
	          env->redis_version, redis_appendfsync(cfg->sync), db->redis.command,
	          HIREDIS_MAJOR, HIREDIS_MINOR, HIREDIS_PATCH,
	          db->tcp ? "TCP 127.0.0.1" : "its Unix socket");
	*ret = db;
	return 0;
fail:
	redis_close(db, NULL, 0);
	return -1;
}

static int redis_worker_init(struct yb_worker *w)
{
	struct redis_worker *rw = calloc(1, sizeof(*rw));

	if (rw == NULL) {
		yb_errf(w->err, sizeof w->err, "out of memory");
		return -1;
	}
	if ((rw->rc = redis_connect(w->db, w->err, sizeof w->err)) == NULL) {
		free(rw);
		return -1;
	}
	w->priv = rw;
	return 0;
}

static void redis_worker_fini(struct yb_worker *w)
{
	struct redis_worker *rw = w->priv;

	if (rw == NULL)
		return;
	redisFree(rw->rc);
	free(rw->argv);
	free(rw->argvlen);
	free(rw);
	w->priv = NULL;
}

static int redis_read(struct yb_worker *w, const char *key, size_t key_len, void *buf, size_t cap,
                      size_t *ret_len)
{
	struct redis_worker *rw = w->priv;
	redisReply *r = redisCommand(rw->rc, "GET %b", key, key_len);

	if (r != NULL && r->type == REDIS_REPLY_NIL) {
		freeReplyObject(r);
		return YB_NOTFOUND;
	}
	if (r == NULL || r->type != REDIS_REPLY_STRING)
		return redis_fail(rw->rc, r, "GET", w->err, sizeof w->err);
	if (buf != NULL)
		memcpy(buf, r->str, r->len < cap ? r->len : cap);
	*ret_len = r->len;
	freeReplyObject(r);
	return YB_FOUND;
}

static int redis_update(struct yb_worker *w, const char *key, size_t key_len, const void *value,
                        size_t value_len)
{
	struct redis_worker *rw = w->priv;
	redisReply *r = redisCommand(rw->rc, "SET %b %b", key, key_len, value, value_len);

	if (r == NULL || r->type != REDIS_REPLY_STATUS)
		return redis_fail(rw->rc, r, "SET", w->err, sizeof w->err);
	freeReplyObject(r);
	return 0;
}

static int redis_insert(struct yb_worker *w, const char *key, size_t key_len, const void *value,
                        size_t value_len)
{
	struct redis_worker *rw = w->priv;
	redisReply *r = NULL;
	void *reply;
	int rv = 0;

	if (redisAppendCommand(rw->rc, "SET %b %b", key, key_len, value, value_len) != REDIS_OK ||
	    redisAppendCommand(rw->rc, "ZADD " YB_REDIS_INDEX " 0 %b", key, key_len) != REDIS_OK)
		return redis_fail(rw->rc, NULL, "SET+ZADD", w->err, sizeof w->err);
	/* both replies are read, even after a failure, to keep the connection in step */
	if (redisGetReply(rw->rc, &reply) != REDIS_OK)
		return redis_fail(rw->rc, NULL, "SET", w->err, sizeof w->err);
	r = reply;
	if (r->type != REDIS_REPLY_STATUS)
		rv = redis_fail(rw->rc, r, "SET", w->err, sizeof w->err);
	else
		freeReplyObject(r);
	if (redisGetReply(rw->rc, &reply) != REDIS_OK)
		return redis_fail(rw->rc, NULL, "ZADD", w->err, sizeof w->err);
	r = reply;
	if (r->type != REDIS_REPLY_INTEGER)
		return redis_fail(rw->rc, r, "ZADD", w->err, sizeof w->err);
	freeReplyObject(r);
	return rv;
}

static int redis_scan(struct yb_worker *w, const char *start, size_t start_len, uint64_t count,
                      size_t value_size, uint64_t *ret_records, uint64_t *ret_wrong)
{
	struct redis_worker *rw = w->priv;
	char min[YB_PATH_MAX];
	redisReply *keys, *vals;
	uint64_t wrong = 0;
	size_t n;

	if (start_len + 1 > sizeof min) {
		yb_errf(w->err, sizeof w->err, "scan start key of %zu bytes", start_len);
		return -1;
	}
	min[0] = '[';
	memcpy(min + 1, start, start_len);
	keys = redisCommand(rw->rc, "ZRANGEBYLEX " YB_REDIS_INDEX " %b + LIMIT 0 %llu", min,
	                    start_len + 1, (unsigned long long)count);
	if (keys == NULL || keys->type != REDIS_REPLY_ARRAY)
		return redis_fail(rw->rc, keys, "ZRANGEBYLEX", w->err, sizeof w->err);
	n = keys->elements;
	if (n == 0) {
		freeReplyObject(keys);
		*ret_records = 0;
		*ret_wrong = 0;
		return 0;
	}
	if (n + 1 > rw->cap) {
		const char **a = realloc(rw->argv, (n + 1) * sizeof(*a));
		size_t *l = a != NULL ? realloc(rw->argvlen, (n + 1) * sizeof(*l)) : NULL;
		if (a != NULL)
			rw->argv = a;
		if (l != NULL)
			rw->argvlen = l;
		if (a == NULL || l == NULL) {
			freeReplyObject(keys);
			yb_errf(w->err, sizeof w->err, "out of memory");
			return -1;
		}
		rw->cap = n + 1;
	}
	rw->argv[0] = "MGET";
	rw->argvlen[0] = 4;
	for (size_t i = 0; i < n; i++) {
		rw->argv[i + 1] = keys->element[i]->str;
		rw->argvlen[i + 1] = keys->element[i]->len;
	}
	vals = redisCommandArgv(rw->rc, (int)(n + 1), rw->argv, rw->argvlen);
	freeReplyObject(keys);
	if (vals == NULL || vals->type != REDIS_REPLY_ARRAY || vals->elements != n)
		return redis_fail(rw->rc, vals, "MGET", w->err, sizeof w->err);
	for (size_t i = 0; i < n; i++)
		if (vals->element[i]->type != REDIS_REPLY_STRING ||
		    vals->element[i]->len != value_size)
			wrong++;
	freeReplyObject(vals);
	*ret_records = n;
	*ret_wrong = wrong;
	return 0;
}

#else /* !KVB_HAVE_HIREDIS */

static const char *redis_unavailable(const struct yb_backend *b, const struct yb_env *env)
{
	(void)b;
	(void)env;
	return "not built (libhiredis-dev was missing at configure time)";
}

#endif

/* ==== embedded ================================================================= */

static const char *emb_unavailable(const struct yb_backend *b, const struct yb_env *env)
{
	const struct peer_backend *pb = peer_find(b->peer);

	if (pb == NULL || !peer_built(pb))
		return "not built (its library was missing at configure time)";
	if (pb->device && env->device == NULL)
		return "needs a device to format (--device PATH --yes-format)";
	if (pb->get_copy == NULL || pb->scan_count == NULL)
		return "its bench/peers.h backend lacks get_copy or scan_count";
	return NULL;
}

/* sync=interval for a peer that has no such mode: its sync every period. */
static void *emb_syncer_main(void *arg)
{
	struct yb_db *db = arg;
	struct timespec next;

	clock_gettime(CLOCK_MONOTONIC, &next);
	pthread_mutex_lock(&db->mu);
	while (!db->stop) {
		char e[YB_ERR_MAX];
		int rv;
		next.tv_sec += db->cfg.sync_interval_ms / 1000;
		next.tv_nsec += (long)(db->cfg.sync_interval_ms % 1000) * 1000000L;
		if (next.tv_nsec >= 1000000000L) {
			next.tv_sec++;
			next.tv_nsec -= 1000000000L;
		}
		while (!db->stop && pthread_cond_timedwait(&db->cv, &db->mu, &next) != ETIMEDOUT)
			;
		if (db->stop)
			break;
		pthread_mutex_unlock(&db->mu);
		rv = db->pb->sync(db->peer, e, sizeof e);
		pthread_mutex_lock(&db->mu);
		db->syncs++;
		if (rv != 0 && db->sync_err[0] == '\0')
			bench_fmt(db->sync_err, sizeof db->sync_err, "%s", e);
	}
	pthread_mutex_unlock(&db->mu);
	return NULL;
}

static int emb_close(struct yb_db *db, char *err, size_t errlen)
{
	int rv = 0;

	if (db == NULL)
		return 0;
	if (db->syncer_started) {
		pthread_mutex_lock(&db->mu);
		db->stop = true;
		pthread_cond_broadcast(&db->cv);
		pthread_mutex_unlock(&db->mu);
		pthread_join(db->syncer, NULL);
		if (db->sync_err[0] != '\0') {
			yb_errf(err, errlen, "background sync: %s", db->sync_err);
			rv = -1;
		}
	}
	if (db->peer != NULL)
		db->pb->close(db->peer);
	pthread_cond_destroy(&db->cv);
	pthread_mutex_destroy(&db->mu);
	if (db->dir[0] != '\0')
		bench_rmtree(db->dir);
	free(db);
	return rv;
}

static int emb_open(const struct yb_backend *b, struct yb_env *env, const struct yb_config *cfg,
                    struct yb_db **ret, char *err, size_t errlen)
{
	struct peer_config pc = {
	        .sync = cfg->sync == YB_SYNC_ALWAYS,
	        .num = cfg->records,
	        .key_size = cfg->key_size,
	        .value_size = cfg->value_size,
	};
	char version[256] = "", io[256] = "", sync[256];
	pthread_condattr_t ca;
	struct yb_db *db;

	if ((db = calloc(1, sizeof(*db))) == NULL) {
		yb_errf(err, errlen, "out of memory");
		return -1;
	}
	db->b = b;
	db->env = env;
	db->cfg = *cfg;
	db->pb = peer_find(b->peer);
	pthread_mutex_init(&db->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&db->cv, &ca);
	pthread_condattr_destroy(&ca);
	if (cfg->path != NULL)
		bench_fmt(db->dir, sizeof db->dir, "%s", cfg->path);
	else
		bench_fmt(db->dir, sizeof db->dir, "%s/%s-%u", env->base, b->name, ++env->seq);
	pc.path = db->dir;
	if (db->pb->device) {
		pc.device = env->device;
		pc.device_force = env->device_force || env->device_formatted;
	}
	/* the engine has an interval mode of its own; the others get a syncer */
	if (cfg->sync == YB_SYNC_INTERVAL && db->pb->sync == NULL)
		pc.sync_interval_ms = cfg->sync_interval_ms;
	if (db->pb->open(&pc, &db->peer, err, errlen) != 0) {
		db->peer = NULL;
		goto fail;
	}
	if (db->pb->device)
		env->device_formatted = true;
	if (cfg->sync == YB_SYNC_INTERVAL && db->pb->sync != NULL) {
		if (pthread_create(&db->syncer, NULL, emb_syncer_main, db) != 0) {
			yb_errf(err, errlen, "pthread_create of the syncer failed");
			goto fail;
		}
		db->syncer_started = true;
	}
	db->pb->version(version, sizeof version);
	if (db->pb->describe != NULL)
		db->pb->describe(db->peer, io, sizeof io);
	if (cfg->sync == YB_SYNC_ALWAYS)
		bench_fmt(sync, sizeof sync, "sync=always: every write synced before it returns");
	else if (cfg->sync == YB_SYNC_NONE)
		bench_fmt(sync, sizeof sync, "sync=none: never synced by the benchmark");
	else if (db->pb->sync == NULL)
		bench_fmt(sync, sizeof sync, "sync=interval: its own, every %u ms",
		          cfg->sync_interval_ms);
	else
		bench_fmt(sync, sizeof sync,
		          "sync=interval: writes unsynced, a thread syncs the log every %u ms",
		          cfg->sync_interval_ms);
	bench_fmt(db->info, sizeof db->info, "%s; %s; %s%s%s", version, db->pb->settings, sync,
	          io[0] ? "; " : "", io);
	*ret = db;
	return 0;
fail:
	emb_close(db, NULL, 0);
	return -1;
}

static int emb_worker_init(struct yb_worker *w)
{
	struct peer_worker *pw = calloc(1, sizeof(*pw));

	if (pw == NULL) {
		yb_errf(w->err, sizeof w->err, "out of memory");
		return -1;
	}
	pw->db = w->db->peer;
	if (w->db->pb->worker_init != NULL && w->db->pb->worker_init(pw) != 0) {
		yb_errf(w->err, sizeof w->err, "%s", pw->err);
		free(pw);
		return -1;
	}
	w->priv = pw;
	return 0;
}

static void emb_worker_fini(struct yb_worker *w)
{
	struct peer_worker *pw = w->priv;

	if (pw == NULL)
		return;
	if (w->db->pb->worker_fini != NULL)
		w->db->pb->worker_fini(pw);
	free(pw);
	w->priv = NULL;
}

static int emb_read(struct yb_worker *w, const char *key, size_t key_len, void *buf, size_t cap,
                    size_t *ret_len)
{
	struct peer_worker *pw = w->priv;
	int rv = buf == NULL ? w->db->pb->get(pw, key, key_len, ret_len)
	                     : w->db->pb->get_copy(pw, key, key_len, buf, cap, ret_len);

	if (rv < 0) {
		yb_errf(w->err, sizeof w->err, "%s", pw->err);
		return -1;
	}
	return rv == PEER_FOUND ? YB_FOUND : YB_NOTFOUND;
}

static int emb_write(struct yb_worker *w, const char *key, size_t key_len, const void *value,
                     size_t value_len)
{
	struct peer_worker *pw = w->priv;

	if (w->db->pb->put(pw, key, key_len, value, value_len) != 0) {
		yb_errf(w->err, sizeof w->err, "%s", pw->err);
		return -1;
	}
	return 0;
}

static int emb_scan(struct yb_worker *w, const char *start, size_t start_len, uint64_t count,
                    size_t value_size, uint64_t *ret_records, uint64_t *ret_wrong)
{
	struct peer_worker *pw = w->priv;
	struct peer_scan s;

	if (w->db->pb->scan_count(pw, start, start_len, count, value_size, &s) != 0) {
		yb_errf(w->err, sizeof w->err, "%s", pw->err);
		return -1;
	}
	*ret_records = s.entries;
	*ret_wrong = s.wrong;
	return 0;
}

static int emb_counters(struct yb_db *db, struct yb_counters *ret, char *err, size_t errlen)
{
	struct peer_counters pc;

	if (db->pb->counters == NULL)
		return 1;
	if (db->pb->counters(db->peer, &pc) != 0) {
		yb_errf(err, errlen, "%s: reading its write counters failed", db->b->name);
		return -1;
	}
	ret->batches = pc.batches;
	ret->writes = pc.writes;
	ret->syncs = pc.syncs;
	ret->merges = pc.merges;
	return 0;
}

static int emb_scan_range(struct yb_worker *w, const char *start, const char *end, size_t key_size,
                          size_t value_size, uint64_t *ret_records, uint64_t *ret_wrong)
{
	struct peer_worker *pw = w->priv;
	struct peer_scan s;

	if (w->db->pb->scan(pw, start, end, key_size, value_size, &s) != 0) {
		yb_errf(w->err, sizeof w->err, "%s", pw->err);
		return -1;
	}
	*ret_records = s.entries;
	*ret_wrong = s.wrong;
	return 0;
}

static void emb_describe_io(struct yb_db *db, char *buf, size_t len)
{
	buf[0] = '\0';
	if (db->pb->describe != NULL)
		db->pb->describe(db->peer, buf, len);
}

/* ==== the list ================================================================== */

static void db_describe(struct yb_db *db, char *buf, size_t len)
{
	bench_fmt(buf, len, "%s", db->info);
}

#define KVD_BACKEND(n)                                                                             \
	{                                                                                          \
		.name = n, .kind = "kvd", .unavailable = kvd_unavailable, .open = kvd_open,        \
		.close = kvd_close, .describe = db_describe, .worker_init = kvd_worker_init,       \
		.worker_fini = kvd_worker_fini, .read = kvd_read, .update = kvd_write,             \
		.insert = kvd_write, .scan = kvd_scan, .versions = kvd_versions,                   \
		.counters = kvd_counters,                                                          \
	}

#ifdef KVB_HAVE_HIREDIS
#define REDIS_BACKEND(n)                                                                           \
	{                                                                                          \
		.name = n, .kind = "redis", .unavailable = redis_unavailable, .open = redis_open,  \
		.close = redis_close, .describe = db_describe, .worker_init = redis_worker_init,   \
		.worker_fini = redis_worker_fini, .read = redis_read, .update = redis_update,      \
		.insert = redis_insert, .scan = redis_scan,                                        \
	}
#else
#define REDIS_BACKEND(n)                                                                           \
	{                                                                                          \
		.name = n, .kind = "redis", .unavailable = redis_unavailable                       \
	}
#endif

#define EMB_BACKEND(n)                                                                             \
	{                                                                                          \
		.name = n, .kind = "embedded", .peer = n, .unavailable = emb_unavailable,          \
		.open = emb_open, .close = emb_close, .describe = db_describe,                     \
		.worker_init = emb_worker_init, .worker_fini = emb_worker_fini, .read = emb_read,  \
		.update = emb_write, .insert = emb_write, .scan = emb_scan,                        \
		.counters = emb_counters, .scan_range = emb_scan_range,                            \
		.describe_io = emb_describe_io,                                                    \
	}

static const struct yb_backend yb_kvd_ipc = KVD_BACKEND("kvd-ipc");
static const struct yb_backend yb_kvd_tcp = KVD_BACKEND("kvd-tcp");
static const struct yb_backend yb_redis = REDIS_BACKEND("redis");
static const struct yb_backend yb_redis_tcp = REDIS_BACKEND("redis-tcp");
static const struct yb_backend yb_engine = EMB_BACKEND("engine");
static const struct yb_backend yb_rocksdb = EMB_BACKEND("rocksdb");
static const struct yb_backend yb_leveldb = EMB_BACKEND("leveldb");
static const struct yb_backend yb_lmdb = EMB_BACKEND("lmdb");
static const struct yb_backend yb_engine_dev = EMB_BACKEND("engine-dev");

const struct yb_backend *const yb_backends[] = {
        &yb_kvd_ipc, &yb_kvd_tcp, &yb_redis,   &yb_redis_tcp,
        &yb_engine,  &yb_rocksdb, &yb_leveldb, &yb_lmdb,
};
const size_t yb_backend_count = sizeof yb_backends / sizeof yb_backends[0];

const struct yb_backend *yb_find(const char *name)
{
	for (size_t i = 0; i < yb_backend_count; i++)
		if (strcmp(yb_backends[i]->name, name) == 0)
			return yb_backends[i];
	if (strcmp(name, yb_engine_dev.name) == 0)
		return &yb_engine_dev;
	return NULL;
}
