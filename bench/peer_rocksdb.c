/*
 * bench/peer_rocksdb.c — kvbench backend "rocksdb", through RocksDB's C API
 * (rocksdb/c.h). Built when meson finds librocksdb.
 *
 * Configuration: no compression; WAL on; write_buffer_size 64 MiB (the
 * RocksDB default, set explicitly); full bloom filter 10 bits/key; from the
 * RocksDB wiki's "Setup Options and Basic Tuning",
 * level_compaction_dynamic_level_bytes and bytes_per_sync 1 MiB; from
 * db_bench's defaults, enable_pipelined_write (db_bench turns it on, Options
 * leaves it off); block cache (8 MiB, as db_bench's --cache_size),
 * max_background_jobs (2) and everything else at their defaults;
 * WriteOptions.sync as the run asks (bench/peer-check.sh runs db_bench
 * beside this backend). Reads use rocksdb_get (a malloc'd copy freed with
 * rocksdb_free); scans use rocksdb_iter_* with iterate_upper_bound for a
 * bounded range. sync (kvbench ycsb's sync=interval) is
 * rocksdb_flush_wal(sync=1): the WAL written so far, fdatasync'ed.
 */
#include "peers.h"

#include <rocksdb/c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef KVB_ROCKSDB_VERSION
#define KVB_ROCKSDB_VERSION "unknown"
#endif

#define ROCKS_WRITE_BUFFER   (64u << 20) /* bytes of a memtable */
#define ROCKS_BLOOM_BITS     10.0        /* bloom filter bits per key */
#define ROCKS_BYTES_PER_SYNC (1u << 20)  /* SST bytes written between background syncs */

struct peer {
	rocksdb_t *db;
	rocksdb_options_t *opt;
	rocksdb_block_based_table_options_t *bbto;
	rocksdb_writeoptions_t *wo;
	rocksdb_readoptions_t *ro;
};

static void rocks_version(char *buf, size_t len)
{
	snprintf(buf, len, "RocksDB %s (headers)", KVB_ROCKSDB_VERSION);
}

/* Moves a RocksDB error string into err and frees it. */
static void rocks_err(char *err, size_t len, const char *what, char *e)
{
	peer_errf(err, len, "%s: %s", what, e);
	rocksdb_free(e);
}

static void rocks_close(struct peer *p)
{
	if (p == NULL)
		return;
	if (p->db != NULL)
		rocksdb_close(p->db);
	if (p->ro != NULL)
		rocksdb_readoptions_destroy(p->ro);
	if (p->wo != NULL)
		rocksdb_writeoptions_destroy(p->wo);
	if (p->bbto != NULL)
		rocksdb_block_based_options_destroy(p->bbto);
	if (p->opt != NULL)
		rocksdb_options_destroy(p->opt);
	free(p);
}

static int rocks_open(const struct peer_config *c, struct peer **ret_db, char *err, size_t errlen)
{
	struct peer *p;
	char *e = NULL;

	if ((p = calloc(1, sizeof(*p))) == NULL) {
		peer_errf(err, errlen, "out of memory");
		return -1;
	}
	p->opt = rocksdb_options_create();
	p->bbto = rocksdb_block_based_options_create();
	p->wo = rocksdb_writeoptions_create();
	p->ro = rocksdb_readoptions_create();
	if (p->opt == NULL || p->bbto == NULL || p->wo == NULL || p->ro == NULL) {
		peer_errf(err, errlen, "out of memory");
		goto fail;
	}
	rocksdb_options_set_create_if_missing(p->opt, 1);
	rocksdb_options_set_compression(p->opt, rocksdb_no_compression);
	rocksdb_options_set_write_buffer_size(p->opt, ROCKS_WRITE_BUFFER);
	rocksdb_options_set_level_compaction_dynamic_level_bytes(p->opt, 1);
	rocksdb_options_set_bytes_per_sync(p->opt, ROCKS_BYTES_PER_SYNC);
	rocksdb_options_set_enable_pipelined_write(p->opt, 1);
	/* the table options take ownership of the filter policy */
	rocksdb_block_based_options_set_filter_policy(
	        p->bbto, rocksdb_filterpolicy_create_bloom_full(ROCKS_BLOOM_BITS));
	rocksdb_options_set_block_based_table_factory(p->opt, p->bbto);
	rocksdb_writeoptions_set_sync(p->wo, c->sync);
	p->db = rocksdb_open(p->opt, c->path, &e);
	if (e != NULL) {
		rocks_err(err, errlen, "rocksdb_open", e);
		p->db = NULL;
		goto fail;
	}
	*ret_db = p;
	return 0;
fail:
	rocks_close(p);
	return -1;
}

static int rocks_put(struct peer_worker *w, const char *key, size_t key_len, const char *value,
                     size_t value_len)
{
	char *e = NULL;

	rocksdb_put(w->db->db, w->db->wo, key, key_len, value, value_len, &e);
	if (e != NULL) {
		rocks_err(w->err, sizeof w->err, "rocksdb_put", e);
		return -1;
	}
	return 0;
}

static int rocks_get(struct peer_worker *w, const char *key, size_t key_len, size_t *ret_len)
{
	char *e = NULL;
	size_t len = 0;
	char *v = rocksdb_get(w->db->db, w->db->ro, key, key_len, &len, &e);

	if (e != NULL) {
		rocks_err(w->err, sizeof w->err, "rocksdb_get", e);
		return -1;
	}
	if (v == NULL)
		return PEER_NOTFOUND;
	*ret_len = len;
	rocksdb_free(v);
	return PEER_FOUND;
}

static int rocks_scan(struct peer_worker *w, const char *start, const char *end, size_t key_size,
                      size_t value_size, struct peer_scan *ret)
{
	struct peer_scan s = {0, 0};
	rocksdb_readoptions_t *ro = w->db->ro;
	rocksdb_iterator_t *it;
	char *e = NULL;
	int rv = 0;

	if (end != NULL) {
		if ((ro = rocksdb_readoptions_create()) == NULL) {
			peer_errf(w->err, sizeof w->err, "out of memory");
			return -1;
		}
		rocksdb_readoptions_set_iterate_upper_bound(ro, end, key_size);
	}
	if ((it = rocksdb_create_iterator(w->db->db, ro)) == NULL) {
		peer_errf(w->err, sizeof w->err, "rocksdb_create_iterator failed");
		rv = -1;
		goto out;
	}
	if (start != NULL)
		rocksdb_iter_seek(it, start, key_size);
	else
		rocksdb_iter_seek_to_first(it);
	for (; rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
		size_t kl, vl;
		(void)rocksdb_iter_key(it, &kl);
		(void)rocksdb_iter_value(it, &vl);
		s.entries++;
		if (kl != key_size || vl != value_size)
			s.wrong++;
	}
	rocksdb_iter_get_error(it, &e);
	rocksdb_iter_destroy(it);
	if (e != NULL) {
		rocks_err(w->err, sizeof w->err, "rocksdb iterator", e);
		rv = -1;
		goto out;
	}
	*ret = s;
out:
	if (ro != w->db->ro)
		rocksdb_readoptions_destroy(ro);
	return rv;
}

static int rocks_get_copy(struct peer_worker *w, const char *key, size_t key_len, void *buf,
                          size_t cap, size_t *ret_len)
{
	char *e = NULL;
	size_t len = 0;
	char *v = rocksdb_get(w->db->db, w->db->ro, key, key_len, &len, &e);

	if (e != NULL) {
		rocks_err(w->err, sizeof w->err, "rocksdb_get", e);
		return -1;
	}
	if (v == NULL)
		return PEER_NOTFOUND;
	memcpy(buf, v, len < cap ? len : cap);
	*ret_len = len;
	rocksdb_free(v);
	return PEER_FOUND;
}

static int rocks_scan_count(struct peer_worker *w, const char *start, size_t start_len,
                            uint64_t count, size_t value_size, struct peer_scan *ret)
{
	struct peer_scan s = {0, 0};
	rocksdb_iterator_t *it;
	char *e = NULL;

	if ((it = rocksdb_create_iterator(w->db->db, w->db->ro)) == NULL) {
		peer_errf(w->err, sizeof w->err, "rocksdb_create_iterator failed");
		return -1;
	}
	rocksdb_iter_seek(it, start, start_len);
	for (; s.entries < count && rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
		size_t vl;
		(void)rocksdb_iter_value(it, &vl);
		s.entries++;
		if (vl != value_size)
			s.wrong++;
	}
	rocksdb_iter_get_error(it, &e);
	rocksdb_iter_destroy(it);
	if (e != NULL) {
		rocks_err(w->err, sizeof w->err, "rocksdb iterator", e);
		return -1;
	}
	*ret = s;
	return 0;
}

static int rocks_sync(struct peer *p, char *err, size_t errlen)
{
	char *e = NULL;

	rocksdb_flush_wal(p->db, 1, &e);
	if (e != NULL) {
		rocks_err(err, errlen, "rocksdb_flush_wal", e);
		return -1;
	}
	return 0;
}

const struct peer_backend peer_rocksdb = {
        .name = "rocksdb",
        .settings = "no compression; WAL on; write_buffer_size 64 MiB (default); full bloom "
                    "filter 10 bits/key; level_compaction_dynamic_level_bytes; bytes_per_sync "
                    "1 MiB; enable_pipelined_write (db_bench's default); default block cache "
                    "(8 MiB); rocksdb_get returns a malloc'd copy",
        .version = rocks_version,
        .open = rocks_open,
        .close = rocks_close,
        .put = rocks_put,
        .get = rocks_get,
        .scan = rocks_scan,
        .get_copy = rocks_get_copy,
        .scan_count = rocks_scan_count,
        .sync = rocks_sync,
};
