/*
 * bench/peer_leveldb.c — kvbench backend "leveldb", through LevelDB's C API
 * (leveldb/c.h). Built when meson finds libleveldb.
 *
 * Configuration: no compression; write_buffer_size raised from LevelDB's
 * 4 MiB default to 64 MiB, like RocksDB's; bloom filter 10 bits/key; block
 * cache and everything else at their defaults; WriteOptions.sync as the run
 * asks (the log is always written). Reads use leveldb_get (a malloc'd copy
 * freed with leveldb_free); scans use leveldb_iter_*, stopping at the end
 * key by comparison (LevelDB has no upper-bound option). sync (kvbench
 * ycsb's sync=interval) writes an empty batch with WriteOptions.sync: LevelDB
 * appends its (empty) record to the log and fdatasyncs the log, which makes
 * every write before it durable; LevelDB has no other way to sync its log.
 */
#include "peers.h"

#include <leveldb/c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LDB_WRITE_BUFFER (64u << 20) /* bytes of a memtable */
#define LDB_BLOOM_BITS   10          /* bloom filter bits per key */

struct peer {
	leveldb_t *db;
	leveldb_options_t *opt;
	leveldb_filterpolicy_t *bloom; /* outlives db */
	leveldb_writeoptions_t *wo;
	leveldb_writeoptions_t *wo_sync; /* for sync */
	leveldb_readoptions_t *ro;
};

static void ldb_version(char *buf, size_t len)
{
	snprintf(buf, len, "LevelDB %d.%d", leveldb_major_version(), leveldb_minor_version());
}

/* Moves a LevelDB error string into err and frees it. */
static void ldb_err(char *err, size_t len, const char *what, char *e)
{
	peer_errf(err, len, "%s: %s", what, e);
	leveldb_free(e);
}

static void ldb_close(struct peer *p)
{
	if (p == NULL)
		return;
	if (p->db != NULL)
		leveldb_close(p->db);
	if (p->ro != NULL)
		leveldb_readoptions_destroy(p->ro);
	if (p->wo != NULL)
		leveldb_writeoptions_destroy(p->wo);
	if (p->wo_sync != NULL)
		leveldb_writeoptions_destroy(p->wo_sync);
	if (p->opt != NULL)
		leveldb_options_destroy(p->opt);
	if (p->bloom != NULL)
		leveldb_filterpolicy_destroy(p->bloom);
	free(p);
}

static int ldb_open(const struct peer_config *c, struct peer **ret_db, char *err, size_t errlen)
{
	struct peer *p;
	char *e = NULL;

	if ((p = calloc(1, sizeof(*p))) == NULL) {
		peer_errf(err, errlen, "out of memory");
		return -1;
	}
	p->opt = leveldb_options_create();
	p->bloom = leveldb_filterpolicy_create_bloom(LDB_BLOOM_BITS);
	p->wo = leveldb_writeoptions_create();
	p->wo_sync = leveldb_writeoptions_create();
	p->ro = leveldb_readoptions_create();
	if (p->opt == NULL || p->bloom == NULL || p->wo == NULL || p->wo_sync == NULL ||
	    p->ro == NULL) {
		peer_errf(err, errlen, "out of memory");
		goto fail;
	}
	leveldb_options_set_create_if_missing(p->opt, 1);
	leveldb_options_set_compression(p->opt, leveldb_no_compression);
	leveldb_options_set_write_buffer_size(p->opt, LDB_WRITE_BUFFER);
	leveldb_options_set_filter_policy(p->opt, p->bloom);
	leveldb_writeoptions_set_sync(p->wo, c->sync);
	leveldb_writeoptions_set_sync(p->wo_sync, 1);
	p->db = leveldb_open(p->opt, c->path, &e);
	if (e != NULL) {
		ldb_err(err, errlen, "leveldb_open", e);
		p->db = NULL;
		goto fail;
	}
	*ret_db = p;
	return 0;
fail:
	ldb_close(p);
	return -1;
}

static int ldb_put(struct peer_worker *w, const char *key, size_t key_len, const char *value,
                   size_t value_len)
{
	char *e = NULL;

	leveldb_put(w->db->db, w->db->wo, key, key_len, value, value_len, &e);
	if (e != NULL) {
		ldb_err(w->err, sizeof w->err, "leveldb_put", e);
		return -1;
	}
	return 0;
}

static int ldb_get(struct peer_worker *w, const char *key, size_t key_len, size_t *ret_len)
{
	char *e = NULL;
	size_t len = 0;
	char *v = leveldb_get(w->db->db, w->db->ro, key, key_len, &len, &e);

	if (e != NULL) {
		ldb_err(w->err, sizeof w->err, "leveldb_get", e);
		return -1;
	}
	if (v == NULL)
		return PEER_NOTFOUND;
	*ret_len = len;
	leveldb_free(v);
	return PEER_FOUND;
}

static int ldb_scan(struct peer_worker *w, const char *start, const char *end, size_t key_size,
                    size_t value_size, struct peer_scan *ret)
{
	struct peer_scan s = {0, 0};
	leveldb_iterator_t *it;
	char *e = NULL;

	if ((it = leveldb_create_iterator(w->db->db, w->db->ro)) == NULL) {
		peer_errf(w->err, sizeof w->err, "leveldb_create_iterator failed");
		return -1;
	}
	if (start != NULL)
		leveldb_iter_seek(it, start, key_size);
	else
		leveldb_iter_seek_to_first(it);
	for (; leveldb_iter_valid(it); leveldb_iter_next(it)) {
		size_t kl, vl;
		const char *k = leveldb_iter_key(it, &kl);
		if (end != NULL) {
			int c = memcmp(k, end, kl < key_size ? kl : key_size);
			if (c > 0 || (c == 0 && kl >= key_size))
				break;
		}
		(void)leveldb_iter_value(it, &vl);
		s.entries++;
		if (kl != key_size || vl != value_size)
			s.wrong++;
	}
	leveldb_iter_get_error(it, &e);
	leveldb_iter_destroy(it);
	if (e != NULL) {
		ldb_err(w->err, sizeof w->err, "leveldb iterator", e);
		return -1;
	}
	*ret = s;
	return 0;
}

static int ldb_get_copy(struct peer_worker *w, const char *key, size_t key_len, void *buf,
                        size_t cap, size_t *ret_len)
{
	char *e = NULL;
	size_t len = 0;
	char *v = leveldb_get(w->db->db, w->db->ro, key, key_len, &len, &e);

	if (e != NULL) {
		ldb_err(w->err, sizeof w->err, "leveldb_get", e);
		return -1;
	}
	if (v == NULL)
		return PEER_NOTFOUND;
	memcpy(buf, v, len < cap ? len : cap);
	*ret_len = len;
	leveldb_free(v);
	return PEER_FOUND;
}

static int ldb_scan_count(struct peer_worker *w, const char *start, size_t start_len,
                          uint64_t count, size_t value_size, struct peer_scan *ret)
{
	struct peer_scan s = {0, 0};
	leveldb_iterator_t *it;
	char *e = NULL;

	if ((it = leveldb_create_iterator(w->db->db, w->db->ro)) == NULL) {
		peer_errf(w->err, sizeof w->err, "leveldb_create_iterator failed");
		return -1;
	}
	leveldb_iter_seek(it, start, start_len);
	for (; s.entries < count && leveldb_iter_valid(it); leveldb_iter_next(it)) {
		size_t vl;
		(void)leveldb_iter_value(it, &vl);
		s.entries++;
		if (vl != value_size)
			s.wrong++;
	}
	leveldb_iter_get_error(it, &e);
	leveldb_iter_destroy(it);
	if (e != NULL) {
		ldb_err(w->err, sizeof w->err, "leveldb iterator", e);
		return -1;
	}
	*ret = s;
	return 0;
}

static int ldb_sync(struct peer *p, char *err, size_t errlen)
{
	leveldb_writebatch_t *batch = leveldb_writebatch_create();
	char *e = NULL;

	if (batch == NULL) {
		peer_errf(err, errlen, "out of memory");
		return -1;
	}
	leveldb_write(p->db, p->wo_sync, batch, &e);
	leveldb_writebatch_destroy(batch);
	if (e != NULL) {
		ldb_err(err, errlen, "leveldb_write (sync)", e);
		return -1;
	}
	return 0;
}

const struct peer_backend peer_leveldb = {
        .name = "leveldb",
        .settings = "no compression; write_buffer_size 64 MiB (raised from the 4 MiB default); "
                    "bloom filter 10 bits/key; default block cache; leveldb_get returns a "
                    "malloc'd copy",
        .version = ldb_version,
        .open = ldb_open,
        .close = ldb_close,
        .put = ldb_put,
        .get = ldb_get,
        .scan = ldb_scan,
        .get_copy = ldb_get_copy,
        .scan_count = ldb_scan_count,
        .sync = ldb_sync,
};
