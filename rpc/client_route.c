/*
 * client_route.c — following MOVED (rpc/PROTOCOL.md, "MOVED"): a kvd in
 * cluster mode answers a request for a tenant another node serves with that
 * node's address; the handle opens a handle of its own to it (once, with
 * the same settings), remembers which node serves the tenant, and sends the
 * request there (client_op_run). As a Redis Cluster client does with MOVED.
 *
 * What it owns: the handles of other nodes (at most ROUTE_PEERS_MAX, open
 * until the handle closes) and a table tenant -> handle (at most
 * ROUTE_TENANTS_MAX entries; the oldest goes when it is full). A route is
 * only a hint: a node that no longer serves the tenant answers MOVED again,
 * and one that cannot be reached loses its routes (client_route_forget).
 *
 * Threads: any; one mutex guards both tables. Handles of other nodes are
 * never closed before the home handle is (kvc_close), so a pointer handed
 * out stays valid while calls run.
 */
#include "kvclient.h"

#include "client_op.h"
#include "mp.h"
#include "wire.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define ROUTE_PEERS_MAX   32   /* other nodes a handle talks to */
#define ROUTE_TENANTS_MAX 1024 /* tenants whose node is remembered */
#define ROUTE_ADDR_MAX    256

struct route_peer {
	char addr[ROUTE_ADDR_MAX];
	kvc *h;
};

struct route_ent {
	char tenant[65];
	kvc *h;
};

struct client_route {
	pthread_mutex_t mu;
	struct route_peer peers[ROUTE_PEERS_MAX];
	size_t npeers;
	struct route_ent ents[ROUTE_TENANTS_MAX];
	size_t nents;
	size_t next_evict; /* the entry replaced when the table is full */
};

int client_route_new(struct client_route **ret)
{
	struct client_route *r = calloc(1, sizeof(*r));

	if (r == NULL)
		return -KVC_RESOURCE_EXHAUSTED;
	pthread_mutex_init(&r->mu, NULL);
	*ret = r;
	return 0;
}

void client_route_free(struct client_route *r)
{
	if (r == NULL)
		return;
	for (size_t i = 0; i < r->npeers; i++)
		kvc_close(r->peers[i].h);
	pthread_mutex_destroy(&r->mu);
	free(r);
}

void client_route_drain(struct client_route *r)
{
	kvc *peers[ROUTE_PEERS_MAX];
	size_t n;

	if (r == NULL)
		return;
	pthread_mutex_lock(&r->mu);
	n = r->npeers;
	for (size_t i = 0; i < n; i++)
		peers[i] = r->peers[i].h;
	pthread_mutex_unlock(&r->mu);
	for (size_t i = 0; i < n; i++)
		kvc_drain(peers[i]);
}

static struct route_ent *ent_find(struct client_route *r, const char *tenant)
{
	for (size_t i = 0; i < r->nents; i++)
		if (strcmp(r->ents[i].tenant, tenant) == 0)
			return &r->ents[i];
	return NULL;
}

kvc *client_route_pick(kvc *home, const char *tenant)
{
	struct client_route *r = home->route;
	struct route_ent *e;
	kvc *h = home;

	pthread_mutex_lock(&r->mu);
	if ((e = ent_find(r, tenant)) != NULL)
		h = e->h;
	pthread_mutex_unlock(&r->mu);
	return h;
}

void client_route_forget(kvc *home, const char *tenant, kvc *to)
{
	struct client_route *r = home->route;
	struct route_ent *e;

	pthread_mutex_lock(&r->mu);
	if ((e = ent_find(r, tenant)) != NULL && (to == NULL || e->h == to))
		*e = r->ents[--r->nents];
	pthread_mutex_unlock(&r->mu);
}

/* The handle of the node at addr: home itself when it is home's endpoint,
 * one opened before, or a new one (mu held; opening sends nothing). */
static int peer_get(kvc *home, const char *addr, kvc **ret)
{
	struct client_route *r = home->route;
	struct kvc_options o;
	kvc *h;
	int rv;

	if (strcmp(addr, home->endpoint) == 0) {
		*ret = home;
		return 0;
	}
	for (size_t i = 0; i < r->npeers; i++) {
		if (strcmp(r->peers[i].addr, addr) == 0) {
			*ret = r->peers[i].h;
			return 0;
		}
	}
	if (r->npeers == ROUTE_PEERS_MAX)
		return -KVC_RESOURCE_EXHAUSTED;
	kvc_options_init(&o);
	o.endpoint = addr;
	o.tenant = home->tenant;
	o.token = home->token;
	o.timeout_ms = home->timeout_ms;
	o.contexts = home->contexts;
	o.max_message_size = home->max_message_size;
	o.tls_ca_file = home->tls_ca; /* the server name: the node's own host */
	if ((rv = kvc_open_tls(&o, home->tls_cert, home->tls_key, &h)) != 0)
		return rv;
	/* it follows nothing itself: the home handle does */
	client_route_free(h->route);
	h->route = NULL;
	snprintf(r->peers[r->npeers].addr, sizeof(r->peers[r->npeers].addr), "%s", addr);
	r->peers[r->npeers++].h = h;
	*ret = h;
	return 0;
}

kvc *client_route_seed(kvc *home, size_t *next)
{
	struct client_route *r = home->route;
	kvc *h = NULL;

	pthread_mutex_lock(&r->mu);
	while (h == NULL && *next < home->nseeds)
		if (peer_get(home, home->seeds[(*next)++], &h) != 0 || h == home)
			h = NULL;
	pthread_mutex_unlock(&r->mu);
	return h;
}

kvc *client_route_moved(kvc *home, struct client_op *op)
{
	struct client_route *r = home->route;
	char addr[ROUTE_ADDR_MAX];
	const char *a = NULL;
	size_t alen = 0;
	struct route_ent *e;
	kvc *h = NULL;
	int rv;

	if (op->env.result == NULL ||
	    mp_field_str(op->env.result, WIRE_F_ADDRESS, true, &a, &alen) != 0 || alen == 0 ||
	    alen >= sizeof(addr) || memchr(a, '\0', alen) != NULL) {
		/* the message the server sent (op->st) stays the call's */
		return NULL;
	}
	memcpy(addr, a, alen);
	addr[alen] = '\0';
	pthread_mutex_lock(&r->mu);
	if ((rv = peer_get(home, addr, &h)) != 0) {
		pthread_mutex_unlock(&r->mu);
		client_op_fail(op, -rv, "cannot open a handle of %s, which serves tenant '%s'",
		               addr, op->tenant);
		return NULL;
	}
	if ((e = ent_find(r, op->tenant)) == NULL) {
		if (r->nents < ROUTE_TENANTS_MAX) {
			e = &r->ents[r->nents++];
		} else {
			e = &r->ents[r->next_evict];
			r->next_evict = (r->next_evict + 1) % ROUTE_TENANTS_MAX;
		}
		snprintf(e->tenant, sizeof(e->tenant), "%s", op->tenant);
	}
	e->h = h;
	if (h == home)
		*e = r->ents[--r->nents]; /* home is where a tenant goes anyway */
	pthread_mutex_unlock(&r->mu);
	return h;
}
