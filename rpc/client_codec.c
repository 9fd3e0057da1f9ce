/* client_codec.c — request encoding and reply decoding of libkvclient. */
#include "client_codec.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- requests ------------------------------------------------------------ */

void creq_envelope(msgpack_packer *pk, const struct creq_envelope *e)
{
	size_t n = 3; /* v, id, method */

	n += e->client != 0;
	n += e->tenant != NULL;
	n += e->timeout_ms != 0;
	n += e->token != NULL;
	n += e->has_args;
	msgpack_pack_map(pk, n);
	mp_kv_uint(pk, WIRE_F_V, WIRE_VERSION);
	mp_kv_uint(pk, WIRE_F_ID, e->id);
	if (e->client != 0)
		mp_kv_uint(pk, WIRE_F_CLIENT, e->client);
	mp_kv_str(pk, WIRE_F_METHOD, e->method);
	if (e->tenant != NULL)
		mp_kv_str(pk, WIRE_F_TENANT, e->tenant);
	if (e->timeout_ms != 0)
		mp_kv_uint(pk, WIRE_F_TIMEOUT_MS, e->timeout_ms);
	if (e->token != NULL)
		mp_kv_str(pk, WIRE_F_TOKEN, e->token);
	if (e->has_args)
		mp_pack_cstr(pk, WIRE_F_ARGS);
}

/* API ttl (0: the tenant's default = absent; KVC_TTL_NONE: 0 on the wire). */
static bool ttl_present(uint64_t ttl_ms)
{
	return ttl_ms != 0;
}

static uint64_t ttl_wire(uint64_t ttl_ms)
{
	return ttl_ms == KVC_TTL_NONE ? 0 : ttl_ms;
}

static void pack_conditions(msgpack_packer *pk, uint64_t if_version, uint64_t ttl_ms)
{
	if (if_version != KVC_ANY_VERSION)
		mp_kv_uint(pk, WIRE_F_IF_VERSION, if_version);
	if (ttl_present(ttl_ms))
		mp_kv_uint(pk, WIRE_F_TTL_MS, ttl_wire(ttl_ms));
}

void creq_put(msgpack_packer *pk, const void *key, size_t key_len, const void *value,
              size_t value_len, uint64_t if_version, uint64_t ttl_ms)
{
	msgpack_pack_map(pk, 2 + (if_version != KVC_ANY_VERSION) + ttl_present(ttl_ms));
	mp_kv_bin(pk, WIRE_F_KEY, key, key_len);
	mp_kv_bin(pk, WIRE_F_VALUE, value, value_len);
	pack_conditions(pk, if_version, ttl_ms);
}

void creq_get(msgpack_packer *pk, const void *key, size_t key_len, uint64_t version, uint64_t as_of)
{
	msgpack_pack_map(pk, 1 + (version != 0) + (as_of != 0));
	mp_kv_bin(pk, WIRE_F_KEY, key, key_len);
	if (version != 0)
		mp_kv_uint(pk, WIRE_F_VERSION, version);
	if (as_of != 0)
		mp_kv_uint(pk, WIRE_F_AS_OF, as_of);
}

void creq_delete(msgpack_packer *pk, const void *key, size_t key_len, uint64_t if_version)
{
	msgpack_pack_map(pk, 1 + (if_version != KVC_ANY_VERSION));
	mp_kv_bin(pk, WIRE_F_KEY, key, key_len);
	if (if_version != KVC_ANY_VERSION)
		mp_kv_uint(pk, WIRE_F_IF_VERSION, if_version);
}

void creq_scan(msgpack_packer *pk, const struct kvc_scan_opts *o, uint32_t limit, uint64_t as_of,
               const void *cont, size_t cont_len)
{
	size_t n = 1; /* limit */

	n += o->start != NULL;
	n += o->end != NULL;
	n += o->prefix != NULL;
	n += o->reverse;
	n += o->keys_only;
	n += as_of != 0;
	n += cont != NULL;
	msgpack_pack_map(pk, n);
	if (o->start != NULL)
		mp_kv_bin(pk, WIRE_F_START, o->start, o->start_len);
	if (o->end != NULL)
		mp_kv_bin(pk, WIRE_F_END, o->end, o->end_len);
	if (o->prefix != NULL)
		mp_kv_bin(pk, WIRE_F_PREFIX, o->prefix, o->prefix_len);
	mp_kv_uint(pk, WIRE_F_LIMIT, limit);
	if (o->reverse)
		mp_kv_bool(pk, WIRE_F_REVERSE, true);
	if (o->keys_only)
		mp_kv_bool(pk, WIRE_F_KEYS_ONLY, true);
	if (as_of != 0)
		mp_kv_uint(pk, WIRE_F_AS_OF, as_of);
	if (cont != NULL)
		mp_kv_bin(pk, WIRE_F_CONTINUATION, cont, cont_len);
}

void creq_versions(msgpack_packer *pk, const void *key, size_t key_len, uint32_t limit,
                   uint64_t before, bool values)
{
	msgpack_pack_map(pk, 1 + (limit != 0) + (before != 0) + !values);
	mp_kv_bin(pk, WIRE_F_KEY, key, key_len);
	if (limit != 0)
		mp_kv_uint(pk, WIRE_F_LIMIT, limit);
	if (before != 0)
		mp_kv_uint(pk, WIRE_F_BEFORE, before);
	if (!values)
		mp_kv_bool(pk, WIRE_F_VALUES, false); /* the server's default is true */
}

void creq_batch(msgpack_packer *pk, const struct kvc_op *ops, size_t n)
{
	size_t i;

	msgpack_pack_map(pk, 1);
	mp_pack_cstr(pk, WIRE_F_OPS);
	msgpack_pack_array(pk, n);
	for (i = 0; i < n; i++) {
		const struct kvc_op *op = &ops[i];
		bool put = op->type == KVC_OP_PUT;

		msgpack_pack_map(pk, 2 + put + (op->if_version != KVC_ANY_VERSION) +
		                             ttl_present(op->ttl_ms));
		mp_kv_str(pk, WIRE_F_OP, put ? "put" : "delete");
		mp_kv_bin(pk, WIRE_F_KEY, op->key, op->key_len);
		if (put)
			mp_kv_bin(pk, WIRE_F_VALUE, op->value, op->value_len);
		pack_conditions(pk, op->if_version, op->ttl_ms);
	}
}

void creq_compact(msgpack_packer *pk, uint64_t revision)
{
	msgpack_pack_map(pk, revision != 0);
	if (revision != 0)
		mp_kv_uint(pk, WIRE_F_REVISION, revision);
}

void creq_stats(msgpack_packer *pk, bool daemon)
{
	msgpack_pack_map(pk, 1);
	mp_kv_str(pk, WIRE_F_SCOPE, daemon ? "daemon" : "tenant");
}

static const char *const sync_names[] = {
        [KVC_SYNC_ALWAYS] = "always",
        [KVC_SYNC_INTERVAL] = "interval",
        [KVC_SYNC_NONE] = "none",
};

/* ttl_ms and max_keys are always sent: 0 means "none" in the API and on the
 * wire alike; sync_interval_ms and history 0 mean "the server's default". */
void creq_tenant_create(msgpack_packer *pk, const char *name, const struct kvc_tenant_opts *o,
                        const char *compression, const struct kvc_evict_opts *e)
{
	unsigned s = (unsigned)o->sync;

	msgpack_pack_map(pk, 4 + (o->sync_interval_ms != 0) + (o->history != 0) +
	                             (compression != NULL) + (e != NULL) +
	                             (e != NULL && e->evict != NULL));
	mp_kv_str(pk, WIRE_F_NAME, name);
	mp_kv_str(pk, WIRE_F_SYNC, sync_names[s < 3 ? s : KVC_SYNC_ALWAYS]);
	if (o->sync_interval_ms != 0)
		mp_kv_uint(pk, WIRE_F_SYNC_INTERVAL_MS, o->sync_interval_ms);
	if (o->history != 0)
		mp_kv_uint(pk, WIRE_F_HISTORY, o->history);
	mp_kv_uint(pk, WIRE_F_TTL_MS, o->ttl_ms);
	mp_kv_uint(pk, WIRE_F_MAX_KEYS, o->max_keys);
	if (compression != NULL)
		mp_kv_str(pk, WIRE_F_COMPRESSION, compression);
	if (e != NULL)
		mp_kv_uint(pk, WIRE_F_MAX_BYTES, e->max_bytes);
	if (e != NULL && e->evict != NULL)
		mp_kv_str(pk, WIRE_F_EVICT, e->evict);
}

void creq_name(msgpack_packer *pk, const char *name)
{
	msgpack_pack_map(pk, 1);
	mp_kv_str(pk, WIRE_F_NAME, name);
}

/* ---- replies --------------------------------------------------------------- */

int crep_envelope(const msgpack_object *root, struct crep_envelope *ret)
{
	struct crep_envelope e = {0};
	int rv;

	if (root->type != MSGPACK_OBJECT_MAP)
		return -EINVAL;
	if ((rv = mp_field_uint(root, WIRE_F_ID, false, &e.id)) != 0 ||
	    (rv = mp_field_uint(root, WIRE_F_STATUS, true, &e.status)) != 0 ||
	    (rv = mp_field_str(root, WIRE_F_MESSAGE, false, &e.message, &e.message_len)) != 0)
		return rv;
	e.result = mp_map_get(root, WIRE_F_RESULT);
	if (e.result != NULL && e.result->type != MSGPACK_OBJECT_MAP)
		return -EINVAL;
	*ret = e;
	return 0;
}

int crep_version(const msgpack_object *result, uint64_t *ret)
{
	return mp_field_uint(result, WIRE_F_VERSION, true, ret);
}

bool crep_blob(const msgpack_object *result, uint64_t *ret_size)
{
	bool blob = false;
	uint64_t size = 0;

	if (mp_field_bool(result, WIRE_F_BLOB, false, &blob) != 0 || !blob ||
	    mp_field_uint(result, WIRE_F_BLOB_SIZE, true, &size) != 0)
		return false;
	*ret_size = size;
	return true;
}

int crep_get(const msgpack_object *result, const void **ret_value, size_t *ret_len,
             uint64_t *ret_version, uint64_t *ret_timestamp_ms, uint64_t *ret_expiry_ms)
{
	const void *p;
	size_t n;
	uint64_t version, ts = 0, exp = 0;
	int rv;

	if ((rv = mp_field_bin(result, WIRE_F_VALUE, true, &p, &n)) != 0 ||
	    (rv = mp_field_uint(result, WIRE_F_VERSION, true, &version)) != 0 ||
	    (rv = mp_field_uint(result, WIRE_F_TIMESTAMP_MS, false, &ts)) != 0 ||
	    (rv = mp_field_uint(result, WIRE_F_EXPIRY_MS, false, &exp)) != 0)
		return rv;
	*ret_value = p;
	*ret_len = n;
	*ret_version = version;
	*ret_timestamp_ms = ts;
	*ret_expiry_ms = exp;
	return 0;
}

int crep_scan(const msgpack_object *result, struct crep_scan_page *ret)
{
	struct crep_scan_page pg = {0};
	int rv;

	pg.items = mp_map_get(result, WIRE_F_ITEMS);
	if (pg.items == NULL || pg.items->type != MSGPACK_OBJECT_ARRAY)
		return -EINVAL;
	if ((rv = mp_field_uint(result, WIRE_F_REVISION, true, &pg.revision)) != 0 ||
	    (rv = mp_field_bool(result, WIRE_F_MORE, true, &pg.more)) != 0 ||
	    (rv = mp_field_bin(result, WIRE_F_CONTINUATION, pg.more, &pg.cont, &pg.cont_len)) != 0)
		return rv;
	if (!pg.more) {
		pg.cont = NULL;
		pg.cont_len = 0;
	}
	*ret = pg;
	return 0;
}

int crep_scan_item(const msgpack_object *item, struct kvc_item *ret)
{
	struct kvc_item it = {0};
	const msgpack_object *a;

	if (item->type != MSGPACK_OBJECT_ARRAY || item->via.array.size < 3)
		return -EINVAL;
	a = item->via.array.ptr;
	if (mp_bin(&a[0], &it.key, &it.key_len) != 0 || mp_uint(&a[2], &it.version) != 0)
		return -EINVAL;
	if (a[1].type != MSGPACK_OBJECT_NIL && mp_bin(&a[1], &it.value, &it.value_len) != 0)
		return -EINVAL;
	*ret = it;
	return 0;
}

int crep_versions(const msgpack_object *result, const msgpack_object **ret_list,
                  bool *ret_truncated)
{
	const msgpack_object *list = mp_map_get(result, WIRE_F_VERSIONS);
	bool truncated = false;
	int rv;

	if (list == NULL || list->type != MSGPACK_OBJECT_ARRAY)
		return -EINVAL;
	if ((rv = mp_field_bool(result, WIRE_F_TRUNCATED, false, &truncated)) != 0)
		return rv;
	*ret_list = list;
	*ret_truncated = truncated;
	return 0;
}

int crep_version_entry(const msgpack_object *entry, struct kvc_version *ret)
{
	struct kvc_version v = {0};
	const msgpack_object *a;

	if (entry->type != MSGPACK_OBJECT_ARRAY || entry->via.array.size < 4)
		return -EINVAL;
	a = entry->via.array.ptr;
	if (mp_uint(&a[0], &v.version) != 0 || mp_uint(&a[1], &v.timestamp_ms) != 0 ||
	    mp_bool(&a[2], &v.deleted) != 0)
		return -EINVAL;
	if (a[3].type != MSGPACK_OBJECT_NIL) {
		const void *p;

		if (mp_bin(&a[3], &p, &v.len) != 0)
			return -EINVAL;
		v.data = (void *)p; /* the caller copies it before it leaves */
	}
	*ret = v;
	return 0;
}

int crep_batch(const msgpack_object *result, struct kvc_op *ops, size_t n)
{
	const msgpack_object *list = mp_map_get(result, WIRE_F_VERSIONS);
	size_t i;

	if (list == NULL || list->type != MSGPACK_OBJECT_ARRAY || list->via.array.size != n)
		return -EINVAL;
	for (i = 0; i < n; i++) {
		if (list->via.array.ptr[i].type != MSGPACK_OBJECT_POSITIVE_INTEGER)
			return -EINVAL;
	}
	for (i = 0; i < n; i++)
		ops[i].version = list->via.array.ptr[i].via.u64;
	return 0;
}

int crep_batch_failed(const msgpack_object *result, size_t n, size_t *ret_index)
{
	uint64_t idx;

	if (result == NULL || mp_field_uint(result, WIRE_F_FAILED_OP, true, &idx) != 0 || idx >= n)
		return -EINVAL;
	*ret_index = (size_t)idx;
	return 0;
}

int crep_compact(const msgpack_object *result, struct kvc_compact_result *ret)
{
	struct kvc_compact_result r = {0};
	int rv;

	if ((rv = mp_field_uint(result, WIRE_F_COMPACT_REVISION, false, &r.compact_revision)) !=
	            0 ||
	    (rv = mp_field_uint(result, WIRE_F_DISK_BYTES_BEFORE, false, &r.disk_bytes_before)) !=
	            0 ||
	    (rv = mp_field_uint(result, WIRE_F_DISK_BYTES_AFTER, false, &r.disk_bytes_after)) != 0)
		return rv;
	*ret = r;
	return 0;
}

/*
 * Statistics and tenant descriptions: the name and the state are required,
 * counters the server leaves out read as 0 (a newer or older server may add
 * or drop one); a field of the wrong type makes the reply malformed.
 */
struct uint_field {
	const char *name;
	size_t off;
};

static int read_uints(const msgpack_object *map, void *base, const struct uint_field *f)
{
	int rv;

	for (; f->name != NULL; f++) {
		if ((rv = mp_field_uint(map, f->name, false,
		                        (uint64_t *)((char *)base + f->off))) != 0)
			return rv;
	}
	return 0;
}

static int read_state(const msgpack_object *map, bool *ret_active)
{
	const char *s;
	size_t n;
	int rv;

	if ((rv = mp_field_str(map, WIRE_F_STATE, true, &s, &n)) != 0)
		return rv;
	*ret_active = n == 6 && memcmp(s, "active", 6) == 0;
	return 0;
}

// clang-format off
#define TI(f) {#f, offsetof(struct kvc_tenant_info, f)}
// clang-format on

// clang-format off
#define CI(f) {#f, offsetof(struct kvc_codec_info, f)}
// clang-format on

int crep_codec_info(const msgpack_object *result, struct kvc_codec_info *ret)
{
	static const struct uint_field fields[] = {
	        CI(value_logical_bytes),
	        CI(value_stored_bytes),
	        CI(values_compressed),
	        {NULL, 0},
	};
	struct kvc_codec_info ci;
	const char *s;
	size_t n = 0;
	int rv;

	memset(&ci, 0, sizeof(ci));
	if ((rv = read_uints(result, &ci, fields)) != 0 ||
	    (rv = mp_field_str(result, WIRE_F_COMPRESSION, false, &s, &n)) != 0)
		return rv;
	if (mp_map_get(result, WIRE_F_COMPRESSION) != NULL) {
		if (n >= sizeof(ci.compression))
			return -EINVAL;
		memcpy(ci.compression, s, n);
	}
	*ret = ci;
	return 0;
}

// clang-format off
#define EI(f) {#f, offsetof(struct kvc_evict_info, f)}
// clang-format on

int crep_evict_info(const msgpack_object *result, struct kvc_evict_info *ret)
{
	static const struct uint_field fields[] = {
	        EI(max_bytes),
	        EI(evictions),
	        EI(tombstone_bytes),
	        {NULL, 0},
	};
	struct kvc_evict_info ei;
	const char *s;
	size_t n = 0;
	int rv;

	memset(&ei, 0, sizeof(ei));
	if ((rv = read_uints(result, &ei, fields)) != 0 ||
	    (rv = mp_field_str(result, WIRE_F_EVICT, false, &s, &n)) != 0)
		return rv;
	if (mp_map_get(result, WIRE_F_EVICT) != NULL) {
		if (n >= sizeof(ei.evict))
			return -EINVAL;
		memcpy(ei.evict, s, n);
	}
	*ret = ei;
	return 0;
}

int crep_tenant_info(const msgpack_object *result, struct kvc_tenant_info *ret)
{
	static const struct uint_field fields[] = {
	        TI(idle_s),         TI(keys),        TI(live_bytes),         TI(disk_bytes),
	        TI(keydir_bytes),   TI(activations), TI(last_activation_ms), TI(last_version),
	        TI(ttl_ms),         TI(max_keys),    TI(dead_bytes),         TI(segments),
	        TI(tombstones),     TI(merges),      TI(compact_revision),   TI(batches),
	        TI(batched_writes), TI(syncs),       TI(last_activation_us), {NULL, 0},
	};
	struct kvc_tenant_info ti;
	const msgpack_object *name = mp_map_get(result, WIRE_F_NAME);
	const char *s;
	size_t n;
	uint64_t history = 0;
	int rv;

	memset(&ti, 0, sizeof(ti));
	if (name == NULL || mp_str_copy(name, ti.name, sizeof(ti.name)) != 0)
		return -EINVAL;
	if ((rv = read_state(result, &ti.active)) != 0 ||
	    (rv = read_uints(result, &ti, fields)) != 0 ||
	    (rv = mp_field_uint(result, WIRE_F_HISTORY, false, &history)) != 0 ||
	    (rv = mp_field_str(result, WIRE_F_SYNC, false, &s, &n)) != 0)
		return rv;
	ti.history = history > UINT32_MAX ? UINT32_MAX : (uint32_t)history;
	if ((rv = mp_field_bool(result, WIRE_F_IO_URING, false, &ti.io_uring)) != 0 ||
	    (rv = mp_field_bool(result, WIRE_F_READ_ONLY, false, &ti.read_only)) != 0)
		return rv;
	ti.sync = KVC_SYNC_ALWAYS;
	if (mp_map_get(result, WIRE_F_SYNC) != NULL) {
		if (n == 8 && memcmp(s, "interval", 8) == 0)
			ti.sync = KVC_SYNC_INTERVAL;
		else if (n == 4 && memcmp(s, "none", 4) == 0)
			ti.sync = KVC_SYNC_NONE;
	}
	*ret = ti;
	return 0;
}

// clang-format off
#define DS(f) {#f, offsetof(struct kvc_daemon_stats, f)}
// clang-format on

int crep_daemon_stats(const msgpack_object *result, struct kvc_daemon_stats *ret)
{
	static const struct uint_field fields[] = {
	        DS(uptime_s),  DS(tenants),      DS(active_tenants), DS(requests),
	        DS(in_flight), DS(keydir_bytes), DS(workers),        {NULL, 0},
	};
	struct kvc_daemon_stats ds;
	const msgpack_object *v = mp_map_get(result, WIRE_F_VERSION);
	int rv;

	memset(&ds, 0, sizeof(ds));
	if (v != NULL && mp_str_copy(v, ds.version, sizeof(ds.version)) != 0)
		return -EINVAL;
	if ((rv = read_uints(result, &ds, fields)) != 0)
		return rv;
	*ret = ds;
	return 0;
}

// clang-format off
#define MS(f) {#f, offsetof(struct kvc_method_stats, f)}
// clang-format on

static const char *const status_names[] = {
#define STATUS_NAME(name, code) [WIRE_##name] = #name,
        WIRE_STATUSES(STATUS_NAME)
#undef STATUS_NAME
};
#define NSTATUS_NAMES (sizeof(status_names) / sizeof(status_names[0]))
_Static_assert(NSTATUS_NAMES <= KVC_STATUS_SLOTS, "by_status holds every status");

/* One entry of `methods`: the counts by status are a map of status names;
 * a name this library does not know counts in requests and errors only. */
static int read_method(const msgpack_object *o, struct kvc_method_stats *ret)
{
	static const struct uint_field fields[] = {
	        MS(requests), MS(errors), MS(latency_count), MS(latency_sum_ns),
	        MS(p50_ns),   MS(p90_ns), MS(p99_ns),        {NULL, 0},
	};
	const msgpack_object *name = mp_map_get(o, WIRE_F_METHOD);
	const msgpack_object *st = mp_map_get(o, WIRE_F_STATUSES);
	int rv;

	if (o->type != MSGPACK_OBJECT_MAP || name == NULL ||
	    mp_str_copy(name, ret->method, sizeof(ret->method)) != 0)
		return -EINVAL;
	if ((rv = read_uints(o, ret, fields)) != 0)
		return rv;
	if (st == NULL)
		return 0;
	if (st->type != MSGPACK_OBJECT_MAP)
		return -EINVAL;
	for (uint32_t i = 0; i < st->via.map.size; i++) {
		const msgpack_object_kv *kv = &st->via.map.ptr[i];
		if (kv->key.type != MSGPACK_OBJECT_STR ||
		    kv->val.type != MSGPACK_OBJECT_POSITIVE_INTEGER)
			return -EINVAL;
		for (size_t c = 0; c < NSTATUS_NAMES; c++)
			if (status_names[c] != NULL &&
			    strlen(status_names[c]) == kv->key.via.str.size &&
			    memcmp(status_names[c], kv->key.via.str.ptr, kv->key.via.str.size) == 0)
				ret->by_status[c] = kv->val.via.u64;
	}
	return 0;
}

static int read_connection(const msgpack_object *o, struct kvc_connection_stats *ret)
{
	const msgpack_object *t = mp_map_get(o, WIRE_F_TRANSPORT);
	const msgpack_object *l = mp_map_get(o, WIRE_F_LISTEN);

	if (o->type != MSGPACK_OBJECT_MAP || t == NULL ||
	    mp_str_copy(t, ret->transport, sizeof(ret->transport)) != 0 ||
	    (l != NULL && mp_str_copy(l, ret->listen, sizeof(ret->listen)) != 0))
		return -EINVAL;
	return mp_field_uint(o, WIRE_F_OPEN, false, &ret->open);
}

/* An optional array field: NULL and 0 when absent. */
static int read_array(const msgpack_object *map, const char *key, const msgpack_object **ret,
                      uint32_t *ret_n)
{
	const msgpack_object *a = mp_map_get(map, key);

	*ret = NULL;
	*ret_n = 0;
	if (a == NULL)
		return 0;
	if (a->type != MSGPACK_OBJECT_ARRAY)
		return -EINVAL;
	*ret = a->via.array.ptr;
	*ret_n = a->via.array.size;
	return 0;
}

int crep_daemon_detail(const msgpack_object *result, struct kvc_daemon_detail **ret)
{
	struct kvc_daemon_detail *d = NULL;
	const msgpack_object *methods, *conns;
	uint32_t nm, nc;
	size_t size;
	int rv;

	if ((rv = read_array(result, WIRE_F_METHODS, &methods, &nm)) != 0 ||
	    (rv = read_array(result, WIRE_F_CONNECTIONS, &conns, &nc)) != 0)
		return rv;
	/* one block: the struct, then the methods, then the connections (the
	 * counts are bounded by the reply's size, which the envelope bounds) */
	size = sizeof(*d) + (size_t)nm * sizeof(*d->methods) + (size_t)nc * sizeof(*d->connections);
	if ((d = calloc(1, size)) == NULL)
		return -ENOMEM;
	d->methods = (struct kvc_method_stats *)(d + 1);
	d->connections = (struct kvc_connection_stats *)(d->methods + nm);
	if ((rv = crep_daemon_stats(result, &d->daemon)) != 0 ||
	    (rv = mp_field_bool(result, WIRE_F_COUNTING, false, &d->counting)) != 0 ||
	    (rv = mp_field_uint(result, WIRE_F_RECEIVED_BYTES, false, &d->received_bytes)) != 0 ||
	    (rv = mp_field_uint(result, WIRE_F_SENT_BYTES, false, &d->sent_bytes)) != 0)
		goto fail;
	for (d->nmethods = 0; d->nmethods < nm; d->nmethods++)
		if ((rv = read_method(&methods[d->nmethods], &d->methods[d->nmethods])) != 0)
			goto fail;
	for (d->nconnections = 0; d->nconnections < nc; d->nconnections++)
		if ((rv = read_connection(&conns[d->nconnections],
		                          &d->connections[d->nconnections])) != 0)
			goto fail;
	*ret = d;
	return 0;
fail:
	free(d);
	return rv;
}

int crep_tenant_list(const msgpack_object *result, const msgpack_object **ret_list)
{
	const msgpack_object *list = mp_map_get(result, WIRE_F_TENANTS);

	if (list == NULL || list->type != MSGPACK_OBJECT_ARRAY)
		return -EINVAL;
	*ret_list = list;
	return 0;
}

int crep_tenant_entry(const msgpack_object *entry, struct kvc_tenant_entry *ret)
{
	struct kvc_tenant_entry e;
	const msgpack_object *name = mp_map_get(entry, WIRE_F_NAME);

	memset(&e, 0, sizeof(e));
	if (entry->type != MSGPACK_OBJECT_MAP || name == NULL ||
	    mp_str_copy(name, e.name, sizeof(e.name)) != 0 || read_state(entry, &e.active) != 0)
		return -EINVAL;
	{
		const char *s = NULL;
		size_t n = 0;
		mp_field_str(entry, WIRE_F_STATE, false, &s, &n);
		e.refused = n == 7 && memcmp(s, "refused", 7) == 0;
	}
	*ret = e;
	return 0;
}

void creq_backup(msgpack_packer *pk, const char *name, const char *dir)
{
	msgpack_pack_map(pk, 2);
	mp_kv_str(pk, WIRE_F_NAME, name);
	mp_kv_str(pk, WIRE_F_DIR, dir);
}

int crep_backup(const msgpack_object *result, struct kvc_backup_result *ret)
{
	struct kvc_backup_result r = {0};
	int rv;

	if ((rv = mp_field_uint(result, WIRE_F_VERSION, true, &r.version)) != 0 ||
	    (rv = mp_field_uint(result, WIRE_F_SEGMENTS, false, &r.segments)) != 0 ||
	    (rv = mp_field_uint(result, WIRE_F_SEGMENTS_LINKED, false, &r.segments_linked)) != 0 ||
	    (rv = mp_field_uint(result, WIRE_F_BYTES_LINKED, false, &r.bytes_linked)) != 0 ||
	    (rv = mp_field_uint(result, WIRE_F_BYTES_COPIED, false, &r.bytes_copied)) != 0 ||
	    (rv = mp_field_uint(result, WIRE_F_FILES, false, &r.files)) != 0 ||
	    (rv = mp_field_uint(result, WIRE_F_ELAPSED_US, false, &r.elapsed_us)) != 0)
		return rv;
	*ret = r;
	return 0;
}

int crep_activate(const msgpack_object *result, uint64_t *ret_activation_us)
{
	return mp_field_uint(result, WIRE_F_ACTIVATION_US, false, ret_activation_us);
}

int crep_owner(const msgpack_object *result, struct kvc_owner *ret)
{
	struct kvc_owner o;
	const msgpack_object *node = mp_map_get(result, WIRE_F_NODE);
	const msgpack_object *addr = mp_map_get(result, WIRE_F_ADDRESS);
	int rv;

	memset(&o, 0, sizeof(o));
	if (node == NULL || mp_str_copy(node, o.node, sizeof(o.node)) != 0 || addr == NULL ||
	    mp_str_copy(addr, o.address, sizeof(o.address)) != 0)
		return -EINVAL;
	if ((rv = mp_field_uint(result, WIRE_F_EPOCH, true, &o.epoch)) != 0)
		return rv;
	*ret = o;
	return 0;
}

int crep_health(const msgpack_object *result, struct kvc_health *ret)
{
	struct kvc_health h;
	const msgpack_object *status = mp_map_get(result, WIRE_F_STATUS);
	const msgpack_object *version = mp_map_get(result, WIRE_F_VERSION);
	int rv;

	memset(&h, 0, sizeof(h));
	if (status == NULL || mp_str_copy(status, h.status, sizeof(h.status)) != 0)
		return -EINVAL;
	if (version != NULL && mp_str_copy(version, h.version, sizeof(h.version)) != 0)
		return -EINVAL;
	if ((rv = mp_field_uint(result, WIRE_F_UPTIME_S, false, &h.uptime_s)) != 0)
		return rv;
	*ret = h;
	return 0;
}
