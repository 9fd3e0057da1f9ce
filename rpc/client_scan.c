/*
 * client_scan.c — kvc_scan_*: an iterator that reads a range page by page.
 *
 * The first page's revision is sent as as_of with every later page, along
 * with the continuation the page before returned, so all pages come from one
 * snapshot. A page holds at most page_size items and never more than the
 * limit still wants. Items point into the current page's reply, which is
 * kept until the next page replaces it.
 */
#include "client_op.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define CLIENT_SCAN_PAGE_DEFAULT 1000u
#define CLIENT_SCAN_PAGE_MAX     10000u /* PROTOCOL.md: Scan pages */

struct kvc_iter {
	kvc *c;
	struct kvc_call call;   /* its tenant is a copy, after the struct */
	struct kvc_scan_opts o; /* start, end and prefix: copies, after the struct */
	uint32_t page_size;
	uint64_t returned;
	uint64_t revision; /* the first page's; as_of of the pages after it */
	bool started;
	bool more;
	struct client_op *page; /* the current page's reply; items point into it */
	struct crep_scan_page pg;
	uint32_t pos;
	int error; /* sticky */
};

static int scan_check(struct client_op *op, const struct kvc_scan_opts *o)
{
	int rv;

	if ((rv = client_check_bytes(op, o->start, o->start_len, "start")) != 0 ||
	    (rv = client_check_bytes(op, o->end, o->end_len, "end")) != 0 ||
	    (rv = client_check_bytes(op, o->prefix, o->prefix_len, "prefix")) != 0)
		return rv;
	if (o->start_len > WIRE_KEY_MAX || o->end_len > WIRE_KEY_MAX ||
	    o->prefix_len > WIRE_KEY_MAX)
		return client_op_fail(op, KVC_INVALID_ARGUMENT,
		                      "scan bounds are keys of at most %u bytes", WIRE_KEY_MAX);
	return 0;
}

/* Copies n bytes of p to *pos and advances it; NULL stays NULL. */
static const void *scan_copy(char **pos, const void *p, size_t n)
{
	char *d = *pos;

	if (p == NULL)
		return NULL;
	memcpy(d, p, n);
	*pos += n;
	return d;
}

int kvc_scan_open(kvc *c, const struct kvc_call *call, const struct kvc_scan_opts *o,
                  kvc_iter **ret)
{
	static const struct kvc_scan_opts all = {0};
	const char *tenant = call != NULL ? call->tenant : NULL;
	size_t tenant_len = tenant != NULL ? strlen(tenant) + 1 : 0;
	struct client_op op;
	kvc_iter *it;
	char *pos;
	int rv;

	client_op_init(&op, c, call, WIRE_M_SCAN);
	if (o == NULL)
		o = &all;
	if (c == NULL || ret == NULL)
		return client_op_end(&op, call,
		                     client_op_fail(&op, KVC_INVALID_ARGUMENT,
		                                    "no handle or no iterator to return"));
	if ((rv = scan_check(&op, o)) != 0)
		return client_op_end(&op, call, rv);
	/* One allocation: the iterator, then its copies of the bounds and the
	 * tenant, so the caller's may go once this returns. */
	it = calloc(1, sizeof(*it) + o->start_len + o->end_len + o->prefix_len + tenant_len);
	if (it == NULL)
		return client_op_end(&op, call,
		                     client_op_fail(&op, KVC_RESOURCE_EXHAUSTED,
		                                    "out of memory for an iterator"));
	pos = (char *)(it + 1);
	it->c = c;
	if (call != NULL)
		it->call = *call;
	it->call.tenant = scan_copy(&pos, tenant, tenant_len);
	it->o = *o;
	it->o.start = scan_copy(&pos, o->start, o->start_len);
	it->o.end = scan_copy(&pos, o->end, o->end_len);
	it->o.prefix = scan_copy(&pos, o->prefix, o->prefix_len);
	it->page_size = o->page_size != 0 ? o->page_size : CLIENT_SCAN_PAGE_DEFAULT;
	if (it->page_size > CLIENT_SCAN_PAGE_MAX)
		it->page_size = CLIENT_SCAN_PAGE_MAX;
	it->revision = o->as_of;
	it->more = true;
	*ret = it;
	return client_op_end(&op, call, 0);
}

/* Fetches the next page; the previous page (and items into it) is freed. */
static int scan_fetch(kvc_iter *it)
{
	const struct kvc_call *call = &it->call;
	struct client_op *op = malloc(sizeof(*op));
	uint64_t left = it->o.limit != 0 ? it->o.limit - it->returned : UINT64_MAX;
	uint32_t limit = left < it->page_size ? (uint32_t)left : it->page_size;
	struct crep_scan_page pg;
	bool same;
	int rv;

	if (op == NULL)
		return client_nomem(call);
	client_op_init(op, it->c, call, WIRE_M_SCAN);
	if ((rv = client_op_request(op, call, true,
	                            it->pg.cont_len + it->o.start_len + it->o.end_len +
	                                    it->o.prefix_len)) != 0)
		goto fail;
	creq_scan(&op->pk, &it->o, limit, it->revision, it->pg.cont, it->pg.cont_len);
	if ((rv = client_op_run(op)) != 0 ||
	    (rv = client_op_decoded(op, crep_scan(op->env.result, &pg))) != 0)
		goto fail;
	/* An empty page that hands back the continuation it was given would
	 * have us ask for it forever. */
	same = it->pg.cont != NULL && pg.cont != NULL && pg.cont_len == it->pg.cont_len &&
	       memcmp(pg.cont, it->pg.cont, pg.cont_len) == 0;
	if (pg.more && pg.items->via.array.size == 0 && same) {
		rv = client_op_fail(op, KVC_INTERNAL,
		                    "malformed reply to Scan: a page without progress");
		goto fail;
	}
	client_op_free(it->page);
	if (!it->started)
		it->revision = pg.revision;
	it->started = true;
	it->more = pg.more;
	it->pg = pg;
	it->pos = 0;
	it->page = op;
	return client_op_report(op, call, 0);
fail:
	rv = client_op_end(op, call, rv);
	free(op);
	return rv;
}

int kvc_scan_next(kvc_iter *it, struct kvc_item *ret)
{
	struct kvc_item item;

	if (it == NULL)
		return -KVC_INVALID_ARGUMENT;
	if (it->error != 0)
		return it->error;
	for (;;) {
		if (it->o.limit != 0 && it->returned >= it->o.limit)
			return 1;
		if (it->page != NULL && it->pos < it->pg.items->via.array.size) {
			if (crep_scan_item(&it->pg.items->via.array.ptr[it->pos], &item) != 0) {
				it->error = client_op_decoded(it->page, -EINVAL);
				if (it->call.status != NULL)
					*it->call.status = it->page->st;
				return it->error;
			}
			it->pos++;
			it->returned++;
			if (ret != NULL)
				*ret = item;
			return 0;
		}
		if (it->started && !it->more)
			return 1;
		if ((it->error = scan_fetch(it)) != 0)
			return it->error;
	}
}

bool kvc_scan_blob(const kvc_iter *it, uint64_t *ret_size)
{
	const msgpack_object *item;
	uint64_t size = 0;

	if (it == NULL || it->page == NULL || it->pos == 0 ||
	    it->pos > it->pg.items->via.array.size)
		return false;
	item = &it->pg.items->via.array.ptr[it->pos - 1];
	/* [key, nil, version, {blob: true, blob_size}] */
	if (item->type != MSGPACK_OBJECT_ARRAY || item->via.array.size < 4 ||
	    item->via.array.ptr[3].type != MSGPACK_OBJECT_MAP ||
	    !crep_blob(&item->via.array.ptr[3], &size))
		return false;
	if (ret_size != NULL)
		*ret_size = size;
	return true;
}

uint64_t kvc_scan_revision(const kvc_iter *it)
{
	return it != NULL && it->started ? it->revision : 0;
}

void kvc_scan_close(kvc_iter *it)
{
	if (it == NULL)
		return;
	client_op_free(it->page);
	free(it);
}
