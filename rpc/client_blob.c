/*
 * client_blob.c — blobs in libkvclient (kvclient.h, "blobs"; PROTOCOL.md,
 * "Blobs"): the streaming writer (BlobBegin, BlobAppend per append_size
 * bytes, BlobCommit; BlobAbort when closed uncommitted) and the ranged
 * reader (BlobInfo, BlobRead in calls of at most KVC_BLOB_READ_MAX bytes).
 *
 * A writer holds at most append_size bytes of the blob; it belongs to one
 * thread at a time. BlobAppend and BlobCommit are safe to send again (the
 * server takes an append's bytes once, by offset, and answers a resent
 * commit with its version), so a writer sends one again when the first
 * went unanswered (UNAVAILABLE, DEADLINE_EXCEEDED), at most BLOB_RESENDS
 * times; every other call follows the library's rule (never resent).
 */
#include "client_op.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BLOB_RESENDS    2
#define BLOB_TENANT_MAX 64                             /* kvd's tenant names, bytes */
#define BLOB_OVERHEAD   (CREQ_OVERHEAD + WIRE_KEY_MAX) /* a message's bytes besides its data */

/* Data bytes one message may carry on this handle (its max_message_size). */
static size_t data_max(const kvc *c, size_t want)
{
	size_t room = c->max_message_size > BLOB_OVERHEAD + 4096
	                      ? c->max_message_size - BLOB_OVERHEAD
	                      : 4096;

	return want < room ? want : room;
}

struct kvc_blob_writer {
	kvc *c;
	struct kvc_call call;
	char tenant[BLOB_TENANT_MAX + 1];
	uint64_t upload;
	uint32_t append_size;
	uint8_t *buf; /* append_size bytes; used of them waiting */
	size_t used;
	uint64_t sent; /* bytes the server has taken */
	uint64_t if_version, ttl_ms;
	int failed; /* the first error (sticky), 0 */
	bool committed;
};

/* A writer's call refused before anything is sent: said through the
 * status of the call the writer was opened with. */
static int writer_refuse(kvc_blob_writer *w, int code, const char *msg)
{
	if (w->call.status != NULL)
		client_status_set(w->call.status, code, msg, strlen(msg));
	return -code;
}

/* A writer that failed before: its first error again. */
static int writer_failed(kvc_blob_writer *w)
{
	return writer_refuse(w, -w->failed, "the blob writer failed earlier (that call said why)");
}

/* ---- one request ------------------------------------------------------------ */

static bool unanswered(int rv)
{
	return rv == -KVC_UNAVAILABLE || rv == -KVC_DEADLINE_EXCEEDED;
}

static int append_once(kvc_blob_writer *w, const void *data, size_t len, uint64_t *ret_size)
{
	struct client_op op;
	uint64_t size = 0;
	int rv;

	client_op_init(&op, w->c, &w->call, WIRE_M_BLOB_APPEND);
	if ((rv = client_op_request(&op, &w->call, true, len)) != 0)
		return client_op_end(&op, &w->call, rv);
	msgpack_pack_map(&op.pk, 3);
	mp_kv_uint(&op.pk, WIRE_F_UPLOAD, w->upload);
	mp_kv_uint(&op.pk, WIRE_F_OFFSET, w->sent);
	mp_kv_bin(&op.pk, WIRE_F_DATA, data, len);
	if ((rv = client_op_run(&op)) == 0)
		rv = client_op_decoded(&op, mp_field_uint(op.env.result, WIRE_F_SIZE, true, &size));
	if (rv == 0 && size != w->sent + len)
		rv = client_op_fail(&op, KVC_INTERNAL,
		                    "BlobAppend: the server has %llu bytes, not %llu",
		                    (unsigned long long)size, (unsigned long long)(w->sent + len));
	rv = client_op_end(&op, &w->call, rv);
	if (rv == 0)
		*ret_size = size;
	return rv;
}

/* Sends len bytes at w->sent (again when unanswered). */
static int append(kvc_blob_writer *w, const void *data, size_t len)
{
	uint64_t size = 0;
	int rv, tries = 0;

	do
		rv = append_once(w, data, len, &size);
	while (unanswered(rv) && tries++ < BLOB_RESENDS);
	if (rv != 0)
		return w->failed = rv;
	w->sent = size;
	return 0;
}

static int flush(kvc_blob_writer *w)
{
	int rv;

	if (w->used == 0)
		return 0;
	if ((rv = append(w, w->buf, w->used)) == 0)
		w->used = 0;
	return rv;
}

/* ---- the writer --------------------------------------------------------------- */

int kvc_blob_writer_open(kvc *c, const struct kvc_call *call, const void *key, size_t key_len,
                         const struct kvc_blob_opts *o, kvc_blob_writer **ret)
{
	static const struct kvc_blob_opts defaults = KVC_BLOB_OPTS_INIT;
	struct client_op op;
	kvc_blob_writer *w = NULL;
	uint64_t upload = 0;
	int rv = 0;

	if (o == NULL)
		o = &defaults;
	client_op_init(&op, c, call, WIRE_M_BLOB_BEGIN);
	if (ret == NULL || c == NULL)
		rv = client_op_fail(&op, KVC_INVALID_ARGUMENT, "no handle or no ret");
	else if (call != NULL && call->tenant != NULL && strlen(call->tenant) > BLOB_TENANT_MAX)
		rv = client_op_fail(&op, KVC_INVALID_ARGUMENT, "a tenant name is 1 to 64 bytes");
	else if ((rv = client_check_key(&op, key, key_len)) == 0 &&
	         ((w = calloc(1, sizeof(*w))) == NULL ||
	          (w->append_size = (uint32_t)data_max(
	                   c, o->append_size != 0 ? o->append_size : KVC_BLOB_APPEND_SIZE),
	           (w->buf = malloc(w->append_size)) == NULL)))
		rv = client_op_fail(&op, KVC_RESOURCE_EXHAUSTED, "out of memory for a blob writer");
	if (rv == 0 && (rv = client_op_request(&op, call, true, key_len)) == 0) {
		msgpack_pack_map(&op.pk, 1 + (o->chunk_size != 0));
		mp_kv_bin(&op.pk, WIRE_F_KEY, key, key_len);
		if (o->chunk_size != 0)
			mp_kv_uint(&op.pk, WIRE_F_CHUNK_SIZE, o->chunk_size);
		if ((rv = client_op_run(&op)) == 0)
			rv = client_op_decoded(
			        &op, mp_field_uint(op.env.result, WIRE_F_UPLOAD, true, &upload));
	}
	rv = client_op_end(&op, call, rv);
	if (rv != 0) {
		if (w != NULL)
			free(w->buf);
		free(w);
		return rv;
	}
	w->c = c;
	if (call != NULL)
		w->call = *call;
	if (call != NULL && call->tenant != NULL) {
		snprintf(w->tenant, sizeof(w->tenant), "%s", call->tenant);
		w->call.tenant = w->tenant;
	}
	w->upload = upload;
	w->if_version = o->if_version;
	w->ttl_ms = o->ttl_ms;
	*ret = w;
	return 0;
}

int kvc_blob_write(kvc_blob_writer *w, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	int rv;

	if (w == NULL)
		return -KVC_INVALID_ARGUMENT;
	if (buf == NULL && len > 0)
		return writer_refuse(w, KVC_INVALID_ARGUMENT, "no buffer");
	if (w->failed != 0)
		return writer_failed(w);
	if (w->committed)
		return writer_refuse(w, KVC_FAILED_PRECONDITION, "the blob is committed already");
	while (len > 0) {
		size_t n;
		if (w->used == 0 && len >= w->append_size) {
			/* whole appends straight from the caller's bytes */
			if ((rv = append(w, p, w->append_size)) != 0)
				return rv;
			p += w->append_size;
			len -= w->append_size;
			continue;
		}
		n = w->append_size - w->used;
		if (n > len)
			n = len;
		memcpy(w->buf + w->used, p, n);
		w->used += n;
		p += n;
		len -= n;
		if (w->used == w->append_size && (rv = flush(w)) != 0)
			return rv;
	}
	return 0;
}

uint64_t kvc_blob_writer_size(const kvc_blob_writer *w)
{
	return w != NULL ? w->sent + w->used : 0;
}

static int commit_once(kvc_blob_writer *w, uint64_t *ret_version)
{
	struct client_op op;
	uint64_t version = 0;
	bool cond = w->if_version != KVC_ANY_VERSION, ttl = w->ttl_ms != 0;
	int rv;

	client_op_init(&op, w->c, &w->call, WIRE_M_BLOB_COMMIT);
	if ((rv = client_op_request(&op, &w->call, true, 0)) != 0)
		return client_op_end(&op, &w->call, rv);
	msgpack_pack_map(&op.pk, 2 + cond + ttl);
	mp_kv_uint(&op.pk, WIRE_F_UPLOAD, w->upload);
	mp_kv_uint(&op.pk, WIRE_F_SIZE, w->sent);
	if (cond)
		mp_kv_uint(&op.pk, WIRE_F_IF_VERSION, w->if_version);
	if (ttl)
		mp_kv_uint(&op.pk, WIRE_F_TTL_MS, w->ttl_ms == KVC_TTL_NONE ? 0 : w->ttl_ms);
	if ((rv = client_op_run(&op)) == 0)
		rv = client_op_decoded(
		        &op, mp_field_uint(op.env.result, WIRE_F_VERSION, true, &version));
	rv = client_op_end(&op, &w->call, rv);
	if (rv == 0)
		*ret_version = version;
	return rv;
}

int kvc_blob_commit(kvc_blob_writer *w, uint64_t *ret_version)
{
	uint64_t version = 0;
	int rv, tries = 0;

	if (w == NULL)
		return -KVC_INVALID_ARGUMENT;
	if (w->failed != 0)
		return writer_failed(w);
	if (w->committed)
		return writer_refuse(w, KVC_FAILED_PRECONDITION, "the blob is committed already");
	if ((rv = flush(w)) != 0)
		return rv;
	do
		rv = commit_once(w, &version);
	while (unanswered(rv) && tries++ < BLOB_RESENDS);
	if (rv != 0)
		return w->failed = rv;
	w->committed = true;
	if (ret_version != NULL)
		*ret_version = version;
	return 0;
}

void kvc_blob_writer_close(kvc_blob_writer *w)
{
	if (w == NULL)
		return;
	if (!w->committed) {
		/* best effort: an upload left open is aborted by the server
		 * after its upload_idle_ms anyway */
		struct kvc_call call = w->call;
		struct client_op op;
		int rv;
		call.status = NULL;
		client_op_init(&op, w->c, &call, WIRE_M_BLOB_ABORT);
		if ((rv = client_op_request(&op, &call, true, 0)) == 0) {
			msgpack_pack_map(&op.pk, 1);
			mp_kv_uint(&op.pk, WIRE_F_UPLOAD, w->upload);
			rv = client_op_run(&op);
		}
		client_op_end(&op, &call, rv);
	}
	free(w->buf);
	free(w);
}

/* ---- reading ------------------------------------------------------------------ */

static void pack_where(msgpack_packer *pk, const void *key, size_t key_len, uint64_t version,
                       uint32_t extra)
{
	msgpack_pack_map(pk, 1 + (version != 0) + extra);
	mp_kv_bin(pk, WIRE_F_KEY, key, key_len);
	if (version != 0)
		mp_kv_uint(pk, WIRE_F_VERSION, version);
}

int kvc_blob_info(kvc *c, const struct kvc_call *call, const void *key, size_t key_len,
                  uint64_t version, struct kvc_blob_info *ret)
{
	struct client_op op;
	struct kvc_blob_info bi = {0};
	uint64_t cs = 0, chunks = 0;
	int rv;

	client_op_init(&op, c, call, WIRE_M_BLOB_INFO);
	if ((rv = client_check_key(&op, key, key_len)) != 0 ||
	    (rv = client_op_request(&op, call, true, key_len)) != 0)
		return client_op_end(&op, call, rv);
	pack_where(&op.pk, key, key_len, version, 0);
	if ((rv = client_op_run(&op)) == 0) {
		const msgpack_object *r = op.env.result;
		rv = client_op_decoded(
		        &op, (mp_field_uint(r, WIRE_F_SIZE, true, &bi.size) ||
		              mp_field_uint(r, WIRE_F_CHUNK_SIZE, true, &cs) ||
		              mp_field_uint(r, WIRE_F_CHUNKS, true, &chunks) ||
		              mp_field_uint(r, WIRE_F_XXH64, true, &bi.xxh64) ||
		              mp_field_uint(r, WIRE_F_STORED_BYTES, false, &bi.stored_bytes) ||
		              mp_field_uint(r, WIRE_F_VERSION, true, &bi.version) ||
		              mp_field_uint(r, WIRE_F_TIMESTAMP_MS, false, &bi.timestamp_ms) ||
		              mp_field_uint(r, WIRE_F_EXPIRY_MS, false, &bi.expiry_ms) ||
		              cs > UINT32_MAX || chunks > UINT32_MAX)
		                     ? -EINVAL
		                     : 0);
	}
	rv = client_op_end(&op, call, rv);
	if (rv != 0)
		return rv;
	bi.chunk_size = (uint32_t)cs;
	bi.chunks = (uint32_t)chunks;
	if (ret != NULL)
		*ret = bi;
	return 0;
}

/* One BlobRead of at most KVC_BLOB_READ_MAX bytes at *version (0: the
 * newest, and *version becomes the version read). */
static int read_once(kvc *c, const struct kvc_call *call, const void *key, size_t key_len,
                     uint64_t *version, uint64_t offset, void *buf, size_t len, size_t *ret_n)
{
	struct client_op op;
	const void *p = NULL;
	size_t n = 0;
	uint64_t v = 0;
	int rv;

	client_op_init(&op, c, call, WIRE_M_BLOB_READ);
	if ((rv = client_op_request(&op, call, true, key_len)) != 0)
		return client_op_end(&op, call, rv);
	pack_where(&op.pk, key, key_len, *version, 2);
	mp_kv_uint(&op.pk, WIRE_F_OFFSET, offset);
	mp_kv_uint(&op.pk, WIRE_F_LENGTH, len);
	if ((rv = client_op_run(&op)) == 0)
		rv = client_op_decoded(
		        &op, (mp_field_bin(op.env.result, WIRE_F_DATA, true, &p, &n) ||
		              mp_field_uint(op.env.result, WIRE_F_VERSION, true, &v) || n > len)
		                     ? -EINVAL
		                     : 0);
	if (rv == 0 && n > 0)
		memcpy(buf, p, n);
	rv = client_op_end(&op, call, rv);
	if (rv != 0)
		return rv;
	*version = v;
	*ret_n = n;
	return 0;
}

int kvc_blob_read(kvc *c, const struct kvc_call *call, const void *key, size_t key_len,
                  uint64_t version, uint64_t offset, void *buf, size_t len, size_t *ret_n)
{
	struct client_op op;
	uint8_t *p = buf;
	size_t got = 0;
	int rv = 0;

	client_op_init(&op, c, call, WIRE_M_BLOB_READ);
	if (c == NULL)
		return client_op_end(&op, call,
		                     client_op_fail(&op, KVC_INVALID_ARGUMENT, "no handle"));
	if ((rv = client_check_key(&op, key, key_len)) != 0 ||
	    (rv = client_check_bytes(&op, buf, len, "the buffer")) != 0)
		return client_op_end(&op, call, rv);
	client_op_end(&op, call, 0);
	if (len == 0) {
		if (ret_n != NULL)
			*ret_n = 0;
		return 0;
	}
	do {
		size_t want = len - got, n = 0;
		want = data_max(c, want < KVC_BLOB_READ_MAX ? want : KVC_BLOB_READ_MAX);
		/* the first call fixes the version the others read */
		if ((rv = read_once(c, call, key, key_len, &version, offset + got, p + got, want,
		                    &n)) != 0)
			return rv;
		got += n;
		if (n < want)
			break; /* the blob's end */
	} while (got < len);
	if (ret_n != NULL)
		*ret_n = got;
	return 0;
}
