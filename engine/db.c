/*
 * db.c — a database's life: options, open (recovery.c does the loading),
 * close, stats, and its maintenance (interval sync, hint files, automatic
 * merges, the background thread). The services the other modules share sit
 * below it: the segment table and hint writing (segtab.c), META
 * (manifest.c), the write path (write.c), iterators and their snapshots
 * (scan.c).
 *
 * A database is one tenant of a storage instance (storage.h), opened at
 * kv_open and locked (tenant_lock) while open. With the files backend,
 * the files in its directory:
 *   LOCK                      flock()ed while open; never removed
 *   META                      the sealed segments, the compact revision, the
 *                             version mark (manifest.h)
 *   <id>.seg                  segments; <id>.hint their hint files
 *   merge-<seq>.commit        the last merge's retired segments and relocations
 *   *.tmp                     a write that did not finish; removed at open
 */
#include "db.h"

#include "kdimage.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void kv_options_init(struct kv_options *o)
{
	memset(o, 0, sizeof(*o));
	o->segment_size = KV_SEGMENT_SIZE_DEFAULT;
	o->sync = KV_SYNC_ALWAYS;
	o->sync_interval_ms = KV_SYNC_INTERVAL_MS_DEFAULT;
	o->history_versions = 1;
	o->history_ms = 0;
	o->max_key_size = KV_KEY_SIZE_MAX;
	o->max_value_size = KV_VALUE_SIZE_DEFAULT;
	o->max_keys = 0;
	o->merge_ratio_pct = KV_MERGE_RATIO_PCT_DEFAULT;
	o->merge_min_bytes = KV_MERGE_MIN_BYTES_DEFAULT;
	o->io = KV_IO_AUTO;
	o->background = true;
	o->external_loop = false;
	o->create_if_missing = true;
	o->lock = true;
	o->mmap_reads = true;
}

static uint64_t realtime_ms(void *arg)
{
	struct timespec ts;

	(void)arg;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint64_t db_now(kv_db *db)
{
	return db->opt.clock(db->opt.clock_arg);
}

/* ---- stats and maintenance --------------------------------------------- */

/* Sealed segments less than a quarter full, on a backend where each one
 * takes a whole extent (kv_storage.seg_max: a device), whose room is lost
 * until a merge packs them: a segment sealed at every activation after a
 * crash, or at every change of owner on a shared device (which never
 * reopens another node's segment). */
size_t db_underfilled(kv_db *db)
{
	uint64_t cap = db->stor->seg_max;
	size_t n = 0;

	if (cap == 0)
		return 0;
	if (db->opt.segment_size < cap)
		cap = db->opt.segment_size; /* what a merge output holds at most */
	pthread_mutex_lock(&db->seg_mu);
	for (size_t i = 0; i < db->nsegs; i++) {
		const struct seg *s = db->segs[i];
		n += s->sealed && !s->lost && !s->retired && s->size < cap / 4;
	}
	pthread_mutex_unlock(&db->seg_mu);
	return n;
}

uint64_t db_reclaimable(kv_db *db)
{
	uint64_t dead, retained = atomic_load(&db->retained_bytes);

	pthread_rwlock_rdlock(&db->kd_lock);
	dead = db->disk_bytes > db->live_bytes ? db->disk_bytes - db->live_bytes : 0;
	pthread_rwlock_unlock(&db->kd_lock);
	/* chunks of open uploads are not garbage (yet) */
	retained += atomic_load(&db->upload_bytes);
	return dead > retained ? dead - retained : 0;
}

int kv_stats(kv_db *db, struct kv_stats *ret)
{
	struct kv_stats s;

	memset(&s, 0, sizeof(s));
	pthread_rwlock_rdlock(&db->kd_lock);
	s.keys = db->live_keys;
	s.tombstones = db->tombstones;
	s.live_bytes = db->live_bytes;
	s.disk_bytes = db->disk_bytes;
	s.dead_bytes = db->disk_bytes > db->live_bytes ? db->disk_bytes - db->live_bytes : 0;
	s.keydir_bytes = keydir_memory(db->kd);
	s.tombstone_bytes = db->tomb_bytes;
	pthread_rwlock_unlock(&db->kd_lock);
	s.evictions = atomic_load(&db->evictions);
	s.evict_order_bytes = atomic_load(&db->evict_bytes);
	pthread_mutex_lock(&db->seg_mu);
	s.segments = (uint32_t)db->nsegs;
	pthread_mutex_unlock(&db->seg_mu);
	s.last_version = atomic_load(&db->committed_version);
	s.compact_revision = atomic_load(&db->compact_floor);
	s.merges = atomic_load(&db->merges);
	s.batches = atomic_load(&db->batches);
	s.batched_writes = atomic_load(&db->batched_writes);
	s.syncs = atomic_load(&db->syncs);
	s.value_logical_bytes = atomic_load(&db->value_logical_bytes);
	s.value_stored_bytes = atomic_load(&db->value_stored_bytes);
	s.values_compressed = atomic_load(&db->values_compressed);
	s.sync_us_sum = atomic_load(&db->sync_us_sum);
	for (size_t i = 0; i < KV_SYNC_BUCKETS; i++)
		s.sync_hist[i] = atomic_load(&db->sync_hist[i]);
	for (size_t i = 0; i < KV_BATCH_BUCKETS; i++)
		s.batch_hist[i] = atomic_load(&db->batch_hist[i]);
	s.read_only = atomic_load(&db->read_only);
	s.io_uring = db->stor->ops->writer_is_uring(db->wr);
	*ret = s;
	return 0;
}

/* On a backend that reports a segment left open as long as its room
 * (storage.h append_reopened), recovery's cut of the newest segment is the
 * unwritten rest of that room, not a torn write: it sealed that segment at
 * the end of its log and started a new one. Says which segment and where,
 * for the log line: the newest one written by neither merge nor this
 * process. */
static void note_open_segment(kv_db *db)
{
	size_t i;

	if (db->stor->append_reopened || db->rinfo.truncated_bytes == 0)
		return;
	pthread_mutex_lock(&db->seg_mu);
	for (i = db->nsegs; i-- > 0;) {
		struct seg *s = db->segs[i];
		if (s == db->active || s->lost || (s->flags & SEG_F_MERGED))
			continue;
		db->rinfo.open_segment = s->id;
		db->rinfo.open_end = s->size;
		break;
	}
	pthread_mutex_unlock(&db->seg_mu);
}

int kv_recovery_info(kv_db *db, struct kv_recovery_info *ret)
{
	*ret = db->rinfo;
	return 0;
}

static int sync_active(kv_db *db, void *arg)
{
	uint64_t pending = atomic_load(&db->unsynced_bytes);
	int rv;

	(void)arg;
	if (db->active == NULL || pending == 0)
		return 0;
	uint64_t t0 = db_clock_us();
	if ((rv = stor_seg_sync(db->active->h)) != 0) {
		atomic_store(&db->read_only, true);
		return rv;
	}
	atomic_fetch_sub(&db->unsynced_bytes, pending);
	db_count_sync(db, t0);
	return 0;
}

int kv_sync(kv_db *db)
{
	return write_barrier(db, sync_active, NULL);
}

int kv_tick(kv_db *db)
{
	uint64_t now = db_now(db), reclaim, total;
	int rv = 0;

	if (db->opt.sync == KV_SYNC_INTERVAL && atomic_load(&db->unsynced_bytes) > 0 &&
	    now - db->last_sync_ms >= db->opt.sync_interval_ms) {
		/* fdatasync may run beside appends: it covers what was written before it */
		uint64_t pending = atomic_load(&db->unsynced_bytes);
		uint64_t written = atomic_load(&db->written_loc);
		int pin = -1;
		struct seg *s = NULL;
		pthread_mutex_lock(&db->seg_mu);
		if (db->nsegs > 0) {
			s = db->segs[db->nsegs - 1];
			/* the active segment is the newest non-merged one */
			for (size_t i = db->nsegs; i-- > 0;) {
				if (!db->segs[i]->sealed) {
					s = db->segs[i];
					break;
				}
			}
			pin = seg_pin(s);
			if (pin == 0)
				seg_ref(s);
			else
				s = NULL;
		}
		pthread_mutex_unlock(&db->seg_mu);
		if (pin == 0) {
			uint64_t t0 = db_clock_us();
			if ((rv = stor_seg_sync(s->h)) != 0)
				atomic_store(&db->read_only, true);
			else {
				atomic_fetch_sub(&db->unsynced_bytes, pending);
				db_count_sync(db, t0);
				/* what was written before the sync is durable */
				if (s->id == loc_seg(written) && written > atomic_load(&db->durable_loc))
					atomic_store(&db->durable_loc, written);
			}
		}
		db_seg_release(s);
		db->last_sync_ms = now;
	}
	if (rv == 0)
		rv = db_write_hints(db);
	if (rv != 0)
		return rv;
	/* (a lost segment stops merges: merge.c, merge_start_fn) */
	if (db->opt.merge_ratio_pct == 0 || atomic_load(&db->merging) || db->has_lost)
		return 0;
	reclaim = db_reclaimable(db);
	pthread_rwlock_rdlock(&db->kd_lock);
	total = db->disk_bytes;
	pthread_rwlock_unlock(&db->kd_lock);
	if (reclaim >= db->opt.merge_min_bytes && total > 0 &&
	    reclaim * 100 >= total * db->opt.merge_ratio_pct)
		return 1;
	return db_underfilled(db) >= DB_UNDERFILLED_MERGE;
}

static void *background_main(void *arg)
{
	kv_db *db = arg;
	uint32_t period = db->opt.sync == KV_SYNC_INTERVAL ? db->opt.sync_interval_ms : 1000;

	if (period == 0)
		period = 1;
	if (period > 1000)
		period = 1000;
	pthread_mutex_lock(&db->mu);
	while (!db->closing) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += (long)(period % 1000) * 1000000L;
		ts.tv_sec += period / 1000 + ts.tv_nsec / 1000000000L;
		ts.tv_nsec %= 1000000000L;
		pthread_cond_timedwait(&db->bg_cv, &db->mu, &ts);
		if (db->closing)
			break;
		pthread_mutex_unlock(&db->mu);
		if (kv_tick(db) == 1)
			kv_merge(db);
		pthread_mutex_lock(&db->mu);
	}
	pthread_mutex_unlock(&db->mu);
	return NULL;
}

/* ---- open / close ------------------------------------------------------ */

static int check_options(const struct kv_options *o)
{
	if (o->segment_size < 4096 || o->segment_size > KV_SEGMENT_SIZE_MAX)
		return -EINVAL;
	if (o->sync > KV_SYNC_NONE || o->io > KV_IO_PSYNC)
		return -EINVAL;
	if (o->sync == KV_SYNC_INTERVAL && o->sync_interval_ms == 0)
		return -EINVAL;
	if (o->history_versions == 0)
		return -EINVAL;
	if (o->max_key_size == 0 || o->max_key_size > KV_KEY_SIZE_MAX)
		return -EINVAL;
	if (o->max_value_size > KV_VALUE_SIZE_MAX)
		return -EINVAL;
	if (o->merge_ratio_pct > 100)
		return -EINVAL;
	if (!codec_level_valid(o->compression, o->compression_level))
		return -EINVAL;
	if (o->evict != KV_EVICT_REFUSE && o->evict != KV_EVICT_OLDEST)
		return -EINVAL;
	return 0;
}

int kv_set_compression(kv_db *db, enum kv_codec codec, int level)
{
	if (!codec_level_valid(codec, level))
		return -EINVAL;
	atomic_store(&db->codec_cfg, (uint32_t)codec | (uint32_t)level << 8);
	return 0;
}

static void db_free(kv_db *db)
{
	size_t i;

	if (db == NULL)
		return;
	for (i = 0; i < db->nsegs; i++)
		seg_unref(db->segs[i]);
	free(db->segs);
	reloc_release(&db->reloc);
	blob_uploads_orphan(db);
	blobmap_release(&db->blob_heads);
	keydir_free(db->kd);
	write_release(db);
	stor_writer_close(db->wr);
	if (db->efd >= 0)
		close(db->efd);
	stor_tenant_close(db->tn);
	if (db->own_stor)
		kv_storage_close(db->stor);
	free(db->snaps);
	pthread_rwlock_destroy(&db->kd_lock);
	pthread_mutex_destroy(&db->seg_mu);
	pthread_mutex_destroy(&db->mu);
	pthread_mutex_destroy(&db->merge_mu);
	pthread_mutex_destroy(&db->upload_mu);
	pthread_cond_destroy(&db->cv);
	pthread_cond_destroy(&db->bg_cv);
	free(db->path);
	free(db->meta);
	free(db);
}

int kv_open(const char *path, const struct kv_options *opts, kv_db **ret_db)
{
	struct kv_options o;
	struct kv_storage *st;
	int rv;

	if (path == NULL || ret_db == NULL)
		return -EINVAL;
	if (opts)
		o = *opts;
	else
		kv_options_init(&o);
	/* a directory named by its path: the files backend without a root */
	if ((rv = kv_storage_file_open(NULL, o.fault, &st)) != 0)
		return rv;
	if ((rv = db_open(st, true, path, &o, ret_db)) != 0)
		kv_storage_close(st);
	return rv;
}

int db_open(struct kv_storage *st, bool own, const char *tenant, const struct kv_options *opts,
            kv_db **ret_db)
{
	struct kv_options o;
	kv_db *db;
	uint64_t t0;
	int rv;

	if (tenant == NULL || ret_db == NULL)
		return -EINVAL;
	if (opts)
		o = *opts;
	else
		kv_options_init(&o);
	if (o.clock == NULL)
		o.clock = realtime_ms;
	if ((rv = check_options(&o)) != 0)
		return rv;
	t0 = realtime_ms(NULL);

	if ((db = calloc(1, sizeof(*db))) == NULL)
		return -ENOMEM;
	db->efd = -1;
	db->opt = o;
	atomic_store(&db->codec_cfg, (uint32_t)o.compression | (uint32_t)o.compression_level << 8);
	pthread_rwlock_init(&db->kd_lock, NULL);
	pthread_mutex_init(&db->seg_mu, NULL);
	pthread_mutex_init(&db->mu, NULL);
	pthread_mutex_init(&db->merge_mu, NULL);
	pthread_mutex_init(&db->upload_mu, NULL);
	pthread_cond_init(&db->cv, NULL);
	{
		pthread_condattr_t ca;
		pthread_condattr_init(&ca);
		pthread_cond_init(&db->bg_cv, &ca);
		pthread_condattr_destroy(&ca);
	}
	reloc_init(&db->reloc);
	if ((db->path = strdup(tenant)) == NULL) {
		rv = -ENOMEM;
		goto fail;
	}
	db->stor = st;
	if (st->seg_max != 0) {
		/* a segment fits in what the backend holds, a record in a segment */
		uint64_t rec_max = st->seg_max - SEG_HEADER_SIZE - REC_HEADER_SIZE - REC_SYNC_SIZE -
		                   db->opt.max_key_size;
		if (db->opt.segment_size > st->seg_max)
			db->opt.segment_size = st->seg_max;
		if (db->opt.max_value_size > rec_max)
			db->opt.max_value_size = (uint32_t)rec_max;
	}
	rv = stor_tenant_open(st, tenant, o.create_if_missing ? KV_STOR_CREATE : 0, &db->tn);
	if (rv != 0)
		goto fail;
	/* the one writer of the tenant, until the handle closes */
	if (o.lock && (rv = db->stor->ops->tenant_lock(db->tn, true)) != 0)
		goto fail;
	/* only an event loop needs to be woken */
	if (o.external_loop && (db->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
		rv = -errno;
		goto fail;
	}
	rv = db->stor->ops->writer_open(db->stor, o.io, o.external_loop ? db->efd : -1, &db->wr);
	if (rv != 0)
		goto fail;
	if ((rv = keydir_new(&db->kd)) != 0)
		goto fail;
	if ((rv = recovery_run(db)) != 0)
		goto fail;
	if (o.evict == KV_EVICT_OLDEST) {
		/* the live keys by write order (evict.h) */
		if ((rv = evict_order_build(&db->order, db->kd)) != 0)
			goto fail;
		atomic_store(&db->evict_bytes, evict_order_memory(&db->order));
	}
	note_open_segment(db);
	/* mapped reads, except where tests inject read faults */
	db->map_reads = o.mmap_reads && o.fault == NULL && io_map_available();
	if (db->map_reads) {
		pthread_mutex_lock(&db->seg_mu);
		for (size_t i = 0; i < db->nsegs; i++)
			db_seg_map(db, db->segs[i], db->segs[i] == db->active);
		pthread_mutex_unlock(&db->seg_mu);
	}
	db->last_sync_ms = db_now(db);
	db->rinfo.elapsed_us = (realtime_ms(NULL) - t0) * 1000;
	if (o.background && !o.external_loop) {
		if ((rv = -pthread_create(&db->bg, NULL, background_main, db)) != 0)
			goto fail;
		db->bg_running = true;
	}
	db->own_stor = own;
	*ret_db = db;
	return 0;
fail:
	db_free(db);
	return rv;
}

static int seal_active(kv_db *db, void *arg)
{
	int rv;

	(void)arg;
	if (db->active == NULL || atomic_load(&db->read_only))
		return 0;
	if ((rv = sync_active(db, NULL)) != 0)
		return rv;
	pthread_mutex_lock(&db->seg_mu);
	db->active->size = db->tail;
	db->active->sealed = true;
	pthread_mutex_unlock(&db->seg_mu);
	/* its length final (and the reserve freed), durably */
	rv = stor_seg_seal(db->active->h, db->tail);
	if (rv == 0)
		rv = db_fsync_dir(db);
	seg_unpin(db->active);
	db->active = NULL;
	return rv;
}

int kv_close(kv_db *db)
{
	int rv, r2 = 0;

	if (db == NULL)
		return 0;
	pthread_mutex_lock(&db->mu);
	db->closing = true;
	/* close drives the remaining queue itself */
	db->opt.external_loop = false;
	pthread_cond_broadcast(&db->bg_cv);
	pthread_mutex_unlock(&db->mu);
	if (db->bg_running)
		pthread_join(db->bg, NULL);
	/* finish what is queued, sync, seal the active segment */
	rv = write_barrier(db, seal_active, NULL);
	/* hint files only make the next open faster: a full disk or an I/O
	 * error writing them does not fail the close */
	if (rv == 0 && !atomic_load(&db->read_only))
		r2 = db_write_hints(db);
	/* so is the key-directory image (kdimage.c) */
	if (rv == 0 && r2 == 0 && !atomic_load(&db->read_only))
		(void)kdimage_save(db);
	db_free(db);
	return rv;
}
