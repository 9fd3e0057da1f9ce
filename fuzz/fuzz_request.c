/*
 * fuzz_request — the server's request decoding (rpc/server.c:
 * rpc_req_decode, rpc_write_prepare, rpc_write_reply; rpc/mp.c: mp_check,
 * mp_parse) against arbitrary bytes, as any client could send them. No
 * store: write methods go as far as the engine ops, Health (which needs no
 * store) is answered, other methods stop after decoding.
 *
 * Invariants:
 *   - nothing crashes, and the bytes allocated for an input stay within a
 *     fixed multiple of its size (no declared count is trusted);
 *   - mp_check accepts exactly what msgpack-c then unpacks: mp_parse
 *     succeeds iff mp_check accepts the whole buffer; mp_check's answer
 *     does not depend on bytes after the object; re-packing the parsed
 *     object is stable;
 *   - a failed decode answers a status of the set PROTOCOL.md documents
 *     (for decoding: 3 or 12) with a message; the error reply it makes
 *     is one msgpack map;
 *   - the decoder takes the token and decides nothing by it (kvd checks
 *     it, daemon/auth.c): the envelope's "token" str, pointing into the
 *     input, or none;
 *   - a decoded request has a known method, its kind, a valid tenant name,
 *     and args absent or a map;
 *   - rpc_write_prepare gives 1 op (Put, Delete) or 1 … 10 000 (Batch) of
 *     the method's types, keys of 1 … 65536 bytes and values within
 *     max_value_size pointing into the request, absent TTLs replaced by the
 *     tenant default; or an INVALID_ARGUMENT reply naming the request id;
 *   - the replies of a finished write (success, failed op) are maps with
 *     the request's id, a documented status and the op results.
 */
#include "fuzz.h"

#include "kvengine.h"
#include "mp.h"
#include "server.h"

#include <errno.h>
#include <string.h>

#define MAX_VALUE (1u << 20)
#define DEFAULT_TTL 12345u

static const struct kv_tenant_config tenant_cfg = {
	.sync = KV_SYNC_ALWAYS,
	.sync_interval_ms = 100,
	.history_versions = 1,
	.default_ttl_ms = DEFAULT_TTL,
};

static const struct rpc_limits lim_open = {
        .max_value_size = MAX_VALUE,
        .defaults = &tenant_cfg,
        .version = "0.1.0-fuzz",
};

static const uint8_t *in_buf;
static size_t in_len;

static bool inside(const void *p, size_t n)
{
	const uint8_t *q = p;

	return q >= in_buf && q <= in_buf + in_len && n <= (size_t)(in_buf + in_len - q);
}

static bool status_documented(int s)
{
	switch (s) {
	case RPC_OK:
	case RPC_INVALID_ARGUMENT:
	case RPC_DEADLINE_EXCEEDED:
	case RPC_NOT_FOUND:
	case RPC_ALREADY_EXISTS:
	case RPC_RESOURCE_EXHAUSTED:
	case RPC_FAILED_PRECONDITION:
	case RPC_OUT_OF_RANGE:
	case RPC_UNIMPLEMENTED:
	case RPC_INTERNAL:
	case RPC_UNAVAILABLE:
	case RPC_DATA_LOSS:
	case RPC_UNAUTHENTICATED:
		return true;
	default:
		return false;
	}
}

/* A reply the server built: one map with v = 1, the id and a documented
 * status; *ret_result is its result map (or NULL). The zone is the caller's. */
static void check_reply(const struct rpc_reply *rp, msgpack_zone *zone, uint64_t id,
                        int want_status, const msgpack_object **ret_result)
{
	msgpack_object root;
	uint64_t v = 0, rid = 0, status = 0;
	const char *msg;
	size_t ml;

	FZ_CHECK(mp_parse((const uint8_t *)rp->buf.data, rp->buf.size, zone, &root) == 0);
	FZ_CHECK(root.type == MSGPACK_OBJECT_MAP);
	FZ_CHECK(mp_field_uint(&root, "v", true, &v) == 0 && v == 1);
	FZ_CHECK(mp_field_uint(&root, "id", true, &rid) == 0 && rid == id);
	FZ_CHECK(mp_field_uint(&root, "status", true, &status) == 0);
	FZ_CHECK(status <= 16 && status_documented((int)status));
	FZ_CHECK(want_status < 0 || status == (uint64_t)want_status);
	if (status != 0)
		FZ_CHECK(mp_field_str(&root, "message", true, &msg, &ml) == 0 && ml > 0);
	*ret_result = mp_map_get(&root, "result");
	FZ_CHECK(*ret_result == NULL || (*ret_result)->type == MSGPACK_OBJECT_MAP);
	FZ_CHECK(status != 0 || *ret_result != NULL);
}

static void check_msgpack(const uint8_t *data, size_t size)
{
	size_t end = 0, end2 = 0;
	msgpack_zone zone;
	msgpack_object obj;
	int rv, rv2, prv;

	rv = mp_check(data, size, MP_DEPTH_MAX, &end);
	FZ_CHECK(rv == 0 || rv == -EINVAL || rv == -E2BIG || rv == -ELOOP);
	if (rv == 0) {
		FZ_CHECK(end >= 1 && end <= size);
		/* the object alone checks the same */
		FZ_CHECK(mp_check(data, end, MP_DEPTH_MAX, &end2) == 0 && end2 == end);
	}
	/* a shallower limit only refuses more */
	rv2 = mp_check(data, size, 2, &end2);
	if (rv2 == 0)
		FZ_CHECK(rv == 0 && end2 == end);
	/* a depth above MP_DEPTH_MAX is MP_DEPTH_MAX */
	FZ_CHECK((mp_check(data, size, 1000, &end2) == 0) == (rv == 0));

	FZ_CHECK(msgpack_zone_init(&zone, 2048));
	prv = mp_parse(data, size, &zone, &obj);
	FZ_CHECK(prv == 0 || prv == -EINVAL || prv == -E2BIG || prv == -ELOOP);
	/* mp_check and msgpack-c agree on what a complete object is */
	FZ_CHECK((prv == 0) == (rv == 0 && end == size));
	if (prv == 0) {
		/* re-packing is stable: pack(parse(pack(x))) == pack(x) */
		msgpack_sbuffer a, b;
		msgpack_packer pk;
		msgpack_object again;
		msgpack_sbuffer_init(&a);
		msgpack_sbuffer_init(&b);
		msgpack_packer_init(&pk, &a, msgpack_sbuffer_write);
		FZ_CHECK(msgpack_pack_object(&pk, obj) == 0);
		FZ_CHECK(mp_parse((const uint8_t *)a.data, a.size, &zone, &again) == 0);
		msgpack_packer_init(&pk, &b, msgpack_sbuffer_write);
		FZ_CHECK(msgpack_pack_object(&pk, again) == 0);
		FZ_CHECK(a.size == b.size && memcmp(a.data, b.data, a.size) == 0);
		msgpack_sbuffer_destroy(&a);
		msgpack_sbuffer_destroy(&b);
	}
	msgpack_zone_destroy(&zone);
}

static void check_write(const struct rpc_req *r)
{
	struct kv_op *ops = (struct kv_op *)(uintptr_t)1, *ops0 = ops;
	size_t n = 7, i;
	struct rpc_reply rp;
	msgpack_zone zone;
	const msgpack_object *result;
	int rv;

	rpc_reply_init(&rp);
	FZ_CHECK(msgpack_zone_init(&zone, 2048));
	rv = rpc_write_prepare(r, &tenant_cfg, &lim_open, &ops, &n, &rp);
	if (rv != 0) {
		FZ_CHECK(rv == -EINVAL || rv == -ENOMEM);
		FZ_CHECK(ops == ops0 && n == 7); /* untouched */
		check_reply(&rp, &zone, r->id, rv == -EINVAL ? RPC_INVALID_ARGUMENT : -1, &result);
		goto out;
	}
	FZ_CHECK(n >= 1 && n <= RPC_BATCH_OPS_MAX);
	FZ_CHECK(r->method == RPC_BATCH || n == 1);
	for (i = 0; i < n; i++) {
		const struct kv_op *op = &ops[i];
		FZ_CHECK(op->type == KV_OP_PUT || op->type == KV_OP_DELETE);
		if (r->method == RPC_PUT)
			FZ_CHECK(op->type == KV_OP_PUT);
		if (r->method == RPC_DELETE)
			FZ_CHECK(op->type == KV_OP_DELETE);
		FZ_CHECK(op->key_len >= 1 && op->key_len <= KV_KEY_SIZE_MAX);
		FZ_CHECK(inside(op->key, op->key_len));
		if (op->type == KV_OP_PUT) {
			FZ_CHECK(op->value != NULL && op->value_len <= MAX_VALUE);
			FZ_CHECK(op->value_len == 0 || inside(op->value, op->value_len));
		} else {
			FZ_CHECK(op->value_len == 0);
		}
		FZ_CHECK(op->version == 0 && op->status == 0);
	}
	/* a write that went through: versions 1..n (a Delete of a missing key: 0) */
	for (i = 0; i < n; i++)
		ops[i].version = i + 1;
	rpc_write_reply(r, 0, ops, n, &rp);
	check_reply(&rp, &zone, r->id, RPC_OK, &result);
	if (r->method == RPC_BATCH) {
		const msgpack_object *vl = mp_map_get(result, "versions");
		FZ_CHECK(vl != NULL && vl->type == MSGPACK_OBJECT_ARRAY && vl->via.array.size == n);
		for (i = 0; i < n; i++)
			FZ_CHECK(vl->via.array.ptr[i].type == MSGPACK_OBJECT_POSITIVE_INTEGER &&
			         vl->via.array.ptr[i].via.u64 == i + 1);
	} else {
		uint64_t v = 0;
		FZ_CHECK(mp_field_uint(result, "version", true, &v) == 0 && v == 1);
	}
	if (r->method == RPC_DELETE) {
		ops[0].version = 0;
		rpc_write_reply(r, 0, ops, n, &rp);
		check_reply(&rp, &zone, r->id, RPC_NOT_FOUND, &result);
	}
	/* a condition that failed on the last op */
	ops[n - 1].status = KV_ECONFLICT;
	rpc_write_reply(r, KV_ECONFLICT, ops, n, &rp);
	check_reply(&rp, &zone, r->id, RPC_FAILED_PRECONDITION, &result);
	if (r->method == RPC_BATCH) {
		uint64_t k = 0;
		FZ_CHECK(mp_field_uint(result, "failed_op", true, &k) == 0 && k == n - 1);
	}
	/* and an I/O error */
	ops[n - 1].status = 0;
	rpc_write_reply(r, -EIO, ops, n, &rp);
	check_reply(&rp, &zone, r->id, RPC_UNAVAILABLE, &result);
	free(ops);
out:
	msgpack_zone_destroy(&zone);
	rpc_reply_release(&rp);
}

/* The decoder takes the token (kvd checks it, daemon/auth.c): the envelope's
 * "token" str, pointing into the input, or none. */
static void check_token(const struct rpc_req *r)
{
	const char *t = NULL;
	size_t tl = 0;

	if (mp_field_str(&r->root, "token", false, &t, &tl) == 0 && t != NULL) {
		FZ_CHECK(r->token == t && r->token_len == tl && inside(t, tl));
	} else {
		FZ_CHECK(r->token == NULL);
	}
}

/* A blob request's arguments (daemon/upload.c reads them so): read, or
 * refused with INVALID_ARGUMENT and a message; what they point at is
 * inside the input. */
static void check_blob_args(const struct rpc_req *r)
{
	struct rpc_blob_args ba;
	struct rpc_reply rp;
	msgpack_zone zone;
	const msgpack_object *result;

	rpc_reply_init(&rp);
	if (rpc_blob_args(r, &ba, &rp) != 0) {
		FZ_CHECK(msgpack_zone_init(&zone, 2048));
		check_reply(&rp, &zone, r->id, RPC_INVALID_ARGUMENT, &result);
		msgpack_zone_destroy(&zone);
	} else if (r->method == RPC_BLOB_BEGIN) {
		FZ_CHECK(ba.key_len >= 1 && ba.key_len <= KV_KEY_SIZE_MAX && inside(ba.key, ba.key_len));
		FZ_CHECK(ba.chunk_size == 0 || (ba.chunk_size >= KV_BLOB_CHUNK_MIN &&
		                                ba.chunk_size <= KV_BLOB_CHUNK_MAX));
	} else if (r->method == RPC_BLOB_APPEND) {
		FZ_CHECK(ba.data == NULL ? ba.len == 0 : inside(ba.data, ba.len));
	} else if (r->method == RPC_BLOB_COMMIT) {
		FZ_CHECK(ba.opts.if_version != KV_ANY_VERSION || !mp_map_get(r->args, "if_version"));
	}
	rpc_reply_release(&rp);
}

static void check_decoded(const struct rpc_req *r)
{
	FZ_CHECK(r->method < RPC_METHODS);
	switch (r->method) {
	case RPC_PUT:
	case RPC_DELETE:
	case RPC_BATCH:
		FZ_CHECK(r->kind == RPC_KIND_WRITE);
		break;
	case RPC_GET:
	case RPC_SCAN:
	case RPC_VERSIONS:
	case RPC_BLOB_INFO:
	case RPC_BLOB_READ:
		FZ_CHECK(r->kind == RPC_KIND_READ);
		break;
	case RPC_BLOB_BEGIN:
	case RPC_BLOB_APPEND:
	case RPC_BLOB_COMMIT:
	case RPC_BLOB_ABORT:
		FZ_CHECK(r->kind == RPC_KIND_BLOB);
		break;
	case RPC_STATS:
		FZ_CHECK(r->kind == RPC_KIND_READ || r->kind == RPC_KIND_LOCAL);
		break;
	case RPC_COMPACT:
		FZ_CHECK(r->kind == RPC_KIND_MAINT);
		break;
	case RPC_TENANT_DROP:
	case RPC_TENANT_PASSIVATE:
	case RPC_TENANT_ACTIVATE:
		FZ_CHECK(r->kind == RPC_KIND_TENANT);
		break;
	default:
		FZ_CHECK(r->kind == RPC_KIND_LOCAL);
		break;
	}
	FZ_CHECK(memchr(r->tenant, '\0', sizeof(r->tenant)) != NULL);
	FZ_CHECK(kv_tenant_name_valid(r->tenant, strlen(r->tenant)));
	FZ_CHECK(r->args == NULL || r->args->type == MSGPACK_OBJECT_MAP);
	FZ_CHECK(r->root.type == MSGPACK_OBJECT_MAP);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rpc_req a;
	const char *msg_a = NULL;
	int st_a = -1, rv_a;
	size_t bytes;

	in_buf = data;
	in_len = size;
	fz_alloc_begin();
	check_msgpack(data, size);

	rv_a = rpc_req_decode(&a, &lim_open, data, size, &st_a, &msg_a);
	if (rv_a != 0) {
		struct rpc_reply rp;
		msgpack_zone zone;
		const msgpack_object *result;

		FZ_CHECK(rv_a == -EINVAL);
		FZ_CHECK(st_a == RPC_INVALID_ARGUMENT || st_a == RPC_UNIMPLEMENTED);
		FZ_CHECK(msg_a != NULL && msg_a[0] != '\0' && strlen(msg_a) < 256);
		/* the answer kvd sends (daemon/worker.c) */
		rpc_reply_init(&rp);
		FZ_CHECK(msgpack_zone_init(&zone, 2048));
		rpc_reply_error(&rp, a.id, st_a, msg_a);
		check_reply(&rp, &zone, a.id, st_a, &result);
		msgpack_zone_destroy(&zone);
		rpc_reply_release(&rp);
	} else {
		FZ_CHECK(st_a == RPC_OK);
		check_decoded(&a);
		check_token(&a);
		if (a.kind == RPC_KIND_WRITE) {
			check_write(&a);
		} else if (a.kind == RPC_KIND_BLOB) {
			check_blob_args(&a);
		} else if (a.method == RPC_HEALTH) {
			struct rpc_reply rp;
			msgpack_zone zone;
			const msgpack_object *result;
			rpc_reply_init(&rp);
			FZ_CHECK(msgpack_zone_init(&zone, 2048));
			rpc_run_local(NULL, &lim_open, &a, 1, 2, 3, 4, false, &rp);
			check_reply(&rp, &zone, a.id, RPC_OK, &result);
			msgpack_zone_destroy(&zone);
			rpc_reply_release(&rp);
		}
	}
	rpc_req_release(&a);
	bytes = fz_alloc_end();
	fz_alloc_report("request", bytes, size);
	/* A decode, the msgpack checks (three parses) and the replies:
	 * msgpack objects cost 24 bytes (48 a map entry) for at least one
	 * byte (two) of input, zone chunks round up by at most 2x, an op is
	 * sizeof(struct kv_op) for at least one byte; replies start at 8 KiB. */
	FZ_CHECK(bytes <= 256 * 1024 + 1024 * size);
	return 0;
}
