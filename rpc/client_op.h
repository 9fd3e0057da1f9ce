/*
 * client_op.h — one request of libkvclient and its reply, as the transport
 * (client.c) carries it for the calls (client_calls.c, client_scan.c).
 *
 * A call's life:
 *
 *   client_op_init      resolve the timeout; the deadline starts now
 *   client_op_request   allocate the request, pack the envelope; the
 *                       caller packs the args through op->pk (creq_*)
 *   client_op_run       blocking round trip: wait for a connection and a
 *                       context, send, receive, check the envelope
 *     or client_op_send_async   the same, ending in op->complete on an nng
 *                       thread, after which the transport frees the op
 *   decode op->env.result (crep_*), client_op_decoded on a decoder error
 *   client_op_end       report through call->status, free the buffers
 *
 * client_op_end may run after any step, so every call has one exit path.
 * Errors are negative KVC codes with op->st saying why.
 *
 * Internal to libkvclient.
 */
#ifndef KV_RPC_CLIENT_OP_H
#define KV_RPC_CLIENT_OP_H

#include "client_codec.h"
#include "kvclient.h"

#include <nng/nng.h>
#include <pthread.h>

struct client_op {
	kvc *c;
	const char *method;
	uint64_t id;
	uint32_t timeout_ms;
	int64_t deadline_ms; /* CLOCK_MONOTONIC */
	nng_msg *req;        /* ours until the transport hands it to nng */
	int write_error;
	msgpack_packer pk;
	bool raw; /* kvc_raw: the reply is not decoded */

	nng_msg *reply; /* the envelope and result point into it */
	msgpack_zone zone;
	bool zone_ready;
	msgpack_object root;
	struct crep_envelope env;
	int rv;
	struct kvc_status st;

	bool done; /* blocking: set under the handle's lock */
	pthread_cond_t done_cv;

	/* async: on an nng thread, once; decodes and calls fn */
	void (*complete)(struct client_op *op);
	struct client_op *complete_next; /* stream: a list of ops being failed */
	kvc_async_fn fn;
	void *arg;
};

void client_op_init(struct client_op *op, kvc *c, const struct kvc_call *call, const char *method);
/* The handle's id for the next request (any thread). */
uint64_t client_next_id(kvc *c);
/* has_args: the caller packs an args map next; payload: bytes of keys and
 * values it will pack (to reserve room once). */
int client_op_request(struct client_op *op, const struct kvc_call *call, bool has_args,
                      size_t payload);
int client_op_run(struct client_op *op);
/* Takes a malloc'd op (op->complete set): 0 when sent; on an error the op
 * is left to the caller. */
int client_op_send_async(struct client_op *op);
int client_op_report(struct client_op *op, const struct kvc_call *call, int rv);
int client_op_end(struct client_op *op, const struct kvc_call *call, int rv);
/* client_op_end's freeing, and free(op). NULL ok. */
void client_op_free(struct client_op *op);

__attribute__((format(printf, 3, 4))) int client_op_fail(struct client_op *op, int code,
                                                         const char *fmt, ...);
/* A decoder's -EINVAL as -KVC_INTERNAL "malformed reply to <method>". */
int client_op_decoded(struct client_op *op, int rv);

int client_check_key(struct client_op *op, const void *key, size_t key_len);
int client_check_bytes(struct client_op *op, const void *p, size_t len, const char *what);
int client_check_name(struct client_op *op, const char *name);
/* -KVC_RESOURCE_EXHAUSTED, said through call->status, for an op that could
 * not even be allocated. */
int client_nomem(const struct kvc_call *call);
/* A malloc'd copy, never NULL when it worked, also for 0 bytes. */
void *client_copy_bytes(const void *p, size_t n);
/* One line: control characters become spaces; a cut keeps UTF-8 whole. */
void client_status_set(struct kvc_status *st, int code, const char *msg, size_t len);

/* Replies (client.c). client_reply_parse: a reply message's envelope,
 * parsed with bounds into zone (initialised here; destroyed again on
 * failure): 0, -KVC_RESOURCE_EXHAUSTED or -KVC_INTERNAL. */
int client_reply_parse(nng_msg *m, msgpack_zone *zone, msgpack_object *root,
                       struct crep_envelope *env);
/* op->env against op: the id, and the status as the call's outcome. */
int client_op_check_reply(struct client_op *op);
/* Both, into op (op->reply set). */
int client_op_decode_reply(struct client_op *op);

int64_t client_now_ms(void); /* CLOCK_MONOTONIC */
int client_cond_init_monotonic(pthread_cond_t *cv);
/* ETIMEDOUT once the monotonic deadline passed. */
int client_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t deadline_ms);

/* ---- the stream transport (client_stream.c): kv+ipc:// and kv+tcp:// ---- */

struct cstream;

bool cstream_url(const char *endpoint);
/* Checks the endpoint; connects on first use. -KVC_INVALID_ARGUMENT or
 * -KVC_RESOURCE_EXHAUSTED. */
int cstream_open(kvc *c, const char *endpoint, uint32_t max_in_flight, size_t max_message_size,
                 struct cstream **ret);
/* Waits for the calls in flight, then closes. NULL ok. */
void cstream_close(struct cstream *s);
void cstream_drain(struct cstream *s);
int cstream_run(struct cstream *s, struct client_op *op);
int cstream_send_async(struct cstream *s, struct client_op *op);

#endif
