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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define LISTENER_PROBE_MS 2000 /* listeners_watch probes each nng listener this often */

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

static int listener_open(struct kvd *d, const char *url, nng_listener *ret, char *err,
                         size_t errlen);

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

/* Whether listener `i` still hands new connections to the socket: a probe
 * connection is dialed and must show up in the listener's accept count. */
static bool listener_alive(struct kvd *d, int i)
{
	nng_listener l = d->listeners[i];
	uint64_t before = listener_stat(l, "accept"), t0;
	nng_socket s;
	nng_dialer dl;
	nng_tls_config *tls = NULL;
	char url[512];
	bool alive = false;

	probe_url(l, d->listener_url[i], url, sizeof(url));
	if (nng_req0_open(&s) != 0)
		return true; /* cannot tell; leave it */
	if (nng_dialer_create(&dl, s, url) != 0) {
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
		while (!(alive = listener_stat(l, "accept") > before) && now_ms() - t0 < 3000)
			poll(NULL, 0, 20);
	}
	nng_close(s);
	if (tls != NULL)
		nng_tls_config_free(tls);
	return alive;
}

/*
 * nng 1.5's listeners stop accepting for good when a peer disconnects in the
 * middle of the SP handshake (nng issue #1518, fixed in nng 1.6): the
 * transport passes the connection's NNG_ECLOSED up as if the listener had
 * been closed (a client closing its socket while its dialer reconnects does
 * it). Every LISTENER_PROBE_MS a probe connection tells whether each
 * listener still accepts (its "accept" count moves); when two probes in a
 * row say no, the listener is replaced by a new one on the same address.
 * Closing it also closes the connections it had accepted; their clients
 * reconnect (libkvclient's calls in flight on them fail with UNAVAILABLE).
 */
void listeners_watch(struct kvd *d)
{
	char err[512];

	for (int i = 0; i < d->nlisteners && !atomic_load(&d->stopping); i++) {
		uint64_t now = now_ms();
		nng_listener l;
		int rv;

		/* nng 1.5 counts every peer's disconnect among the errors that
		 * also stop a listener, and can lose its accept without counting
		 * anything: so every listener is probed every LISTENER_PROBE_MS */
		if (now - d->listener_probed_ms[i] < LISTENER_PROBE_MS)
			continue;
		d->listener_probed_ms[i] = now;
		/* replacing closes the listener's connections: only when a second
		 * probe agrees with the first */
		if (listener_alive(d, i) || listener_alive(d, i))
			continue;
		klog(LOG_WARNING,
		     "%s stopped accepting connections (a peer left during the "
		     "handshake); replacing the listener",
		     d->listener_url[i]);
		nng_listener_close(d->listeners[i]);
		if ((rv = listener_open(d, d->listener_url[i], &l, err, sizeof(err))) != 0) {
			static struct klog_limit retry_log;
			klog_limited(&retry_log, 10000, LOG_ERR, "%s; retrying every second", err);
			d->listener_probed_ms[i] = 0; /* the next turn tries again */
			continue;
		}
		d->listeners[i] = l;
		atomic_fetch_add(&d->listener_restarts, 1);
	}
}

/* Creates and starts the listener for the configured address `url`. */
static int listener_open(struct kvd *d, const char *url, nng_listener *ret, char *err,
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
	nng_listener_set_size(l, NNG_OPT_RECVMAXSZ, (size_t)d->cfg.max_message_size);
	if (strncmp(url, "ipc://", 6) == 0)
		nng_listener_set_int(l, NNG_OPT_IPC_PERMISSIONS, (int)d->cfg.ipc_mode);
	if (strncmp(url, "tls+tcp://", 10) == 0 && (rv = tls_setup(d, l, err, errlen)) != 0) {
		nng_listener_close(l);
		return rv;
	}
	if ((rv = nng_listener_start(l, 0)) != 0) {
		snprintf(err, errlen, "listen %s: %s", url, nng_strerror(rv));
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
	nng_socket_set_size(d->sock, NNG_OPT_RECVMAXSZ, (size_t)d->cfg.max_message_size);
	for (int k = 0; k < d->cfg.nlisten; k++) {
		int n = d->nlisteners;
		if (stream_url(d->cfg.listen[k]))
			continue; /* stream.c's */
		if ((rv = listener_open(d, d->cfg.listen[k], &d->listeners[n], err, errlen)) != 0)
			return rv;
		d->listener_url[n] = d->cfg.listen[k];
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
	for (int i = 0; i < d->nlisteners; i++)
		nng_listener_close(d->listeners[i]);
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
