/*
 * client_calls.c — the calls of kvclient.h on keys, tenants and the daemon,
 * blocking and async: each validates its arguments, packs its request
 * (creq_*), runs it through the transport (client_op.h) and decodes the
 * result (crep_*) into the caller's outputs, which are written only on
 * success. Scans are in client_scan.c.
 */
#include "client_op.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define CLIENT_BATCH_MAX 10000u /* PROTOCOL.md: Batch ops */

/* ---- data ------------------------------------------------------------------ */

void kvc_value_free(struct kvc_value *v)
{
	if (v == NULL)
		return;
	free(v->data);
	v->data = NULL;
	v->len = 0;
}

int kvc_put(kvc *c, const struct kvc_call *call, const void *key, size_t key_len, const void *value,
            size_t value_len, const struct kvc_write *w, uint64_t *ret_version)
{
	static const struct kvc_write unconditional = KVC_WRITE_INIT;
	struct client_op op;
	uint64_t version = 0;
	int rv;

	if (w == NULL)
		w = &unconditional;
	client_op_init(&op, c, call, WIRE_M_PUT);
	if ((rv = client_check_key(&op, key, key_len)) != 0 ||
	    (rv = client_check_bytes(&op, value, value_len, "the value")) != 0 ||
	    (rv = client_op_request(&op, call, true, key_len + value_len)) != 0)
		return client_op_end(&op, call, rv);
	creq_put(&op.pk, key, key_len, value, value_len, w->if_version, w->ttl_ms);
	if ((rv = client_op_run(&op)) == 0)
		rv = client_op_decoded(&op, crep_version(op.env.result, &version));
	rv = client_op_end(&op, call, rv);
	if (rv == 0 && ret_version != NULL)
		*ret_version = version;
	return rv;
}

/* A blob where a Get wants a value: FAILED_PRECONDITION saying so. */
static int blob_not_value(struct client_op *op, uint64_t size)
{
	return client_op_fail(op, KVC_FAILED_PRECONDITION,
	                      "the key's value is a blob of %llu bytes (read it with BlobRead: "
	                      "kvc_blob_read)",
	                      (unsigned long long)size);
}

/* kvc_get and kvc_get_ex: with blob_ok a blob is answered through *ret_blob. */
static int get_call(kvc *c, const struct kvc_call *call, const void *key, size_t key_len,
                    uint64_t version, uint64_t as_of, struct kvc_value *ret, bool blob_ok,
                    bool *ret_blob, uint64_t *ret_blob_size)
{
	struct client_op op;
	struct kvc_value v = {0};
	const void *p = NULL;
	uint64_t blob_size = 0;
	bool blob = false;
	int rv;

	client_op_init(&op, c, call, WIRE_M_GET);
	if ((rv = client_check_key(&op, key, key_len)) != 0 ||
	    (rv = client_op_request(&op, call, true, key_len)) != 0)
		return client_op_end(&op, call, rv);
	creq_get(&op.pk, key, key_len, version, as_of);
	if ((rv = client_op_run(&op)) == 0 && (blob = crep_blob(op.env.result, &blob_size))) {
		if (!blob_ok)
			rv = blob_not_value(&op, blob_size);
		else
			rv = client_op_decoded(
			        &op, (mp_field_uint(op.env.result, WIRE_F_VERSION, true, &v.version) ||
			              mp_field_uint(op.env.result, WIRE_F_TIMESTAMP_MS, false,
			                            &v.timestamp_ms) ||
			              mp_field_uint(op.env.result, WIRE_F_EXPIRY_MS, false,
			                            &v.expiry_ms))
			                     ? -EINVAL
			                     : 0);
	} else if (rv == 0) {
		rv = client_op_decoded(&op, crep_get(op.env.result, &p, &v.len, &v.version,
		                                     &v.timestamp_ms, &v.expiry_ms));
		if (rv == 0 && ret != NULL && (v.data = client_copy_bytes(p, v.len)) == NULL)
			rv = client_op_fail(&op, KVC_RESOURCE_EXHAUSTED,
			                    "out of memory for a %zu byte value", v.len);
	}
	rv = client_op_end(&op, call, rv);
	if (rv != 0)
		return rv;
	if (ret != NULL)
		*ret = v;
	if (ret_blob != NULL)
		*ret_blob = blob;
	if (ret_blob_size != NULL)
		*ret_blob_size = blob ? blob_size : 0;
	return 0;
}

int kvc_get(kvc *c, const struct kvc_call *call, const void *key, size_t key_len, uint64_t version,
            uint64_t as_of, struct kvc_value *ret)
{
	return get_call(c, call, key, key_len, version, as_of, ret, false, NULL, NULL);
}

int kvc_get_ex(kvc *c, const struct kvc_call *call, const void *key, size_t key_len,
               uint64_t version, uint64_t as_of, struct kvc_value *ret, bool *ret_blob,
               uint64_t *ret_blob_size)
{
	return get_call(c, call, key, key_len, version, as_of, ret, true, ret_blob, ret_blob_size);
}

int kvc_delete(kvc *c, const struct kvc_call *call, const void *key, size_t key_len,
               uint64_t if_version, uint64_t *ret_version)
{
	struct client_op op;
	uint64_t version = 0;
	int rv;

	client_op_init(&op, c, call, WIRE_M_DELETE);
	if ((rv = client_check_key(&op, key, key_len)) != 0 ||
	    (rv = client_op_request(&op, call, true, key_len)) != 0)
		return client_op_end(&op, call, rv);
	creq_delete(&op.pk, key, key_len, if_version);
	if ((rv = client_op_run(&op)) == 0)
		rv = client_op_decoded(&op, crep_version(op.env.result, &version));
	rv = client_op_end(&op, call, rv);
	if (rv == 0 && ret_version != NULL)
		*ret_version = version;
	return rv;
}

void kvc_versions_free(struct kvc_version *list, size_t count)
{
	size_t i;

	if (list == NULL)
		return;
	for (i = 0; i < count; i++)
		free(list[i].data);
	free(list);
}

/* Copies the reply's versions out; data of each is its own allocation.
 * blobs (NULL: not wanted): a new array of each version's blob size,
 * KVC_NOT_BLOB for a version that is no blob. */
static int versions_copy(struct client_op *op, const msgpack_object *arr,
                         struct kvc_version **ret_list, size_t *ret_count, uint64_t **blobs)
{
	size_t i, n = arr->via.array.size;
	struct kvc_version *list = calloc(n != 0 ? n : 1, sizeof(*list));

	if (list == NULL || (blobs != NULL && (*blobs = calloc(n != 0 ? n : 1,
	                                                       sizeof(**blobs))) == NULL)) {
		free(list);
		return client_op_fail(op, KVC_RESOURCE_EXHAUSTED, "out of memory for %zu versions",
		                      n);
	}
	for (i = 0; i < n; i++) {
		const msgpack_object *e = &arr->via.array.ptr[i];
		struct kvc_version v;

		if (blobs != NULL) {
			/* [version, timestamp_ms, false, nil, {blob: true, blob_size}] */
			uint64_t size = 0;
			bool blob = e->type == MSGPACK_OBJECT_ARRAY && e->via.array.size >= 5 &&
			            e->via.array.ptr[4].type == MSGPACK_OBJECT_MAP &&
			            crep_blob(&e->via.array.ptr[4], &size);
			(*blobs)[i] = blob ? size : KVC_NOT_BLOB;
		}

		if (crep_version_entry(e, &v) != 0) {
			kvc_versions_free(list, i);
			if (blobs != NULL)
				free(*blobs);
			return client_op_decoded(op, -EINVAL);
		}
		if (v.data != NULL && (v.data = client_copy_bytes(v.data, v.len)) == NULL) {
			kvc_versions_free(list, i);
			if (blobs != NULL)
				free(*blobs);
			return client_op_fail(op, KVC_RESOURCE_EXHAUSTED,
			                      "out of memory for a value");
		}
		list[i] = v;
	}
	*ret_list = list;
	*ret_count = n;
	return 0;
}

int kvc_versions(kvc *c, const struct kvc_call *call, const void *key, size_t key_len,
                 uint32_t limit, uint64_t before, bool values, struct kvc_version **ret_list,
                 size_t *ret_count, bool *ret_truncated)
{
	return kvc_versions_ex(c, call, key, key_len, limit, before, values, ret_list, ret_count,
	                       ret_truncated, NULL);
}

int kvc_versions_ex(kvc *c, const struct kvc_call *call, const void *key, size_t key_len,
                    uint32_t limit, uint64_t before, bool values, struct kvc_version **ret_list,
                    size_t *ret_count, bool *ret_truncated, uint64_t **ret_blob_sizes)
{
	struct client_op op;
	const msgpack_object *arr = NULL;
	struct kvc_version *list = NULL;
	uint64_t *blobs = NULL;
	size_t count = 0;
	bool truncated = false;
	int rv;

	client_op_init(&op, c, call, WIRE_M_VERSIONS);
	if ((rv = client_check_key(&op, key, key_len)) != 0 ||
	    (rv = client_op_request(&op, call, true, key_len)) != 0)
		return client_op_end(&op, call, rv);
	creq_versions(&op.pk, key, key_len, limit, before, values);
	if ((rv = client_op_run(&op)) == 0)
		rv = client_op_decoded(&op, crep_versions(op.env.result, &arr, &truncated));
	if (rv == 0)
		rv = versions_copy(&op, arr, &list, &count, ret_blob_sizes != NULL ? &blobs : NULL);
	rv = client_op_end(&op, call, rv);
	if (rv != 0)
		return rv;
	if (ret_blob_sizes != NULL)
		*ret_blob_sizes = blobs;
	if (ret_list != NULL)
		*ret_list = list;
	else
		kvc_versions_free(list, count);
	if (ret_count != NULL)
		*ret_count = count;
	if (ret_truncated != NULL)
		*ret_truncated = truncated;
	return 0;
}

int kvc_batch(kvc *c, const struct kvc_call *call, struct kvc_op *ops, size_t n,
              size_t *ret_failed_op)
{
	struct client_op op;
	size_t i, payload = 0, failed;
	int rv = 0;

	client_op_init(&op, c, call, WIRE_M_BATCH);
	if ((ops == NULL && n > 0) || n > CLIENT_BATCH_MAX)
		rv = client_op_fail(&op, KVC_INVALID_ARGUMENT, "a batch holds 0 to %u ops, not %zu",
		                    CLIENT_BATCH_MAX, n);
	for (i = 0; rv == 0 && i < n; i++) {
		if (ops[i].type != KVC_OP_PUT && ops[i].type != KVC_OP_DELETE)
			rv = client_op_fail(&op, KVC_INVALID_ARGUMENT, "op %zu: unknown type %d", i,
			                    (int)ops[i].type);
		else if ((rv = client_check_key(&op, ops[i].key, ops[i].key_len)) == 0 &&
		         ops[i].type == KVC_OP_PUT)
			rv = client_check_bytes(&op, ops[i].value, ops[i].value_len, "a value");
		payload += ops[i].key_len + 32 + (ops[i].type == KVC_OP_PUT ? ops[i].value_len : 0);
	}
	if (rv != 0 || (rv = client_op_request(&op, call, true, payload)) != 0)
		return client_op_end(&op, call, rv);
	creq_batch(&op.pk, ops, n);
	rv = client_op_run(&op);
	if (rv == 0)
		rv = client_op_decoded(&op, crep_batch(op.env.result, ops, n));
	else if (rv == -KVC_FAILED_PRECONDITION && ret_failed_op != NULL &&
	         crep_batch_failed(op.env.result, n, &failed) == 0)
		*ret_failed_op = failed;
	return client_op_end(&op, call, rv);
}

/* ---- tenants and the daemon -------------------------------------------------- */

/* TenantCreate, TenantDrop, TenantPassivate, TenantActivate, TenantInfo:
 * a {name} request (or o for TenantCreate) whose reply op is left to the
 * caller to decode and end. */
static int name_call(struct client_op *op, kvc *c, const struct kvc_call *call, const char *method,
                     const char *name, const struct kvc_tenant_opts *o, const char *compression,
                     const struct kvc_evict_opts *e)
{
	int rv;

	client_op_init(op, c, call, method);
	if ((rv = client_check_name(op, name)) != 0 ||
	    (rv = client_op_request(op, call, true, strlen(name))) != 0)
		return rv;
	op->tenant = name; /* where it runs, and so where it is routed */
	if (o != NULL)
		creq_tenant_create(&op->pk, name, o, compression, e);
	else
		creq_name(&op->pk, name);
	return client_op_run(op);
}

int kvc_tenant_create_evict(kvc *c, const struct kvc_call *call, const char *name,
                            const struct kvc_tenant_opts *o, const char *compression,
                            const struct kvc_evict_opts *e)
{
	static const struct kvc_tenant_opts defaults = {0};
	struct client_op op;

	return client_op_end(&op, call,
	                     name_call(&op, c, call, WIRE_M_TENANT_CREATE, name,
	                               o != NULL ? o : &defaults, compression, e));
}

int kvc_tenant_create_codec(kvc *c, const struct kvc_call *call, const char *name,
                            const struct kvc_tenant_opts *o, const char *compression)
{
	return kvc_tenant_create_evict(c, call, name, o, compression, NULL);
}

int kvc_tenant_create(kvc *c, const struct kvc_call *call, const char *name,
                      const struct kvc_tenant_opts *o)
{
	return kvc_tenant_create_codec(c, call, name, o, NULL);
}

int kvc_tenant_drop(kvc *c, const struct kvc_call *call, const char *name)
{
	struct client_op op;

	return client_op_end(&op, call,
	                     name_call(&op, c, call, WIRE_M_TENANT_DROP, name, NULL, NULL, NULL));
}

int kvc_tenant_passivate(kvc *c, const struct kvc_call *call, const char *name)
{
	struct client_op op;

	return client_op_end(&op, call,
	                     name_call(&op, c, call, WIRE_M_TENANT_PASSIVATE, name, NULL, NULL, NULL));
}

int kvc_tenant_owners(kvc *c, const struct kvc_call *call, struct kvc_tenant_owner **ret_list,
                      size_t *ret_count)
{
	struct client_op op;
	const msgpack_object *arr = NULL;
	struct kvc_tenant_owner *list = NULL;
	size_t i, n = 0;
	int rv;

	client_op_init(&op, c, call, WIRE_M_TENANT_LIST);
	if ((rv = client_op_request(&op, call, false, 0)) == 0 && (rv = client_op_run(&op)) == 0)
		rv = client_op_decoded(&op, crep_tenant_list(op.env.result, &arr));
	if (rv == 0) {
		n = arr->via.array.size;
		if ((list = calloc(n != 0 ? n : 1, sizeof(*list))) == NULL)
			rv = client_op_fail(&op, KVC_RESOURCE_EXHAUSTED,
			                    "out of memory for %zu tenants", n);
		for (i = 0; rv == 0 && i < n; i++) {
			const msgpack_object *m = &arr->via.array.ptr[i];
			struct kvc_tenant_entry e;
			const msgpack_object *node;
			rv = client_op_decoded(&op, crep_tenant_entry(m, &e));
			if (rv != 0)
				break;
			memcpy(list[i].name, e.name, sizeof(list[i].name));
			list[i].active = e.active;
			list[i].refused = e.refused;
			node = mp_map_get(m, WIRE_F_OWNER);
			if (node != NULL &&
			    (mp_str_copy(node, list[i].node, sizeof(list[i].node)) != 0 ||
			     mp_field_uint(m, WIRE_F_EPOCH, false, &list[i].epoch) != 0))
				rv = client_op_decoded(&op, -EINVAL);
		}
	}
	rv = client_op_end(&op, call, rv);
	if (rv != 0 || ret_list == NULL)
		free(list);
	if (rv != 0)
		return rv;
	if (ret_list != NULL)
		*ret_list = list;
	if (ret_count != NULL)
		*ret_count = n;
	return 0;
}

void kvc_tenant_owners_free(struct kvc_tenant_owner *list)
{
	free(list);
}

int kvc_tenant_release(kvc *c, const struct kvc_call *call, const char *name)
{
	struct client_op op;

	return client_op_end(&op, call,
	                     name_call(&op, c, call, WIRE_M_TENANT_RELEASE, name, NULL, NULL, NULL));
}

int kvc_tenant_adopt(kvc *c, const struct kvc_call *call, const char *name,
                     struct kvc_owner *ret)
{
	struct client_op op;
	struct kvc_owner o;
	int rv;

	client_op_init(&op, c, call, WIRE_M_TENANT_ADOPT);
	if ((rv = client_check_name(&op, name)) == 0 &&
	    (rv = client_op_request(&op, call, true, strlen(name))) == 0) {
		creq_name(&op.pk, name);
		op.tenant = NULL; /* to this handle's node, wherever the tenant was */
		rv = client_op_run(&op);
	}
	if (rv == 0)
		rv = client_op_decoded(&op, crep_owner(op.env.result, &o));
	if (rv == 0 && c->route != NULL)
		client_route_forget(c, name, NULL); /* served here from now on */
	rv = client_op_end(&op, call, rv);
	if (rv == 0 && ret != NULL)
		*ret = o;
	return rv;
}

int kvc_tenant_activate(kvc *c, const struct kvc_call *call, const char *name,
                        uint64_t *ret_activation_us)
{
	struct client_op op;
	uint64_t us = 0;
	int rv;

	if ((rv = name_call(&op, c, call, WIRE_M_TENANT_ACTIVATE, name, NULL, NULL, NULL)) == 0)
		rv = client_op_decoded(&op, crep_activate(op.env.result, &us));
	rv = client_op_end(&op, call, rv);
	if (rv == 0 && ret_activation_us != NULL)
		*ret_activation_us = us;
	return rv;
}

static int decode_tenant_info(const msgpack_object *result, void *ret)
{
	return crep_tenant_info(result, ret);
}

static int decode_codec_info(const msgpack_object *result, void *ret)
{
	return crep_codec_info(result, ret);
}

static int decode_evict_info(const msgpack_object *result, void *ret)
{
	return crep_evict_info(result, ret);
}

/* TenantInfo of name, decoded by decode into got (kvc_tenant_info's,
 * kvc_tenant_codec's or kvc_tenant_evict's struct). */
static int tenant_info_call(kvc *c, const struct kvc_call *call, const char *name,
                            int (*decode)(const msgpack_object *, void *), void *got)
{
	struct client_op op;
	int rv;

	if ((rv = name_call(&op, c, call, WIRE_M_TENANT_INFO, name, NULL, NULL, NULL)) == 0)
		rv = client_op_decoded(&op, decode(op.env.result, got));
	return client_op_end(&op, call, rv);
}

int kvc_tenant_info(kvc *c, const struct kvc_call *call, const char *name,
                    struct kvc_tenant_info *ret)
{
	struct kvc_tenant_info ti;
	int rv = tenant_info_call(c, call, name, decode_tenant_info, &ti);

	if (rv == 0 && ret != NULL) {
		/* The Stats-only fields stay 0, as kvclient.h says. */
		ti.dead_bytes = ti.segments = ti.tombstones = ti.merges = ti.compact_revision = 0;
		*ret = ti;
	}
	return rv;
}

int kvc_tenant_codec(kvc *c, const struct kvc_call *call, const char *name,
                     struct kvc_codec_info *ret)
{
	struct kvc_codec_info ci;
	int rv = tenant_info_call(c, call, name, decode_codec_info, &ci);

	if (rv == 0 && ret != NULL) {
		/* the counters are Stats's */
		ci.value_logical_bytes = ci.value_stored_bytes = ci.values_compressed = 0;
		*ret = ci;
	}
	return rv;
}

int kvc_tenant_evict(kvc *c, const struct kvc_call *call, const char *name,
                     struct kvc_evict_info *ret)
{
	struct kvc_evict_info ei;
	int rv = tenant_info_call(c, call, name, decode_evict_info, &ei);

	if (rv == 0 && ret != NULL) {
		ei.evictions = ei.tombstone_bytes = 0; /* Stats's */
		*ret = ei;
	}
	return rv;
}

void kvc_tenant_list_free(struct kvc_tenant_entry *list)
{
	free(list);
}

int kvc_tenant_list(kvc *c, const struct kvc_call *call, struct kvc_tenant_entry **ret_list,
                    size_t *ret_count)
{
	struct client_op op;
	const msgpack_object *arr = NULL;
	struct kvc_tenant_entry *list = NULL;
	size_t i, n = 0;
	int rv;

	client_op_init(&op, c, call, WIRE_M_TENANT_LIST);
	if ((rv = client_op_request(&op, call, false, 0)) == 0 && (rv = client_op_run(&op)) == 0)
		rv = client_op_decoded(&op, crep_tenant_list(op.env.result, &arr));
	if (rv == 0) {
		n = arr->via.array.size;
		if ((list = calloc(n != 0 ? n : 1, sizeof(*list))) == NULL)
			rv = client_op_fail(&op, KVC_RESOURCE_EXHAUSTED,
			                    "out of memory for %zu tenants", n);
		for (i = 0; rv == 0 && i < n; i++)
			rv = client_op_decoded(&op,
			                       crep_tenant_entry(&arr->via.array.ptr[i], &list[i]));
	}
	rv = client_op_end(&op, call, rv);
	if (rv != 0 || ret_list == NULL)
		free(list);
	if (rv != 0)
		return rv;
	if (ret_list != NULL)
		*ret_list = list;
	if (ret_count != NULL)
		*ret_count = n;
	return 0;
}

/* A tenant's Stats, decoded by one of the crep_*_info decoders into out
 * (size bytes; untouched on failure). */
static int tenant_stats(kvc *c, const struct kvc_call *call,
                        int (*decode)(const msgpack_object *, void *), void *out, size_t size)
{
	struct client_op op;
	union {
		struct kvc_tenant_info ti;
		struct kvc_codec_info ci;
		struct kvc_evict_info ei;
	} got;
	int rv;

	client_op_init(&op, c, call, WIRE_M_STATS);
	if ((rv = client_op_request(&op, call, true, 0)) != 0)
		return client_op_end(&op, call, rv);
	creq_stats(&op.pk, false);
	if ((rv = client_op_run(&op)) == 0)
		rv = client_op_decoded(&op, decode(op.env.result, &got));
	rv = client_op_end(&op, call, rv);
	if (rv == 0 && out != NULL)
		memcpy(out, &got, size);
	return rv;
}

int kvc_stats(kvc *c, const struct kvc_call *call, struct kvc_tenant_info *ret)
{
	return tenant_stats(c, call, decode_tenant_info, ret, sizeof(*ret));
}

int kvc_stats_codec(kvc *c, const struct kvc_call *call, struct kvc_codec_info *ret)
{
	return tenant_stats(c, call, decode_codec_info, ret, sizeof(*ret));
}

int kvc_stats_evict(kvc *c, const struct kvc_call *call, struct kvc_evict_info *ret)
{
	return tenant_stats(c, call, decode_evict_info, ret, sizeof(*ret));
}

int kvc_stats_daemon(kvc *c, const struct kvc_call *call, struct kvc_daemon_stats *ret)
{
	struct client_op op;
	struct kvc_daemon_stats ds;
	int rv;

	client_op_init(&op, c, call, WIRE_M_STATS);
	if ((rv = client_op_request(&op, call, true, 0)) != 0)
		return client_op_end(&op, call, rv);
	creq_stats(&op.pk, true);
	if ((rv = client_op_run(&op)) == 0)
		rv = client_op_decoded(&op, crep_daemon_stats(op.env.result, &ds));
	rv = client_op_end(&op, call, rv);
	if (rv == 0 && ret != NULL)
		*ret = ds;
	return rv;
}

int kvc_stats_daemon_detail(kvc *c, const struct kvc_call *call, struct kvc_daemon_detail **ret)
{
	struct client_op op;
	struct kvc_daemon_detail *d = NULL;
	int rv;

	client_op_init(&op, c, call, WIRE_M_STATS);
	if ((rv = client_op_request(&op, call, true, 0)) != 0)
		return client_op_end(&op, call, rv);
	creq_stats(&op.pk, true);
	if ((rv = client_op_run(&op)) == 0) {
		rv = crep_daemon_detail(op.env.result, &d);
		if (rv == -ENOMEM)
			rv = client_op_fail(&op, KVC_RESOURCE_EXHAUSTED, "out of memory");
		else
			rv = client_op_decoded(&op, rv);
	}
	rv = client_op_end(&op, call, rv);
	if (rv == 0 && ret != NULL)
		*ret = d;
	else
		free(d);
	return rv;
}

void kvc_daemon_detail_free(struct kvc_daemon_detail *d)
{
	free(d); /* (one block) */
}

int kvc_compact(kvc *c, const struct kvc_call *call, uint64_t revision,
                struct kvc_compact_result *ret)
{
	struct client_op op;
	struct kvc_compact_result r;
	int rv;

	client_op_init(&op, c, call, WIRE_M_COMPACT);
	if ((rv = client_op_request(&op, call, true, 0)) != 0)
		return client_op_end(&op, call, rv);
	creq_compact(&op.pk, revision);
	if ((rv = client_op_run(&op)) == 0)
		rv = client_op_decoded(&op, crep_compact(op.env.result, &r));
	rv = client_op_end(&op, call, rv);
	if (rv == 0 && ret != NULL)
		*ret = r;
	return rv;
}

int kvc_tenant_backup(kvc *c, const struct kvc_call *call, const char *name, const char *dir,
                      struct kvc_backup_result *ret)
{
	struct client_op op;
	struct kvc_backup_result r;
	int rv;

	client_op_init(&op, c, call, WIRE_M_BACKUP);
	if (dir == NULL || dir[0] != '/')
		return client_op_end(
		        &op, call,
		        client_op_fail(&op, KVC_INVALID_ARGUMENT,
		                       "the backup directory must be an absolute path"));
	if ((rv = client_check_name(&op, name)) != 0 ||
	    (rv = client_op_request(&op, call, true, strlen(name) + strlen(dir))) != 0)
		return client_op_end(&op, call, rv);
	op.tenant = name;
	creq_backup(&op.pk, name, dir);
	if ((rv = client_op_run(&op)) == 0)
		rv = client_op_decoded(&op, crep_backup(op.env.result, &r));
	rv = client_op_end(&op, call, rv);
	if (rv == 0 && ret != NULL)
		*ret = r;
	return rv;
}

int kvc_health(kvc *c, const struct kvc_call *call, struct kvc_health *ret)
{
	struct client_op op;
	struct kvc_health h;
	int rv;

	client_op_init(&op, c, call, WIRE_M_HEALTH);
	if ((rv = client_op_request(&op, call, false, 0)) == 0 && (rv = client_op_run(&op)) == 0)
		rv = client_op_decoded(&op, crep_health(op.env.result, &h));
	rv = client_op_end(&op, call, rv);
	if (rv == 0 && ret != NULL)
		*ret = h;
	return rv;
}

/* ---- asynchronous calls -------------------------------------------------------- */

/* On a library thread, once: decode what the call needs and run its callback. */
static void async_finish(struct client_op *op, struct kvc_async_result *res, int rv)
{
	if (rv == -KVC_MOVED && client_op_async_moved(op))
		return; /* the op sent to the node named completes instead */
	if (rv == 0)
		client_status_set(&op->st, KVC_OK, "", 0);
	res->rv = rv;
	res->status = &op->st;
	op->fn(op->arg, res);
}

static void async_version_done(struct client_op *op)
{
	struct kvc_async_result res = {0};
	int rv = op->rv;

	if (rv == 0)
		rv = client_op_decoded(op, crep_version(op->env.result, &res.version));
	async_finish(op, &res, rv);
}

static void async_get_done(struct client_op *op)
{
	struct kvc_async_result res = {0};
	uint64_t blob_size = 0;
	int rv = op->rv;

	if (rv == 0 && crep_blob(op->env.result, &blob_size))
		rv = blob_not_value(op, blob_size);
	else if (rv == 0)
		rv = client_op_decoded(op,
		                       crep_get(op->env.result, &res.value, &res.value_len,
		                                &res.version, &res.timestamp_ms, &res.expiry_ms));
	async_finish(op, &res, rv);
}

static struct client_op *async_op(kvc *c, const struct kvc_call *call, const char *method,
                                  void (*complete)(struct client_op *), kvc_async_fn fn, void *arg)
{
	struct client_op *op = malloc(sizeof(*op));

	if (op == NULL)
		return NULL;
	client_op_init(op, c, call, method);
	op->complete = complete;
	op->fn = fn;
	op->arg = arg;
	return op;
}

/* Sends an op built by async_op; on failure the op is freed, call->status
 * says why, and fn never runs. */
static int async_submit(struct client_op *op, const struct kvc_call *call, int rv)
{
	if (rv == 0 && op->fn == NULL)
		rv = client_op_fail(op, KVC_INVALID_ARGUMENT, "an async call needs a callback");
	if (rv == 0 && (rv = client_op_send_async(op)) == 0)
		return 0;
	client_op_end(op, call, rv);
	free(op);
	return rv;
}

int kvc_put_async(kvc *c, const struct kvc_call *call, const void *key, size_t key_len,
                  const void *value, size_t value_len, const struct kvc_write *w, kvc_async_fn fn,
                  void *arg)
{
	static const struct kvc_write unconditional = KVC_WRITE_INIT;
	struct client_op *op = async_op(c, call, WIRE_M_PUT, async_version_done, fn, arg);
	int rv;

	if (op == NULL)
		return client_nomem(call);
	if (w == NULL)
		w = &unconditional;
	if ((rv = client_check_key(op, key, key_len)) == 0 &&
	    (rv = client_check_bytes(op, value, value_len, "the value")) == 0 &&
	    (rv = client_op_request(op, call, true, key_len + value_len)) == 0)
		creq_put(&op->pk, key, key_len, value, value_len, w->if_version, w->ttl_ms);
	return async_submit(op, call, rv);
}

int kvc_get_async(kvc *c, const struct kvc_call *call, const void *key, size_t key_len,
                  kvc_async_fn fn, void *arg)
{
	struct client_op *op = async_op(c, call, WIRE_M_GET, async_get_done, fn, arg);
	int rv;

	if (op == NULL)
		return client_nomem(call);
	if ((rv = client_check_key(op, key, key_len)) == 0 &&
	    (rv = client_op_request(op, call, true, key_len)) == 0)
		creq_get(&op->pk, key, key_len, 0, 0);
	return async_submit(op, call, rv);
}

int kvc_delete_async(kvc *c, const struct kvc_call *call, const void *key, size_t key_len,
                     kvc_async_fn fn, void *arg)
{
	struct client_op *op = async_op(c, call, WIRE_M_DELETE, async_version_done, fn, arg);
	int rv;

	if (op == NULL)
		return client_nomem(call);
	if ((rv = client_check_key(op, key, key_len)) == 0 &&
	    (rv = client_op_request(op, call, true, key_len)) == 0)
		creq_delete(&op->pk, key, key_len, KVC_ANY_VERSION);
	return async_submit(op, call, rv);
}
