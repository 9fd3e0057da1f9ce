/*
 * harness.h — start and stop a real kvd for integration tests, and talk to it
 * with plain nng REQ sockets and msgpack.
 *
 * The kvd binary comes from $KVD_BIN (meson sets it). Each daemon gets a
 * fresh data directory, an ipc:// (nng) and a kv+ipc:// (stream) socket
 * under $TMPDIR; its stderr goes to <dir>/kvd.log, printed when a test
 * fails. kvd_start and kvd_stop run it through harness/kvdrun.h, as kvbench
 * does; what is the tests' own here is the tracking of every kvd started
 * (killed when the test program exits) and the log printed on failure.
 */
#ifndef KV_TEST_HARNESS_H
#define KV_TEST_HARNESS_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <msgpack.h>
#include <netinet/in.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kvdrun.h"
#include "mp.h"
#include "testutil.h"

struct kvd_proc {
	pid_t pid;
	char *dir;      /* scratch directory */
	char *data;     /* data directory */
	char url[512];  /* ipc:// address (nng REQ/REP) */
	char surl[512]; /* kv+ipc:// address (kvd's stream framing) */
	char log[600];
	char config[600]; /* always written, empty when the test gives no text */
};

struct kvd_opts {
	const char *config_text; /* written to <dir>/kvd.conf and passed with --config */
	const char *env[4];      /* extra NAME=value */
	rlim_t nofile;           /* RLIMIT_NOFILE for kvd; 0: inherit */
	const char *extra[6];    /* extra arguments */
	const char *reuse_dir;   /* start on an existing scratch directory */
	const char *notify_socket;
	int health_timeout_ms; /* readiness probe timeout; default 300 */
};

/* Every kvd started and not yet stopped, so a test that fails half way
 * does not leave one running (cmocka leaves the test function at the failed
 * assertion): they are killed when the test program exits. */
#define H_PROCS_MAX 64
static pid_t h_procs[H_PROCS_MAX];

static inline void h_kill_all(void)
{
	for (int i = 0; i < H_PROCS_MAX; i++) {
		if (h_procs[i] > 0) {
			kill(h_procs[i], SIGKILL);
			waitpid(h_procs[i], NULL, 0);
			h_procs[i] = 0;
		}
	}
}

static inline void h_track(pid_t pid, bool add)
{
	static bool registered;

	if (!registered) {
		atexit(h_kill_all);
		registered = true;
	}
	for (int i = 0; i < H_PROCS_MAX; i++) {
		if (add && h_procs[i] == 0) {
			h_procs[i] = pid;
			return;
		}
		if (!add && h_procs[i] == pid) {
			h_procs[i] = 0;
			return;
		}
	}
}

static inline uint64_t h_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static inline void h_dump_log(const struct kvd_proc *k)
{
	FILE *f = fopen(k->log, "r");
	char line[1024];

	if (f == NULL)
		return;
	fprintf(stderr, "---- %s\n", k->log);
	while (fgets(line, sizeof(line), f))
		fputs(line, stderr);
	fclose(f);
}

/* Whether kvd's log has a line containing text. */
static inline bool h_log_has(const struct kvd_proc *k, const char *text)
{
	FILE *f = fopen(k->log, "r");
	char line[2048];
	bool found = false;

	if (f == NULL)
		return false;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, text) != NULL;
	fclose(f);
	return found;
}

/* Opens a REQ socket to url with a receive timeout; resend disabled. */
static inline nng_socket h_dial(const char *url, int timeout_ms)
{
	nng_socket s;

	if (nng_req0_open(&s) != 0)
		abort();
	nng_socket_set_ms(s, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
	nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, timeout_ms);
	nng_socket_set_ms(s, NNG_OPT_SENDTIMEO, timeout_ms);
	nng_socket_set_size(s, NNG_OPT_RECVMAXSZ, 256u << 20);
	nng_dial(s, url, NULL, NNG_FLAG_NONBLOCK);
	return s;
}

/* Sends raw bytes, returns the reply (malloc'd) or NULL on a transport error
 * (*ret_err gets the nng error). */
static inline uint8_t *h_rawcall(nng_socket s, const void *body, size_t len, size_t *ret_len,
                                 int *ret_err)
{
	void *buf = NULL;
	size_t n = 0;
	int rv;

	if ((rv = nng_send(s, (void *)body, len, 0)) != 0 ||
	    (rv = nng_recv(s, &buf, &n, NNG_FLAG_ALLOC)) != 0) {
		if (ret_err)
			*ret_err = rv;
		return NULL;
	}
	{
		uint8_t *copy = malloc(n ? n : 1);
		memcpy(copy, buf, n);
		nng_free(buf, n);
		*ret_len = n;
		return copy;
	}
}

/* A parsed reply. */
struct h_reply {
	msgpack_zone zone;
	msgpack_object root;
	uint64_t status;
	const msgpack_object *result;
	char message[256];
	uint64_t id;
	bool ok; /* a reply arrived and parsed */
};

static inline void h_reply_free(struct h_reply *r)
{
	msgpack_zone_destroy(&r->zone);
}

static inline int h_parse(const uint8_t *p, size_t n, struct h_reply *r)
{
	memset(r, 0, sizeof(*r));
	msgpack_zone_init(&r->zone, 4096);
	if (mp_parse(p, n, &r->zone, &r->root) != 0 || r->root.type != MSGPACK_OBJECT_MAP)
		return -1;
	if (mp_field_uint(&r->root, "status", true, &r->status) != 0)
		return -1;
	mp_field_uint(&r->root, "id", false, &r->id);
	r->result = mp_map_get(&r->root, "result");
	{
		const msgpack_object *m = mp_map_get(&r->root, "message");
		if (m)
			mp_str_copy(m, r->message, sizeof(r->message));
	}
	r->ok = true;
	return 0;
}

/* Builds {v:1, id, method, tenant, args:{...}} with args given as packer
 * callbacks through a small builder. */
struct h_req {
	msgpack_sbuffer sb;
	msgpack_packer pk;
};

/* Starts a request; with extra_fields > 0 the caller packs that many
 * envelope fields next and then calls h_req_args. */
static inline void h_req_args(struct h_req *q, uint32_t nargs)
{
	mp_pack_cstr(&q->pk, "args");
	msgpack_pack_map(&q->pk, nargs);
}

static inline void h_req_begin(struct h_req *q, const char *method, const char *tenant, uint64_t id,
                               uint32_t nargs, uint32_t extra_fields)
{
	msgpack_sbuffer_init(&q->sb);
	msgpack_packer_init(&q->pk, &q->sb, msgpack_sbuffer_write);
	msgpack_pack_map(&q->pk, 4 + (tenant ? 1 : 0) + extra_fields);
	mp_kv_uint(&q->pk, "v", 1);
	mp_kv_uint(&q->pk, "id", id);
	mp_kv_str(&q->pk, "method", method);
	if (tenant)
		mp_kv_str(&q->pk, "tenant", tenant);
	if (extra_fields == 0)
		h_req_args(q, nargs);
}

/* The reply bytes of h_call_sbuf are freed before the caller reads them;
 * this variant keeps them until h_reply2_free. */
struct h_reply2 {
	struct h_reply r;
	uint8_t *bytes;
};

static inline int h_call(nng_socket s, struct h_req *q, struct h_reply2 *out)
{
	size_t n = 0;
	int err = 0;

	out->bytes = h_rawcall(s, q->sb.data, q->sb.size, &n, &err);
	msgpack_sbuffer_destroy(&q->sb);
	if (out->bytes == NULL) {
		memset(&out->r, 0, sizeof(out->r));
		msgpack_zone_init(&out->r.zone, 64);
		return err ? err : -1;
	}
	return h_parse(out->bytes, n, &out->r);
}

static inline void h_reply2_free(struct h_reply2 *r)
{
	h_reply_free(&r->r);
	free(r->bytes);
}

/* Put key=value (strings) into tenant; returns the status, *ret_version. */
static inline int h_put(nng_socket s, const char *tenant, const char *key, const void *val,
                        size_t vlen, uint64_t *ret_version)
{
	struct h_req q;
	struct h_reply2 r;
	uint64_t st;

	h_req_begin(&q, "Put", tenant, 1, 2, 0);
	mp_kv_bin(&q.pk, "key", key, strlen(key));
	mp_kv_bin(&q.pk, "value", val, vlen);
	if (h_call(s, &q, &r) != 0 || !r.r.ok) {
		h_reply2_free(&r);
		return -1;
	}
	st = r.r.status;
	if (st == 0 && ret_version)
		mp_field_uint(r.r.result, "version", true, ret_version);
	h_reply2_free(&r);
	return (int)st;
}

/* Get: status; the value copied into buf (NUL-terminated when it fits);
 * -1 when no reply came or an OK reply has no value. */
static inline int h_get(nng_socket s, const char *tenant, const char *key, char *buf, size_t cap,
                        uint64_t *ret_version)
{
	struct h_req q;
	struct h_reply2 r;
	int st;

	h_req_begin(&q, "Get", tenant, 2, 1, 0);
	mp_kv_bin(&q.pk, "key", key, strlen(key));
	if (h_call(s, &q, &r) != 0 || !r.r.ok) {
		h_reply2_free(&r);
		return -1;
	}
	st = (int)r.r.status;
	if (st == 0) {
		const void *v;
		size_t n;
		if (mp_field_bin(r.r.result, "value", true, &v, &n) != 0) {
			h_reply2_free(&r);
			return -1; /* an OK reply without a value */
		}
		if (buf && cap) {
			size_t c = n < cap - 1 ? n : cap - 1;
			memcpy(buf, v, c);
			buf[c] = '\0';
		}
		if (ret_version)
			mp_field_uint(r.r.result, "version", true, ret_version);
	}
	h_reply2_free(&r);
	return st;
}

/* Calls a tenant method with args {name}; returns the status. */
static inline int h_tenant_call(nng_socket s, const char *method, const char *name,
                                struct h_reply2 *keep)
{
	struct h_req q;
	struct h_reply2 r;
	int st;

	h_req_begin(&q, method, NULL, 3, 1, 0);
	mp_kv_str(&q.pk, "name", name);
	if (h_call(s, &q, &r) != 0 || !r.r.ok) {
		h_reply2_free(&r);
		return -1;
	}
	st = (int)r.r.status;
	if (keep)
		*keep = r;
	else
		h_reply2_free(&r);
	return st;
}

static inline bool h_health_t(const char *url, int timeout_ms)
{
	nng_socket s = h_dial(url, timeout_ms);
	struct h_req q;
	struct h_reply2 r;
	bool ok;

	h_req_begin(&q, "Health", NULL, 9, 0, 0);
	ok = h_call(s, &q, &r) == 0 && r.r.ok && r.r.status == 0;
	h_reply2_free(&r);
	nng_close(s);
	return ok;
}

static inline bool h_health(const char *url)
{
	return h_health_t(url, 300);
}

/* A TCP port on 127.0.0.1 that was free a moment ago (-1 on failure). */
static inline int h_free_port(void)
{
	int port = kvd_run_free_port();

	return port < 0 ? -1 : port;
}

/* Connects a plain socket to an ipc:// or tcp://127.0.0.1:port URL, waits
 * for the first `want` bytes the server sends and hangs up (at once, TCP
 * with a reset, when `want` is 0): a peer that leaves in the middle of the
 * SP (or TLS) handshake. 0 on success. */
static inline int h_connect_and_leave(const char *url, size_t want)
{
	int fd, rv = -1;
	char buf[64];
	size_t got = 0;

	if (strncmp(url, "ipc://", 6) == 0) {
		struct sockaddr_un sa = {.sun_family = AF_UNIX};
		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", url + 6);
		if ((fd = socket(AF_UNIX, SOCK_STREAM, 0)) < 0)
			return -1;
		rv = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	} else {
		const char *colon = strrchr(url, ':');
		struct sockaddr_in sa = {.sin_family = AF_INET,
		                         .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
		if (colon == NULL || (fd = socket(AF_INET, SOCK_STREAM, 0)) < 0)
			return -1;
		sa.sin_port = htons((uint16_t)atoi(colon + 1));
		if (want == 0) { /* hang up with a reset */
			struct linger lg = {1, 0};
			setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		}
		rv = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	}
	while (rv == 0 && got < want && got < sizeof(buf)) {
		struct pollfd p = {fd, POLLIN, 0};
		ssize_t n;
		if (poll(&p, 1, 5000) != 1 || (n = read(fd, buf, want - got)) <= 0) {
			rv = -1;
			break;
		}
		got += (size_t)n;
	}
	close(fd);
	return rv;
}

/* Copies a path that fits (the scratch directory's paths are short). */
static inline void h_copy(char *dst, size_t cap, const char *src)
{
	size_t n = strlen(src);

	if (n >= cap)
		abort();
	memcpy(dst, src, n + 1);
}

/* Starts kvd; waits (bounded) until it answers Health. */
static inline int kvd_start(struct kvd_proc *k, const struct kvd_opts *o)
{
	const char *bin = getenv("KVD_BIN");
	struct kvd_run r = {0};
	char err[1024];

	memset(k, 0, sizeof(*k));
	if (bin == NULL)
		bin = "./build/daemon/kvd";
	if (o && o->reuse_dir)
		k->dir = strdup(o->reuse_dir);
	else
		k->dir = tu_mkdtemp("kvd");
	if (k->dir == NULL || asprintf(&k->data, "%s/data", k->dir) < 0)
		abort();
	r.bin = bin;
	r.dir = k->dir;
	r.listen = KVD_RUN_LISTEN(KVD_RUN_IPC) | KVD_RUN_LISTEN(KVD_RUN_KVIPC);
	/* a restart on reuse_dir adds to the log the test may search */
	r.log_append = true;
	r.start_timeout_ms = 20000;
	r.probe_timeout_ms = o && o->health_timeout_ms ? o->health_timeout_ms : 300;
	if (o) {
		/* always a file of the test's own (empty when it gives no
		 * settings): without --config kvd reads /etc/kvd/kvd.conf */
		r.config_text = o->config_text;
		for (int i = 0; i < 6 && o->extra[i]; i++)
			r.extra[i] = o->extra[i];
		for (int i = 0; i < 4 && o->env[i]; i++)
			r.env[i] = o->env[i];
		r.notify_socket = o->notify_socket;
		r.nofile = o->nofile;
	}
	if (kvd_run_spawn(&r, err, sizeof(err)) != 0) {
		fprintf(stderr, "kvd_start: %s\n", err);
		return -1;
	}
	h_copy(k->url, sizeof(k->url), r.url[KVD_RUN_IPC]);
	h_copy(k->surl, sizeof(k->surl), r.url[KVD_RUN_KVIPC]);
	h_copy(k->log, sizeof(k->log), r.log);
	h_copy(k->config, sizeof(k->config), r.config);
	k->pid = r.pid;
	h_track(k->pid, true);
	if (kvd_run_wait(&r, err, sizeof(err)) != 0) {
		if (r.pid < 0) { /* it ended, and was reaped */
			h_track(k->pid, false);
			k->pid = 0;
		}
		h_dump_log(k);
		return -1;
	}
	return 0;
}

/* SIGTERM and wait (bounded); returns the exit status, 128 + the signal
 * that ended it, or -1. */
static inline int kvd_stop(struct kvd_proc *k)
{
	struct kvd_run r = {.pid = k->pid};
	char err[1024];

	if (k->pid <= 0)
		return -1;
	h_copy(r.log, sizeof(r.log), k->log);
	if (kvd_run_stop(&r, err, sizeof(err)) != 0 && r.pid > 0)
		return -1; /* SIGTERM could not be sent */
	h_track(k->pid, false);
	k->pid = 0;
	if (!WIFEXITED(r.status) || WEXITSTATUS(r.status) != 0)
		h_dump_log(k);
	return WIFEXITED(r.status) ? WEXITSTATUS(r.status) : 128 + WTERMSIG(r.status);
}

static inline void kvd_cleanup(struct kvd_proc *k, bool keep_dir)
{
	if (k->pid > 0) {
		kill(k->pid, SIGKILL);
		waitpid(k->pid, NULL, 0);
		h_track(k->pid, false);
	}
	/* KVTEST_KEEP=1 keeps every scratch directory (and kvd's log) */
	if (!keep_dir && getenv("KVTEST_KEEP") == NULL)
		tu_rmtree(k->dir);
	free(k->dir);
	free(k->data);
}

#endif
