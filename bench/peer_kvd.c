/*
 * bench/peer_kvd.c — kvbench backend "engine": kvd's engine through its
 * public API (kvengine.h) only.
 *
 * Configuration: kv_options_init() defaults (background thread on, default
 * segment size, merge policy and I/O method) except the sync mode, which is
 * KV_SYNC_ALWAYS or KV_SYNC_NONE as the run asks, or KV_SYNC_INTERVAL with
 * the run's sync_interval_ms (the engine syncs on its own: no sync op).
 * Reads use kv_get (a malloc'd copy released with kv_value_release); scans
 * use kv_iter_*.
 *
 * Backend "engine-dev": the same engine in a store on a block device
 * (kv_store_options.device). open formats peer_config.device
 * (kv_dev_format, with its extent size and force), opens a store on it
 * (kv_store_options_init defaults, the read cache at its default, and
 * background on as kv_options_init has it for "engine"), creates one tenant
 * "ycsb" with the run's sync mode and uses that tenant's database with the
 * calls above; close releases the tenant and closes the store.
 */
#include "peers.h"

#include "kvengine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct peer {
	kv_db *db;
	kv_store *store; /* engine-dev: the store on the device, and its tenant */
	kv_tenant *tenant;
};

#define KVD_DEV_TENANT "ycsb"

static void kvd_version(char *buf, size_t len)
{
	struct kv_options o;

	kv_options_init(&o);
	snprintf(buf, len,
	         "kvd engine %s (defaults: background=%s, segment %llu MiB, auto-merge at %u%% "
	         "and %llu MiB, io %s)",
	         KV_ENGINE_VERSION, o.background ? "true" : "false",
	         (unsigned long long)(o.segment_size >> 20), (unsigned)o.merge_ratio_pct,
	         (unsigned long long)(o.merge_min_bytes >> 20),
	         o.io == KV_IO_AUTO    ? "auto"
	         : o.io == KV_IO_URING ? "io_uring"
	                               : "psync");
}

static int kvd_open(const struct peer_config *c, struct peer **ret_db, char *err, size_t errlen)
{
	struct kv_options o;
	struct peer *p;
	int rv;

	if ((p = calloc(1, sizeof(*p))) == NULL) {
		peer_errf(err, errlen, "out of memory");
		return -1;
	}
	kv_options_init(&o);
	o.sync = c->sync ? KV_SYNC_ALWAYS : KV_SYNC_NONE;
	if (!c->sync && c->sync_interval_ms > 0) {
		o.sync = KV_SYNC_INTERVAL;
		o.sync_interval_ms = c->sync_interval_ms;
	}
	if ((rv = kv_open(c->path, &o, &p->db)) != 0) {
		peer_errf(err, errlen, "kv_open %s: %s", c->path, kv_strerror(rv));
		free(p);
		return -1;
	}
	*ret_db = p;
	return 0;
}

static void kvd_close(struct peer *p)
{
	if (p == NULL)
		return;
	if (p->store != NULL) {
		if (p->tenant != NULL)
			kv_store_put(p->store, p->tenant);
		kv_store_close(p->store);
	} else {
		kv_close(p->db);
	}
	free(p);
}

static void kvd_dev_version(char *buf, size_t len)
{
	snprintf(buf, len,
	         "kvd engine %s on a block device (a store's tenant; extents of %llu MiB unless "
	         "given, read cache %llu MiB)",
	         KV_ENGINE_VERSION, (unsigned long long)(KV_DEV_EXTENT_SIZE_DEFAULT >> 20),
	         (unsigned long long)(KV_DEV_CACHE_DEFAULT >> 20));
}

static int kvd_dev_open(const struct peer_config *c, struct peer **ret_db, char *err, size_t errlen)
{
	struct kv_dev_format_options fo = {.extent_size = c->device_extent_size,
	                                   .force = c->device_force};
	struct kv_store_options so;
	struct kv_tenant_config tc;
	char e[256] = "";
	struct peer *p;
	int rv;

	if (c->device == NULL) {
		peer_errf(err, errlen, "no device to format (--device)");
		return -1;
	}
	if ((p = calloc(1, sizeof(*p))) == NULL) {
		peer_errf(err, errlen, "out of memory");
		return -1;
	}
	if ((rv = kv_dev_format(c->device, &fo, e, sizeof e)) != 0) {
		peer_errf(err, errlen, "kv_dev_format %s: %s%s%s%s", c->device, kv_strerror(rv),
		          e[0] ? " (" : "", e, e[0] ? ")" : "");
		goto fail;
	}
	kv_store_options_init(&so);
	so.base.background = true;
	so.device = c->device;
	if ((rv = kv_store_open(NULL, &so, &p->store)) != 0) {
		peer_errf(err, errlen, "kv_store_open on %s: %s", c->device, kv_strerror(rv));
		p->store = NULL;
		goto fail;
	}
	kv_tenant_config_init(&tc);
	tc.sync = c->sync ? KV_SYNC_ALWAYS : KV_SYNC_NONE;
	if (!c->sync && c->sync_interval_ms > 0) {
		tc.sync = KV_SYNC_INTERVAL;
		tc.sync_interval_ms = c->sync_interval_ms;
	}
	if ((rv = kv_store_create(p->store, KVD_DEV_TENANT, &tc)) != 0) {
		peer_errf(err, errlen, "kv_store_create %s: %s", KVD_DEV_TENANT, kv_strerror(rv));
		goto fail;
	}
	if ((rv = kv_store_get(p->store, KVD_DEV_TENANT, &p->tenant)) != 0) {
		peer_errf(err, errlen, "kv_store_get %s: %s", KVD_DEV_TENANT, kv_strerror(rv));
		p->tenant = NULL;
		goto fail;
	}
	p->db = kv_tenant_db(p->tenant);
	*ret_db = p;
	return 0;
fail:
	kvd_close(p);
	return -1;
}

static int kvd_put(struct peer_worker *w, const char *key, size_t key_len, const char *value,
                   size_t value_len)
{
	int rv = kv_put(w->db->db, key, key_len, value, value_len, NULL, NULL);

	if (rv != 0) {
		peer_errf(w->err, sizeof w->err, "kv_put: %s", kv_strerror(rv));
		return -1;
	}
	return 0;
}

static int kvd_get(struct peer_worker *w, const char *key, size_t key_len, size_t *ret_len)
{
	struct kv_value v;
	int rv = kv_get(w->db->db, key, key_len, NULL, &v);

	if (rv == KV_ENOTFOUND)
		return PEER_NOTFOUND;
	if (rv != 0) {
		peer_errf(w->err, sizeof w->err, "kv_get: %s", kv_strerror(rv));
		return -1;
	}
	*ret_len = v.len;
	kv_value_release(&v);
	return PEER_FOUND;
}

static int kvd_scan(struct peer_worker *w, const char *start, const char *end, size_t key_size,
                    size_t value_size, struct peer_scan *ret)
{
	struct kv_scan_opts so = {
	        .start = start,
	        .start_len = start ? key_size : 0,
	        .end = end,
	        .end_len = end ? key_size : 0,
	};
	struct peer_scan s = {0, 0};
	struct kv_entry e;
	kv_iter *it;
	int rv;

	if ((rv = kv_iter_open(w->db->db, &so, &it)) != 0) {
		peer_errf(w->err, sizeof w->err, "kv_iter_open: %s", kv_strerror(rv));
		return -1;
	}
	while ((rv = kv_iter_next(it, &e)) == 0) {
		s.entries++;
		if (e.key_len != key_size || e.value_len != value_size)
			s.wrong++;
	}
	kv_iter_close(it);
	if (rv != KV_EEND) {
		peer_errf(w->err, sizeof w->err, "kv_iter_next: %s", kv_strerror(rv));
		return -1;
	}
	*ret = s;
	return 0;
}

static int kvd_get_copy(struct peer_worker *w, const char *key, size_t key_len, void *buf,
                        size_t cap, size_t *ret_len)
{
	struct kv_value v;
	int rv = kv_get(w->db->db, key, key_len, NULL, &v);

	if (rv == KV_ENOTFOUND)
		return PEER_NOTFOUND;
	if (rv != 0) {
		peer_errf(w->err, sizeof w->err, "kv_get: %s", kv_strerror(rv));
		return -1;
	}
	memcpy(buf, v.data, v.len < cap ? v.len : cap);
	*ret_len = v.len;
	kv_value_release(&v);
	return PEER_FOUND;
}

static int kvd_scan_count(struct peer_worker *w, const char *start, size_t start_len,
                          uint64_t count, size_t value_size, struct peer_scan *ret)
{
	struct kv_scan_opts so = {.start = start, .start_len = start_len, .limit = count};
	struct peer_scan s = {0, 0};
	struct kv_entry e;
	kv_iter *it;
	int rv;

	if ((rv = kv_iter_open(w->db->db, &so, &it)) != 0) {
		peer_errf(w->err, sizeof w->err, "kv_iter_open: %s", kv_strerror(rv));
		return -1;
	}
	while (s.entries < count && (rv = kv_iter_next(it, &e)) == 0) {
		s.entries++;
		if (e.value_len != value_size)
			s.wrong++;
	}
	kv_iter_close(it);
	if (s.entries < count && rv != KV_EEND) {
		peer_errf(w->err, sizeof w->err, "kv_iter_next: %s", kv_strerror(rv));
		return -1;
	}
	*ret = s;
	return 0;
}

static int kvd_counters(struct peer *p, struct peer_counters *ret)
{
	struct kv_stats st;

	if (kv_stats(p->db, &st) != 0)
		return -1;
	ret->batches = st.batches;
	ret->writes = st.batched_writes;
	ret->syncs = st.syncs;
	ret->merges = st.merges;
	return 0;
}

static void kvd_describe(struct peer *p, char *buf, size_t len)
{
	struct kv_stats st;

	if (kv_stats(p->db, &st) != 0) {
		snprintf(buf, len, "I/O method unknown (kv_stats failed)");
		return;
	}
	snprintf(buf, len, "I/O: %s", st.io_uring ? "io_uring" : "pread/pwrite");
}

const struct peer_backend peer_kvd = {
        .name = "engine",
        .settings = "kv_options_init() defaults except sync; kv_get returns a malloc'd copy "
                    "(kv_value_release)",
        .version = kvd_version,
        .open = kvd_open,
        .close = kvd_close,
        .put = kvd_put,
        .get = kvd_get,
        .scan = kvd_scan,
        .get_copy = kvd_get_copy,
        .scan_count = kvd_scan_count,
        .counters = kvd_counters,
        .describe = kvd_describe,
};

const struct peer_backend peer_kvd_dev = {
        .name = "engine-dev",
        .settings =
                "the device formatted for every database; a store on it, kv_store_options_init() "
                "defaults with background on; one tenant with the run's sync; kv_get "
                "returns a malloc'd copy (kv_value_release)",
        .device = true,
        .version = kvd_dev_version,
        .open = kvd_dev_open,
        .close = kvd_close,
        .put = kvd_put,
        .get = kvd_get,
        .scan = kvd_scan,
        .get_copy = kvd_get_copy,
        .scan_count = kvd_scan_count,
        .counters = kvd_counters,
        .describe = kvd_describe,
};
