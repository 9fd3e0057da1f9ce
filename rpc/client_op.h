/*
 * client_op.h — one request of libkvclient and its reply, as the calls
 * (client_calls.c, client_scan.c) build it and a transport (client_stream.c,
 * client_nng.c) carries it; client_op.c holds the life of a request that
 * every transport shares. The layers, top down:
 *
 *   client.c            the handle: kvc_open picks a transport by URL
 *   client_calls.c ...  build requests, decode replies (client_codec.c)
 *   client_stream.c, client_nng.c   struct client_transport
 *   client_op.c         requests, replies, deadlines, status (this header)
 *   wire.h              the protocol's constants
 *
 * A transport calls only down (client_op.c); the handle and the calls reach
 * a transport only through c->tr.
 *
 * A call's life:
 *
 *   client_op_init      resolve the timeout; the deadline starts now
 *   client_op_request   allocate the request, pack the envelope; the
 *                       caller packs the args through op->pk (creq_*)
 *   client_op_run       checks the request, then the transport's blocking
 *                       round trip: send op->req, receive op->reply, check
 *                       the envelope (client_op_decode_reply)
 *     or client_op_send_async   the same, ending in op->complete on a
 *                       library thread, after which the transport frees
 *                       the op
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

#include <pthread.h>
#include <stdatomic.h>

struct client_op;

/* A request or a reply: malloc'd bytes, or (release set) bytes a transport
 * lends, given back with release(hold). */
struct client_buf {
	uint8_t *data;
	size_t len;
	size_t cap;
	void (*release)(void *hold);
	void *hold;
};

/* A transport: how a handle's requests reach kvd. Each function takes the
 * state its open returned. run and send_async are given an op whose
 * request is complete and within max_message_size; they return 0 or a
 * negative KVC code with op->st saying why (client_op_fail). */
struct client_transport {
	const char *name;
	/* Whether it serves this endpoint (by its scheme). */
	bool (*accepts)(const char *endpoint);
	/* Checks c->endpoint; may connect in the background. Takes its settings
	 * from c and o. -KVC_* as kvc_open. */
	int (*open)(kvc *c, const struct kvc_options *o, void **ret);
	/* Blocking round trip: send op->req, leave the reply in op->reply,
	 * decoded with client_op_decode_reply unless op->raw. */
	int (*run)(void *t, struct client_op *op);
	/* Takes a malloc'd op: 0 when sent (op->complete then runs once, and
	 * the transport frees the op); on an error the op is the caller's. */
	int (*send_async)(void *t, struct client_op *op);
	/* Waits until no call is in flight. */
	void (*drain)(void *t);
	/* Waits for the calls in flight, then closes. NULL ok. */
	void (*close)(void *t);
};

extern const struct client_transport client_stream_transport; /* kv+ipc://, kv+tcp:// */
extern const struct client_transport client_nng_transport;    /* ipc://, tcp://, tls+tcp:// */

/* The handle: what every transport and call shares. Set once in kvc_open. */
struct kvc {
	const struct client_transport *tr;
	void *t; /* tr's state */
	char *endpoint;
	char *tenant;
	char *token;
	char *tls_cert; /* kvc_open_tls: the client certificate and key; NULL: none */
	char *tls_key;
	char *tls_ca;   /* o->tls_ca_file, for the handles of other nodes */
	uint32_t timeout_ms;
	uint32_t contexts; /* requests in flight at most */
	size_t max_message_size;
	uint64_t client_id;
	atomic_uint_fast64_t next_id;
	/* client_route.c: the other nodes' handles and which tenant is where;
	 * NULL in a handle of another node (it follows nothing itself) */
	struct client_route *route;
	char **seeds; /* the endpoints after the first of a list; NULL: one */
	size_t nseeds;
};

struct client_op {
	kvc *c; /* the handle it runs on (another node's while a MOVED is followed) */
	const char *method;
	const char *tenant; /* the request's tenant (the call's or the handle's) */
	uint64_t id;
	uint32_t timeout_ms;
	int64_t deadline_ms;   /* CLOCK_MONOTONIC */
	struct client_buf req; /* the transport may take it (and leave it empty) */
	int write_error;
	msgpack_packer pk;
	bool raw; /* kvc_raw: the reply is not decoded */
	bool unsent; /* set by a transport that failed before sending anything
	                (no connection): another endpoint may be tried */

	struct client_buf reply; /* the envelope and result point into it */
	msgpack_zone zone;
	bool zone_ready;
	msgpack_object root;
	struct crep_envelope env;
	int rv;
	struct kvc_status st;

	bool done; /* blocking: set under the handle's lock */
	pthread_cond_t done_cv;

	/* async: on a library thread, once; decodes and calls fn */
	void (*complete)(struct client_op *op);
	struct client_op *complete_next; /* stream: a list of ops being failed */
	kvc_async_fn fn;
	void *arg;
	/* async on a handle that follows MOVED: the handle it was called on,
	 * the request again and its tenant, for the next node (client_route.c) */
	kvc *home;
	struct client_buf resend;
	char resend_tenant[65];
	int hops;
};

void client_op_init(struct client_op *op, kvc *c, const struct kvc_call *call, const char *method);
/* The handle's id for the next request (any thread). */
uint64_t client_next_id(kvc *c);
/* has_args: the caller packs an args map next; payload: bytes of keys and
 * values it will pack (to reserve room once). */
int client_op_request(struct client_op *op, const struct kvc_call *call, bool has_args,
                      size_t payload);
/* Follows MOVED replies (client_route.c), at most KVC_REDIRECTS_MAX times. */
int client_op_run(struct client_op *op);
/* Takes a malloc'd op (op->complete set): 0 when sent; on an error the op
 * is left to the caller. */
int client_op_send_async(struct client_op *op);
/* In an async op's completion: when its reply was MOVED and it may follow
 * it, sends the request again to the node named (a new op, which completes
 * in its place) and returns true; the op then completes nothing. */
bool client_op_async_moved(struct client_op *op);
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

/* Replies. client_reply_parse: a reply message's envelope,
 * parsed with bounds into zone (initialised here; destroyed again on
 * failure): 0, -KVC_RESOURCE_EXHAUSTED or -KVC_INTERNAL. */
int client_reply_parse(const void *data, size_t len, msgpack_zone *zone, msgpack_object *root,
                       struct crep_envelope *env);
/* op->env against op: the id, and the status as the call's outcome. */
int client_op_check_reply(struct client_op *op);
/* Both, into op (op->reply set). */
int client_op_decode_reply(struct client_op *op);

/* client_route.c: following MOVED. client_route_new: 0 or
 * -KVC_RESOURCE_EXHAUSTED; client_route_free closes the other nodes'
 * handles (NULL ok); client_route_drain waits for their calls. */
struct client_route;
int client_route_new(struct client_route **ret);
void client_route_free(struct client_route *r);
void client_route_drain(struct client_route *r);
/* The handle a request for tenant goes to: one that answered it before,
 * else home itself. */
kvc *client_route_pick(kvc *home, const char *tenant);
/* After a MOVED reply in op (decoded): the handle of the node it names
 * (opened once), remembered for op->tenant; NULL with op->st saying why
 * (no address, cannot open one). */
kvc *client_route_moved(kvc *home, struct client_op *op);
/* The handle of the next of the handle's other endpoints (kvc_options'
 * comma-separated list), from *next on; NULL when there is none left. */
kvc *client_route_seed(kvc *home, size_t *next);
/* A call to `to` for tenant failed to reach it (to NULL: the tenant is
 * served by home now): its route is forgotten. */
void client_route_forget(kvc *home, const char *tenant, kvc *to);

int64_t client_now_ms(void); /* CLOCK_MONOTONIC */
int client_cond_init_monotonic(pthread_cond_t *cv);
/* ETIMEDOUT once the monotonic deadline passed. */
int client_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t deadline_ms);

/* The request's bytes, moved out of op (the transport owns them then). */
struct client_buf client_op_take_request(struct client_op *op);
/* Frees (or gives back) a buffer's bytes and empties it. */
void client_buf_free(struct client_buf *b);

#endif
