/*
 * server_blob.c — the server side of the blob methods (PROTOCOL.md
 * "Blobs"): BlobInfo and BlobRead, run as reads; the arguments and replies
 * of BlobBegin/Append/Commit/Abort, whose uploads kvd's workers keep
 * (daemon/upload.c).
 */
#include "server.h"
#include "server_internal.h"

#include "mp.h"
#include "wire.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void pack_blob_info(struct rpc_reply *out, const struct kv_blob_info *bi)
{
	mp_kv_uint(&out->pk, WIRE_F_SIZE, bi->size);
	mp_kv_uint(&out->pk, WIRE_F_VERSION, bi->version);
	mp_kv_uint(&out->pk, WIRE_F_TIMESTAMP_MS, bi->timestamp_ms);
	mp_kv_uint(&out->pk, WIRE_F_EXPIRY_MS, bi->expiry_ms);
}

void rpc_run_blob_info(kv_tenant *t, const struct rpc_req *r, struct rpc_reply *out)
{
	struct kv_read_opts ro = {0, 0};
	struct kv_blob_info bi;
	const void *key;
	size_t klen;
	int rv;

	if (rpc_arg_read(r, out, &key, &klen, &ro))
		return;
	if ((rv = kv_blob_info(kv_tenant_db(t), key, klen, &ro, &bi)) != 0) {
		rpc_reply_kv_error(out, r->id, rv);
		return;
	}
	rpc_reply_ok(out, r->id, 8);
	pack_blob_info(out, &bi);
	mp_kv_uint(&out->pk, WIRE_F_CHUNK_SIZE, bi.chunk_size);
	mp_kv_uint(&out->pk, WIRE_F_CHUNKS, bi.chunks);
	mp_kv_uint(&out->pk, WIRE_F_XXH64, bi.xxh64);
	mp_kv_uint(&out->pk, WIRE_F_STORED_BYTES, bi.stored_bytes);
}

void rpc_run_blob_read(kv_tenant *t, const struct rpc_req *r, struct rpc_reply *out)
{
	struct kv_read_opts ro = {0, 0};
	struct kv_blob_info bi;
	const void *key;
	size_t klen, n = 0;
	uint64_t offset = 0, length = WIRE_BLOB_READ_MAX;
	void *buf;
	int rv;

	if (rpc_arg_read(r, out, &key, &klen, &ro) ||
	    rpc_arg_uint(r, out, WIRE_F_OFFSET, &offset) ||
	    rpc_arg_uint(r, out, WIRE_F_LENGTH, &length))
		return;
	if (length > WIRE_BLOB_READ_MAX)
		length = WIRE_BLOB_READ_MAX;
	if ((buf = malloc(length ? length : 1)) == NULL) {
		rpc_reply_kv_error(out, r->id, -ENOMEM);
		return;
	}
	rv = kv_blob_read(kv_tenant_db(t), key, klen, &ro, offset, buf, (size_t)length, &n, &bi);
	if (rv != 0) {
		free(buf);
		rpc_reply_kv_error(out, r->id, rv);
		return;
	}
	rpc_reply_ok(out, r->id, 6);
	mp_kv_bin(&out->pk, WIRE_F_DATA, buf, n);
	mp_kv_uint(&out->pk, WIRE_F_OFFSET, offset);
	pack_blob_info(out, &bi);
	free(buf);
}

int rpc_blob_args(const struct rpc_req *r, struct rpc_blob_args *ret, struct rpc_reply *err_out)
{
	struct rpc_blob_args a;
	const msgpack_object *o;

	memset(&a, 0, sizeof(a));
	a.opts.if_version = KV_ANY_VERSION;
	if (r->args == NULL) {
		rpc_reply_error(err_out, r->id, RPC_INVALID_ARGUMENT, "'args' missing");
		return -EINVAL;
	}
	if (r->method == RPC_BLOB_BEGIN) {
		if (rpc_arg_key(r, err_out, WIRE_F_KEY, &a.key, &a.key_len) ||
		    rpc_arg_uint(r, err_out, WIRE_F_CHUNK_SIZE, &a.chunk_size))
			return -EINVAL;
		if (a.chunk_size != 0 &&
		    (a.chunk_size < KV_BLOB_CHUNK_MIN || a.chunk_size > KV_BLOB_CHUNK_MAX)) {
			rpc_reply_errorf(err_out, r->id, RPC_INVALID_ARGUMENT,
			                 "'chunk_size' must be %u..%u (or absent: %u)",
			                 KV_BLOB_CHUNK_MIN, KV_BLOB_CHUNK_MAX,
			                 KV_BLOB_CHUNK_DEFAULT);
			return -EINVAL;
		}
		*ret = a;
		return 0;
	}
	if (mp_field_uint(r->args, WIRE_F_UPLOAD, true, &a.upload) != 0) {
		rpc_reply_error(err_out, r->id, RPC_INVALID_ARGUMENT,
		                "'upload' missing or not an unsigned integer");
		return -EINVAL;
	}
	if (r->method == RPC_BLOB_APPEND) {
		if (mp_field_uint(r->args, WIRE_F_OFFSET, true, &a.offset) != 0) {
			rpc_reply_error(err_out, r->id, RPC_INVALID_ARGUMENT,
			                "'offset' missing or not an unsigned integer");
			return -EINVAL;
		}
		if (mp_field_bin(r->args, WIRE_F_DATA, true, &a.data, &a.len) != 0) {
			rpc_reply_error(err_out, r->id, RPC_INVALID_ARGUMENT,
			                "'data' missing or not bin");
			return -EINVAL;
		}
	} else if (r->method == RPC_BLOB_COMMIT) {
		if (mp_field_uint(r->args, WIRE_F_SIZE, true, &a.size) != 0) {
			rpc_reply_error(err_out, r->id, RPC_INVALID_ARGUMENT,
			                "'size' missing or not an unsigned integer");
			return -EINVAL;
		}
		if ((o = mp_map_get(r->args, WIRE_F_IF_VERSION)) != NULL &&
		    (mp_uint(o, &a.opts.if_version) != 0 || a.opts.if_version == KV_ANY_VERSION)) {
			rpc_reply_error(err_out, r->id, RPC_INVALID_ARGUMENT,
			                "'if_version' must be an unsigned integer below 2^64-1");
			return -EINVAL;
		}
		if (rpc_arg_uint(r, err_out, WIRE_F_TTL_MS, &a.opts.ttl_ms))
			return -EINVAL;
		a.has_ttl = mp_map_get(r->args, WIRE_F_TTL_MS) != NULL;
	}
	*ret = a;
	return 0;
}

void rpc_blob_reply_uint(struct rpc_reply *out, uint64_t id, const char *field, uint64_t v)
{
	if (field == NULL) {
		rpc_reply_ok(out, id, 0);
		return;
	}
	rpc_reply_ok(out, id, 1);
	mp_kv_uint(&out->pk, field, v);
}

void rpc_blob_reply_begin(struct rpc_reply *out, uint64_t id, uint64_t upload, uint32_t chunk_size)
{
	rpc_reply_ok(out, id, 2);
	mp_kv_uint(&out->pk, WIRE_F_UPLOAD, upload);
	mp_kv_uint(&out->pk, WIRE_F_CHUNK_SIZE, chunk_size);
}
