/*
 * client_nng.c — libkvclient's nng transport (ipc://, tcp://, tls+tcp://):
 * one nng REQ socket, a pool of contexts created once, and the state
 * machine that carries a request (client_op.h) through one of them. It
 * implements struct client_transport; the handle (client.c) reaches it only
 * through client_nng_transport.
 *
 * What it owns: the socket, its dialer (and TLS configuration), `contexts`
 * slots (an nng_ctx and an nng_aio each, made in kvc_open: nng 1.5.2 pays a
 * quadratic timer cost when many REQ contexts are created in a burst, so
 * never per call), and the connection state learnt from pipe events and
 * from the first dial.
 *
 * Invariants (c->mu guards the fields below it in struct cnng):
 *  1. A slot is either on the free list or owned by exactly one op; only the
 *     owner touches the slot's op, aio and ctx.
 *  2. in_flight counts ops that hold a slot, and async ops until their
 *     callback has returned; kvc_drain and kvc_close wait for it to be 0.
 *  3. pipes counts pipes between NNG_PIPE_EV_ADD_PRE and NNG_PIPE_EV_REM_POST
 *     (nng runs REM_POST exactly for the pipes that saw ADD_PRE).
 *  4. probing is true from kvc_open until the first, blocking dial returned.
 *  5. A slot's state changes under c->mu (pipe_event reads it).
 *
 * A slot's state machine; slot_cb runs it on an nng thread:
 *
 *   FREE --slot_start--> SEND --sent--> RECV --reply--> decode --> FREE
 *                          |              |
 *                          +--error-------+--error or timeout-----> FREE
 *
 * slot_finish puts the slot back on the free list, then wakes the blocking
 * caller (cnng_run) or runs the async completion. A context whose receive timed
 * out is reused as is: nng clears its request, and a late reply to the old
 * request id is discarded by the REQ protocol.
 *
 * Failing fast. A REQ socket holds a request while no pipe is connected, so
 * a daemon that is not running would only show as a timeout. cnng_open
 * therefore starts a helper thread that dials once, blocking (on a thread so
 * that a TCP SYN into a black hole cannot hold kvc_open for minutes). If that
 * dial fails, its error is remembered and the dialer is started again
 * non-blocking, so nng keeps retrying in the background. A call that finds
 * no pipe waits (within its deadline) only while that first dial runs;
 * otherwise it fails at once with -KVC_UNAVAILABLE and the reason, as
 * kvclient.h promises ("calls fail with -KVC_UNAVAILABLE until it is").
 * nng reports a pipe's removal after it failed the requests waiting on it,
 * so a call can still find the old pipe counted and queue its request; the
 * last pipe's removal therefore aborts requests still waiting to be sent.
 * (A request taken in the microseconds between that removal and its send
 * waits for a new pipe or its deadline.)
 *
 * Threads: every public call may come from any thread; async callbacks and
 * pipe events run on nng threads. Nothing calls into nng with c->mu held but
 * pipe_event's nng_aio_abort, whose completion nng runs on a task thread.
 */
#include "kvclient.h"

#include "client_op.h"

#include <errno.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <nng/supplemental/tls/tls.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CNNG_RECONNECT_MAX_MS   1000 /* nng's redial back-off ceiling */
#define CNNG_SYSTEM_CA          "/etc/ssl/certs/ca-certificates.crt"
#define CNNG_CLOSE_DIAL_WAIT_MS 2000 /* close waits this long for a first dial */

enum slot_state { SLOT_FREE, SLOT_SEND, SLOT_RECV };

struct slot {
	struct cnng *c;
	nng_ctx ctx;
	nng_aio *aio;
	enum slot_state state;
	struct client_op *op;
	struct slot *next_free;
};

struct cnng {
	const char *endpoint; /* the handle's */
	nng_socket sock;
	nng_dialer dialer;
	nng_tls_config *tls;
	struct slot *slots;
	uint32_t nslots;
	pthread_t prober;
	bool prober_started;

	pthread_mutex_t mu;
	pthread_cond_t slot_cv; /* a slot was freed, or closing */
	pthread_cond_t conn_cv; /* pipes or probing changed, or closing */
	pthread_cond_t idle_cv; /* in_flight reached 0 */
	struct slot *free_slots;
	uint32_t in_flight;
	bool closing;
	int pipes;
	bool probing;
	bool ever_connected;
	int dial_error; /* the first dial's nng error, 0 if it worked */
};

static const char *dial_error_text(int rv)
{
	switch (rv) {
	case NNG_ECONNREFUSED:
		return "connection refused";
	case NNG_EADDRINVAL:
		return "address invalid or not resolvable";
	case NNG_EPEERAUTH:
	case NNG_ECRYPTO:
		return "TLS handshake failed (certificate not trusted, or another server name?)";
	case NNG_EPERM:
		return "permission denied";
	case NNG_ETIMEDOUT:
		return "connect timed out";
	case NNG_EUNREACHABLE:
		return "unreachable";
	case NNG_EPROTO:
		return "protocol error (not a kvd REP socket?)";
	default:
		return nng_strerror(rv);
	}
}

/* ---- connection state ---------------------------------------------------- */

static void pipe_event(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	struct cnng *c = arg;

	(void)p;
	pthread_mutex_lock(&c->mu);
	if (ev == NNG_PIPE_EV_ADD_PRE) {
		c->pipes++;
		c->ever_connected = true;
	} else if (ev == NNG_PIPE_EV_REM_POST && --c->pipes == 0) {
		uint32_t i;

		/* Requests REQ holds for a pipe that will not come: fail them
		 * now (the abort's completion runs on an nng task thread, not
		 * here, so holding c->mu is safe). */
		for (i = 0; i < c->nslots; i++) {
			if (c->slots[i].state == SLOT_SEND)
				nng_aio_abort(c->slots[i].aio, NNG_ECONNRESET);
		}
	}
	pthread_cond_broadcast(&c->conn_cv);
	pthread_mutex_unlock(&c->mu);
}

static void *prober_main(void *arg)
{
	struct cnng *c = arg;
	int rv = nng_dialer_start(c->dialer, 0);

	/* A failed blocking start leaves the dialer stopped; start it again in
	 * the background so that a daemon started later is found. */
	if (rv != 0 && rv != NNG_ECLOSED)
		(void)nng_dialer_start(c->dialer, NNG_FLAG_NONBLOCK);
	pthread_mutex_lock(&c->mu);
	c->dial_error = rv;
	c->probing = false;
	pthread_cond_broadcast(&c->conn_cv);
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

/* With c->mu held: the reason no pipe is up. */
static int unreachable(struct cnng *c, struct client_op *op)
{
	op->unsent = true; /* no pipe: nothing was sent */
	if (c->ever_connected)
		return client_op_fail(op, KVC_UNAVAILABLE, "cannot reach %s: connection lost",
		                      c->endpoint);
	return client_op_fail(op, KVC_UNAVAILABLE, "cannot reach %s: %s", c->endpoint,
	                      dial_error_text(c->dial_error));
}

/* ---- slots ---------------------------------------------------------------- */

/* Waits for a connection and a free slot, within the op's deadline. */
static int slot_acquire(struct cnng *c, struct client_op *op, struct slot **ret)
{
	struct slot *s;
	int rv = 0;

	pthread_mutex_lock(&c->mu);
	while (!c->closing && c->pipes == 0 && c->probing && rv != ETIMEDOUT)
		rv = client_cond_wait_until(&c->conn_cv, &c->mu, op->deadline_ms);
	if (c->closing) {
		rv = client_op_fail(op, KVC_CANCELLED, "the handle is being closed");
		goto out;
	}
	if (c->pipes == 0) {
		if (c->probing)
			rv = client_op_fail(op, KVC_DEADLINE_EXCEEDED,
			                    "cannot reach %s: no connection within %u ms",
			                    c->endpoint, op->timeout_ms);
		else
			rv = unreachable(c, op);
		goto out;
	}
	rv = 0;
	while (!c->closing && c->free_slots == NULL && rv != ETIMEDOUT)
		rv = client_cond_wait_until(&c->slot_cv, &c->mu, op->deadline_ms);
	if (c->closing) {
		rv = client_op_fail(op, KVC_CANCELLED, "the handle is being closed");
		goto out;
	}
	if (c->free_slots == NULL) {
		rv = client_op_fail(op, KVC_DEADLINE_EXCEEDED,
		                    "no free context within %u ms (%u requests in flight)",
		                    op->timeout_ms, c->in_flight);
		goto out;
	}
	s = c->free_slots;
	c->free_slots = s->next_free;
	s->next_free = NULL;
	s->op = op;
	s->state = SLOT_SEND;
	c->in_flight++;
	*ret = s;
	rv = 0;
out:
	pthread_mutex_unlock(&c->mu);
	return rv;
}

static nng_duration remaining(const struct client_op *op)
{
	int64_t left = op->deadline_ms - client_now_ms();

	return left < 1 ? 1 : left > INT32_MAX ? INT32_MAX : (nng_duration)left;
}

static void slot_finish(struct slot *s, int rv);

/* s was taken by slot_acquire for op (state SEND). */
static void slot_start(struct slot *s, struct client_op *op)
{
	/* an async op gives its bytes up at once; a blocking one keeps them,
	 * to be sent again to another node after a MOVED (client_route.c) */
	struct client_buf req = op->complete != NULL ? client_op_take_request(op) : op->req;
	nng_msg *m;

	if (nng_msg_alloc(&m, req.len) != 0) {
		if (op->complete != NULL)
			client_buf_free(&req);
		slot_finish(s, client_op_fail(op, KVC_RESOURCE_EXHAUSTED,
		                              "out of memory for a request of %zu bytes", req.len));
		return;
	}
	if (req.len != 0)
		memcpy(nng_msg_body(m), req.data, req.len);
	if (op->complete != NULL)
		client_buf_free(&req);
	nng_aio_set_msg(s->aio, m);
	nng_aio_set_timeout(s->aio, remaining(op));
	nng_ctx_send(s->ctx, s->aio);
}

static void in_flight_done(struct cnng *c)
{
	if (--c->in_flight == 0)
		pthread_cond_broadcast(&c->idle_cv);
}

static void slot_finish(struct slot *s, int rv)
{
	struct cnng *c = s->c;
	struct client_op *op = s->op;

	op->rv = rv;
	if (rv == 0)
		client_status_set(&op->st, KVC_OK, "", 0);
	pthread_mutex_lock(&c->mu);
	s->op = NULL;
	s->state = SLOT_FREE;
	s->next_free = c->free_slots;
	c->free_slots = s;
	pthread_cond_signal(&c->slot_cv);
	if (op->complete == NULL) {
		/* Signalled with the lock held: op lives on the waiter's stack. */
		op->done = true;
		pthread_cond_signal(&op->done_cv);
		in_flight_done(c);
		pthread_mutex_unlock(&c->mu);
		return;
	}
	pthread_mutex_unlock(&c->mu);
	op->complete(op);
	client_op_free(op);
	pthread_mutex_lock(&c->mu);
	in_flight_done(c);
	pthread_mutex_unlock(&c->mu);
}

static int transport_error(struct client_op *op, int rv, bool sent)
{
	struct cnng *c = op->c->t;

	switch (rv) {
	case NNG_ETIMEDOUT:
		if (!sent)
			return client_op_fail(op, KVC_DEADLINE_EXCEEDED,
			                      "cannot reach %s: not connected within %u ms",
			                      c->endpoint, op->timeout_ms);
		return client_op_fail(op, KVC_DEADLINE_EXCEEDED, "no reply within %u ms",
		                      op->timeout_ms);
	case NNG_ECONNRESET:
	case NNG_ECONNSHUT:
	case NNG_ECONNABORTED:
	case NNG_ECONNREFUSED:
		return client_op_fail(op, KVC_UNAVAILABLE, "lost connection to %s", c->endpoint);
	case NNG_ECLOSED:
	case NNG_ECANCELED:
		return client_op_fail(op, KVC_CANCELLED, "cancelled");
	case NNG_ENOMEM:
		return client_op_fail(op, KVC_RESOURCE_EXHAUSTED, "out of memory");
	case NNG_EMSGSIZE:
		return client_op_fail(op, KVC_RESOURCE_EXHAUSTED, "message too large");
	default:
		return client_op_fail(op, KVC_UNAVAILABLE, "%s: %s", c->endpoint, nng_strerror(rv));
	}
}

static void msg_release(void *m)
{
	nng_msg_free(m);
}

static void slot_cb(void *arg)
{
	struct slot *s = arg;
	struct client_op *op = s->op;
	int rv = nng_aio_result(s->aio);

	if (s->state == SLOT_SEND) {
		if (rv != 0) {
			nng_msg_free(nng_aio_get_msg(s->aio)); /* not sent: still ours */
			nng_aio_set_msg(s->aio, NULL);
			slot_finish(s, transport_error(op, rv, false));
			return;
		}
		pthread_mutex_lock(&s->c->mu); /* pipe_event reads the state */
		s->state = SLOT_RECV;
		pthread_mutex_unlock(&s->c->mu);
		nng_aio_set_timeout(s->aio, remaining(op));
		nng_ctx_recv(s->ctx, s->aio);
		return;
	}
	if (rv != 0) {
		slot_finish(s, transport_error(op, rv, true));
		return;
	}
	{
		nng_msg *m = nng_aio_get_msg(s->aio);

		nng_aio_set_msg(s->aio, NULL);
		/* lent to the op until it is freed: no copy */
		op->reply = (struct client_buf){nng_msg_body(m), nng_msg_len(m), nng_msg_len(m),
		                                msg_release, m};
	}
	slot_finish(s, op->raw ? 0 : client_op_decode_reply(op));
}

/* ---- the transport's calls -------------------------------------------------- */

static int cnng_run(void *t, struct client_op *op)
{
	struct cnng *c = t;
	struct slot *s;
	int rv;

	if ((rv = slot_acquire(c, op, &s)) != 0)
		return rv;
	pthread_cond_init(&op->done_cv, NULL);
	slot_start(s, op);
	pthread_mutex_lock(&c->mu);
	while (!op->done)
		pthread_cond_wait(&op->done_cv, &c->mu);
	pthread_mutex_unlock(&c->mu);
	pthread_cond_destroy(&op->done_cv);
	return op->rv;
}

static int cnng_send_async(void *t, struct client_op *op)
{
	struct cnng *c = t;
	struct slot *s;
	int rv;

	if ((rv = slot_acquire(c, op, &s)) != 0)
		return rv;
	slot_start(s, op);
	return 0;
}

static void cnng_drain(void *t)
{
	struct cnng *c = t;

	pthread_mutex_lock(&c->mu);
	while (c->in_flight > 0)
		pthread_cond_wait(&c->idle_cv, &c->mu);
	pthread_mutex_unlock(&c->mu);
}

/* ---- open and close ----------------------------------------------------- */

/* The host of a URL (for TLS verification): "tls+tcp://host:port",
 * "tls+tcp://[::1]:port". */
static int url_host(const char *url, char *buf, size_t cap)
{
	const char *p = strstr(url, "://"), *end;
	size_t n;

	if (p == NULL)
		return -EINVAL;
	p += 3;
	if (*p == '[') {
		p++;
		end = strchr(p, ']');
	} else {
		end = p + strcspn(p, ":/");
	}
	if (end == NULL || end == p || (n = (size_t)(end - p)) >= cap)
		return -EINVAL;
	memcpy(buf, p, n);
	buf[n] = '\0';
	return 0;
}

static int tls_setup(struct cnng *c, const struct kvc_options *o)
{
	const char *ca = o->tls_ca_file;
	char host[256];
	int rv;

	if ((rv = nng_tls_config_alloc(&c->tls, NNG_TLS_MODE_CLIENT)) != 0)
		return rv;
	/* Without a CA of its own, verify against the system's bundle. */
	if (ca == NULL && access(CNNG_SYSTEM_CA, R_OK) == 0)
		ca = CNNG_SYSTEM_CA;
	if (ca != NULL && (rv = nng_tls_config_ca_file(c->tls, ca)) != 0)
		return rv;
	if (o->tls_server_name != NULL)
		rv = nng_tls_config_server_name(c->tls, o->tls_server_name);
	else if (url_host(c->endpoint, host, sizeof(host)) == 0)
		rv = nng_tls_config_server_name(c->tls, host);
	if (rv != 0)
		return rv;
	return nng_dialer_set_ptr(c->dialer, NNG_OPT_TLS_CONFIG, c->tls);
}

static void cnng_free(struct cnng *c)
{
	uint32_t i;

	for (i = 0; c->slots != NULL && i < c->nslots; i++)
		nng_aio_free(c->slots[i].aio);
	if (c->tls != NULL)
		nng_tls_config_free(c->tls);
	pthread_cond_destroy(&c->slot_cv);
	pthread_cond_destroy(&c->conn_cv);
	pthread_cond_destroy(&c->idle_cv);
	pthread_mutex_destroy(&c->mu);
	free(c->slots);
	free(c);
}

static bool cnng_accepts(const char *endpoint)
{
	(void)endpoint;
	return true; /* nng says what it cannot dial */
}

static int cnng_open(kvc *h, const struct kvc_options *o, void **ret)
{
	struct cnng *c;
	bool sock_open = false;
	uint32_t i;
	int rv;

	if ((c = calloc(1, sizeof(*c))) == NULL)
		return -KVC_RESOURCE_EXHAUSTED;
	pthread_mutex_init(&c->mu, NULL);
	if (client_cond_init_monotonic(&c->slot_cv) != 0 ||
	    client_cond_init_monotonic(&c->conn_cv) != 0 ||
	    client_cond_init_monotonic(&c->idle_cv) != 0) {
		rv = -KVC_RESOURCE_EXHAUSTED;
		goto fail;
	}
	c->endpoint = h->endpoint;
	c->nslots = h->contexts;
	c->slots = calloc(c->nslots, sizeof(*c->slots));
	if (c->slots == NULL) {
		rv = -KVC_RESOURCE_EXHAUSTED;
		goto fail;
	}

	if ((rv = nng_req0_open(&c->sock)) != 0) {
		rv = -KVC_RESOURCE_EXHAUSTED;
		goto fail;
	}
	sock_open = true;
	/* Resending would apply a write twice on a server without the
	 * idempotency cache; our own timeout ends a call instead. */
	if ((rv = nng_socket_set_ms(c->sock, NNG_OPT_REQ_RESENDTIME,
	                            o->resend_ms > 0 ? o->resend_ms : NNG_DURATION_INFINITE)) !=
	            0 ||
	    (rv = nng_pipe_notify(c->sock, NNG_PIPE_EV_ADD_PRE, pipe_event, c)) != 0 ||
	    (rv = nng_pipe_notify(c->sock, NNG_PIPE_EV_REM_POST, pipe_event, c)) != 0) {
		rv = -KVC_INTERNAL;
		goto fail;
	}
	if ((rv = nng_dialer_create(&c->dialer, c->sock, c->endpoint)) != 0) {
		rv = rv == NNG_ENOMEM ? -KVC_RESOURCE_EXHAUSTED : -KVC_INVALID_ARGUMENT;
		goto fail;
	}
	if ((rv = nng_dialer_set_size(c->dialer, NNG_OPT_RECVMAXSZ, h->max_message_size)) != 0 ||
	    (rv = nng_dialer_set_ms(c->dialer, NNG_OPT_RECONNMAXT, CNNG_RECONNECT_MAX_MS)) != 0) {
		rv = -KVC_INVALID_ARGUMENT;
		goto fail;
	}
	if (strncmp(c->endpoint, "tls+", 4) == 0 && (rv = tls_setup(c, o)) != 0) {
		rv = rv == NNG_ENOMEM ? -KVC_RESOURCE_EXHAUSTED : -KVC_INVALID_ARGUMENT;
		goto fail;
	}
	for (i = 0; i < c->nslots; i++) {
		struct slot *s = &c->slots[i];

		s->c = c;
		if (nng_ctx_open(&s->ctx, c->sock) != 0 ||
		    nng_aio_alloc(&s->aio, slot_cb, s) != 0) {
			rv = -KVC_RESOURCE_EXHAUSTED;
			goto fail;
		}
		s->next_free = c->free_slots;
		c->free_slots = s;
	}
	c->probing = true;
	if (pthread_create(&c->prober, NULL, prober_main, c) != 0) {
		rv = -KVC_RESOURCE_EXHAUSTED;
		goto fail;
	}
	c->prober_started = true;
	*ret = c;
	return 0;
fail:
	if (sock_open)
		nng_close(c->sock); /* also the dialer and the contexts */
	cnng_free(c);
	return rv;
}

static void cnng_close(void *t)
{
	struct cnng *c = t;

	if (c == NULL)
		return;
	pthread_mutex_lock(&c->mu);
	c->closing = true;
	pthread_cond_broadcast(&c->conn_cv);
	pthread_cond_broadcast(&c->slot_cv);
	while (c->in_flight > 0)
		pthread_cond_wait(&c->idle_cv, &c->mu);
	/* A socket closed in the middle of the SP handshake stops an nng 1.5
	 * server's listener for good (nng #1518): let a first dial still
	 * running finish, for a while. */
	{
		int64_t until = client_now_ms() + CNNG_CLOSE_DIAL_WAIT_MS;
		while (c->probing &&
		       client_cond_wait_until(&c->conn_cv, &c->mu, until) != ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(&c->mu);
	nng_close(c->sock); /* ends a first dial still running */
	if (c->prober_started)
		pthread_join(c->prober, NULL);
	cnng_free(c);
}

const struct client_transport client_nng_transport = {
        .name = "nng",
        .accepts = cnng_accepts,
        .open = cnng_open,
        .run = cnng_run,
        .send_async = cnng_send_async,
        .drain = cnng_drain,
        .close = cnng_close,
};
