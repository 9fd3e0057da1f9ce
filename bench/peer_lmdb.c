/*
 * bench/peer_lmdb.c — kvbench backend "lmdb" (optional), through lmdb.h.
 * Built when meson finds liblmdb.
 *
 * Configuration: one B+tree, map size large enough for the run (the file is
 * sparse); every put is its own write transaction (db_bench_mdb's
 * fillrandom, Symas's port of db_bench; its fillrandbatch and mdb_load put
 * 1000 and 100 records per transaction, a bulk load and not this benchmark's
 * one write per operation); sync=always is LMDB's default (fdatasync at
 * commit); sync=none is MDB_NOSYNC | MDB_WRITEMAP, as db_bench_mdb opens it
 * and as lmdb.h advises for a database that fits in RAM (LMDB has no log: a
 * commit leaves its pages dirty in the shared map, the kernel writes them
 * back; without MDB_WRITEMAP every commit pwrites them, 4-5x slower
 * fillrandom on this benchmark's machine). Each worker keeps one
 * read-only transaction, reset after every get and renewed before the next
 * (the usual way to read from many threads). Unlike the others, a get
 * returns a pointer into the map, not a copy: LMDB's natural read path.
 * sync (kvbench ycsb's sync=interval over MDB_NOSYNC) is mdb_env_sync(force).
 */
#include "peers.h"

#include <errno.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define LMDB_MAP_MIN               (1ull << 30) /* smallest map size */
#define LMDB_BYTES_PER_WRITE_SLACK 4ull         /* map bytes per written byte */

struct peer {
	MDB_env *env;
	MDB_dbi dbi;
};

static void lmdb_version(char *buf, size_t len)
{
	snprintf(buf, len, "%s", mdb_version(NULL, NULL, NULL));
}

static void lmdb_close(struct peer *p)
{
	if (p == NULL)
		return;
	if (p->env != NULL)
		mdb_env_close(p->env);
	free(p);
}

/* mdb_env_open's flags for the run (lmdb.h's advice for a database that fits
 * in RAM): sync=none is MDB_NOSYNC | MDB_WRITEMAP, a commit then leaves its
 * pages dirty in the map for the kernel to write back, no pwrite of them;
 * sync=always keeps LMDB's default, a commit's pages pwritten and
 * fdatasync'ed (with MDB_WRITEMAP it would msync the whole map instead).
 * KVB_LMDB_WRITEMAP=0 in the environment leaves MDB_WRITEMAP out, for
 * comparison with the plain MDB_NOSYNC of earlier runs. */
static unsigned lmdb_env_flags(const struct peer_config *c)
{
	const char *wm = getenv("KVB_LMDB_WRITEMAP");

	if (c->sync)
		return 0;
	if (wm != NULL && strcmp(wm, "0") == 0)
		return MDB_NOSYNC;
	return MDB_NOSYNC | MDB_WRITEMAP;
}

static int lmdb_open(const struct peer_config *c, struct peer **ret_db, char *err, size_t errlen)
{
	uint64_t map =
	        ((uint64_t)c->key_size + c->value_size + 64) * c->num * LMDB_BYTES_PER_WRITE_SLACK;
	struct peer *p;
	MDB_txn *txn;
	int rv;

	if (map < LMDB_MAP_MIN)
		map = LMDB_MAP_MIN;
	if ((p = calloc(1, sizeof(*p))) == NULL) {
		peer_errf(err, errlen, "out of memory");
		return -1;
	}
	if (mkdir(c->path, 0755) != 0 && errno != EEXIST) {
		peer_errf(err, errlen, "mkdir %s: %s", c->path, strerror(errno));
		goto fail;
	}
	if ((rv = mdb_env_create(&p->env)) != 0) {
		peer_errf(err, errlen, "mdb_env_create: %s", mdb_strerror(rv));
		p->env = NULL;
		goto fail;
	}
	if ((rv = mdb_env_set_mapsize(p->env, (size_t)map)) != 0) {
		peer_errf(err, errlen, "mdb_env_set_mapsize: %s", mdb_strerror(rv));
		goto fail;
	}
	if ((rv = mdb_env_open(p->env, c->path, lmdb_env_flags(c), 0644)) != 0) {
		peer_errf(err, errlen, "mdb_env_open %s: %s", c->path, mdb_strerror(rv));
		goto fail;
	}
	if ((rv = mdb_txn_begin(p->env, NULL, 0, &txn)) != 0) {
		peer_errf(err, errlen, "mdb_txn_begin: %s", mdb_strerror(rv));
		goto fail;
	}
	if ((rv = mdb_dbi_open(txn, NULL, 0, &p->dbi)) != 0) {
		mdb_txn_abort(txn);
		peer_errf(err, errlen, "mdb_dbi_open: %s", mdb_strerror(rv));
		goto fail;
	}
	if ((rv = mdb_txn_commit(txn)) != 0) {
		peer_errf(err, errlen, "mdb_txn_commit: %s", mdb_strerror(rv));
		goto fail;
	}
	*ret_db = p;
	return 0;
fail:
	lmdb_close(p);
	return -1;
}

static int lmdb_worker_init(struct peer_worker *w)
{
	w->priv = NULL; /* the read transaction, begun at the first read */
	return 0;
}

static void lmdb_worker_fini(struct peer_worker *w)
{
	if (w->priv != NULL)
		mdb_txn_abort(w->priv);
	w->priv = NULL;
}

/* Starts the worker's read transaction: renews the reset one, or begins it. */
static int lmdb_read_begin(struct peer_worker *w, MDB_txn **ret)
{
	MDB_txn *txn = w->priv;
	int rv;

	if (txn != NULL)
		rv = mdb_txn_renew(txn);
	else if ((rv = mdb_txn_begin(w->db->env, NULL, MDB_RDONLY, &txn)) == 0)
		w->priv = txn;
	if (rv != 0) {
		peer_errf(w->err, sizeof w->err, "read transaction: %s", mdb_strerror(rv));
		return -1;
	}
	*ret = txn;
	return 0;
}

static int lmdb_put(struct peer_worker *w, const char *key, size_t key_len, const char *value,
                    size_t value_len)
{
	MDB_val k = {key_len, (void *)key}, v = {value_len, (void *)value};
	MDB_txn *txn;
	int rv;

	if ((rv = mdb_txn_begin(w->db->env, NULL, 0, &txn)) != 0) {
		peer_errf(w->err, sizeof w->err, "mdb_txn_begin: %s", mdb_strerror(rv));
		return -1;
	}
	if ((rv = mdb_put(txn, w->db->dbi, &k, &v, 0)) != 0) {
		mdb_txn_abort(txn);
		peer_errf(w->err, sizeof w->err, "mdb_put: %s", mdb_strerror(rv));
		return -1;
	}
	if ((rv = mdb_txn_commit(txn)) != 0) {
		peer_errf(w->err, sizeof w->err, "mdb_txn_commit: %s", mdb_strerror(rv));
		return -1;
	}
	return 0;
}

static int lmdb_get(struct peer_worker *w, const char *key, size_t key_len, size_t *ret_len)
{
	MDB_val k = {key_len, (void *)key}, v;
	MDB_txn *txn;
	int rv;

	if (lmdb_read_begin(w, &txn) != 0)
		return -1;
	rv = mdb_get(txn, w->db->dbi, &k, &v);
	mdb_txn_reset(txn);
	if (rv == MDB_NOTFOUND)
		return PEER_NOTFOUND;
	if (rv != 0) {
		peer_errf(w->err, sizeof w->err, "mdb_get: %s", mdb_strerror(rv));
		return -1;
	}
	*ret_len = v.mv_size;
	return PEER_FOUND;
}

static int lmdb_scan(struct peer_worker *w, const char *start, const char *end, size_t key_size,
                     size_t value_size, struct peer_scan *ret)
{
	struct peer_scan s = {0, 0};
	MDB_val k = {key_size, (void *)start}, v;
	MDB_cursor *cur;
	MDB_txn *txn;
	int rv;

	if (lmdb_read_begin(w, &txn) != 0)
		return -1;
	if ((rv = mdb_cursor_open(txn, w->db->dbi, &cur)) != 0) {
		mdb_txn_reset(txn);
		peer_errf(w->err, sizeof w->err, "mdb_cursor_open: %s", mdb_strerror(rv));
		return -1;
	}
	rv = mdb_cursor_get(cur, &k, &v, start != NULL ? MDB_SET_RANGE : MDB_FIRST);
	for (; rv == 0; rv = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		if (end != NULL) {
			size_t kl = k.mv_size;
			int c = memcmp(k.mv_data, end, kl < key_size ? kl : key_size);
			if (c > 0 || (c == 0 && kl >= key_size))
				break;
		}
		s.entries++;
		if (k.mv_size != key_size || v.mv_size != value_size)
			s.wrong++;
	}
	mdb_cursor_close(cur);
	mdb_txn_reset(txn);
	if (rv != 0 && rv != MDB_NOTFOUND) {
		peer_errf(w->err, sizeof w->err, "mdb_cursor_get: %s", mdb_strerror(rv));
		return -1;
	}
	*ret = s;
	return 0;
}

static int lmdb_get_copy(struct peer_worker *w, const char *key, size_t key_len, void *buf,
                         size_t cap, size_t *ret_len)
{
	MDB_val k = {key_len, (void *)key}, v;
	MDB_txn *txn;
	int rv;

	if (lmdb_read_begin(w, &txn) != 0)
		return -1;
	rv = mdb_get(txn, w->db->dbi, &k, &v);
	if (rv == 0) {
		memcpy(buf, v.mv_data, v.mv_size < cap ? v.mv_size : cap);
		*ret_len = v.mv_size;
	}
	mdb_txn_reset(txn);
	if (rv == MDB_NOTFOUND)
		return PEER_NOTFOUND;
	if (rv != 0) {
		peer_errf(w->err, sizeof w->err, "mdb_get: %s", mdb_strerror(rv));
		return -1;
	}
	return PEER_FOUND;
}

static int lmdb_scan_count(struct peer_worker *w, const char *start, size_t start_len,
                           uint64_t count, size_t value_size, struct peer_scan *ret)
{
	struct peer_scan s = {0, 0};
	MDB_val k = {start_len, (void *)start}, v;
	MDB_cursor *cur;
	MDB_txn *txn;
	int rv;

	if (count == 0) {
		*ret = s;
		return 0;
	}
	if (lmdb_read_begin(w, &txn) != 0)
		return -1;
	if ((rv = mdb_cursor_open(txn, w->db->dbi, &cur)) != 0) {
		mdb_txn_reset(txn);
		peer_errf(w->err, sizeof w->err, "mdb_cursor_open: %s", mdb_strerror(rv));
		return -1;
	}
	rv = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
	while (rv == 0) {
		s.entries++;
		if (v.mv_size != value_size)
			s.wrong++;
		if (s.entries == count)
			break;
		rv = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
	}
	mdb_cursor_close(cur);
	mdb_txn_reset(txn);
	if (rv != 0 && rv != MDB_NOTFOUND) {
		peer_errf(w->err, sizeof w->err, "mdb_cursor_get: %s", mdb_strerror(rv));
		return -1;
	}
	*ret = s;
	return 0;
}

static int lmdb_sync(struct peer *p, char *err, size_t errlen)
{
	int rv = mdb_env_sync(p->env, 1);

	if (rv != 0) {
		peer_errf(err, errlen, "mdb_env_sync: %s", mdb_strerror(rv));
		return -1;
	}
	return 0;
}

const struct peer_backend peer_lmdb = {
        .name = "lmdb",
        .settings = "one write transaction per put; MDB_NOSYNC | MDB_WRITEMAP for sync=none, "
                    "default flags (fdatasync at commit) for sync=always; a get returns a "
                    "pointer into the map (no copy); read transaction reset/renewed per get",
        .version = lmdb_version,
        .open = lmdb_open,
        .close = lmdb_close,
        .worker_init = lmdb_worker_init,
        .worker_fini = lmdb_worker_fini,
        .put = lmdb_put,
        .get = lmdb_get,
        .scan = lmdb_scan,
        .get_copy = lmdb_get_copy,
        .scan_count = lmdb_scan_count,
        .sync = lmdb_sync,
};
