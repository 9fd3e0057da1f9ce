/*
 * listener.c — the nng REP socket, its listeners and its contexts.
 *
 * One REP socket serves every listen address; `contexts` nng contexts are
 * opened once at start, each receiving one request at a time, so that many
 * requests are in flight at once. A context's state machine:
 *
 *   RECV --message--> (decode; answer now, or hand the job to a worker)
 *        ... conn_reply() ... --> [DELAY --timer-->] SEND --sent--> RECV
 *
 * Callbacks run on nng's threads. The job embedded in a context belongs to
 * whoever holds it between RECV and conn_reply(); after conn_reply() it may
 * be reused at once for the next request.
 */
#include "kvd.h"

#include "log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>
#include <nng/supplemental/tls/tls.h>
#include <nng/transport/ipc/ipc.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#define LISTENER_PROBE_MS      1000 /* listeners_watch probes each ipc:// listener this often */
#define LISTENER_PROBE_WAIT_MS 1000 /* … and waits this long for the probe to be accepted */

enum { CONN_RECV, CONN_DELAY, CONN_SEND };

static void conn_send(struct conn *c, nng_msg *m)
{
	c->state = CONN_SEND;
	nng_aio_set_msg(c->aio, m);
	nng_ctx_send(c->ctx, c->aio);
}

static void conn_reply(struct conn *c, struct rpc_reply *rp)
{
	struct kvd *d = c->d;
	nng_msg *m = NULL;

	job_release(&c->job);
	if (nng_msg_alloc(&m, 0) != 0 || nng_msg_append(m, rp->buf.data, rp->buf.size) != 0) {
		/* out of memory: the client's call times out */
		klog(LOG_ERR, "cannot allocate a reply of %zu bytes", rp->buf.size);
		if (m != NULL)
			nng_msg_free(m);
		rpc_reply_release(rp);
		atomic_fetch_sub(&d->in_flight, 1);
		c->state = CONN_RECV;
		nng_ctx_recv(c->ctx, c->aio);
		return;
	}
	rpc_reply_release(rp);
	if (d->reply_delay_ms > 0) {
		c->reply = m;
		c->state = CONN_DELAY;
		nng_sleep_aio((nng_duration)d->reply_delay_ms, c->aio);
		return;
	}
	conn_send(c, m);
}

/* job->conn_of of an nng context's job: the pipe's id with the top bit set
 * (the stream transport's ids are addresses, which never have it), and who
 * is at its other end. */
static uint64_t conn_job_conn(const struct job *j, char *peer, size_t len)
{
	nng_pipe p;
	nng_sockaddr sa;
	uint64_t uid;
	char host[INET6_ADDRSTRLEN] = "?";

	p = nng_msg_get_pipe(j->msg);
	if (nng_pipe_get_addr(p, NNG_OPT_REMADDR, &sa) == 0 && sa.s_family == NNG_AF_INET) {
		inet_ntop(AF_INET, &sa.s_in.sa_addr, host, sizeof(host));
		snprintf(peer, len, "nng connection %d of %s port %u", nng_pipe_id(p), host,
		         ntohs(sa.s_in.sa_port));
	} else if (nng_pipe_get_addr(p, NNG_OPT_REMADDR, &sa) == 0 && sa.s_family == NNG_AF_INET6) {
		inet_ntop(AF_INET6, sa.s_in6.sa_addr, host, sizeof(host));
		snprintf(peer, len, "nng connection %d of %s port %u", nng_pipe_id(p), host,
		         ntohs(sa.s_in6.sa_port));
	} else if (nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_UID, &uid) == 0) {
		snprintf(peer, len, "nng connection %d of uid %llu", nng_pipe_id(p),
		         (unsigned long long)uid);
	} else {
		snprintf(peer, len, "nng connection %d", nng_pipe_id(p));
	}
	return 1ull << 63 | (uint32_t)nng_pipe_id(p);
}

/* job->reply of an nng context's job. */
static void conn_job_reply(struct job *j, struct rpc_reply *rp)
{
	conn_reply(j->sink, rp);
}

static void handle_request(struct conn *c, nng_msg *msg)
{
	struct job *j = &c->job;

	memset(j, 0, sizeof(*j));
	j->d = c->d;
	j->reply = conn_job_reply;
	j->conn_of = conn_job_conn;
	j->sink = c;
	j->msg = msg;
	request_dispatch(c->d, j, nng_msg_body(msg), nng_msg_len(msg), NULL);
}

static void conn_cb(void *arg)
{
	struct conn *c = arg;
	struct kvd *d = c->d;
	int rv = nng_aio_result(c->aio);

	switch (c->state) {
	case CONN_RECV:
		if (rv != 0) {
			if (rv == NNG_ECLOSED || rv == NNG_ECANCELED || atomic_load(&d->quit))
				return;
			nng_ctx_recv(c->ctx, c->aio);
			return;
		}
		handle_request(c, nng_aio_get_msg(c->aio));
		return;
	case CONN_DELAY:
		if (rv == NNG_ECLOSED || rv == NNG_ECANCELED) {
			nng_msg_free(c->reply);
			c->reply = NULL;
			atomic_fetch_sub(&d->in_flight, 1);
			return;
		}
		conn_send(c, c->reply);
		c->reply = NULL;
		return;
	case CONN_SEND:
		if (rv != 0)
			nng_msg_free(nng_aio_get_msg(c->aio));
		atomic_fetch_sub(&d->in_flight, 1);
		if (rv == NNG_ECLOSED || rv == NNG_ECANCELED)
			return;
		c->state = CONN_RECV;
		nng_ctx_recv(c->ctx, c->aio);
		return;
	}
}

static int read_file(const char *path, char **ret)
{
	FILE *f = fopen(path, "r");
	char *buf;
	long n;

	if (f == NULL)
		return -errno;
	if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0 ||
	    (buf = malloc((size_t)n + 1)) == NULL) {
		fclose(f);
		return -EIO;
	}
	if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		fclose(f);
		return -EIO;
	}
	buf[n] = '\0';
	fclose(f);
	*ret = buf;
	return 0;
}

static int tls_setup(struct kvd *d, nng_listener l, char *err, size_t errlen)
{
	nng_tls_config *cfg;
	char *cert = NULL, *key = NULL;
	int rv;

	if ((rv = read_file(d->cfg.tls_cert, &cert)) != 0) {
		snprintf(err, errlen, "tls_cert %s: %s", d->cfg.tls_cert, strerror(-rv));
		return rv;
	}
	if ((rv = read_file(d->cfg.tls_key, &key)) != 0) {
		snprintf(err, errlen, "tls_key %s: %s", d->cfg.tls_key, strerror(-rv));
		free(cert);
		return rv;
	}
	if ((rv = nng_tls_config_alloc(&cfg, NNG_TLS_MODE_SERVER)) == 0) {
		rv = nng_tls_config_own_cert(cfg, cert, key, NULL);
		if (rv == 0)
			rv = nng_listener_set_ptr(l, NNG_OPT_TLS_CONFIG, cfg);
		nng_tls_config_free(cfg); /* the listener keeps its own reference */
	}
	free(cert);
	free(key);
	if (rv != 0)
		snprintf(err, errlen, "TLS certificate %s: %s", d->cfg.tls_cert, nng_strerror(rv));
	return rv ? -EINVAL : 0;
}

static void ensure_ipc_dir(const char *url)
{
	char path[4096], *slash;

	snprintf(path, sizeof(path), "%s", url + 6);
	if ((slash = strrchr(path, '/')) != NULL && slash != path) {
		*slash = '\0';
		mkdir(path, 0755); /* best effort; nng reports what fails */
	}
}

static int listener_open(struct kvd *d, int i, const char *url, nng_listener *ret, char *err,
                         size_t errlen);
static struct klog_limit lw_log[KVD_LISTEN_MAX];

/* The statistics scope of listener `l` under `st`. (nng 1.5.2's
 * nng_stat_find_listener returns the first listener's whatever `l` is: its
 * search below the root ignores the id.) */
static nng_stat *listener_scope(nng_stat *st, nng_listener l)
{
	for (; st != NULL; st = nng_stat_next(st)) {
		nng_stat *c, *found;
		if (nng_stat_type(st) == NNG_STAT_SCOPE &&
		    strcmp(nng_stat_name(st), "listener") == 0) {
			for (c = nng_stat_child(st); c != NULL; c = nng_stat_next(c))
				if (strcmp(nng_stat_name(c), "id") == 0 &&
				    (uint32_t)nng_stat_value(c) == (uint32_t)nng_listener_id(l))
					return st;
			continue;
		}
		if ((found = listener_scope(nng_stat_child(st), l)) != NULL)
			return found;
	}
	return NULL;
}

/* A counter from nng's statistics of listener `l` (0 when absent). */
static uint64_t listener_stat(nng_listener l, const char *name)
{
	nng_stat *all, *ls, *st;
	uint64_t v = 0;

	if (nng_stats_get(&all) != 0)
		return 0;
	if ((ls = listener_scope(all, l)) != NULL && (st = nng_stat_find(ls, name)) != NULL)
		v = nng_stat_value(st);
	nng_stats_free(all);
	return v;
}

/* The address a probe dials to reach listener `l` configured as `url`:
 * wildcard TCP addresses become loopback, port 0 the port bound. */
static void probe_url(nng_listener l, const char *url, char *out, size_t outlen)
{
	nng_sockaddr sa;
	const char *scheme;
	char host[INET6_ADDRSTRLEN] = "";

	if (url == NULL) { /* not a listener of ours */
		out[0] = '\0';
		return;
	}
	scheme = strncmp(url, "tls+tcp://", 10) == 0 ? "tls+tcp" : "tcp";
	snprintf(out, outlen, "%s", url);
	if (strncmp(url, "ipc://", 6) == 0 || nng_listener_get_addr(l, NNG_OPT_LOCADDR, &sa) != 0)
		return;
	if (sa.s_family == NNG_AF_INET) {
		struct in_addr a = {sa.s_in.sa_addr};
		if (a.s_addr == htonl(INADDR_ANY))
			a.s_addr = htonl(INADDR_LOOPBACK);
		inet_ntop(AF_INET, &a, host, sizeof(host));
		snprintf(out, outlen, "%s://%s:%u", scheme, host, ntohs(sa.s_in.sa_port));
	} else if (sa.s_family == NNG_AF_INET6) {
		struct in6_addr a;
		memcpy(&a, sa.s_in6.sa_addr, sizeof(a));
		if (IN6_IS_ADDR_UNSPECIFIED(&a))
			a = in6addr_loopback;
		inet_ntop(AF_INET6, &a, host, sizeof(host));
		snprintf(out, outlen, "%s://[%s]:%u", scheme, host, ntohs(sa.s_in6.sa_port));
	}
}

/* Set by nng, on one of its threads, when the probe's pipe has finished the
 * SP handshake. Static, not on listener_alive's stack: nng may still be in
 * the callback while nng_close returns. Only the main thread probes. */
static atomic_bool probe_up;

static void probe_pipe_up(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	(void)p;
	(void)ev;
	(void)arg;
	atomic_store(&probe_up, true);
}

/* Whether listener `i` still hands new connections to the socket: a probe
 * connection is dialed and must show up in the listener's accept count.
 * Once accepted, the probe is closed only after its handshake is over (or
 * the wait ran out): nng 1.5.2 leaks a dialer closed mid-handshake. */
static bool listener_alive(struct kvd *d, int i)
{
	nng_listener l = d->listeners[i];
	uint64_t before = listener_stat(l, "accept"), t0;
	nng_socket s;
	nng_dialer dl;
	nng_tls_config *tls = NULL;
	char url[512];
	bool alive = false;

	atomic_store(&probe_up, false);
	probe_url(l, d->listener_url[i], url, sizeof(url));
	if (nng_req0_open(&s) != 0)
		return true; /* cannot tell; leave it */
	if (nng_pipe_notify(s, NNG_PIPE_EV_ADD_POST, probe_pipe_up, NULL) != 0 ||
	    nng_dialer_create(&dl, s, url) != 0) {
		nng_close(s);
		return true;
	}
	if (strncmp(url, "tls+tcp://", 10) == 0 &&
	    nng_tls_config_alloc(&tls, NNG_TLS_MODE_CLIENT) == 0) {
		nng_tls_config_auth_mode(tls, NNG_TLS_AUTH_MODE_NONE);
		nng_dialer_set_ptr(dl, NNG_OPT_TLS_CONFIG, tls);
	}
	/* non-blocking: a dead listener must not hold the main thread (and the
	 * watchdog) for nng's 10 s handshake timeout */
	if (nng_dialer_start(dl, NNG_FLAG_NONBLOCK) == 0) {
		t0 = now_ms();
		while (!(alive = listener_stat(l, "accept") > before) &&
		       now_ms() - t0 < LISTENER_PROBE_WAIT_MS)
			poll(NULL, 0, 20);
		while (alive && !atomic_load(&probe_up) && now_ms() - t0 < LISTENER_PROBE_WAIT_MS)
			poll(NULL, 0, 5);
	}
	nng_close(s);
	if (tls != NULL)
		nng_tls_config_free(tls);
	return alive;
}

/*
 * nng 1.5's ipc:// listeners stop accepting for good when a peer leaves
 * before the SP handshake is over (nng issue #1518, fixed in nng 1.6): a
 * peer that connects and closes, sends part of the header or the whole
 * header and leaves before reading the server's, or sends something that is
 * not SP. Measured on Debian's nng 1.5.2: one such peer stops an ipc://
 * listener; 30 of each kind leave tcp:// and tls+tcp:// listeners
 * accepting, so only ipc:// listeners are watched.
 *
 * Every LISTENER_PROBE_MS a probe connection tells whether each ipc://
 * listener still accepts (its "accept" count moves). When it does not, a
 * new listener is bound beside the socket file (PATH.kvd-N) and renamed
 * over PATH, so new clients reach it at once; the old one keeps serving
 * the connections it had (closing it would close them) until the last of
 * them ends, and is closed then. (The first listener of an address stays
 * until kvd stops: nng removes its file when it is closed, and that name
 * is the new listener's now.) So a peer that keeps leaving mid-handshake
 * costs other nng clients only connections they open while the listener is
 * down: until the next probe, at most about 2 s. Connections that reached
 * the dead listener's backlog wait there until it is closed, or for their
 * own handshake timeout. kv+ipc:// is not affected.
 */
#define LISTENER_DRAIN_MAX 16 /* old listeners kept for their connections, per address */

struct drain {
	nng_listener l;
	bool first; /* the address's first listener: its close removes the file */
};
static struct {
	pthread_mutex_t mu;
	uint32_t id[KVD_LISTEN_MAX * (LISTENER_DRAIN_MAX + 2)]; /* listener ids … */
	int pipes[KVD_LISTEN_MAX * (LISTENER_DRAIN_MAX + 2)];   /* … and their connections */
	/* per address: its open listeners' ids (the current one and those
	 * draining; 0: a free entry), for listener_connections */
	uint32_t addr_ids[KVD_LISTEN_MAX][LISTENER_DRAIN_MAX + 2];
	const char *addr_url[KVD_LISTEN_MAX];
	int naddr;
	struct drain drain[KVD_LISTEN_MAX][LISTENER_DRAIN_MAX];
	int ndrain[KVD_LISTEN_MAX];
	bool first_replaced[KVD_LISTEN_MAX];
	unsigned gen;
} lw = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* nng's pipe events: connections per listener (any nng thread). */
static void pipe_event(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	uint32_t id = (uint32_t)nng_listener_id(nng_pipe_listener(p));
	size_t n = sizeof(lw.id) / sizeof(lw.id[0]), free_slot = n;

	(void)arg;
	if ((int32_t)id <= 0)
		return; /* a dialer's (none here) */
	pthread_mutex_lock(&lw.mu);
	for (size_t i = 0; i < n; i++) {
		if (lw.id[i] == id) {
			lw.pipes[i] += ev == NNG_PIPE_EV_ADD_POST ? 1 : -1;
			if (lw.pipes[i] <= 0)
				lw.id[i] = 0, lw.pipes[i] = 0;
			pthread_mutex_unlock(&lw.mu);
			return;
		}
		if (lw.id[i] == 0 && free_slot == n)
			free_slot = i;
	}
	if (ev == NNG_PIPE_EV_ADD_POST && free_slot < n) {
		lw.id[free_slot] = id;
		lw.pipes[free_slot] = 1;
	}
	pthread_mutex_unlock(&lw.mu);
}

/* Listener id belongs to address i (before it starts: its first pipe
 * event finds it), or no longer (lw_forget, before it is closed). */
static void lw_remember(int i, uint32_t id)
{
	pthread_mutex_lock(&lw.mu);
	for (size_t k = 0; k < LISTENER_DRAIN_MAX + 2; k++)
		if (lw.addr_ids[i][k] == 0) {
			lw.addr_ids[i][k] = id;
			break;
		} /* (full: cannot be, an address has at most the drains and one more) */
	pthread_mutex_unlock(&lw.mu);
}

static void lw_forget(nng_listener l)
{
	uint32_t id = (uint32_t)nng_listener_id(l);

	pthread_mutex_lock(&lw.mu);
	for (int i = 0; i < KVD_LISTEN_MAX; i++)
		for (size_t k = 0; k < LISTENER_DRAIN_MAX + 2; k++)
			if (lw.addr_ids[i][k] == id)
				lw.addr_ids[i][k] = 0;
	pthread_mutex_unlock(&lw.mu);
}

int listener_connections(struct kvd *d, const char **ret_url, uint32_t *ret_open, int max)
{
	size_t nslots = sizeof(lw.id) / sizeof(lw.id[0]);
	int n;

	(void)d;
	pthread_mutex_lock(&lw.mu);
	for (n = 0; n < lw.naddr && n < max; n++) {
		int open = 0;
		for (size_t k = 0; k < LISTENER_DRAIN_MAX + 2; k++)
			for (size_t j = 0; lw.addr_ids[n][k] != 0 && j < nslots; j++)
				if (lw.id[j] == lw.addr_ids[n][k])
					open += lw.pipes[j];
		ret_url[n] = lw.addr_url[n];
		ret_open[n] = (uint32_t)open;
	}
	pthread_mutex_unlock(&lw.mu);
	return n;
}

static int listener_pipes(nng_listener l)
{
	uint32_t id = (uint32_t)nng_listener_id(l);
	int n = 0;

	pthread_mutex_lock(&lw.mu);
	for (size_t i = 0; i < sizeof(lw.id) / sizeof(lw.id[0]); i++)
		if (lw.id[i] == id)
			n = lw.pipes[i];
	pthread_mutex_unlock(&lw.mu);
	return n;
}

/* Closes the old listeners of address i whose connections all ended (not
 * the first: see above); past LISTENER_DRAIN_MAX, the oldest with them. */
static void drain_reap(int i)
{
	int k = 0;

	while (k < lw.ndrain[i]) {
		struct drain *dr = &lw.drain[i][k];
		bool full =
		        lw.ndrain[i] >= LISTENER_DRAIN_MAX && k == (lw.drain[i][0].first ? 1 : 0);
		if (!dr->first && (listener_pipes(dr->l) == 0 || full)) {
			if (full)
				klog(LOG_WARNING,
				     "%d replaced nng listeners of one address still serve "
				     "connections; closing the oldest and its %d connection(s)",
				     lw.ndrain[i], listener_pipes(dr->l));
			lw_forget(dr->l);
			nng_listener_close(dr->l);
			memmove(dr, dr + 1, (size_t)(lw.ndrain[i] - k - 1) * sizeof(*dr));
			lw.ndrain[i]--;
			continue;
		}
		k++;
	}
}

/* Opens a new listener for ipc:// address i beside its file and renames it
 * over the file; the old one is kept for its connections. */
static int listener_swap_ipc(struct kvd *d, int i, char *err, size_t errlen)
{
	const char *path = d->listener_url[i] + 6;
	char tmp[4096], url[4200];
	nng_listener l;
	int rv;

	snprintf(tmp, sizeof(tmp), "%s.kvd-%u", path, ++lw.gen);
	if (strlen(tmp) >= sizeof(((struct sockaddr_un *)0)->sun_path) ||
	    lw.ndrain[i] >= LISTENER_DRAIN_MAX) {
		/* no room for the name beside it, or for one more old listener:
		 * replaced in place, which closes its connections */
		lw_forget(d->listeners[i]);
		nng_listener_close(d->listeners[i]);
		return listener_open(d, i, d->listener_url[i], &d->listeners[i], err, errlen);
	}
	snprintf(url, sizeof(url), "ipc://%s", tmp);
	if ((rv = listener_open(d, i, url, &l, err, errlen)) != 0)
		return rv;
	if (rename(tmp, path) != 0) {
		snprintf(err, errlen, "rename %s to %s: %s", tmp, path, strerror(errno));
		lw_forget(l);
		nng_listener_close(l);
		return -errno;
	}
	lw.drain[i][lw.ndrain[i]].l = d->listeners[i];
	lw.drain[i][lw.ndrain[i]].first = !lw.first_replaced[i];
	lw.first_replaced[i] = true;
	lw.ndrain[i]++;
	d->listeners[i] = l;
	return 0;
}

void listeners_watch(struct kvd *d)
{
	char err[512];

	for (int i = 0; i < d->nlisteners && !atomic_load(&d->stopping); i++) {
		uint64_t now = now_ms();
		int rv;

		if (strncmp(d->listener_url[i], "ipc://", 6) != 0)
			continue;
		drain_reap(i);
		if (now - d->listener_probed_ms[i] < LISTENER_PROBE_MS)
			continue;
		d->listener_probed_ms[i] = now;
		if (listener_alive(d, i))
			continue;
		klog_limited(&lw_log[i], 10000, LOG_WARNING,
		             "%s stopped accepting connections (a peer left during the "
		             "handshake; nng 1.5); replacing the listener, its connections stay",
		             d->listener_url[i]);
		if ((rv = listener_swap_ipc(d, i, err, sizeof(err))) != 0) {
			static struct klog_limit retry_log;
			klog_limited(&retry_log, 10000, LOG_ERR, "%s; retrying every second", err);
			d->listener_probed_ms[i] = 0; /* the next turn tries again */
			continue;
		}
		atomic_fetch_add(&d->listener_restarts, 1);
	}
}

/* Creates and starts the listener for `url`, of the configured address i. */
static int listener_open(struct kvd *d, int i, const char *url, nng_listener *ret, char *err,
                         size_t errlen)
{
	nng_listener l;
	int rv;

	if (strncmp(url, "ipc://", 6) == 0)
		ensure_ipc_dir(url);
	if ((rv = nng_listener_create(&l, d->sock, url)) != 0) {
		snprintf(err, errlen, "listen %s: %s", url, nng_strerror(rv));
		return -EINVAL;
	}
	/* nng counts the REQ header (the 4-byte request id of a directly
	 * connected peer) in what it checks against RECVMAXSZ; the limit
	 * PROTOCOL.md states, the same as on the stream transport, is on the
	 * message body */
	nng_listener_set_size(l, NNG_OPT_RECVMAXSZ, (size_t)d->cfg.max_message_size + 4);
	if (strncmp(url, "ipc://", 6) == 0)
		nng_listener_set_int(l, NNG_OPT_IPC_PERMISSIONS, (int)d->cfg.ipc_mode);
	if (strncmp(url, "tls+tcp://", 10) == 0 && (rv = tls_setup(d, l, err, errlen)) != 0) {
		nng_listener_close(l);
		return rv;
	}
	lw_remember(i, (uint32_t)nng_listener_id(l));
	if ((rv = nng_listener_start(l, 0)) != 0) {
		snprintf(err, errlen, "listen %s: %s", url, nng_strerror(rv));
		lw_forget(l);
		nng_listener_close(l);
		return -EADDRINUSE;
	}
	*ret = l;
	return 0;
}

int listeners_start(struct kvd *d, char *err, size_t errlen)
{
	int rv;
	uint32_t i;

	if ((rv = nng_rep0_open(&d->sock)) != 0) {
		snprintf(err, errlen, "cannot open the REP socket: %s", nng_strerror(rv));
		return -EIO;
	}
	nng_socket_set_size(d->sock, NNG_OPT_RECVMAXSZ, (size_t)d->cfg.max_message_size + 4);
	nng_pipe_notify(d->sock, NNG_PIPE_EV_ADD_POST, pipe_event, d);
	nng_pipe_notify(d->sock, NNG_PIPE_EV_REM_POST, pipe_event, d);
	for (int k = 0; k < d->cfg.nlisten; k++) {
		int n = d->nlisteners;
		if (stream_url(d->cfg.listen[k]))
			continue; /* stream.c's */
		rv = listener_open(d, n, d->cfg.listen[k], &d->listeners[n], err, errlen);
		if (rv != 0)
			return rv;
		d->listener_url[n] = d->cfg.listen[k];
		pthread_mutex_lock(&lw.mu);
		lw.addr_url[n] = d->cfg.listen[k];
		lw.naddr = n + 1;
		pthread_mutex_unlock(&lw.mu);
		d->nlisteners = n + 1;
		klog(LOG_INFO, "listening on %s", d->cfg.listen[k]);
	}
	d->nconns = d->cfg.contexts;
	if ((d->conns = calloc(d->nconns, sizeof(*d->conns))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (i = 0; i < d->nconns; i++) {
		struct conn *c = &d->conns[i];
		c->d = d;
		if ((rv = nng_ctx_open(&c->ctx, d->sock)) != 0 ||
		    (rv = nng_aio_alloc(&c->aio, conn_cb, c)) != 0) {
			snprintf(err, errlen, "cannot open context %u: %s", i, nng_strerror(rv));
			d->nconns = i;
			return -ENOMEM;
		}
		c->state = CONN_RECV;
		nng_ctx_recv(c->ctx, c->aio);
	}
	return 0;
}

void listeners_close(struct kvd *d)
{
	pthread_mutex_lock(&lw.mu);
	lw.naddr = 0;
	memset(lw.addr_ids, 0, sizeof(lw.addr_ids));
	pthread_mutex_unlock(&lw.mu);
	for (int i = 0; i < d->nlisteners; i++) {
		nng_listener_close(d->listeners[i]);
		/* the old ones last: the first removes the socket file */
		for (int k = 0; k < lw.ndrain[i]; k++)
			nng_listener_close(lw.drain[i][k].l);
		lw.ndrain[i] = 0;
	}
	d->nlisteners = 0;
}

void conns_stop(struct kvd *d)
{
	uint32_t i;

	for (i = 0; i < d->nconns; i++)
		if (d->conns[i].aio != NULL)
			nng_aio_stop(d->conns[i].aio);
	nng_close(d->sock);
	for (i = 0; i < d->nconns; i++) {
		struct conn *c = &d->conns[i];
		if (c->aio != NULL)
			nng_aio_free(c->aio);
		nng_ctx_close(c->ctx);
		if (c->reply != NULL)
			nng_msg_free(c->reply);
		job_release(&c->job);
	}
	free(d->conns);
	d->conns = NULL;
	d->nconns = 0;
}
