/*
 * client_codec.h — libkvclient's half of the wire protocol (rpc/PROTOCOL.md):
 * request encoders (creq_*) and reply decoders (crep_*), with no transport.
 *
 * Encoders write through any msgpack_packer (the client packs straight into
 * the request's byte buffer, client_op.c; the unit test into a
 * msgpack_sbuffer). They take the public
 * API's conventions (KVC_ANY_VERSION, KVC_TTL_NONE, 0 = default) and turn
 * them into present or absent protocol fields, in one place.
 *
 * Decoders read a reply's `result` map (already bounded-parsed by
 * mp_parse) and return 0 or -EINVAL for a reply that does not have the
 * shape PROTOCOL.md gives it. Pointers they return point into the parsed
 * reply and live as long as its buffer and zone.
 *
 * Internal to libkvclient: not exported (the version script exports kvc_*).
 */
#ifndef KV_RPC_CLIENT_CODEC_H
#define KV_RPC_CLIENT_CODEC_H

#include "kvclient.h"
#include "mp.h"
#include "wire.h"


/* ---- requests ---------------------------------------------------------- */

struct creq_envelope {
	uint64_t id;
	uint64_t client; /* 0: omitted */
	const char *method;
	const char *tenant;  /* NULL: omitted */
	uint32_t timeout_ms; /* 0: omitted */
	const char *token;   /* NULL: omitted */
	bool has_args;       /* an "args" map follows (packed by a creq_* below) */
};

/* The top-level map up to and including the "args" key when has_args. */
void creq_envelope(msgpack_packer *pk, const struct creq_envelope *e);

void creq_put(msgpack_packer *pk, const void *key, size_t key_len, const void *value,
              size_t value_len, uint64_t if_version, uint64_t ttl_ms);
void creq_get(msgpack_packer *pk, const void *key, size_t key_len, uint64_t version,
              uint64_t as_of);
void creq_delete(msgpack_packer *pk, const void *key, size_t key_len, uint64_t if_version);
/* One page: limit is this page's; as_of 0 and cont NULL are omitted. */
void creq_scan(msgpack_packer *pk, const struct kvc_scan_opts *o, uint32_t limit, uint64_t as_of,
               const void *cont, size_t cont_len);
void creq_versions(msgpack_packer *pk, const void *key, size_t key_len, uint32_t limit,
                   uint64_t before, bool values);
void creq_batch(msgpack_packer *pk, const struct kvc_op *ops, size_t n);
void creq_compact(msgpack_packer *pk, uint64_t revision);
void creq_stats(msgpack_packer *pk, bool daemon);
/* compression: NULL leaves it out (the server's default); e NULL leaves
 * out max_bytes and evict, e->evict NULL evict */
void creq_tenant_create(msgpack_packer *pk, const char *name, const struct kvc_tenant_opts *o,
                        const char *compression, const struct kvc_evict_opts *e);
/* TenantDrop, TenantInfo, TenantPassivate, TenantActivate: {name}. */
void creq_name(msgpack_packer *pk, const char *name);

/* Bytes a request needs beyond its keys and values (a reservation hint). */
#define CREQ_OVERHEAD 256u

/* ---- replies ------------------------------------------------------------ */

struct crep_envelope {
	uint64_t id;
	uint64_t status;
	const char *message; /* not NUL-terminated; NULL when absent */
	size_t message_len;
	const msgpack_object *result; /* NULL when absent */
};

/* The reply's top-level map. -EINVAL: not a map, or id/status missing or
 * of the wrong type, or result present and not a map. */
int crep_envelope(const msgpack_object *root, struct crep_envelope *ret);

int crep_version(const msgpack_object *result, uint64_t *ret);
/* A Get result for a blob ({blob: true, blob_size}): true with its size. */
bool crep_blob(const msgpack_object *result, uint64_t *ret_size);
/* Get: value points into the reply (a blob has none: -EINVAL; crep_blob
 * first). */
int crep_get(const msgpack_object *result, const void **ret_value, size_t *ret_len,
             uint64_t *ret_version, uint64_t *ret_timestamp_ms, uint64_t *ret_expiry_ms);

struct crep_scan_page {
	const msgpack_object *items; /* array; each checked by crep_scan_item */
	uint64_t revision;
	bool more;
	const void *cont; /* present (non-NULL) when more */
	size_t cont_len;
};
int crep_scan(const msgpack_object *result, struct crep_scan_page *ret);
int crep_scan_item(const msgpack_object *item, struct kvc_item *ret);

/* Versions: *ret_list is an array; each entry checked by crep_version_entry,
 * whose data points into the reply. */
int crep_versions(const msgpack_object *result, const msgpack_object **ret_list,
                  bool *ret_truncated);
int crep_version_entry(const msgpack_object *entry, struct kvc_version *ret);

/* Batch: one version per op, written into ops[i].version (n must match). */
int crep_batch(const msgpack_object *result, struct kvc_op *ops, size_t n);
int crep_batch_failed(const msgpack_object *result, size_t n, size_t *ret_index);

int crep_compact(const msgpack_object *result, struct kvc_compact_result *ret);
/* TenantInfo, and tenant-scope Stats (which adds the Stats-only fields). */
int crep_tenant_info(const msgpack_object *result, struct kvc_tenant_info *ret);
/* compression (absent: "") and the value byte counters (absent: 0) of a
 * TenantInfo or Stats result. 0 or -EINVAL. */
int crep_codec_info(const msgpack_object *result, struct kvc_codec_info *ret);
/* max_bytes and evictions (absent: 0) and evict (absent: "") of a
 * TenantInfo or Stats result. 0 or -EINVAL. */
int crep_evict_info(const msgpack_object *result, struct kvc_evict_info *ret);
int crep_daemon_stats(const msgpack_object *result, struct kvc_daemon_stats *ret);
/* Daemon-scope Stats with the metrics figures: *ret a new block
 * (kvc_daemon_detail_free); -EINVAL for a malformed reply, -ENOMEM. */
int crep_daemon_detail(const msgpack_object *result, struct kvc_daemon_detail **ret);
int crep_tenant_list(const msgpack_object *result, const msgpack_object **ret_list);
int crep_tenant_entry(const msgpack_object *entry, struct kvc_tenant_entry *ret);
/* Backup's arguments and result. */
void creq_backup(msgpack_packer *pk, const char *name, const char *dir);
int crep_backup(const msgpack_object *result, struct kvc_backup_result *ret);
int crep_activate(const msgpack_object *result, uint64_t *ret_activation_us);
/* TenantAdopt's result (and MOVED's): node, address, epoch. */
int crep_owner(const msgpack_object *result, struct kvc_owner *ret);
int crep_health(const msgpack_object *result, struct kvc_health *ret);

#endif
