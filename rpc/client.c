/*
 * client.c — libkvclient's handle: kvc_open picks the transport that serves
 * the endpoint's scheme (client_op.h's struct client_transport: the stream
 * transport in client_stream.c, nng in client_nng.c), and kvc_close,
 * kvc_drain and kvc_raw go through it. The calls that build requests and
 * read replies are in client_calls.c and client_scan.c; the life of a
 * request, the same on every transport, is in client_op.c.
 *
 * What it owns: the handle's settings (endpoint, tenant, token, limits, the
 * client id), set once in kvc_open and read-only after, and the transport's
 * state, which the transport owns. Any thread.
 */
#include "kvclient.h"

#include "client_op.h"

#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define CLIENT_TIMEOUT_DEFAULT  10000u /* ms */
#define CLIENT_CONTEXTS_DEFAULT 64u
#define CLIENT_CONTEXTS_MAX     4096u              /* requests in flight per handle */
#define CLIENT_MSG_DEFAULT      ((size_t)64 << 20) /* PROTOCOL.md's max_message_size */
#define CLIENT_SEEDS_MAX        15                 /* endpoints after the first */

/* The transports, asked in order; the last serves every other endpoint. */
static const struct client_transport *const transports[] = {
        &client_stream_transport,
        &client_nng_transport,
};

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
	for (size_t i = 0; i < c->nseeds; i++)
		free(c->seeds[i]);
	free(c->seeds);
	free(c->endpoint);
	free(c->tenant);
	free(c->token);
	free(c->tls_cert);
	free(c->tls_key);
	free(c->tls_ca);
	free(c);
}

/* "URL,URL,...": the first stays c->endpoint, the others become seeds
 * (tried in order when the first cannot be reached; client_op_run). */
static int split_endpoints(kvc *c)
{
	char *p = strchr(c->endpoint, ','), *tok;
	size_t n = 0;

	if (p == NULL)
		return 0;
	*p++ = '\0';
	n = 1; /* the endpoints after the first: one more than the commas left */
	for (const char *q = p; (q = strchr(q, ',')) != NULL; q++)
		n++;
	if (n > CLIENT_SEEDS_MAX || c->endpoint[0] == '\0')
		return -KVC_INVALID_ARGUMENT;
	if ((c->seeds = calloc(n, sizeof(*c->seeds))) == NULL)
		return -KVC_RESOURCE_EXHAUSTED;
	while ((tok = strsep(&p, ",")) != NULL) {
		if (*tok == '\0')
			return -KVC_INVALID_ARGUMENT;
		if ((c->seeds[c->nseeds++] = strdup(tok)) == NULL)
			return -KVC_RESOURCE_EXHAUSTED;
	}
	return 0;
}

int kvc_open(const struct kvc_options *o, kvc **ret)
{
	return kvc_open_tls(o, NULL, NULL, ret);
}

int kvc_open_tls(const struct kvc_options *o, const char *cert_file, const char *key_file,
                 kvc **ret)
{
	struct kvc_options defaults;
	kvc *c;
	bool nomem = false;
	size_t i;
	int rv;

	if (ret == NULL || (cert_file == NULL) != (key_file == NULL))
		return -KVC_INVALID_ARGUMENT;
	if (o == NULL) {
		kvc_options_init(&defaults);
		o = &defaults;
	}
	if ((c = calloc(1, sizeof(*c))) == NULL)
		return -KVC_RESOURCE_EXHAUSTED;
	c->endpoint =
	        strdup_or_null(o->endpoint != NULL ? o->endpoint : KVC_DEFAULT_ENDPOINT, &nomem);
	if (c->endpoint != NULL && (rv = split_endpoints(c)) != 0)
		goto fail;
	c->tenant = strdup_or_null(o->tenant != NULL ? o->tenant : "default", &nomem);
	c->token = strdup_or_null(o->token, &nomem);
	c->tls_cert = strdup_or_null(cert_file, &nomem);
	c->tls_key = strdup_or_null(key_file, &nomem);
	c->tls_ca = strdup_or_null(o->tls_ca_file, &nomem);
	c->timeout_ms = o->timeout_ms != 0 ? o->timeout_ms : CLIENT_TIMEOUT_DEFAULT;
	c->max_message_size = o->max_message_size != 0 ? o->max_message_size : CLIENT_MSG_DEFAULT;
	c->contexts = o->contexts != 0 ? o->contexts : CLIENT_CONTEXTS_DEFAULT;
	if (c->contexts > CLIENT_CONTEXTS_MAX)
		c->contexts = CLIENT_CONTEXTS_MAX;
	c->client_id = random_client_id();
	atomic_init(&c->next_id, 1);
	if (nomem) {
		rv = -KVC_RESOURCE_EXHAUSTED;
		goto fail;
	}
	for (i = 0; i < sizeof(transports) / sizeof(transports[0]); i++) {
		if (transports[i]->accepts(c->endpoint))
			break;
	}
	c->tr = transports[i < sizeof(transports) / sizeof(transports[0]) ? i : i - 1];
	if ((rv = client_route_new(&c->route)) != 0)
		goto fail;
	if ((rv = c->tr->open(c, o, &c->t)) != 0)
		goto fail;
	*ret = c;
	return 0;
fail:
	client_route_free(c->route);
	client_free(c);
	return rv;
}

void kvc_close(kvc *c)
{
	if (c == NULL)
		return;
	c->tr->close(c->t);
	client_route_free(c->route); /* the other nodes' handles, after their calls */
	client_free(c);
}

void kvc_drain(kvc *c)
{
	if (c == NULL)
		return;
	/* an async call that follows a MOVED goes on on another node's handle,
	 * from there perhaps to a third (at most KVC_REDIRECTS_MAX hops) */
	for (int round = 0; round <= KVC_REDIRECTS_MAX; round++) {
		c->tr->drain(c->t);
		client_route_drain(c->route);
		if (c->route == NULL)
			break;
	}
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
	else if ((op.req.data = client_copy_bytes(body, len)) == NULL)
		rv = client_op_fail(&op, KVC_RESOURCE_EXHAUSTED, "out of memory");
	if (rv == 0) {
		op.req.len = op.req.cap = len;
		rv = client_op_run(&op);
	}
	if (rv == 0) {
		n = op.reply.len;
		if ((reply = client_copy_bytes(op.reply.data, n)) == NULL)
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
