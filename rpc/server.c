/* server.c — decoding requests, running methods, encoding replies. */
#include "server.h"
#include "server_internal.h"

#include "mp.h"
#include "wire.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
	const char *name;
	enum rpc_kind kind;
} methods[RPC_METHODS] = {
	[RPC_PUT] = {WIRE_M_PUT, RPC_KIND_WRITE},
	[RPC_GET] = {WIRE_M_GET, RPC_KIND_READ},
	[RPC_DELETE] = {WIRE_M_DELETE, RPC_KIND_WRITE},
	[RPC_SCAN] = {WIRE_M_SCAN, RPC_KIND_READ},
	[RPC_VERSIONS] = {WIRE_M_VERSIONS, RPC_KIND_READ},
	[RPC_BATCH] = {WIRE_M_BATCH, RPC_KIND_WRITE},
	[RPC_COMPACT] = {WIRE_M_COMPACT, RPC_KIND_MAINT},
	[RPC_STATS] = {WIRE_M_STATS, RPC_KIND_LOCAL},
	[RPC_TENANT_CREATE] = {WIRE_M_TENANT_CREATE, RPC_KIND_LOCAL},
	[RPC_TENANT_DROP] = {WIRE_M_TENANT_DROP, RPC_KIND_TENANT},
	[RPC_TENANT_LIST] = {WIRE_M_TENANT_LIST, RPC_KIND_LOCAL},
	[RPC_TENANT_INFO] = {WIRE_M_TENANT_INFO, RPC_KIND_LOCAL},
	[RPC_TENANT_PASSIVATE] = {WIRE_M_TENANT_PASSIVATE, RPC_KIND_TENANT},
	[RPC_TENANT_ACTIVATE] = {WIRE_M_TENANT_ACTIVATE, RPC_KIND_TENANT},
	[RPC_HEALTH] = {WIRE_M_HEALTH, RPC_KIND_LOCAL},
	/* cluster mode: kvd's cluster.c answers TenantAdopt itself; TenantRelease
	 * passivates on the tenant's worker, then cluster.c lets it go */
	[RPC_TENANT_RELEASE] = {WIRE_M_TENANT_RELEASE, RPC_KIND_TENANT},
	[RPC_TENANT_ADOPT] = {WIRE_M_TENANT_ADOPT, RPC_KIND_LOCAL},
	/* long, and drives the tenant's write path (its barrier): as Compact */
	[RPC_BACKUP] = {WIRE_M_BACKUP, RPC_KIND_MAINT},
	/* uploads live on the tenant's worker (daemon/upload.c) */
	[RPC_BLOB_BEGIN] = {WIRE_M_BLOB_BEGIN, RPC_KIND_BLOB},
	[RPC_BLOB_APPEND] = {WIRE_M_BLOB_APPEND, RPC_KIND_BLOB},
	[RPC_BLOB_COMMIT] = {WIRE_M_BLOB_COMMIT, RPC_KIND_BLOB},
	[RPC_BLOB_ABORT] = {WIRE_M_BLOB_ABORT, RPC_KIND_BLOB},
	[RPC_BLOB_INFO] = {WIRE_M_BLOB_INFO, RPC_KIND_READ},
	[RPC_BLOB_READ] = {WIRE_M_BLOB_READ, RPC_KIND_READ},
};

/* The role each method needs (wire.h's third column). */
static const uint8_t method_roles[RPC_METHODS] = {
#define METHOD_ROLE(id, name, role) [RPC_##id] = role,
        WIRE_METHODS(METHOD_ROLE)
#undef METHOD_ROLE
};

const char *rpc_method_name(enum rpc_method m)
{
	return m < RPC_METHODS ? methods[m].name : "?";
}

/* ---- replies ----------------------------------------------------------- */

/* The packer's writer: a failed write (out of memory) is remembered, and
 * the writes after it are skipped, so the reply is never sent with a hole
 * in it (rpc_reply_finish). */
static int reply_write(void *data, const char *buf, size_t len)
{
	struct rpc_reply *rp = data;

	if (rp->write_failed)
		return -1;
	if (msgpack_sbuffer_write(&rp->buf, buf, len) != 0) {
		rp->write_failed = true;
		return -1;
	}
	return 0;
}

void rpc_reply_init(struct rpc_reply *rp)
{
	msgpack_sbuffer_init(&rp->buf);
	msgpack_packer_init(&rp->pk, rp, reply_write);
	rp->status = RPC_OK;
	rp->write_failed = false;
}

void rpc_reply_release(struct rpc_reply *rp)
{
	msgpack_sbuffer_destroy(&rp->buf);
}

/* Empties the reply (keeping its memory) to write it again from the start. */
static void reply_restart(struct rpc_reply *rp)
{
	msgpack_sbuffer_clear(&rp->buf);
	rp->write_failed = false;
}

void rpc_reply_bytes(struct rpc_reply *rp, const void *p, size_t len)
{
	reply_restart(rp);
	reply_write(rp, p, len);
}

/* The error that replaces a reply that could not be written whole. */
#define REPLY_OOM_MESSAGE "out of memory while encoding the reply (a write may have been applied)"
#define REPLY_OOM_BYTES   (sizeof(REPLY_OOM_MESSAGE) + 64) /* with v, id, status and keys */

int rpc_reply_finish(struct rpc_reply *rp, uint64_t id)
{
	if (!rp->write_failed)
		return 0;
	rpc_reply_error(rp, id, RPC_RESOURCE_EXHAUSTED, REPLY_OOM_MESSAGE);
	if (!rp->write_failed)
		return 0;
	/* buf never got memory (msgpack's first allocation is 8 KiB): one
	 * just the size of this error, into which it is written whole */
	msgpack_sbuffer_destroy(&rp->buf);
	msgpack_sbuffer_init(&rp->buf);
	if ((rp->buf.data = malloc(REPLY_OOM_BYTES)) == NULL)
		return -ENOMEM;
	rp->buf.alloc = REPLY_OOM_BYTES;
	rpc_reply_error(rp, id, RPC_RESOURCE_EXHAUSTED, REPLY_OOM_MESSAGE);
	return rp->write_failed ? -ENOMEM : 0;
}

static void reply_head(struct rpc_reply *rp, uint64_t id, int status, uint32_t extra)
{
	rp->status = status;
	msgpack_pack_map(&rp->pk, 3 + extra);
	mp_kv_uint(&rp->pk, WIRE_F_V, 1);
	mp_kv_uint(&rp->pk, WIRE_F_ID, id);
	mp_kv_uint(&rp->pk, WIRE_F_STATUS, (uint64_t)status);
}

void rpc_reply_error(struct rpc_reply *rp, uint64_t id, int status, const char *message)
{
	reply_restart(rp);
	reply_head(rp, id, status, 1);
	mp_kv_str(&rp->pk, WIRE_F_MESSAGE, message);
}

void rpc_reply_moved(struct rpc_reply *rp, uint64_t id, const char *message, const char *node,
                     const char *address, uint64_t epoch)
{
	reply_restart(rp);
	reply_head(rp, id, RPC_MOVED, 2);
	mp_kv_str(&rp->pk, WIRE_F_MESSAGE, message);
	mp_pack_cstr(&rp->pk, WIRE_F_RESULT);
	msgpack_pack_map(&rp->pk, 3);
	mp_kv_str(&rp->pk, WIRE_F_NODE, node);
	mp_kv_str(&rp->pk, WIRE_F_ADDRESS, address);
	mp_kv_uint(&rp->pk, WIRE_F_EPOCH, epoch);
}

void rpc_reply_ok(struct rpc_reply *rp, uint64_t id, uint32_t fields)
{
	reply_restart(rp);
	reply_head(rp, id, RPC_OK, 1);
	mp_pack_cstr(&rp->pk, WIRE_F_RESULT);
	msgpack_pack_map(&rp->pk, fields);
}

void rpc_reply_errorf(struct rpc_reply *rp, uint64_t id, int status, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	rpc_reply_error(rp, id, status, msg);
}

int rpc_status_of(int err)
{
	switch (err) {
	case 0:
		return RPC_OK;
	case KV_ENOTFOUND:
	case -ENOENT:
		return RPC_NOT_FOUND;
	case KV_ECONFLICT:
	case KV_ENOTBLOB:
	case -EBADFD:
		return RPC_FAILED_PRECONDITION;
	case KV_ECORRUPT:
		return RPC_DATA_LOSS;
	case KV_EREADONLY:
	case KV_EREFUSED:
	case KV_ECLOSED:
	case KV_ELOCKED:
	case -EBUSY:
	case -EIO:
	case -ESTALE:
		return RPC_UNAVAILABLE;
	case KV_EKEYSIZE:
	case KV_EVALSIZE:
	case KV_EBATCHSIZE:
	case -EINVAL:
	case -EFBIG:
		return RPC_INVALID_ARGUMENT;
	case KV_ECOMPACTED:
		return RPC_OUT_OF_RANGE;
	case KV_EMAXKEYS:
	case -ENOSPC:
	case -EDQUOT:
	case -ENOMEM:
	case -EMFILE:
	case -ENFILE:
		return RPC_RESOURCE_EXHAUSTED;
	case -EEXIST:
		return RPC_ALREADY_EXISTS;
	case -EPERM:
		return RPC_FAILED_PRECONDITION;
	default:
		return RPC_INTERNAL;
	}
}

const char *rpc_message_of(int err)
{
	switch (err) {
	case -ENOSPC:
		return "no space left on the device";
	case -EIO:
		return "I/O error";
	case -EBUSY:
		return "busy, try again";
	case -ESTALE:
		return "this node gave the tenant up (another node of the shared device may "
		       "serve it)";
	case KV_ENOTBLOB:
		return "not a blob";
	case -EBADFD:
		return "the upload failed earlier (a chunk could not be written); start again";
	case -EFBIG:
		return "a blob is at most 1 TiB (2^21 chunks)";
	case KV_EREADONLY:
		return "tenant is read-only after a failed fsync: fix the disk, then "
		       "TenantPassivate and TenantActivate it (or restart kvd)";
	default:
		return kv_strerror(err);
	}
}

void rpc_tenant_message(kv_store *s, const char *tenant, int err, char *buf, size_t size)
{
	char why[320];

	if (err == -ENOENT)
		snprintf(buf, size, "tenant '%s' not found", tenant);
	else if (err == KV_EREFUSED && kv_store_why_refused(s, tenant, why, sizeof(why)) == 0)
		snprintf(buf, size, "tenant '%s' is refused: %s", tenant, why);
	else
		snprintf(buf, size, "tenant '%s': %s", tenant, rpc_message_of(err));
}

void rpc_reply_kv_error(struct rpc_reply *rp, uint64_t id, int err)
{
	rpc_reply_error(rp, id, rpc_status_of(err), rpc_message_of(err));
}

/* ---- decoding ---------------------------------------------------------- */

static int lookup_method(const char *s, size_t n, enum rpc_method *ret)
{
	int i;

	for (i = 0; i < RPC_METHODS; i++) {
		if (strlen(methods[i].name) == n && memcmp(methods[i].name, s, n) == 0) {
			*ret = (enum rpc_method)i;
			return 0;
		}
	}
	return -ENOENT;
}

/* The whole str is the name: "a\0b" is refused, not taken as "a". */
static int name_from(const msgpack_object *o, char *buf)
{
	const char *s;
	size_t n;

	if (o == NULL || mp_str(o, &s, &n) != 0 || !kv_tenant_name_valid(s, n))
		return -EINVAL;
	memcpy(buf, s, n);
	buf[n] = '\0';
	return 0;
}

int rpc_req_decode(struct rpc_req *r, const struct rpc_limits *lim, const void *body, size_t len,
                   int *ret_status, const char **ret_msg)
{
	const msgpack_object *o;
	const char *s;
	size_t n;
	uint64_t v = 0;
	int rv;

	(void)lim; /* no limit of the envelope's is a setting (yet) */
	memset(r, 0, sizeof(*r));
	msgpack_zone_init(&r->zone, 2048);
	*ret_status = RPC_INVALID_ARGUMENT;
	rv = mp_parse(body, len, &r->zone, &r->root);
	if (rv == -E2BIG) {
		*ret_msg = "malformed request: a declared length exceeds the message";
		return -EINVAL;
	}
	if (rv == -ELOOP) {
		snprintf(r->errbuf, sizeof(r->errbuf),
		         "request nests maps and arrays more than %d deep (the request map is the "
		         "first)",
		         MP_DEPTH_MAX);
		*ret_msg = r->errbuf;
		return -EINVAL;
	}
	if (rv != 0) {
		*ret_msg = "malformed request: not one complete msgpack object";
		return -EINVAL;
	}
	if (r->root.type != MSGPACK_OBJECT_MAP) {
		*ret_msg = "malformed request: not a msgpack map";
		return -EINVAL;
	}
	if (mp_field_uint(&r->root, WIRE_F_ID, false, &r->id) != 0) {
		*ret_msg = "'id' must be an unsigned integer";
		return -EINVAL;
	}
	if ((o = mp_map_get(&r->root, WIRE_F_CLIENT)) != NULL) {
		if (mp_uint(o, &r->client) != 0) {
			*ret_msg = "'client' must be an unsigned integer";
			return -EINVAL;
		}
		r->has_client = true;
	}
	if ((o = mp_map_get(&r->root, WIRE_F_V)) == NULL || mp_uint(o, &v) != 0) {
		*ret_msg = "'v' (protocol version) missing or not an unsigned integer";
		return -EINVAL;
	}
	if (v != 1) {
		*ret_status = RPC_UNIMPLEMENTED;
		snprintf(r->errbuf, sizeof(r->errbuf),
		         "protocol version %" PRIu64 " not supported (this server speaks 1)", v);
		*ret_msg = r->errbuf;
		return -EINVAL;
	}
	if ((rv = mp_field_str(&r->root, WIRE_F_METHOD, true, &s, &n)) != 0) {
		*ret_msg = "'method' missing or not a string";
		return -EINVAL;
	}
	if (lookup_method(s, n, &r->method) != 0) {
		*ret_status = RPC_UNIMPLEMENTED;
		snprintf(r->errbuf, sizeof(r->errbuf), "unknown method '%.*s'", (int)(n > 64 ? 64 : n),
		         s);
		*ret_msg = r->errbuf;
		return -EINVAL;
	}
	r->kind = methods[r->method].kind;
	if (mp_field_uint(&r->root, WIRE_F_TIMEOUT_MS, false, &r->timeout_ms) != 0) {
		*ret_msg = "'timeout_ms' must be an unsigned integer";
		return -EINVAL;
	}
	r->args = mp_map_get(&r->root, WIRE_F_ARGS);
	if (r->args != NULL && r->args->type != MSGPACK_OBJECT_MAP) {
		*ret_msg = "'args' must be a map";
		return -EINVAL;
	}
	/* checked by the caller (daemon/auth.c); a token that is not a str
	 * is no token */
	{
		const char *tok = NULL;
		size_t tl = 0;
		if (mp_field_str(&r->root, WIRE_F_TOKEN, false, &tok, &tl) == 0 && tok != NULL) {
			r->token = tok;
			r->token_len = tl;
		}
	}
	if ((o = mp_map_get(&r->root, WIRE_F_TENANT)) != NULL) {
		if (name_from(o, r->tenant) != 0) {
			*ret_msg = "'tenant' must be 1-64 characters of [A-Za-z0-9._-], not starting "
			           "with '.'";
			return -EINVAL;
		}
	} else {
		strcpy(r->tenant, "default");
	}
	switch (r->method) {
	case RPC_TENANT_CREATE:
	case RPC_TENANT_DROP:
	case RPC_TENANT_INFO:
	case RPC_TENANT_PASSIVATE:
	case RPC_TENANT_ACTIVATE:
	case RPC_TENANT_RELEASE:
	case RPC_TENANT_ADOPT:
	case RPC_BACKUP:
		if (name_from(mp_map_get(r->args, WIRE_F_NAME), r->tenant) != 0) {
			*ret_msg = "'name' missing or not a valid tenant name";
			return -EINVAL;
		}
		break;
	case RPC_STATS: {
		const char *scope = "tenant";
		size_t sl = 6;
		if (mp_field_str(r->args, WIRE_F_SCOPE, false, &scope, &sl) != 0) {
			*ret_msg = "'scope' must be a string";
			return -EINVAL;
		}
		if (sl == 6 && memcmp(scope, "tenant", 6) == 0) {
			r->kind = RPC_KIND_READ;
		} else if (!(sl == 6 && memcmp(scope, "daemon", 6) == 0)) {
			*ret_msg = "'scope' must be \"tenant\" or \"daemon\"";
			return -EINVAL;
		}
		break;
	}
	default:
		break;
	}
	*ret_status = RPC_OK;
	return 0;
}

void rpc_req_release(struct rpc_req *r)
{
	msgpack_zone_destroy(&r->zone);
}

int rpc_req_role(const struct rpc_req *r)
{
	/* Stats of the daemon is the kind a tenant's is not */
	if (r->method == RPC_STATS && r->kind == RPC_KIND_LOCAL)
		return WIRE_ROLE_DAEMON;
	return r->method < RPC_METHODS ? method_roles[r->method] : WIRE_ROLE_DAEMON;
}

/* ---- arguments --------------------------------------------------------- */

int rpc_arg_key(const struct rpc_req *r, struct rpc_reply *out, const char *field,
                const void **ret, size_t *ret_len)
{
	if (mp_field_bin(r->args, field, true, ret, ret_len) != 0) {
		rpc_reply_errorf(out, r->id, RPC_INVALID_ARGUMENT, "'%s' missing or not bin", field);
		return -EINVAL;
	}
	if (*ret_len == 0 || *ret_len > KV_KEY_SIZE_MAX) {
		rpc_reply_errorf(out, r->id, RPC_INVALID_ARGUMENT, "'%s' must be 1..%u bytes", field,
		             KV_KEY_SIZE_MAX);
		return -EINVAL;
	}
	return 0;
}

int rpc_arg_uint(const struct rpc_req *r, struct rpc_reply *out, const char *field,
                 uint64_t *ret)
{
	if (mp_field_uint(r->args, field, false, ret) != 0) {
		rpc_reply_errorf(out, r->id, RPC_INVALID_ARGUMENT, "'%s' must be an unsigned integer",
		             field);
		return -EINVAL;
	}
	return 0;
}

int rpc_arg_read(const struct rpc_req *r, struct rpc_reply *out, const void **ret_key,
                 size_t *ret_len, struct kv_read_opts *ret_ro)
{
	return rpc_arg_key(r, out, WIRE_F_KEY, ret_key, ret_len) ||
	               rpc_arg_uint(r, out, WIRE_F_VERSION, &ret_ro->version) ||
	               rpc_arg_uint(r, out, WIRE_F_AS_OF, &ret_ro->as_of)
	           ? -EINVAL
	           : 0;
}

static int arg_bool(const struct rpc_req *r, struct rpc_reply *out, const char *field, bool *ret)
{
	if (mp_field_bool(r->args, field, false, ret) != 0) {
		rpc_reply_errorf(out, r->id, RPC_INVALID_ARGUMENT, "'%s' must be a boolean", field);
		return -EINVAL;
	}
	return 0;
}

static int arg_bin(const struct rpc_req *r, struct rpc_reply *out, const char *field,
                   const void **ret, size_t *ret_len)
{
	if (mp_field_bin(r->args, field, false, ret, ret_len) != 0) {
		rpc_reply_errorf(out, r->id, RPC_INVALID_ARGUMENT, "'%s' must be bin", field);
		return -EINVAL;
	}
	if (*ret != NULL && *ret_len > KV_KEY_SIZE_MAX + 1) {
		rpc_reply_errorf(out, r->id, RPC_INVALID_ARGUMENT, "'%s' is longer than a key can be",
		             field);
		return -EINVAL;
	}
	return 0;
}

/* ---- reads ------------------------------------------------------------- */

static int key_cmp(const void *a, size_t al, const void *b, size_t bl)
{
	int c = memcmp(a, b, al < bl ? al : bl);

	return c ? c : (al < bl ? -1 : al > bl);
}

static void run_get(kv_tenant *t, const struct rpc_req *r, struct rpc_reply *out)
{
	struct kv_read_opts ro = {0, 0};
	struct kv_value val;
	const void *key;
	size_t klen;
	int rv;

	if (rpc_arg_read(r, out, &key, &klen, &ro))
		return;
	if ((rv = kv_get(kv_tenant_db(t), key, klen, &ro, &val)) != 0) {
		rpc_reply_kv_error(out, r->id, rv);
		return;
	}
	if (val.blob) {
		/* no bytes: BlobRead has them */
		rpc_reply_ok(out, r->id, 5);
		mp_kv_bool(&out->pk, WIRE_F_BLOB, true);
		mp_kv_uint(&out->pk, WIRE_F_BLOB_SIZE, val.blob_size);
	} else {
		rpc_reply_ok(out, r->id, 4);
		mp_kv_bin(&out->pk, WIRE_F_VALUE, val.data, val.len);
	}
	mp_kv_uint(&out->pk, WIRE_F_VERSION, val.version);
	mp_kv_uint(&out->pk, WIRE_F_TIMESTAMP_MS, val.timestamp_ms);
	mp_kv_uint(&out->pk, WIRE_F_EXPIRY_MS, val.expiry_ms);
	kv_value_release(&val);
}

/* A blob in a Scan item or a Versions entry: a trailing {blob: true,
 * blob_size} after the fields every entry has. */
static void pack_blob_mark(msgpack_packer *pk, uint64_t size)
{
	msgpack_pack_map(pk, 2);
	mp_kv_bool(pk, WIRE_F_BLOB, true);
	mp_kv_uint(pk, WIRE_F_BLOB_SIZE, size);
}

static void run_scan(kv_tenant *t, const struct rpc_req *r, struct rpc_reply *out)
{
	struct kv_scan_opts so;
	const void *cont = NULL;
	size_t cont_len = 0, count = 0, bytes = 0;
	uint64_t limit = 1000;
	uint8_t *after = NULL;
	struct rpc_reply items; /* the page's items, counted before the head is written */
	struct kv_entry e;
	kv_iter *it;
	uint8_t *keep = NULL;
	size_t keep_cap = 0, last_len = 0;
	bool more = false;
	int rv;

	memset(&so, 0, sizeof(so));
	if (arg_bin(r, out, WIRE_F_START, &so.start, &so.start_len) ||
	    arg_bin(r, out, WIRE_F_END, &so.end, &so.end_len) ||
	    arg_bin(r, out, WIRE_F_PREFIX, &so.prefix, &so.prefix_len) ||
	    rpc_arg_uint(r, out, WIRE_F_LIMIT, &limit) ||
	    arg_bool(r, out, WIRE_F_REVERSE, &so.reverse) ||
	    arg_bool(r, out, WIRE_F_KEYS_ONLY, &so.keys_only) ||
	    rpc_arg_uint(r, out, WIRE_F_AS_OF, &so.as_of) ||
	    arg_bin(r, out, WIRE_F_CONTINUATION, &cont, &cont_len))
		return;
	if (limit == 0 || limit > RPC_SCAN_PAGE_MAX)
		limit = limit == 0 ? 1000 : RPC_SCAN_PAGE_MAX;
	if (cont != NULL) {
		const uint8_t *c = cont;
		if (cont_len < 2 || c[0] != (so.reverse ? 1 : 0)) {
			rpc_reply_error(out, r->id, RPC_INVALID_ARGUMENT,
			                "'continuation' does not belong to this scan");
			return;
		}
		if (!so.reverse) {
			/* the smallest key after the last one returned */
			if ((after = malloc(cont_len)) == NULL) {
				rpc_reply_kv_error(out, r->id, -ENOMEM);
				return;
			}
			memcpy(after, c + 1, cont_len - 1);
			after[cont_len - 1] = 0;
			if (so.start == NULL || key_cmp(after, cont_len, so.start, so.start_len) > 0) {
				so.start = after;
				so.start_len = cont_len;
			}
		} else {
			so.end = c + 1;
			so.end_len = cont_len - 1;
		}
	}
	/* the iterator reads no more records than the page can take; one past
	 * the limit says whether there is more */
	so.limit = limit + 1;
	if ((rv = kv_iter_open(kv_tenant_db(t), &so, &it)) != 0) {
		free(after);
		rpc_reply_kv_error(out, r->id, rv);
		return;
	}
	rpc_reply_init(&items);
	while ((rv = kv_iter_next(it, &e)) == 0) {
		if (count == limit || bytes >= RPC_SCAN_BYTES_MAX) {
			more = true;
			break;
		}
		msgpack_pack_array(&items.pk, e.blob ? 4 : 3);
		mp_pack_bin(&items.pk, e.key, e.key_len);
		if (so.keys_only || e.blob)
			msgpack_pack_nil(&items.pk);
		else
			mp_pack_bin(&items.pk, e.value, e.value_len);
		msgpack_pack_uint64(&items.pk, e.version);
		if (e.blob)
			pack_blob_mark(&items.pk, e.blob_size);
		if (items.write_failed) {
			rv = -ENOMEM;
			break;
		}
		count++;
		bytes += e.key_len + e.value_len + 16;
		/* the continuation: direction byte + this key (e.key is only
		 * valid until the next kv_iter_next) */
		if (keep_cap < e.key_len + 1) {
			uint8_t *nk = realloc(keep, e.key_len + 1);
			if (nk == NULL) {
				rv = -ENOMEM;
				break;
			}
			keep = nk;
			keep_cap = e.key_len + 1;
		}
		keep[0] = so.reverse ? 1 : 0;
		memcpy(keep + 1, e.key, e.key_len);
		last_len = e.key_len;
	}
	if (rv != 0 && rv != KV_EEND) {
		kv_iter_close(it);
		rpc_reply_release(&items);
		free(after);
		free(keep);
		rpc_reply_kv_error(out, r->id, rv);
		return;
	}
	rpc_reply_ok(out, r->id, more ? 4 : 3);
	mp_pack_cstr(&out->pk, WIRE_F_ITEMS);
	msgpack_pack_array(&out->pk, (uint32_t)count);
	reply_write(out, items.buf.data, items.buf.size);
	mp_kv_uint(&out->pk, WIRE_F_REVISION, kv_iter_version(it));
	mp_kv_bool(&out->pk, WIRE_F_MORE, more);
	if (more)
		mp_kv_bin(&out->pk, WIRE_F_CONTINUATION, keep, last_len + 1);
	kv_iter_close(it);
	rpc_reply_release(&items);
	free(after);
	free(keep);
}

static void run_versions(kv_tenant *t, const struct rpc_req *r, struct rpc_reply *out)
{
	struct kv_version *list;
	const void *key;
	size_t klen, n, i;
	uint64_t limit = 10, before = 0;
	bool values = true, truncated = false;
	int rv;

	if (rpc_arg_key(r, out, WIRE_F_KEY, &key, &klen) || rpc_arg_uint(r, out, WIRE_F_LIMIT, &limit) ||
	    rpc_arg_uint(r, out, WIRE_F_BEFORE, &before) || arg_bool(r, out, WIRE_F_VALUES, &values))
		return;
	if (limit == 0)
		limit = 10;
	if (limit > RPC_VERSIONS_MAX)
		limit = RPC_VERSIONS_MAX;
	rv = kv_versions(kv_tenant_db(t), key, klen, (uint32_t)limit, before, values, &list, &n,
	                 &truncated);
	if (rv != 0) {
		rpc_reply_kv_error(out, r->id, rv);
		return;
	}
	rpc_reply_ok(out, r->id, 2);
	mp_pack_cstr(&out->pk, WIRE_F_VERSIONS);
	msgpack_pack_array(&out->pk, (uint32_t)n);
	for (i = 0; i < n; i++) {
		bool blob = list[i].blob && !list[i].tombstone;
		msgpack_pack_array(&out->pk, blob ? 5 : 4);
		msgpack_pack_uint64(&out->pk, list[i].version);
		msgpack_pack_uint64(&out->pk, list[i].timestamp_ms);
		if (list[i].tombstone)
			msgpack_pack_true(&out->pk);
		else
			msgpack_pack_false(&out->pk);
		if (blob) {
			msgpack_pack_nil(&out->pk);
			pack_blob_mark(&out->pk, list[i].blob_size);
		} else if (list[i].data != NULL)
			mp_pack_bin(&out->pk, list[i].data, list[i].len);
		else if (values && !list[i].tombstone)
			mp_pack_bin(&out->pk, "", 0);
		else
			msgpack_pack_nil(&out->pk);
	}
	mp_kv_bool(&out->pk, WIRE_F_TRUNCATED, truncated);
	kv_versions_free(list, n);
}

static const char *sync_str(enum kv_sync s)
{
	return s == KV_SYNC_ALWAYS ? "always" : s == KV_SYNC_INTERVAL ? "interval" : "none";
}

static void pack_info(struct rpc_reply *out, uint64_t id, const struct kv_tenant_info *in,
                      bool with_stats)
{
	char codec[KV_CODEC_NAME_MAX];
	const char *evict = kv_evict_name(in->config.evict);

	if (kv_codec_format(in->config.compression, in->config.compression_level, codec,
	                    sizeof(codec)) != 0)
		snprintf(codec, sizeof(codec), "unknown");
	rpc_reply_ok(out, id, with_stats ? 33 : 17);
	mp_kv_str(&out->pk, WIRE_F_NAME, in->name);
	mp_kv_str(&out->pk, WIRE_F_STATE, in->active ? "active" : "passive");
	mp_kv_uint(&out->pk, WIRE_F_IDLE_S, in->idle_ms / 1000);
	mp_kv_uint(&out->pk, WIRE_F_KEYS, in->stats.keys);
	mp_kv_uint(&out->pk, WIRE_F_LIVE_BYTES, in->stats.live_bytes);
	mp_kv_uint(&out->pk, WIRE_F_DISK_BYTES, in->stats.disk_bytes);
	mp_kv_uint(&out->pk, WIRE_F_KEYDIR_BYTES, in->active ? in->stats.keydir_bytes : 0);
	mp_kv_uint(&out->pk, WIRE_F_ACTIVATIONS, in->activations);
	mp_kv_uint(&out->pk, WIRE_F_LAST_ACTIVATION_MS, in->last_activation_ms);
	mp_kv_uint(&out->pk, WIRE_F_LAST_VERSION, in->stats.last_version);
	mp_kv_str(&out->pk, WIRE_F_SYNC, sync_str(in->config.sync));
	mp_kv_uint(&out->pk, WIRE_F_HISTORY, in->config.history_versions);
	mp_kv_uint(&out->pk, WIRE_F_TTL_MS, in->config.default_ttl_ms);
	mp_kv_uint(&out->pk, WIRE_F_MAX_KEYS, in->config.max_keys);
	mp_kv_str(&out->pk, WIRE_F_COMPRESSION, codec);
	mp_kv_uint(&out->pk, WIRE_F_MAX_BYTES, in->config.max_bytes);
	mp_kv_str(&out->pk, WIRE_F_EVICT, evict != NULL ? evict : "unknown");
	if (with_stats) {
		mp_kv_uint(&out->pk, WIRE_F_DEAD_BYTES, in->stats.dead_bytes);
		mp_kv_uint(&out->pk, WIRE_F_SEGMENTS, in->stats.segments);
		mp_kv_uint(&out->pk, WIRE_F_TOMBSTONES, in->stats.tombstones);
		mp_kv_uint(&out->pk, WIRE_F_MERGES, in->stats.merges);
		mp_kv_uint(&out->pk, WIRE_F_COMPACT_REVISION, in->stats.compact_revision);
		mp_kv_bool(&out->pk, WIRE_F_IO_URING, in->stats.io_uring);
		mp_kv_uint(&out->pk, WIRE_F_BATCHES, in->stats.batches);
		mp_kv_uint(&out->pk, WIRE_F_BATCHED_WRITES, in->stats.batched_writes);
		mp_kv_uint(&out->pk, WIRE_F_SYNCS, in->stats.syncs);
		mp_kv_uint(&out->pk, WIRE_F_LAST_ACTIVATION_US, in->last_activation_us);
		mp_kv_bool(&out->pk, WIRE_F_READ_ONLY, in->active && in->stats.read_only);
		mp_kv_uint(&out->pk, WIRE_F_VALUE_LOGICAL_BYTES, in->stats.value_logical_bytes);
		mp_kv_uint(&out->pk, WIRE_F_VALUE_STORED_BYTES, in->stats.value_stored_bytes);
		mp_kv_uint(&out->pk, WIRE_F_VALUES_COMPRESSED, in->stats.values_compressed);
		mp_kv_uint(&out->pk, WIRE_F_EVICTIONS, in->stats.evictions);
		mp_kv_uint(&out->pk, WIRE_F_TOMBSTONE_BYTES, in->stats.tombstone_bytes);
	}
}

static void run_compact(kv_tenant *t, const struct rpc_req *r, struct rpc_reply *out)
{
	struct kv_stats before, after;
	uint64_t rev = 0;
	int rv;

	if (rpc_arg_uint(r, out, WIRE_F_REVISION, &rev))
		return;
	kv_stats(kv_tenant_db(t), &before);
	if (rev > before.last_version) {
		rpc_reply_errorf(out, r->id, RPC_INVALID_ARGUMENT,
		             "revision %" PRIu64 " is in the future (last version %" PRIu64 ")", rev,
		             before.last_version);
		return;
	}
	rv = rev ? kv_compact(kv_tenant_db(t), rev) : kv_merge(kv_tenant_db(t));
	if (rv != 0) {
		rpc_reply_kv_error(out, r->id, rv);
		return;
	}
	kv_stats(kv_tenant_db(t), &after);
	rpc_reply_ok(out, r->id, 3);
	mp_kv_uint(&out->pk, WIRE_F_COMPACT_REVISION, after.compact_revision);
	mp_kv_uint(&out->pk, WIRE_F_DISK_BYTES_BEFORE, before.disk_bytes);
	mp_kv_uint(&out->pk, WIRE_F_DISK_BYTES_AFTER, after.disk_bytes);
}

/* A backup's directory: an absolute path on the server's host. */
#define BACKUP_DIR_MAX 4095

static void run_backup(kv_store *s, kv_tenant *t, const struct rpc_req *r, struct rpc_reply *out)
{
	struct kv_backup_info bi;
	char dir[BACKUP_DIR_MAX + 1];
	const char *p = NULL;
	size_t n = 0;
	int rv;

	if (mp_field_str(r->args, WIRE_F_DIR, true, &p, &n) != 0 || n == 0 || n > BACKUP_DIR_MAX ||
	    p[0] != '/' || memchr(p, '\0', n) != NULL) {
		rpc_reply_error(out, r->id, RPC_INVALID_ARGUMENT,
		                "'dir' missing or not an absolute path on the server's host");
		return;
	}
	memcpy(dir, p, n);
	dir[n] = '\0';
	rv = kv_store_backup(s, kv_tenant_name(t), dir, &bi);
	switch (rv) {
	case 0:
		break;
	case -EINVAL:
		rpc_reply_errorf(out, r->id, RPC_INVALID_ARGUMENT,
		             "backup directory %s is inside kvd's data directory", dir);
		return;
	case -ENOTEMPTY:
	case -EEXIST:
		rpc_reply_errorf(out, r->id, RPC_FAILED_PRECONDITION,
		             "backup directory %s exists and is not empty", dir);
		return;
	case -ENOTDIR:
		rpc_reply_errorf(out, r->id, RPC_FAILED_PRECONDITION,
		             "backup directory %s exists and is not a directory", dir);
		return;
	case -ENOENT:
		rpc_reply_errorf(out, r->id, RPC_FAILED_PRECONDITION,
		             "backup directory %s: its parent directory does not exist", dir);
		return;
	case -EACCES:
	case -EPERM:
	case -EROFS:
		rpc_reply_errorf(out, r->id, RPC_FAILED_PRECONDITION,
		             "backup directory %s: %s (kvd's user must be able to write it)", dir,
		             strerror(-rv));
		return;
	default:
		rpc_reply_kv_error(out, r->id, rv);
		return;
	}
	rpc_reply_ok(out, r->id, 7);
	mp_kv_uint(&out->pk, WIRE_F_VERSION, bi.version);
	mp_kv_uint(&out->pk, WIRE_F_SEGMENTS, bi.segments);
	mp_kv_uint(&out->pk, WIRE_F_SEGMENTS_LINKED, bi.segments_linked);
	mp_kv_uint(&out->pk, WIRE_F_BYTES_LINKED, bi.bytes_linked);
	mp_kv_uint(&out->pk, WIRE_F_BYTES_COPIED, bi.bytes_copied);
	mp_kv_uint(&out->pk, WIRE_F_FILES, bi.files);
	mp_kv_uint(&out->pk, WIRE_F_ELAPSED_US, bi.elapsed_us);
}

void rpc_run_read(kv_store *s, kv_tenant *t, const struct rpc_req *r, struct rpc_reply *out)
{
	switch (r->method) {
	case RPC_GET:
		run_get(t, r, out);
		break;
	case RPC_SCAN:
		run_scan(t, r, out);
		break;
	case RPC_VERSIONS:
		run_versions(t, r, out);
		break;
	case RPC_COMPACT:
		run_compact(t, r, out);
		break;
	case RPC_BACKUP:
		run_backup(s, t, r, out);
		break;
	case RPC_BLOB_INFO:
		rpc_run_blob_info(t, r, out);
		break;
	case RPC_BLOB_READ:
		rpc_run_blob_read(t, r, out);
		break;
	case RPC_STATS: {
		struct kv_tenant_info info;
		int rv = kv_store_info(s, kv_tenant_name(t), &info);
		if (rv != 0)
			rpc_reply_kv_error(out, r->id, rv);
		else
			pack_info(out, r->id, &info, true);
		break;
	}
	default:
		rpc_reply_error(out, r->id, RPC_INTERNAL, "method run on the wrong path");
		break;
	}
}

/* ---- methods without a tenant database --------------------------------- */

static int parse_config(const struct rpc_req *r, struct rpc_reply *out, struct kv_tenant_config *c)
{
	const char *sync = NULL, *codec = NULL, *evict = NULL;
	size_t sl = 0, cl = 0, el = 0;
	uint64_t v;

	if (mp_field_str(r->args, WIRE_F_SYNC, false, &sync, &sl) != 0) {
		rpc_reply_error(out, r->id, RPC_INVALID_ARGUMENT, "'sync' must be a string");
		return -EINVAL;
	}
	if (sync != NULL) {
		if (sl == 6 && memcmp(sync, "always", 6) == 0)
			c->sync = KV_SYNC_ALWAYS;
		else if (sl == 8 && memcmp(sync, "interval", 8) == 0)
			c->sync = KV_SYNC_INTERVAL;
		else if (sl == 4 && memcmp(sync, "none", 4) == 0)
			c->sync = KV_SYNC_NONE;
		else {
			rpc_reply_error(out, r->id, RPC_INVALID_ARGUMENT,
			                "'sync' must be \"always\", \"interval\" or \"none\"");
			return -EINVAL;
		}
	}
	v = c->sync_interval_ms;
	if (rpc_arg_uint(r, out, WIRE_F_SYNC_INTERVAL_MS, &v))
		return -EINVAL;
	if (v == 0 || v > 3600000) {
		rpc_reply_error(out, r->id, RPC_INVALID_ARGUMENT,
		                "'sync_interval_ms' must be 1..3600000");
		return -EINVAL;
	}
	c->sync_interval_ms = (uint32_t)v;
	v = c->history_versions;
	if (rpc_arg_uint(r, out, WIRE_F_HISTORY, &v))
		return -EINVAL;
	if (v == 0 || v > 1000000) {
		rpc_reply_error(out, r->id, RPC_INVALID_ARGUMENT, "'history' must be 1..1000000");
		return -EINVAL;
	}
	c->history_versions = (uint32_t)v;
	if (rpc_arg_uint(r, out, WIRE_F_TTL_MS, &c->default_ttl_ms) ||
	    rpc_arg_uint(r, out, WIRE_F_MAX_KEYS, &c->max_keys))
		return -EINVAL;
	if (mp_field_str(r->args, WIRE_F_COMPRESSION, false, &codec, &cl) != 0 ||
	    (codec != NULL &&
	     kv_codec_parse(codec, cl, &c->compression, &c->compression_level) != 0)) {
		rpc_reply_error(out, r->id, RPC_INVALID_ARGUMENT,
		                "'compression' must be \"none\", \"lz4\", \"zstd\" or "
		                "\"zstd:LEVEL\" (1..22)");
		return -EINVAL;
	}
	if (rpc_arg_uint(r, out, WIRE_F_MAX_BYTES, &c->max_bytes))
		return -EINVAL;
	if (mp_field_str(r->args, WIRE_F_EVICT, false, &evict, &el) != 0 ||
	    (evict != NULL && kv_evict_parse(evict, el, &c->evict) != 0)) {
		rpc_reply_error(out, r->id, RPC_INVALID_ARGUMENT,
		                "'evict' must be \"refuse\" or \"oldest\"");
		return -EINVAL;
	}
	return 0;
}

static const char *const status_names[WIRE_STATUS_COUNT] = {
#define STATUS_NAME(name, code) [code] = #name,
        WIRE_STATUSES(STATUS_NAME)
#undef STATUS_NAME
};

/* Stats (daemon): the five fields of the metrics endpoint's figures
 * (PROTOCOL.md, "Stats"); methods without a request are left out. */
static void pack_daemon_figures(msgpack_packer *pk, const struct rpc_daemon_fig *fig)
{
	uint32_t nm = 0;
	unsigned m, st;

	mp_kv_bool(pk, WIRE_F_COUNTING, fig->counting);
	mp_kv_uint(pk, WIRE_F_RECEIVED_BYTES, fig->received_bytes);
	mp_kv_uint(pk, WIRE_F_SENT_BYTES, fig->sent_bytes);
	for (m = 0; m < RPC_FIG_METHODS; m++)
		for (st = 0; st < WIRE_STATUS_COUNT; st++)
			if (fig->methods[m].replies[st] != 0) {
				nm++;
				break;
			}
	mp_pack_cstr(pk, WIRE_F_METHODS);
	msgpack_pack_array(pk, nm);
	for (m = 0; m < RPC_FIG_METHODS; m++) {
		const struct rpc_method_fig *f = &fig->methods[m];
		uint64_t total = 0;
		uint32_t nst = 0;
		for (st = 0; st < WIRE_STATUS_COUNT; st++) {
			total += f->replies[st];
			nst += f->replies[st] != 0;
		}
		if (total == 0)
			continue;
		msgpack_pack_map(pk, 9);
		mp_kv_str(pk, WIRE_F_METHOD,
		          m < RPC_METHODS ? rpc_method_name((enum rpc_method)m) : "invalid");
		mp_kv_uint(pk, WIRE_F_REQUESTS, total);
		mp_kv_uint(pk, WIRE_F_ERRORS, total - f->replies[RPC_OK]);
		mp_pack_cstr(pk, WIRE_F_STATUSES);
		msgpack_pack_map(pk, nst);
		for (st = 0; st < WIRE_STATUS_COUNT; st++)
			if (f->replies[st] != 0)
				mp_kv_uint(pk, status_names[st], f->replies[st]);
		mp_kv_uint(pk, WIRE_F_LATENCY_COUNT, f->lat_count);
		mp_kv_uint(pk, WIRE_F_LATENCY_SUM_NS, f->lat_sum_ns);
		mp_kv_uint(pk, WIRE_F_P50_NS, f->p50_ns);
		mp_kv_uint(pk, WIRE_F_P90_NS, f->p90_ns);
		mp_kv_uint(pk, WIRE_F_P99_NS, f->p99_ns);
	}
	mp_pack_cstr(pk, WIRE_F_CONNECTIONS);
	msgpack_pack_array(pk, (uint32_t)fig->nconns);
	for (size_t i = 0; i < fig->nconns; i++) {
		msgpack_pack_map(pk, 3);
		mp_kv_str(pk, WIRE_F_TRANSPORT, fig->conns[i].transport);
		mp_kv_str(pk, WIRE_F_LISTEN, fig->conns[i].listen);
		mp_kv_uint(pk, WIRE_F_OPEN, fig->conns[i].open);
	}
}

static int owner_cmp(const void *key, const void *elem)
{
	return strcmp(key, ((const struct rpc_owner *)elem)->tenant);
}

void rpc_run_local(kv_store *s, const struct rpc_limits *lim, const struct rpc_req *r,
                   uint64_t uptime_s, uint64_t requests, uint64_t in_flight, uint32_t workers,
                   bool stopping, struct rpc_reply *out)
{
	int rv;

	switch (r->method) {
	case RPC_HEALTH:
		rpc_reply_ok(out, r->id, 3);
		mp_kv_str(&out->pk, WIRE_F_STATUS, stopping ? "stopping" : "serving");
		mp_kv_str(&out->pk, WIRE_F_VERSION, lim->version);
		mp_kv_uint(&out->pk, WIRE_F_UPTIME_S, uptime_s);
		break;
	case RPC_STATS: {
		struct kv_store_stats st;
		struct rpc_daemon_fig *fig = NULL;
		kv_store_stats(s, &st);
		if (lim->figures != NULL) {
			if ((fig = calloc(1, sizeof(*fig))) == NULL) {
				rpc_reply_error(out, r->id, RPC_RESOURCE_EXHAUSTED,
				                "out of memory");
				break;
			}
			lim->figures(lim->figures_arg, fig);
		}
		rpc_reply_ok(out, r->id, (fig != NULL ? 13 : 8) + (st.device ? 5 : 0));
		mp_kv_str(&out->pk, WIRE_F_VERSION, lim->version);
		mp_kv_uint(&out->pk, WIRE_F_UPTIME_S, uptime_s);
		mp_kv_uint(&out->pk, WIRE_F_TENANTS, st.tenants);
		mp_kv_uint(&out->pk, WIRE_F_ACTIVE_TENANTS, st.active);
		mp_kv_uint(&out->pk, WIRE_F_REQUESTS, requests);
		mp_kv_uint(&out->pk, WIRE_F_IN_FLIGHT, in_flight);
		mp_kv_uint(&out->pk, WIRE_F_KEYDIR_BYTES, st.keydir_bytes);
		mp_kv_uint(&out->pk, WIRE_F_WORKERS, workers);
		if (st.device) {
			mp_kv_uint(&out->pk, WIRE_F_DEVICE_EXTENTS, st.device_extents);
			mp_kv_uint(&out->pk, WIRE_F_DEVICE_EXTENTS_FREE, st.device_extents_free);
			mp_kv_uint(&out->pk, WIRE_F_DEVICE_EXTENT_SIZE, st.device_extent_size);
			mp_kv_uint(&out->pk, WIRE_F_DEVICE_CACHE_HITS, st.device_cache_hits);
			mp_kv_uint(&out->pk, WIRE_F_DEVICE_CACHE_MISSES, st.device_cache_misses);
		}
		if (fig != NULL)
			pack_daemon_figures(&out->pk, fig);
		free(fig);
		break;
	}
	case RPC_TENANT_CREATE: {
		struct kv_tenant_config c;
		if (lim->defaults)
			c = *lim->defaults;
		else
			kv_tenant_config_init(&c);
		if (parse_config(r, out, &c) != 0)
			return;
		rv = kv_store_create(s, r->tenant, &c);
		if (rv == -EEXIST)
			rpc_reply_errorf(out, r->id, RPC_ALREADY_EXISTS, "tenant '%s' already exists",
			             r->tenant);
		else if (rv != 0)
			rpc_reply_kv_error(out, r->id, rv);
		else {
			rpc_reply_ok(out, r->id, 1);
			mp_kv_str(&out->pk, WIRE_F_NAME, r->tenant);
		}
		break;
	}
	case RPC_TENANT_LIST: {
		struct kv_tenant_state *list;
		struct rpc_owner *owners = NULL;
		size_t n, i, shown = 0, nowners = 0;
		if ((rv = kv_store_list(s, &list, &n)) != 0) {
			rpc_reply_kv_error(out, r->id, rv);
			return;
		}
		/* only the tenants the request's token has a grant on */
		for (i = 0; i < n; i++)
			if (r->may_see == NULL || r->may_see(r->grant, list[i].name))
				list[shown++] = list[i];
		n = shown;
		if (lim->owners != NULL && (rv = lim->owners(lim->owners_arg, &owners, &nowners)) != 0) {
			free(list);
			rpc_reply_errorf(out, r->id, RPC_UNAVAILABLE,
			             "the tenants' owners cannot be read from etcd: %s", strerror(-rv));
			return;
		}
		rpc_reply_ok(out, r->id, 1);
		mp_pack_cstr(&out->pk, WIRE_F_TENANTS);
		msgpack_pack_array(&out->pk, (uint32_t)n);
		for (i = 0; i < n; i++) {
			const struct rpc_owner *o = NULL;
			if (nowners > 0)
				o = bsearch(list[i].name, owners, nowners, sizeof(*owners), owner_cmp);
			msgpack_pack_map(&out->pk, o != NULL ? 4 : 2);
			mp_kv_str(&out->pk, WIRE_F_NAME, list[i].name);
			mp_kv_str(&out->pk, WIRE_F_STATE,
			          list[i].refused  ? "refused"
			          : list[i].active ? "active"
			                           : "passive");
			if (o != NULL) {
				mp_kv_str(&out->pk, WIRE_F_OWNER, o->node);
				mp_kv_uint(&out->pk, WIRE_F_EPOCH, o->epoch);
			}
		}
		free(owners);
		free(list);
		break;
	}
	case RPC_TENANT_INFO: {
		struct kv_tenant_info info;
		if ((rv = kv_store_info(s, r->tenant, &info)) == -ENOENT ||
		    rv == KV_EREFUSED) {
			char msg[512];
			rpc_tenant_message(s, r->tenant, rv, msg, sizeof(msg));
			rpc_reply_error(out, r->id, rpc_status_of(rv), msg);
		} else if (rv != 0)
			rpc_reply_kv_error(out, r->id, rv);
		else
			pack_info(out, r->id, &info, false);
		break;
	}
	default:
		rpc_reply_error(out, r->id, RPC_INTERNAL, "method run on the wrong path");
		break;
	}
}

void rpc_run_tenant(kv_store *s, const struct rpc_req *r, struct rpc_reply *out)
{
	uint64_t us = 0;
	int rv;

	switch (r->method) {
	case RPC_TENANT_DROP:
		rv = kv_store_drop(s, r->tenant);
		break;
	case RPC_TENANT_PASSIVATE:
	case RPC_TENANT_RELEASE:
		rv = kv_store_passivate(s, r->tenant);
		break;
	case RPC_TENANT_ACTIVATE:
		rv = kv_store_activate(s, r->tenant, &us);
		break;
	default:
		rpc_reply_error(out, r->id, RPC_INTERNAL, "method run on the wrong path");
		return;
	}
	if (rv == -ENOENT || rv == KV_EREFUSED) {
		char msg[512];
		rpc_tenant_message(s, r->tenant, rv, msg, sizeof(msg));
		rpc_reply_error(out, r->id, rpc_status_of(rv), msg);
		return;
	}
	if (rv == -EPERM) {
		rpc_reply_error(out, r->id, RPC_INVALID_ARGUMENT,
		                "the tenant 'default' cannot be dropped");
		return;
	}
	if (rv != 0) {
		rpc_reply_kv_error(out, r->id, rv);
		return;
	}
	if (r->method == RPC_TENANT_DROP) {
		rpc_reply_ok(out, r->id, 1);
		mp_kv_str(&out->pk, WIRE_F_NAME, r->tenant);
	} else if (r->method == RPC_TENANT_PASSIVATE || r->method == RPC_TENANT_RELEASE) {
		rpc_reply_ok(out, r->id, 2);
		mp_kv_str(&out->pk, WIRE_F_NAME, r->tenant);
		mp_kv_str(&out->pk, WIRE_F_STATE, "passive");
	} else {
		rpc_reply_ok(out, r->id, 3);
		mp_kv_str(&out->pk, WIRE_F_NAME, r->tenant);
		mp_kv_str(&out->pk, WIRE_F_STATE, "active");
		mp_kv_uint(&out->pk, WIRE_F_ACTIVATION_US, us);
	}
}

/* ---- writes ------------------------------------------------------------ */

static int prepare_op(const msgpack_object *m, enum kv_op_type type,
                      const struct kv_tenant_config *cfg, const struct rpc_limits *lim,
                      struct kv_op *op, char *err, size_t errlen)
{
	const msgpack_object *o;

	memset(op, 0, sizeof(*op));
	op->type = type;
	op->if_version = KV_ANY_VERSION;
	if (mp_field_bin(m, WIRE_F_KEY, true, &op->key, &op->key_len) != 0) {
		snprintf(err, errlen, "'key' missing or not bin");
		return -EINVAL;
	}
	if (op->key_len == 0 || op->key_len > KV_KEY_SIZE_MAX) {
		snprintf(err, errlen, "'key' must be 1..%u bytes", KV_KEY_SIZE_MAX);
		return -EINVAL;
	}
	if ((o = mp_map_get(m, WIRE_F_IF_VERSION)) != NULL && mp_uint(o, &op->if_version) != 0) {
		snprintf(err, errlen, "'if_version' must be an unsigned integer");
		return -EINVAL;
	}
	/* the engine's "no condition" (KV_ANY_VERSION) is no version a write
	 * can get: on the wire it would be a condition that silently vanished */
	if (o != NULL && op->if_version == KV_ANY_VERSION) {
		snprintf(err, errlen, "'if_version' must be below 2^64-1");
		return -EINVAL;
	}
	if (type == KV_OP_DELETE)
		return 0;
	/* required in a Batch's put as in Put */
	if (mp_field_bin(m, WIRE_F_VALUE, true, &op->value, &op->value_len) != 0) {
		snprintf(err, errlen, "'value' missing or not bin");
		return -EINVAL;
	}
	if (op->value == NULL)
		op->value = ""; /* an empty bin */
	if (op->value_len > lim->max_value_size) {
		snprintf(err, errlen, "'value' is %zu bytes, more than the limit of %u", op->value_len,
		         lim->max_value_size);
		return -EINVAL;
	}
	op->ttl_ms = cfg->default_ttl_ms;
	if ((o = mp_map_get(m, WIRE_F_TTL_MS)) != NULL && mp_uint(o, &op->ttl_ms) != 0) {
		snprintf(err, errlen, "'ttl_ms' must be an unsigned integer");
		return -EINVAL;
	}
	return 0;
}

int rpc_write_prepare(const struct rpc_req *r, const struct kv_tenant_config *cfg,
                      const struct rpc_limits *lim, struct kv_op **ret_ops, size_t *ret_n,
                      struct rpc_reply *err_out)
{
	struct kv_op *ops = NULL;
	char err[160];
	size_t n = 0, i;
	int rv;

	if (r->args == NULL) {
		rpc_reply_error(err_out, r->id, RPC_INVALID_ARGUMENT, "'args' missing");
		return -EINVAL;
	}
	if (r->method == RPC_BATCH) {
		const msgpack_object *arr = mp_map_get(r->args, WIRE_F_OPS);
		if (arr == NULL || arr->type != MSGPACK_OBJECT_ARRAY) {
			rpc_reply_error(err_out, r->id, RPC_INVALID_ARGUMENT,
			                "'ops' missing or not an array");
			return -EINVAL;
		}
		n = arr->via.array.size;
		if (n == 0 || n > RPC_BATCH_OPS_MAX) {
			rpc_reply_errorf(err_out, r->id, RPC_INVALID_ARGUMENT,
			             "'ops' must hold 1..%u operations", RPC_BATCH_OPS_MAX);
			return -EINVAL;
		}
		if ((ops = calloc(n, sizeof(*ops))) == NULL) {
			rpc_reply_kv_error(err_out, r->id, -ENOMEM);
			return -ENOMEM;
		}
		for (i = 0; i < n; i++) {
			const msgpack_object *m = &arr->via.array.ptr[i];
			const char *opn;
			size_t ol;
			enum kv_op_type type;
			if (m->type != MSGPACK_OBJECT_MAP ||
			    mp_field_str(m, WIRE_F_OP, true, &opn, &ol) != 0) {
				rpc_reply_errorf(err_out, r->id, RPC_INVALID_ARGUMENT,
				             "op %zu: not a map with an 'op' string", i);
				free(ops);
				return -EINVAL;
			}
			if (ol == 3 && memcmp(opn, "put", 3) == 0)
				type = KV_OP_PUT;
			else if (ol == 6 && memcmp(opn, "delete", 6) == 0)
				type = KV_OP_DELETE;
			else {
				rpc_reply_errorf(err_out, r->id, RPC_INVALID_ARGUMENT,
				             "op %zu: 'op' must be \"put\" or \"delete\"", i);
				free(ops);
				return -EINVAL;
			}
			if ((rv = prepare_op(m, type, cfg, lim, &ops[i], err, sizeof(err))) != 0) {
				rpc_reply_errorf(err_out, r->id, RPC_INVALID_ARGUMENT, "op %zu: %s", i, err);
				free(ops);
				return rv;
			}
		}
	} else {
		n = 1;
		if ((ops = calloc(1, sizeof(*ops))) == NULL) {
			rpc_reply_kv_error(err_out, r->id, -ENOMEM);
			return -ENOMEM;
		}
		rv = prepare_op(r->args, r->method == RPC_PUT ? KV_OP_PUT : KV_OP_DELETE, cfg, lim,
		                ops, err, sizeof(err));
		if (rv != 0) {
			rpc_reply_error(err_out, r->id, RPC_INVALID_ARGUMENT, err);
			free(ops);
			return rv;
		}
	}
	*ret_ops = ops;
	*ret_n = n;
	return 0;
}

void rpc_write_reply(const struct rpc_req *r, int status, const struct kv_op *ops, size_t n,
                     struct rpc_reply *out)
{
	size_t i;

	if (status != 0) {
		if (r->method == RPC_BATCH) {
			for (i = 0; i < n && ops[i].status == 0; i++)
				;
			if (i < n) {
				char msg[200];
				snprintf(msg, sizeof(msg), "op %zu: %s", i, rpc_message_of(ops[i].status));
				reply_restart(out);
				reply_head(out, r->id, rpc_status_of(ops[i].status), 2);
				mp_kv_str(&out->pk, WIRE_F_MESSAGE, msg);
				mp_pack_cstr(&out->pk, WIRE_F_RESULT);
				msgpack_pack_map(&out->pk, 1);
				mp_kv_uint(&out->pk, WIRE_F_FAILED_OP, i);
				return;
			}
		}
		rpc_reply_kv_error(out, r->id, status);
		return;
	}
	if (r->method == RPC_BATCH) {
		rpc_reply_ok(out, r->id, 1);
		mp_pack_cstr(&out->pk, WIRE_F_VERSIONS);
		msgpack_pack_array(&out->pk, (uint32_t)n);
		for (i = 0; i < n; i++)
			msgpack_pack_uint64(&out->pk, ops[i].version);
		return;
	}
	if (r->method == RPC_DELETE && ops[0].version == 0) {
		rpc_reply_kv_error(out, r->id, KV_ENOTFOUND);
		return;
	}
	rpc_reply_ok(out, r->id, 1);
	mp_kv_uint(&out->pk, WIRE_F_VERSION, ops[0].version);
}
