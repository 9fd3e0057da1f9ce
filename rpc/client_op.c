/*
 * client_op.c — the life of one request of libkvclient, the same on every
 * transport: the request's bytes and envelope, the deadline, the reply's
 * envelope checked against the request, and the status a call reports
 * (client_op.h has the steps). It also holds what the layers share: status
 * codes and their names, the monotonic clock, condition variables on it.
 *
 * No state of its own but the handle's request ids (atomic). Any thread.
 */
#include "kvclient.h"

#include "client_op.h"
#include "wire.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

void client_buf_free(struct client_buf *b)
{
	if (b->release != NULL)
		b->release(b->hold);
	else
		free(b->data);
	*b = (struct client_buf){0};
}

/* Grows b to hold at least need bytes: 0 or -KVC_RESOURCE_EXHAUSTED. */
static int buf_reserve(struct client_buf *b, size_t need)
{
	size_t cap = b->cap != 0 ? b->cap : 256;
	uint8_t *p;

	if (need <= b->cap)
		return 0;
	while (cap < need)
		cap = cap > SIZE_MAX / 2 ? need : cap * 2;
	if ((p = realloc(b->data, cap)) == NULL)
		return -KVC_RESOURCE_EXHAUSTED;
	b->data = p;
	b->cap = cap;
	return 0;
}

int client_reply_parse(const void *data, size_t len, msgpack_zone *zone, msgpack_object *root,
                       struct crep_envelope *env)
{
	if (!msgpack_zone_init(zone, 2048))
		return -KVC_RESOURCE_EXHAUSTED;
	if (mp_parse(data, len, zone, root) != 0 || crep_envelope(root, env) != 0) {
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
	code = e->status < WIRE_STATUS_COUNT ? (int)e->status : KVC_UNKNOWN;
	if (e->message != NULL && e->message_len > 0)
		client_status_set(&op->st, code, e->message, e->message_len);
	else
		client_op_fail(op, code, "%s (status %llu)", kvc_code_name(code),
		               (unsigned long long)e->status);
	return -code;
}

int client_op_decode_reply(struct client_op *op)
{
	int rv = client_reply_parse(op->reply.data, op->reply.len, &op->zone, &op->root, &op->env);

	if (rv == -KVC_RESOURCE_EXHAUSTED)
		return client_op_fail(op, KVC_RESOURCE_EXHAUSTED, "out of memory for a reply");
	if (rv != 0)
		return client_op_fail(op, KVC_INTERNAL, "malformed reply to %s", op->method);
	op->zone_ready = true;
	return client_op_check_reply(op);
}

/* ---- ops ------------------------------------------------------------------ */

static int msg_write(void *data, const char *buf, size_t len)
{
	struct client_op *op = data;

	if (op->write_error == 0 &&
	    (op->write_error = buf_reserve(&op->req, op->req.len + len)) == 0) {
		memcpy(op->req.data + op->req.len, buf, len);
		op->req.len += len;
	}
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
	if (buf_reserve(&op->req, CREQ_OVERHEAD + payload) != 0)
		return client_op_fail(op, KVC_RESOURCE_EXHAUSTED,
		                      "out of memory for a request of %zu bytes", payload);
	msgpack_packer_init(&op->pk, op, msg_write);
	op->id = client_next_id(c);
	e.id = op->id;
	e.client = c->client_id;
	e.method = op->method;
	e.tenant = call != NULL && call->tenant != NULL ? call->tenant : c->tenant;
	op->tenant = e.tenant;
	e.timeout_ms = op->timeout_ms;
	e.token = c->token;
	e.has_args = has_args;
	creq_envelope(&op->pk, &e);
	return 0;
}

struct client_buf client_op_take_request(struct client_op *op)
{
	struct client_buf b = op->req;

	op->req = (struct client_buf){0};
	return b;
}

/* What every transport would refuse anyway, said the same way by each. */
static int op_check(struct client_op *op)
{
	if (op->write_error != 0)
		return client_op_fail(op, KVC_RESOURCE_EXHAUSTED, "out of memory while packing %s",
		                      op->method);
	/* The same bound both ways: a larger message would be dropped by the
	 * server's transport and show up as a lost connection. */
	if (op->req.len > op->c->max_message_size)
		return client_op_fail(op, KVC_INVALID_ARGUMENT,
		                      "request of %zu bytes exceeds max_message_size %zu",
		                      op->req.len, op->c->max_message_size);
	return 0;
}

/* Forgets a reply, so that the request can be sent again. */
static void op_reply_clear(struct client_op *op)
{
	client_buf_free(&op->reply);
	if (op->zone_ready)
		msgpack_zone_destroy(&op->zone);
	op->zone_ready = false;
	memset(&op->env, 0, sizeof(op->env));
}

/* A blocking round trip: to the node that serves the tenant as far as the
 * handle knows, then after each MOVED to the node it names (the same
 * request, id and deadline: nothing of it was applied where it was
 * moved). */
int client_op_run(struct client_op *op)
{
	kvc *home = op->c, *to;
	int rv, hops;

	if ((rv = op_check(op)) != 0)
		return rv;
	if (home->route == NULL || op->raw || op->tenant == NULL)
		return home->tr->run(home->t, op);
	to = client_route_pick(home, op->tenant);
	for (hops = 0;; hops++) {
		op->c = to;
		op->unsent = false;
		rv = to->tr->run(to->t, op);
		op->c = home;
		/* a node that cannot be reached or does not answer in time
		 * (stopped, frozen) loses its routes: the next call asks the
		 * handle's own node again, which says where the tenant is now */
		if ((rv == -KVC_UNAVAILABLE || rv == -KVC_DEADLINE_EXCEEDED) && to != home)
			client_route_forget(home, op->tenant, to);
		if (rv == -KVC_UNAVAILABLE && op->unsent && to == home) {
			/* the handle's first endpoint cannot be reached: the
			 * next ones of its list, while none could */
			size_t next = 0;
			kvc *seed;
			while (rv == -KVC_UNAVAILABLE && op->unsent &&
			       (seed = client_route_seed(home, &next)) != NULL) {
				op_reply_clear(op);
				op->c = to = seed;
				op->unsent = false;
				rv = to->tr->run(to->t, op);
				op->c = home;
			}
		}
		if (rv != -KVC_MOVED || hops == KVC_REDIRECTS_MAX)
			break;
		if ((to = client_route_moved(home, op)) == NULL) {
			rv = -op->st.code;
			break;
		}
		op_reply_clear(op);
	}
	return rv;
}

int client_op_send_async(struct client_op *op)
{
	int rv;

	if (op->complete == NULL)
		return client_op_fail(op, KVC_INVALID_ARGUMENT, "an async call needs a callback");
	if ((rv = op_check(op)) != 0)
		return rv;
	/* async calls go where earlier calls found the tenant, and keep the
	 * request to follow a MOVED (client_op_async_moved) */
	if (op->c->route != NULL && op->tenant != NULL && !op->raw) {
		size_t n = strlen(op->tenant);
		if (n < sizeof(op->resend_tenant) &&
		    (op->resend.data = client_copy_bytes(op->req.data, op->req.len)) != NULL) {
			op->resend.len = op->resend.cap = op->req.len;
			memcpy(op->resend_tenant, op->tenant, n + 1);
			op->home = op->c;
		}
		op->c = client_route_pick(op->c, op->tenant);
	}
	return op->c->tr->send_async(op->c->t, op);
}

bool client_op_async_moved(struct client_op *op)
{
	struct client_op *n;
	kvc *to;

	if (op->rv != -KVC_MOVED || op->home == NULL || op->hops >= KVC_REDIRECTS_MAX)
		return false;
	op->tenant = op->resend_tenant;
	if ((to = client_route_moved(op->home, op)) == NULL || (n = malloc(sizeof(*n))) == NULL)
		return false;
	/* the same request, id and deadline: nothing of it was applied where
	 * it was moved */
	client_op_init(n, to, NULL, op->method);
	n->timeout_ms = op->timeout_ms;
	n->deadline_ms = op->deadline_ms;
	n->id = op->id;
	n->req = op->resend;
	n->resend.data = client_copy_bytes(op->resend.data, op->resend.len);
	n->resend.len = n->resend.cap = n->resend.data != NULL ? op->resend.len : 0;
	memcpy(n->resend_tenant, op->resend_tenant, sizeof(n->resend_tenant));
	n->tenant = n->resend_tenant;
	n->home = n->resend.data != NULL ? op->home : NULL;
	n->hops = op->hops + 1;
	n->complete = op->complete;
	n->fn = op->fn;
	n->arg = op->arg;
	op->resend = (struct client_buf){0};
	if (to->tr->send_async(to->t, n) != 0) {
		/* not sent: the MOVED stays this op's answer */
		client_op_free(n);
		return false;
	}
	return true;
}

static void op_release(struct client_op *op)
{
	client_buf_free(&op->req);
	client_buf_free(&op->reply);
	client_buf_free(&op->resend);
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
	if ((key == NULL && key_len > 0) || key_len == 0 || key_len > WIRE_KEY_MAX)
		return client_op_fail(op, KVC_INVALID_ARGUMENT, "a key is 1 to %u bytes, not %zu",
		                      WIRE_KEY_MAX, key_len);
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
