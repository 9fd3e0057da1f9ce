/*
 * client.c — libkvclient's transport: one nng REQ socket, a pool of contexts
 * created once, and the state machine that carries a request (client_op.h)
 * through one of them. The calls of kvclient.h that build the requests and
 * read the replies are in client_calls.c and client_scan.c.
 *
 * What it owns: the socket, its dialer (and TLS configuration), `contexts`
 * slots (an nng_ctx and an nng_aio each, made in kvc_open: nng 1.5.2 pays a
 * quadratic timer cost when many REQ contexts are created in a burst, so
 * never per call), and the connection state learnt from pipe events and
 * from the first dial.
 *
 * Invariants (c->mu guards the fields below it in struct kvc):
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
 * caller (client_op_run) or runs the async completion. A context whose receive timed
 * out is reused as is: nng clears its request, and a late reply to the old
 * request id is discarded by the REQ protocol.
 *
 * Failing fast. A REQ socket holds a request while no pipe is connected, so
 * a daemon that is not running would only show as a timeout. kvc_open
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
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define CLIENT_TIMEOUT_DEFAULT    10000u /* ms */
#define CLIENT_CONTEXTS_DEFAULT   64u
#define CLIENT_CONTEXTS_MAX       4096u              /* requests in flight per handle */
#define CLIENT_MSG_DEFAULT        ((size_t)64 << 20) /* PROTOCOL.md's max_message_size */
#define CLIENT_RECONNECT_MAX_MS   1000               /* nng's redial back-off ceiling */
#define CLIENT_SYSTEM_CA          "/etc/ssl/certs/ca-certificates.crt"
#define CLIENT_CLOSE_DIAL_WAIT_MS 2000 /* kvc_close waits this long for a first dial */

enum slot_state { SLOT_FREE, SLOT_SEND, SLOT_RECV };

struct slot {
	kvc *c;
	nng_ctx ctx;
	nng_aio *aio;
	enum slot_state state;
	struct client_op *op;
	struct slot *next_free;
};

struct kvc {
	struct cstream *stream; /* kv+ipc://, kv+tcp://: all of the transport; else nng's */
	nng_socket sock;
	nng_dialer dialer;
	nng_tls_config *tls;
	char *endpoint;
	char *tenant;
	char *token;
	uint32_t timeout_ms;
	size_t max_message_size;
	uint64_t client_id;
	atomic_uint_fast64_t next_id;
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

/* ---- small helpers ----------------------------------------------------- */

/* kvclient.h's public codes are the wire's status codes (wire.h). */
#define CODE_SAME(name, code)                                                                      \
	_Static_assert((int)KVC_##name == (int)WIRE_##name && WIRE_##name == (code),               \
	               #name " differs");
WIRE_STATUSES(CODE_SAME)
#undef CODE_SAME
_Static_assert(KVC_PROTOCOL_VERSION == WIRE_VERSION, "protocol version differs");

static const char *const code_names[] = {
#define CODE_NAME(name, code) [WIRE_##name] = #name,
        WIRE_STATUSES(CODE_NAME)
#undef CODE_NAME
};

const char *kvc_code_name(int code)
{
	if (code < 0)
		code = -code;
	if (code >= 0 && (size_t)code < sizeof(code_names) / sizeof(code_names[0]))
		return code_names[code];
	return "UNKNOWN";
}

void kvc_options_init(struct kvc_options *o)
{
	if (o == NULL)
		return;
	memset(o, 0, sizeof(*o));
	o->endpoint = KVC_DEFAULT_ENDPOINT;
	o->tenant = "default";
	o->timeout_ms = CLIENT_TIMEOUT_DEFAULT;
	o->contexts = CLIENT_CONTEXTS_DEFAULT;
	o->max_message_size = CLIENT_MSG_DEFAULT;
	o->resend_ms = -1;
}

int64_t client_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits on cv until the monotonic deadline; ETIMEDOUT once it passed. */
int client_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t deadline_ms)
{
	struct timespec ts;

	if (client_now_ms() >= deadline_ms)
		return ETIMEDOUT;
	ts.tv_sec = deadline_ms / 1000;
	ts.tv_nsec = (deadline_ms % 1000) * 1000000;
	return pthread_cond_timedwait(cv, mu, &ts);
}

int client_cond_init_monotonic(pthread_cond_t *cv)
{
	pthread_condattr_t a;
	int rv;

	if ((rv = pthread_condattr_init(&a)) != 0)
		return rv;
	if ((rv = pthread_condattr_setclock(&a, CLOCK_MONOTONIC)) == 0)
		rv = pthread_cond_init(cv, &a);
	pthread_condattr_destroy(&a);
	return rv;
}

/* Copies a message into st as one line: control characters become spaces,
 * and a cut never splits a UTF-8 sequence. */
void client_status_set(struct kvc_status *st, int code, const char *msg, size_t len)
{
	size_t i;

	st->code = code;
	if (len > KVC_MESSAGE_MAX - 1) {
		len = KVC_MESSAGE_MAX - 1;
		while (len > 0 && ((unsigned char)msg[len] & 0xc0) == 0x80)
			len--;
	}
	for (i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)msg[i];
		st->message[i] = ch < 0x20 || ch == 0x7f ? ' ' : (char)ch;
	}
	st->message[len] = '\0';
}

__attribute__((format(printf, 3, 4))) int client_op_fail(struct client_op *op, int code,
                                                         const char *fmt, ...)
{
	char buf[KVC_MESSAGE_MAX];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	client_status_set(&op->st, code, buf,
	                  (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
	return -code;
}

/* A decoder's -EINVAL as the caller sees it. */
int client_op_decoded(struct client_op *op, int rv)
{
	if (rv == 0)
		return 0;
	return client_op_fail(op, KVC_INTERNAL, "malformed reply to %s", op->method);
}

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
	kvc *c = arg;

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
	kvc *c = arg;
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
static int unreachable(kvc *c, struct client_op *op)
{
	if (c->ever_connected)
		return client_op_fail(op, KVC_UNAVAILABLE, "cannot reach %s: connection lost",
		                      c->endpoint);
	return client_op_fail(op, KVC_UNAVAILABLE, "cannot reach %s: %s", c->endpoint,
	                      dial_error_text(c->dial_error));
}

/* ---- slots ---------------------------------------------------------------- */

/* Waits for a connection and a free slot, within the op's deadline. */
static int slot_acquire(kvc *c, struct client_op *op, struct slot **ret)
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

/* s was taken by slot_acquire for op (state SEND). */
static void slot_start(struct slot *s, struct client_op *op)
{
	nng_aio_set_msg(s->aio, op->req);
	op->req = NULL;
	nng_aio_set_timeout(s->aio, remaining(op));
	nng_ctx_send(s->ctx, s->aio);
}

static void in_flight_done(kvc *c)
{
	if (--c->in_flight == 0)
		pthread_cond_broadcast(&c->idle_cv);
}

static void slot_finish(struct slot *s, int rv)
{
	kvc *c = s->c;
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
	kvc *c = op->c;

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

int client_reply_parse(nng_msg *m, msgpack_zone *zone, msgpack_object *root,
                       struct crep_envelope *env)
{
	if (!msgpack_zone_init(zone, 2048))
		return -KVC_RESOURCE_EXHAUSTED;
	if (mp_parse(nng_msg_body(m), nng_msg_len(m), zone, root) != 0 ||
	    crep_envelope(root, env) != 0) {
		msgpack_zone_destroy(zone);
		return -KVC_INTERNAL;
	}
	return 0;
}

int client_op_check_reply(struct client_op *op)
{
	const struct crep_envelope *e = &op->env;
	int code;

	/* id 0 with an error: the server could not parse the request at all
	 * (PROTOCOL.md); the transport has already paired the reply with this
	 * request. */
	if (e->id != op->id && !(e->id == 0 && e->status != 0))
		return client_op_fail(op, KVC_INTERNAL,
		                      "malformed reply to %s: id %llu, expected %llu", op->method,
		                      (unsigned long long)e->id, (unsigned long long)op->id);
	if (e->status == 0)
		return 0;
	code = e->status <= KVC_UNAUTHENTICATED ? (int)e->status : KVC_UNKNOWN;
	if (e->message != NULL && e->message_len > 0)
		client_status_set(&op->st, code, e->message, e->message_len);
	else
		client_op_fail(op, code, "%s (status %llu)", kvc_code_name(code),
		               (unsigned long long)e->status);
	return -code;
}

int client_op_decode_reply(struct client_op *op)
{
	int rv = client_reply_parse(op->reply, &op->zone, &op->root, &op->env);

	if (rv == -KVC_RESOURCE_EXHAUSTED)
		return client_op_fail(op, KVC_RESOURCE_EXHAUSTED, "out of memory for a reply");
	if (rv != 0)
		return client_op_fail(op, KVC_INTERNAL, "malformed reply to %s", op->method);
	op->zone_ready = true;
	return client_op_check_reply(op);
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
	op->reply = nng_aio_get_msg(s->aio);
	nng_aio_set_msg(s->aio, NULL);
	slot_finish(s, op->raw ? 0 : client_op_decode_reply(op));
}

/* ---- ops ------------------------------------------------------------------ */

static int msg_write(void *data, const char *buf, size_t len)
{
	struct client_op *op = data;

	if (op->write_error == 0 && nng_msg_append(op->req, buf, len) != 0)
		op->write_error = -KVC_RESOURCE_EXHAUSTED;
	return op->write_error;
}

/* Every op starts here, so that op_end can always run. */
void client_op_init(struct client_op *op, kvc *c, const struct kvc_call *call, const char *method)
{
	memset(op, 0, sizeof(*op));
	op->c = c;
	op->method = method;
	if (c != NULL) {
		op->timeout_ms =
		        call != NULL && call->timeout_ms != 0 ? call->timeout_ms : c->timeout_ms;
		op->deadline_ms = client_now_ms() + op->timeout_ms;
	}
}

uint64_t client_next_id(kvc *c)
{
	return atomic_fetch_add(&c->next_id, 1);
}

/* Allocates the request and packs the envelope; args follow through op->pk. */
int client_op_request(struct client_op *op, const struct kvc_call *call, bool has_args,
                      size_t payload)
{
	kvc *c = op->c;
	struct creq_envelope e = {0};

	if (c == NULL)
		return client_op_fail(op, KVC_INVALID_ARGUMENT, "no handle");
	if (nng_msg_alloc(&op->req, 0) != 0 ||
	    nng_msg_reserve(op->req, CREQ_OVERHEAD + payload) != 0)
		return client_op_fail(op, KVC_RESOURCE_EXHAUSTED,
		                      "out of memory for a request of %zu bytes", payload);
	msgpack_packer_init(&op->pk, op, msg_write);
	op->id = client_next_id(c);
	e.id = op->id;
	e.client = c->client_id;
	e.method = op->method;
	e.tenant = call != NULL && call->tenant != NULL ? call->tenant : c->tenant;
	e.timeout_ms = op->timeout_ms;
	e.token = c->token;
	e.has_args = has_args;
	creq_envelope(&op->pk, &e);
	return 0;
}

/* Checks the packed request, then takes a slot and sends it. */
static int op_submit(struct client_op *op, struct slot **ret)
{
	kvc *c = op->c;

	if (op->write_error != 0)
		return client_op_fail(op, KVC_RESOURCE_EXHAUSTED, "out of memory while packing %s",
		                      op->method);
	/* The same bound both ways: a larger message would be dropped by the
	 * server's transport and show up as a lost connection. */
	if (nng_msg_len(op->req) > c->max_message_size)
		return client_op_fail(op, KVC_INVALID_ARGUMENT,
		                      "request of %zu bytes exceeds max_message_size %zu",
		                      nng_msg_len(op->req), c->max_message_size);
	return slot_acquire(c, op, ret);
}

/* A blocking round trip. */
int client_op_run(struct client_op *op)
{
	kvc *c = op->c;
	struct slot *s;
	int rv;

	if (c->stream != NULL) {
		if (op->write_error != 0)
			return client_op_fail(op, KVC_RESOURCE_EXHAUSTED,
			                      "out of memory while packing %s", op->method);
		return cstream_run(c->stream, op);
	}
	if ((rv = op_submit(op, &s)) != 0)
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

int client_op_send_async(struct client_op *op)
{
	struct slot *s;
	int rv;

	if (op->complete == NULL)
		return client_op_fail(op, KVC_INVALID_ARGUMENT, "an async call needs a callback");
	if (op->c->stream != NULL) {
		if (op->write_error != 0)
			return client_op_fail(op, KVC_RESOURCE_EXHAUSTED,
			                      "out of memory while packing %s", op->method);
		return cstream_send_async(op->c->stream, op);
	}
	if ((rv = op_submit(op, &s)) != 0)
		return rv;
	slot_start(s, op);
	return 0;
}

static void op_release(struct client_op *op)
{
	nng_msg_free(op->req);
	op->req = NULL;
	nng_msg_free(op->reply);
	op->reply = NULL;
	if (op->zone_ready)
		msgpack_zone_destroy(&op->zone);
	op->zone_ready = false;
}

/* Reports the outcome through call->status. */
int client_op_report(struct client_op *op, const struct kvc_call *call, int rv)
{
	if (rv == 0)
		client_status_set(&op->st, KVC_OK, "", 0);
	if (call != NULL && call->status != NULL)
		*call->status = op->st;
	return rv;
}

/* Reports the outcome and frees the op's buffers. */
int client_op_end(struct client_op *op, const struct kvc_call *call, int rv)
{
	client_op_report(op, call, rv);
	op_release(op);
	return rv;
}

void client_op_free(struct client_op *op)
{
	if (op == NULL)
		return;
	op_release(op);
	free(op);
}

int client_check_key(struct client_op *op, const void *key, size_t key_len)
{
	if ((key == NULL && key_len > 0) || key_len == 0 || key_len > CLIENT_KEY_MAX)
		return client_op_fail(op, KVC_INVALID_ARGUMENT, "a key is 1 to %u bytes, not %zu",
		                      CLIENT_KEY_MAX, key_len);
	return 0;
}

int client_check_bytes(struct client_op *op, const void *p, size_t len, const char *what)
{
	if (p == NULL && len > 0)
		return client_op_fail(op, KVC_INVALID_ARGUMENT, "%s is NULL with a length of %zu",
		                      what, len);
	return 0;
}

int client_check_name(struct client_op *op, const char *name)
{
	if (name == NULL || name[0] == '\0')
		return client_op_fail(op, KVC_INVALID_ARGUMENT, "a tenant name is required");
	return 0;
}

int client_nomem(const struct kvc_call *call)
{
	static const char msg[] = "out of memory";

	if (call != NULL && call->status != NULL)
		client_status_set(call->status, KVC_RESOURCE_EXHAUSTED, msg, sizeof(msg) - 1);
	return -KVC_RESOURCE_EXHAUSTED;
}

void *client_copy_bytes(const void *p, size_t n)
{
	void *d = malloc(n != 0 ? n : 1);

	if (d != NULL && n != 0)
		memcpy(d, p, n);
	return d;
}

/* ---- open and close ----------------------------------------------------- */

static uint64_t random_client_id(void)
{
	uint64_t id = 0;

	if (getrandom(&id, sizeof(id), 0) != (ssize_t)sizeof(id)) {
		struct timespec ts;

		/* No entropy source: unique enough for one host's clients. */
		clock_gettime(CLOCK_REALTIME, &ts);
		id = ((uint64_t)ts.tv_sec * 1000000007u) ^ (uint64_t)ts.tv_nsec ^
		     ((uint64_t)getpid() << 40) ^ (uint64_t)(uintptr_t)&id;
	}
	return id != 0 ? id : 1;
}

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

static int tls_setup(kvc *c, const struct kvc_options *o)
{
	const char *ca = o->tls_ca_file;
	char host[256];
	int rv;

	if ((rv = nng_tls_config_alloc(&c->tls, NNG_TLS_MODE_CLIENT)) != 0)
		return rv;
	/* Without a CA of its own, verify against the system's bundle. */
	if (ca == NULL && access(CLIENT_SYSTEM_CA, R_OK) == 0)
		ca = CLIENT_SYSTEM_CA;
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

static char *strdup_or_null(const char *s, bool *failed)
{
	char *d;

	if (s == NULL)
		return NULL;
	if ((d = strdup(s)) == NULL)
		*failed = true;
	return d;
}

static void client_free(kvc *c)
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
	free(c->endpoint);
	free(c->tenant);
	free(c->token);
	free(c);
}

int kvc_open(const struct kvc_options *o, kvc **ret)
{
	struct kvc_options defaults;
	kvc *c;
	bool nomem = false, sock_open = false;
	uint32_t i;
	int rv;

	if (ret == NULL)
		return -KVC_INVALID_ARGUMENT;
	if (o == NULL) {
		kvc_options_init(&defaults);
		o = &defaults;
	}
	if ((c = calloc(1, sizeof(*c))) == NULL)
		return -KVC_RESOURCE_EXHAUSTED;
	pthread_mutex_init(&c->mu, NULL);
	if (client_cond_init_monotonic(&c->slot_cv) != 0 ||
	    client_cond_init_monotonic(&c->conn_cv) != 0 ||
	    client_cond_init_monotonic(&c->idle_cv) != 0) {
		rv = -KVC_RESOURCE_EXHAUSTED;
		goto fail;
	}
	c->endpoint =
	        strdup_or_null(o->endpoint != NULL ? o->endpoint : KVC_DEFAULT_ENDPOINT, &nomem);
	c->tenant = strdup_or_null(o->tenant != NULL ? o->tenant : "default", &nomem);
	c->token = strdup_or_null(o->token, &nomem);
	c->timeout_ms = o->timeout_ms != 0 ? o->timeout_ms : CLIENT_TIMEOUT_DEFAULT;
	c->max_message_size = o->max_message_size != 0 ? o->max_message_size : CLIENT_MSG_DEFAULT;
	c->nslots = o->contexts != 0 ? o->contexts : CLIENT_CONTEXTS_DEFAULT;
	if (c->nslots > CLIENT_CONTEXTS_MAX)
		c->nslots = CLIENT_CONTEXTS_MAX;
	c->client_id = random_client_id();
	atomic_init(&c->next_id, 1);
	if (nomem) {
		rv = -KVC_RESOURCE_EXHAUSTED;
		goto fail;
	}
	if (cstream_url(c->endpoint)) {
		if ((rv = cstream_open(c, c->endpoint, c->nslots, c->max_message_size,
		                       &c->stream)) != 0)
			goto fail;
		*ret = c;
		return 0;
	}
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
	if ((rv = nng_dialer_set_size(c->dialer, NNG_OPT_RECVMAXSZ, c->max_message_size)) != 0 ||
	    (rv = nng_dialer_set_ms(c->dialer, NNG_OPT_RECONNMAXT, CLIENT_RECONNECT_MAX_MS)) != 0) {
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
	client_free(c);
	return rv;
}

void kvc_close(kvc *c)
{
	if (c == NULL)
		return;
	if (c->stream != NULL) {
		cstream_close(c->stream);
		client_free(c);
		return;
	}
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
		int64_t until = client_now_ms() + CLIENT_CLOSE_DIAL_WAIT_MS;
		while (c->probing &&
		       client_cond_wait_until(&c->conn_cv, &c->mu, until) != ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(&c->mu);
	nng_close(c->sock); /* ends a first dial still running */
	if (c->prober_started)
		pthread_join(c->prober, NULL);
	client_free(c);
}

void kvc_drain(kvc *c)
{
	if (c == NULL)
		return;
	if (c->stream != NULL) {
		cstream_drain(c->stream);
		return;
	}
	pthread_mutex_lock(&c->mu);
	while (c->in_flight > 0)
		pthread_cond_wait(&c->idle_cv, &c->mu);
	pthread_mutex_unlock(&c->mu);
}

/* ---- raw ------------------------------------------------------------------------- */

int kvc_raw(kvc *c, uint32_t timeout_ms, const void *body, size_t len, void **ret_reply,
            size_t *ret_len)
{
	struct kvc_call call = {.timeout_ms = timeout_ms};
	struct client_op op;
	void *reply = NULL;
	size_t n = 0;
	int rv = 0;

	client_op_init(&op, c, &call, "raw request");
	op.raw = true;
	if (c == NULL || (body == NULL && len > 0))
		rv = client_op_fail(&op, KVC_INVALID_ARGUMENT, "no handle or no body");
	else if (nng_msg_alloc(&op.req, len) != 0)
		rv = client_op_fail(&op, KVC_RESOURCE_EXHAUSTED, "out of memory");
	if (rv == 0) {
		if (len > 0)
			memcpy(nng_msg_body(op.req), body, len);
		rv = client_op_run(&op);
	}
	if (rv == 0) {
		n = nng_msg_len(op.reply);
		if ((reply = client_copy_bytes(nng_msg_body(op.reply), n)) == NULL)
			rv = client_op_fail(&op, KVC_RESOURCE_EXHAUSTED, "out of memory");
	}
	rv = client_op_end(&op, NULL, rv);
	if (rv != 0)
		return rv;
	if (ret_reply != NULL)
		*ret_reply = reply;
	else
		free(reply);
	if (ret_len != NULL)
		*ret_len = n;
	return 0;
}
