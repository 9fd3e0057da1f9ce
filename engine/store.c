/*
 * store.c — many tenant databases in one directory, or on one block device
 * (kv_store_options.device: storage_dev.c, with no directory or LOCK), with
 * passivation.
 *
 * Layout on files:
 *   <dir>/LOCK                        flock()ed while the store is open
 *   <dir>/tenants/<name>/TENANT       the tenant's configuration (INI with a
 *                                     checksum line, tenant_file.c)
 *   <dir>/tenants/<name>/STATS        its statistics as of the last passivation
 *   <dir>/tenants/<name>/...          its database (see docs/FORMAT.md)
 *
 * Tenants are listed, created (with their TENANT), dropped, and have their
 * STATS written and read through the storage interface (storage.h), over
 * tenants/ with the files backend, and a tenant's database is opened on it
 * (db_open). On files, TENANT is read by kv_tenant_file_read (a path: kvd
 * --check reads it the same way); on a device, as the storage's blob
 * (tenant_read_stor), with the same answers.
 *
 * States of a tenant, all changed under s->mu:
 *
 *   (new) --create--> CREATING --directory and TENANT written--> PASSIVE
 *   PASSIVE --get/activate--> OPENING --kv_open ok--> ACTIVE
 *                                     --kv_open failed--> PASSIVE
 *   ACTIVE --passivate/maintain (no references)--> CLOSING --kv_close--> PASSIVE
 *
 * File I/O (creating, kv_open, kv_close) runs without s->mu held; a thread
 * that finds a tenant CREATING, OPENING or CLOSING waits on s->cv. `refs` counts users of an ACTIVE
 * tenant's database; a tenant is only closed with refs == 0. `hold` keeps the
 * struct alive for threads waiting on it, also after a drop.
 *
 * A tenant whose TENANT file kv_store_open could not read (damaged, not a
 * regular file, missing beside a database) is in the table, PASSIVE, with
 * t->why set: it is refused — never activated, never created again over its
 * files — while every other tenant is served. Only a drop removes it.
 *
 * Invariants:
 *   1. t->db != NULL exactly when the state is ACTIVE or CLOSING.
 *   2. A dropped tenant is out of the table; its struct is freed when the
 *      last hold goes.
 *   3. t->why != NULL implies the state is PASSIVE; it is set only at open.
 */
#include "codec.h"
#include "backup.h"
#include "db.h"
#include "io.h"
#include "kvengine.h"
#include "storage.h"
#include "tenant_file.h"

#include <errno.h>
#include <fcntl.h>
#include <ini.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum tstate { T_CREATING, T_PASSIVE, T_OPENING, T_ACTIVE, T_CLOSING };

struct kv_tenant {
	char name[KV_TENANT_NAME_MAX + 1];
	char *path;
	struct kv_tenant_config cfg;
	kv_db *db;
	enum tstate state;
	uint32_t refs;
	uint32_t hold;
	uint32_t waiting_idle; /* threads waiting for refs to reach 0 */
	bool dropped;
	uint64_t last_used_ms; /* monotonic */
	uint64_t activations;
	uint64_t last_activation_ms;
	uint64_t last_activation_us;
	struct kv_stats last; /* as of the last passivation */
	char *why;            /* refused: why (names the file); NULL when sound */
};

struct kv_store {
	char *dir;
	char *tdir;
	struct kv_storage *stor; /* tenants/: their creation, TENANT, STATS and drop */
	int lockfd;
	struct kv_store_options opt;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct kv_tenant **t; /* sorted by name */
	size_t n, cap;
	uint64_t activations, passivations;
};

static uint64_t mono_ms_real(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Idle time is measured with the injected clock when there is one (tests). */
static kv_clock_fn idle_clock;
static void *idle_clock_arg;

static uint64_t mono_ms(void)
{
	return idle_clock ? idle_clock(idle_clock_arg) : mono_ms_real();
}

static uint64_t mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static uint64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void kv_store_options_init(struct kv_store_options *o)
{
	memset(o, 0, sizeof(*o));
	kv_options_init(&o->base);
	o->base.background = false;
	kv_tenant_config_init(&o->defaults);
}

bool kv_tenant_name_valid(const char *name, size_t n)
{
	size_t i;

	if (name == NULL || n == 0 || n > KV_TENANT_NAME_MAX || name[0] == '.')
		return false;
	for (i = 0; i < n; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return false;
	}
	return true;
}

static int config_valid(const struct kv_tenant_config *c)
{
	if (c->sync > KV_SYNC_NONE || c->history_versions == 0)
		return -EINVAL;
	if (c->sync == KV_SYNC_INTERVAL && c->sync_interval_ms == 0)
		return -EINVAL;
	if (!codec_level_valid(c->compression, c->compression_level))
		return -EINVAL;
	if (kv_evict_name(c->evict) == NULL)
		return -EINVAL;
	return 0;
}

/* ---- files ------------------------------------------------------------- */

/* Replaces the blob `name` of tenant t (storage.h meta_put). */
static int put_blob(const kv_store *s, struct kv_tenant *t, const char *name, const char *text,
                    unsigned flags)
{
	struct kv_stor_tenant *tn;
	int rv;

	if ((rv = stor_tenant_open(s->stor, t->name, 0, &tn)) != 0)
		return rv;
	rv = stor_meta_put(tn, name, text, strlen(text), flags);
	stor_tenant_close(tn);
	return rv;
}

static int write_stats(const kv_store *s, struct kv_tenant *t)
{
	char text[1024];

	snprintf(text, sizeof(text),
	         "# kvd tenant statistics as of the last passivation\n[stats]\n"
	         "keys = %" PRIu64 "\ntombstones = %" PRIu64 "\nlive_bytes = %" PRIu64
	         "\ndisk_bytes = %" PRIu64 "\nsegments = %u\nlast_version = %" PRIu64
	         "\ncompact_revision = %" PRIu64 "\nactivations = %" PRIu64
	         "\nlast_activation_ms = %" PRIu64 "\nlast_activation_us = %" PRIu64
	         "\ntombstone_bytes = %" PRIu64 "\n",
	         t->last.keys, t->last.tombstones, t->last.live_bytes, t->last.disk_bytes,
	         t->last.segments, t->last.last_version, t->last.compact_revision, t->activations,
	         t->last_activation_ms, t->last_activation_us, t->last.tombstone_bytes);
	/* statistics only: a STATS file a crash damaged reads as zeros */
	return put_blob(s, t, "STATS", text, 0);
}

/* STATS, statistics only: what does not parse stays zero. */
static int ini_stats(void *user, const char *section, const char *name, const char *value)
{
	struct kv_tenant *t = user;
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(value, &end, 10);
	if (errno || *end != '\0')
		return 0;
	if (strcmp(section, "stats") == 0) {
		if (strcmp(name, "keys") == 0)
			t->last.keys = v;
		else if (strcmp(name, "tombstones") == 0)
			t->last.tombstones = v;
		else if (strcmp(name, "live_bytes") == 0)
			t->last.live_bytes = v;
		else if (strcmp(name, "disk_bytes") == 0)
			t->last.disk_bytes = v;
		else if (strcmp(name, "segments") == 0)
			t->last.segments = (uint32_t)v;
		else if (strcmp(name, "last_version") == 0)
			t->last.last_version = v;
		else if (strcmp(name, "compact_revision") == 0)
			t->last.compact_revision = v;
		else if (strcmp(name, "activations") == 0)
			t->activations = v;
		else if (strcmp(name, "last_activation_ms") == 0)
			t->last_activation_ms = v;
		else if (strcmp(name, "last_activation_us") == 0)
			t->last_activation_us = v;
		else if (strcmp(name, "tombstone_bytes") == 0)
			t->last.tombstone_bytes = v;
	}
	return 1;
}

/* STATS into t->last and the activation counters: what does not parse, or
 * a STATS that cannot be read, stays zero. */
static void read_stats(const kv_store *s, struct kv_tenant *t)
{
	struct kv_stor_tenant *tn;
	uint8_t *buf;
	size_t len;
	char *text;

	if (stor_tenant_open(s->stor, t->name, 0, &tn) != 0)
		return;
	if (stor_meta_get(tn, "STATS", 1u << 20, &buf, &len) == 0) {
		if ((text = malloc(len + 1)) != NULL) {
			memcpy(text, buf, len);
			text[len] = '\0';
			ini_parse_string(text, ini_stats, t);
			free(text);
		}
		free(buf);
	}
	stor_tenant_close(tn);
}

/* ---- the table --------------------------------------------------------- */

static size_t find_pos(kv_store *s, const char *name)
{
	size_t lo = 0, hi = s->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (strcmp(s->t[mid]->name, name) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static struct kv_tenant *find(kv_store *s, const char *name)
{
	size_t i = find_pos(s, name);

	return i < s->n && strcmp(s->t[i]->name, name) == 0 ? s->t[i] : NULL;
}

static int table_insert(kv_store *s, struct kv_tenant *t)
{
	size_t i;

	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 16;
		struct kv_tenant **nv = realloc(s->t, cap * sizeof(*nv));
		if (nv == NULL)
			return -ENOMEM;
		s->t = nv;
		s->cap = cap;
	}
	i = find_pos(s, t->name);
	memmove(s->t + i + 1, s->t + i, (s->n - i) * sizeof(*s->t));
	s->t[i] = t;
	s->n++;
	return 0;
}

static void table_remove(kv_store *s, struct kv_tenant *t)
{
	size_t i = find_pos(s, t->name);

	if (i < s->n && s->t[i] == t) {
		memmove(s->t + i, s->t + i + 1, (s->n - i - 1) * sizeof(*s->t));
		s->n--;
	}
}

static void tenant_free(struct kv_tenant *t)
{
	if (t == NULL)
		return;
	free(t->path);
	free(t->why);
	free(t);
}

static struct kv_tenant *tenant_new(kv_store *s, const char *name)
{
	struct kv_tenant *t = calloc(1, sizeof(*t));

	if (t == NULL)
		return NULL;
	snprintf(t->name, sizeof(t->name), "%s", name);
	if (asprintf(&t->path, "%s/%s", s->tdir, name) < 0) {
		free(t);
		return NULL;
	}
	t->cfg = s->opt.defaults;
	t->state = T_PASSIVE;
	t->last_used_ms = mono_ms();
	return t;
}

static bool settling(const struct kv_tenant *t)
{
	return t->state == T_CREATING || t->state == T_OPENING || t->state == T_CLOSING;
}

static void wait_settled(kv_store *s, struct kv_tenant *t)
{
	while (settling(t))
		pthread_cond_wait(&s->cv, &s->mu);
}

/* Waits, at most busy_wait_ms, for a tenant's references to go (a request
 * finishing, maintenance writing hints or merging). */
static void wait_idle(kv_store *s, struct kv_tenant *t)
{
	struct timespec until;

	if (t->refs == 0 || s->opt.busy_wait_ms == 0)
		return;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += s->opt.busy_wait_ms / 1000;
	until.tv_nsec += (long)(s->opt.busy_wait_ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	t->waiting_idle++;
	while (t->refs > 0 && !t->dropped)
		if (pthread_cond_timedwait(&s->cv, &s->mu, &until) != 0)
			break;
	t->waiting_idle--;
	wait_settled(s, t);
}

static void hold_drop(struct kv_tenant *t)
{
	if (--t->hold == 0 && t->dropped)
		tenant_free(t);
}

/* Creates the tenant's directory and configuration. Called and returns with
 * s->mu held; drops it around the file I/O (two fsyncs), during which the
 * tenant is in the table as CREATING. */
static int create_locked(kv_store *s, const char *name, const struct kv_tenant_config *c,
                         struct kv_tenant **ret)
{
	struct kv_tenant *t;
	int rv;

	if (!kv_tenant_name_valid(name, strlen(name)))
		return -EINVAL;
	if (c != NULL && (rv = config_valid(c)) != 0)
		return rv;
	if (find(s, name) != NULL)
		return -EEXIST;
	if ((t = tenant_new(s, name)) == NULL)
		return -ENOMEM;
	if (c != NULL)
		t->cfg = *c;
	t->state = T_CREATING;
	if ((rv = table_insert(s, t)) != 0) {
		tenant_free(t);
		return rv;
	}
	t->hold++;
	pthread_mutex_unlock(&s->mu);
	{
		/* the tenant and its TENANT, durably */
		char text[512];
		if ((rv = tenant_file_format(&t->cfg, text, sizeof(text))) == 0)
			rv = s->stor->ops->tenant_create(s->stor, t->name, "TENANT", text,
			                                 strlen(text));
	}
	pthread_mutex_lock(&s->mu);
	if (rv != 0) {
		table_remove(s, t);
		t->dropped = true;
	} else {
		t->state = T_PASSIVE;
	}
	pthread_cond_broadcast(&s->cv);
	if (rv == 0 && ret)
		*ret = t;
	hold_drop(t);
	return rv;
}

/* ---- opening and closing tenant databases ------------------------------ */

static void db_options(kv_store *s, const struct kv_tenant *t, struct kv_options *o)
{
	*o = s->opt.base;
	o->lock = false; /* the store's LOCK covers its tenants */
	o->sync = t->cfg.sync;
	o->sync_interval_ms = t->cfg.sync_interval_ms;
	o->history_versions = t->cfg.history_versions;
	o->max_keys = t->cfg.max_keys;
	o->compression = t->cfg.compression;
	o->compression_level = t->cfg.compression_level;
	o->max_bytes = t->cfg.max_bytes;
	o->evict = t->cfg.evict;
}

static uint64_t store_keydir_bytes_locked(kv_store *s)
{
	uint64_t total = 0;
	size_t i;

	for (i = 0; i < s->n; i++) {
		struct kv_stats st;
		if (s->t[i]->state == T_ACTIVE && kv_stats(s->t[i]->db, &st) == 0)
			total += st.keydir_bytes + st.evict_order_bytes;
	}
	return total;
}

/* Closes an ACTIVE tenant with no references. Called and returns with s->mu
 * held; drops it around kv_close. */
static int close_locked(kv_store *s, struct kv_tenant *t)
{
	kv_db *db = t->db;
	struct kv_stats st;
	int rv;

	t->state = T_CLOSING;
	t->hold++;
	pthread_mutex_unlock(&s->mu);
	kv_stats(db, &st);
	rv = kv_close(db);
	pthread_mutex_lock(&s->mu);
	t->db = NULL;
	t->state = T_PASSIVE;
	t->last = st;
	t->last.keydir_bytes = 0;
	s->passivations++;
	if (!t->dropped)
		write_stats(s, t);
	t->hold--;
	pthread_cond_broadcast(&s->cv);
	return rv;
}

/* Descriptors an active tenant holds besides its segment files: its
 * directory, its io_uring ring (none on pread/pwrite) and its event fd. Its
 * segment files (1 to 4 or so open: the one being written, those being
 * read) are counted by the engine's open-file budget. */
#define TENANT_FDS 3

static size_t max_active(kv_store *s)
{
	struct rlimit rl;
	size_t lim, seg, n;

	if (s->opt.max_active)
		return s->opt.max_active;
	/* Of the process's descriptors, the segment files take the engine's
	 * open-file budget (half by default, or open_files), a quarter is left
	 * to the process (listeners, clients, its own), and what remains goes
	 * to active tenants, TENANT_FDS each. */
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
		return 1024;
	lim = (size_t)rl.rlim_cur;
	seg = kv_open_files_budget();
	n = lim > seg + lim / 4 ? (lim - seg - lim / 4) / TENANT_FDS : 0;
	return n < 2 ? 2 : n;
}

/* Makes room for one more active tenant by closing the least recently used
 * idle ones. s->mu held. */
static void make_room_locked(kv_store *s)
{
	size_t limit = max_active(s);

	for (;;) {
		struct kv_tenant *lru = NULL;
		size_t active = 0, i;
		for (i = 0; i < s->n; i++) {
			struct kv_tenant *t = s->t[i];
			if (t->state == T_ACTIVE || t->state == T_OPENING || t->state == T_CLOSING)
				active++;
			if (t->state == T_ACTIVE && t->refs == 0 &&
			    (lru == NULL || t->last_used_ms < lru->last_used_ms))
				lru = t;
		}
		if (active < limit || lru == NULL)
			return;
		close_locked(s, lru);
	}
}

/* Brings t to ACTIVE. s->mu held, t held by the caller. */
static int activate_locked(kv_store *s, struct kv_tenant *t)
{
	struct kv_options o;
	kv_db *db = NULL;
	uint64_t t0;
	int rv;

	for (;;) {
		wait_settled(s, t);
		if (t->dropped)
			return -ENOENT;
		if (t->why != NULL)
			return KV_EREFUSED;
		if (t->state == T_ACTIVE)
			return 0;
		make_room_locked(s);
		if (t->state == T_PASSIVE)
			break;
	}
	t->state = T_OPENING;
	db_options(s, t, &o);
	pthread_mutex_unlock(&s->mu);
	t0 = mono_us();
	rv = db_open(s->stor, false, t->name, &o, &db);
	t0 = mono_us() - t0;
	pthread_mutex_lock(&s->mu);
	if (rv == 0) {
		t->db = db;
		t->state = T_ACTIVE;
		t->activations++;
		t->last_activation_ms = wall_ms();
		t->last_activation_us = t0;
		s->activations++;
		if (s->opt.activated != NULL) {
			/* the tenant is ACTIVE and held by our caller: safe unlocked */
			t->refs++;
			pthread_mutex_unlock(&s->mu);
			s->opt.activated(s->opt.activated_arg, t->name, db, t0);
			pthread_mutex_lock(&s->mu);
			t->refs--;
		}
	} else {
		t->state = T_PASSIVE;
	}
	pthread_cond_broadcast(&s->cv);
	return rv;
}

/* ---- public ------------------------------------------------------------ */

static int has_any(void *arg, const struct kv_stor_entry *e)
{
	(void)e;
	*(bool *)arg = true;
	return 1;
}

/* kv_tenant_file_read's answers, for a tenant of a storage without paths
 * (a device): its TENANT blob through the storage interface. */
static int tenant_read_stor(kv_store *s, const char *name, char *why, size_t why_size,
                            struct kv_tenant_config *ret)
{
	struct kv_stor_tenant *tn;
	struct kv_tenant_config c = s->opt.defaults;
	uint8_t *buf;
	size_t len;
	int rv;

	if ((rv = stor_tenant_open(s->stor, name, 0, &tn)) != 0)
		return rv;
	rv = stor_meta_get(tn, "TENANT", TENANT_FILE_MAX, &buf, &len);
	if (rv == -ENOENT) {
		bool any = false;
		stor_list(tn, has_any, &any);
		if (any) {
			snprintf(why, why_size, "no TENANT, but the tenant holds a database");
			rv = KV_EREFUSED;
		}
	} else if (rv == KV_ECORRUPT) {
		snprintf(why, why_size, "damaged (its checksum does not match)");
		rv = KV_EREFUSED;
	} else if (rv == 0) {
		rv = tenant_file_parse((const char *)buf, len, why, why_size, &c);
		free(buf);
		if (rv == 0)
			*ret = c;
	}
	stor_tenant_close(tn);
	return rv;
}

/* Reads tenants/<name>/TENANT (and STATS) of one directory entry into a
 * new table entry: sound, refused (t->why), or none (*ret NULL: not a
 * tenant, e.g. a creation cut short before its TENANT was written). */
static int load_tenant(kv_store *s, const char *name, struct kv_tenant **ret)
{
	struct kv_tenant *t;
	char why[256];
	int rv;

	*ret = NULL;
	if ((t = tenant_new(s, name)) == NULL)
		return -ENOMEM;
	if (s->opt.device != NULL)
		rv = tenant_read_stor(s, name, why, sizeof(why), &t->cfg);
	else
		rv = kv_tenant_file_read(t->path, &s->opt.defaults, why, sizeof(why), &t->cfg);
	if (rv == -ENOENT) {
		tenant_free(t);
		return 0;
	}
	if (rv == -EMFILE || rv == -ENFILE || rv == -ENOMEM) {
		tenant_free(t);
		return rv; /* the process is short, not the tenant damaged */
	}
	if (rv != 0 && rv != KV_EREFUSED) {
		/* the directory itself cannot be opened (EACCES, EIO…) */
		snprintf(why, sizeof(why), "cannot open the directory: %s", strerror(-rv));
		rv = KV_EREFUSED;
	}
	if (rv == KV_EREFUSED) {
		t->cfg = s->opt.defaults;
		if (asprintf(&t->why, "tenants/%s/TENANT: %s", name, why) < 0) {
			t->why = NULL;
			tenant_free(t);
			return -ENOMEM;
		}
	} else {
		read_stats(s, t); /* missing or damaged: zeros */
	}
	*ret = t;
	return 0;
}

static int load_one(void *arg, const char *name)
{
	kv_store *s = arg;
	struct kv_tenant *t;
	int rv;

	if (!kv_tenant_name_valid(name, strlen(name)))
		return 0;
	if ((rv = load_tenant(s, name, &t)) != 0)
		return rv;
	if (t != NULL && (rv = table_insert(s, t)) != 0)
		tenant_free(t);
	return rv;
}

/* Every tenant of tenants/ into the table (storage.h tenant_list, which
 * also finishes drops a crash interrupted). */
static int load_tenants(kv_store *s)
{
	return s->stor->ops->tenant_list(s->stor, load_one, s);
}

int kv_store_open(const char *dir, const struct kv_store_options *o, kv_store **ret)
{
	kv_store *s;
	char *lock = NULL;
	int rv;

	if ((s = calloc(1, sizeof(*s))) == NULL)
		return -ENOMEM;
	s->lockfd = -1;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	if (o)
		s->opt = *o;
	else
		kv_store_options_init(&s->opt);
	idle_clock = s->opt.base.clock;
	idle_clock_arg = s->opt.base.clock_arg;
	if ((rv = config_valid(&s->opt.defaults)) != 0)
		goto fail;
	if (s->opt.device != NULL) {
		/* every tenant on the device, which the backend locks */
		if ((s->dir = strdup(s->opt.device)) == NULL ||
		    (s->tdir = strdup(s->opt.device)) == NULL) {
			rv = -ENOMEM;
			goto fail;
		}
		s->opt.device = s->dir; /* the caller's string need not outlive the call */
		rv = kv_storage_dev_open_node(s->opt.device, s->opt.device_cache_bytes, false,
		                              s->opt.device_node ? s->opt.device_node : 1,
		                              s->opt.base.fault, &s->stor);
		if (rv != 0)
			goto fail;
		kv_storage_dev_set_sync(s->stor, (int)s->opt.device_sync);
		kv_storage_dev_set_grace(s->stor, s->opt.device_grace_ms);
		goto load;
	}
	if (dir == NULL) {
		rv = -EINVAL;
		goto fail;
	}
	if ((s->dir = strdup(dir)) == NULL || asprintf(&s->tdir, "%s/tenants", dir) < 0 ||
	    asprintf(&lock, "%s/LOCK", dir) < 0) {
		rv = -ENOMEM;
		goto fail;
	}
	if ((mkdir(dir, 0750) != 0 && errno != EEXIST) ||
	    (mkdir(s->tdir, 0750) != 0 && errno != EEXIST)) {
		rv = -errno;
		goto fail;
	}
	if ((rv = kv_storage_file_open(s->tdir, s->opt.base.fault, &s->stor)) != 0)
		goto fail;
	if ((s->lockfd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644)) < 0) {
		rv = -errno;
		goto fail;
	}
	if (flock(s->lockfd, LOCK_EX | LOCK_NB) != 0) {
		rv = errno == EWOULDBLOCK ? KV_ELOCKED : -errno;
		goto fail;
	}
	{
		char pid[32];
		int n = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
		if (ftruncate(s->lockfd, 0) != 0 || pwrite(s->lockfd, pid, (size_t)n, 0) != n) {
			rv = -errno;
			goto fail;
		}
	}
load:
	if ((rv = load_tenants(s)) != 0)
		goto fail;
	/* on a shared device "default" is made by the node that claims it first */
	if (!s->stor->shared && find(s, "default") == NULL) {
		pthread_mutex_lock(&s->mu);
		rv = create_locked(s, "default", NULL, NULL);
		pthread_mutex_unlock(&s->mu);
		if (rv != 0)
			goto fail;
	}
	free(lock);
	*ret = s;
	return 0;
fail:
	free(lock);
	kv_store_close(s);
	return rv;
}

int kv_store_close(kv_store *s)
{
	size_t i;
	int rv = 0;

	if (s == NULL)
		return 0;
	pthread_mutex_lock(&s->mu);
	for (i = 0; i < s->n; i++) {
		struct kv_tenant *t = s->t[i];
		wait_settled(s, t);
		if (t->state == T_ACTIVE) {
			int r = close_locked(s, t);
			if (rv == 0)
				rv = r;
		}
	}
	for (i = 0; i < s->n; i++)
		tenant_free(s->t[i]);
	pthread_mutex_unlock(&s->mu);
	free(s->t);
	if (s->lockfd >= 0)
		close(s->lockfd);
	kv_storage_close(s->stor);
	free(s->dir);
	free(s->tdir);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	free(s);
	return rv;
}

int kv_store_create(kv_store *s, const char *name, const struct kv_tenant_config *c)
{
	int rv;

	pthread_mutex_lock(&s->mu);
	rv = create_locked(s, name, c, NULL);
	pthread_mutex_unlock(&s->mu);
	return rv;
}

int kv_store_drop(kv_store *s, const char *name)
{
	struct kv_tenant *t;
	int rv;

	if (strcmp(name, "default") == 0)
		return -EPERM;
	pthread_mutex_lock(&s->mu);
	if ((t = find(s, name)) == NULL) {
		pthread_mutex_unlock(&s->mu);
		return -ENOENT;
	}
	t->hold++;
	wait_settled(s, t);
	if (t->dropped) {
		rv = -ENOENT;
		goto out;
	}
	wait_idle(s, t);
	if (t->dropped) {
		rv = -ENOENT;
		goto out;
	}
	if (t->refs > 0) {
		rv = -EBUSY;
		goto out;
	}
	t->dropped = true;
	table_remove(s, t);
	if (t->state == T_ACTIVE)
		close_locked(s, t);
	/* durably gone before its files are removed (storage.h tenant_drop) */
	rv = s->stor->ops->tenant_drop(s->stor, t->name);
out:
	if (--t->hold == 0 && t->dropped)
		tenant_free(t);
	pthread_mutex_unlock(&s->mu);
	return rv;
}

int kv_store_list(kv_store *s, struct kv_tenant_state **ret, size_t *ret_count)
{
	struct kv_tenant_state *v;
	size_t i;

	pthread_mutex_lock(&s->mu);
	if ((v = calloc(s->n + 1, sizeof(*v))) == NULL) {
		pthread_mutex_unlock(&s->mu);
		return -ENOMEM;
	}
	for (i = 0; i < s->n; i++) {
		snprintf(v[i].name, sizeof(v[i].name), "%s", s->t[i]->name);
		v[i].active = s->t[i]->state == T_ACTIVE;
		v[i].refused = s->t[i]->why != NULL;
	}
	*ret_count = s->n;
	pthread_mutex_unlock(&s->mu);
	*ret = v;
	return 0;
}

int kv_store_info(kv_store *s, const char *name, struct kv_tenant_info *ret)
{
	struct kv_tenant_info info;
	struct kv_tenant *t;

	memset(&info, 0, sizeof(info));
	pthread_mutex_lock(&s->mu);
	if ((t = find(s, name)) == NULL) {
		pthread_mutex_unlock(&s->mu);
		return -ENOENT;
	}
	/* a tenant half way open or closed has no consistent figures yet */
	t->hold++;
	wait_settled(s, t);
	t->hold--;
	if (t->dropped) {
		if (t->hold == 0)
			tenant_free(t);
		pthread_mutex_unlock(&s->mu);
		return -ENOENT;
	}
	if (t->why != NULL) {
		/* its settings are unknown: no figures rather than made-up ones */
		pthread_mutex_unlock(&s->mu);
		return KV_EREFUSED;
	}
	snprintf(info.name, sizeof(info.name), "%s", t->name);
	info.active = t->state == T_ACTIVE;
	info.idle_ms = t->refs > 0 ? 0 : mono_ms() - t->last_used_ms;
	info.config = t->cfg;
	info.activations = t->activations;
	info.last_activation_ms = t->last_activation_ms;
	info.last_activation_us = t->last_activation_us;
	info.in_use = t->refs;
	if (info.active)
		kv_stats(t->db, &info.stats);
	else
		info.stats = t->last;
	pthread_mutex_unlock(&s->mu);
	*ret = info;
	return 0;
}

int kv_store_why_refused(kv_store *s, const char *name, char *buf, size_t size)
{
	struct kv_tenant *t;
	int rv = -ENOENT;

	pthread_mutex_lock(&s->mu);
	if ((t = find(s, name)) != NULL && t->why != NULL) {
		if (size > 0)
			snprintf(buf, size, "%s", t->why);
		rv = 0;
	}
	pthread_mutex_unlock(&s->mu);
	return rv;
}

int kv_store_get(kv_store *s, const char *name, kv_tenant **ret)
{
	struct kv_tenant *t;
	int rv;

	pthread_mutex_lock(&s->mu);
	t = find(s, name);
	if (t == NULL) {
		if (!s->opt.auto_create) {
			pthread_mutex_unlock(&s->mu);
			return kv_tenant_name_valid(name, strlen(name)) ? -ENOENT : -EINVAL;
		}
		if ((rv = create_locked(s, name, NULL, &t)) != 0) {
			pthread_mutex_unlock(&s->mu);
			return rv;
		}
	}
	if (t->state == T_ACTIVE) {
		/* the hot path: one lock, no I/O */
		t->refs++;
		t->last_used_ms = mono_ms();
		pthread_mutex_unlock(&s->mu);
		*ret = t;
		return 0;
	}
	t->hold++;
	rv = activate_locked(s, t);
	if (rv == 0) {
		t->refs++;
		t->last_used_ms = mono_ms();
	}
	if (--t->hold == 0 && t->dropped) {
		tenant_free(t);
		t = NULL;
	}
	pthread_mutex_unlock(&s->mu);
	if (rv == 0)
		*ret = t;
	return rv;
}

int kv_store_get_ready(kv_store *s, const char *name, kv_tenant **ret)
{
	struct kv_tenant *t;

	pthread_mutex_lock(&s->mu);
	t = find(s, name);
	if (t != NULL && t->state == T_ACTIVE) {
		t->refs++;
		t->last_used_ms = mono_ms();
		pthread_mutex_unlock(&s->mu);
		*ret = t;
		return 0;
	}
	pthread_mutex_unlock(&s->mu);
	if (!kv_tenant_name_valid(name, strlen(name)))
		return -EINVAL;
	if (t == NULL && !s->opt.auto_create)
		return -ENOENT;
	return -EAGAIN; /* created, activated or settled by kv_store_get */
}

int kv_store_get_active(kv_store *s, const char *name, kv_tenant **ret)
{
	struct kv_tenant *t;

	pthread_mutex_lock(&s->mu);
	t = find(s, name);
	if (t == NULL || t->state != T_ACTIVE) {
		pthread_mutex_unlock(&s->mu);
		return t == NULL ? -ENOENT : -EAGAIN;
	}
	t->refs++; /* not a use: last_used_ms stays, so idle tenants still age */
	pthread_mutex_unlock(&s->mu);
	*ret = t;
	return 0;
}

void kv_store_put(kv_store *s, kv_tenant *t)
{
	if (t == NULL)
		return;
	pthread_mutex_lock(&s->mu);
	if (--t->refs == 0 && t->waiting_idle > 0)
		pthread_cond_broadcast(&s->cv);
	t->last_used_ms = mono_ms();
	pthread_mutex_unlock(&s->mu);
}

void kv_store_put_unused(kv_store *s, kv_tenant *t)
{
	if (t == NULL)
		return;
	pthread_mutex_lock(&s->mu);
	if (--t->refs == 0 && t->waiting_idle > 0)
		pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

kv_db *kv_tenant_db(kv_tenant *t)
{
	return t->db;
}

const struct kv_tenant_config *kv_tenant_config_of(kv_tenant *t)
{
	return &t->cfg;
}

const char *kv_tenant_name(kv_tenant *t)
{
	return t->name;
}

int kv_store_passivate(kv_store *s, const char *name)
{
	struct kv_tenant *t;
	int rv = 0;

	pthread_mutex_lock(&s->mu);
	if ((t = find(s, name)) == NULL) {
		pthread_mutex_unlock(&s->mu);
		return -ENOENT;
	}
	t->hold++;
	wait_settled(s, t);
	if (t->state == T_ACTIVE)
		wait_idle(s, t);
	if (t->state == T_ACTIVE) {
		if (t->refs > 0)
			rv = -EBUSY;
		else
			rv = close_locked(s, t);
	}
	if (--t->hold == 0 && t->dropped)
		tenant_free(t);
	pthread_mutex_unlock(&s->mu);
	return rv;
}

int kv_store_activate(kv_store *s, const char *name, uint64_t *ret_us)
{
	struct kv_tenant *t;
	int rv;

	pthread_mutex_lock(&s->mu);
	if ((t = find(s, name)) == NULL) {
		pthread_mutex_unlock(&s->mu);
		return -ENOENT;
	}
	t->hold++;
	rv = activate_locked(s, t);
	if (rv == 0) {
		t->last_used_ms = mono_ms();
		if (ret_us)
			*ret_us = t->last_activation_us;
	}
	if (--t->hold == 0 && t->dropped)
		tenant_free(t);
	pthread_mutex_unlock(&s->mu);
	return rv;
}

int kv_store_maintain(kv_store *s, uint32_t *ret_passivated)
{
	uint32_t done = 0;
	uint64_t now = mono_ms();
	size_t i;

	pthread_mutex_lock(&s->mu);
	/* idle tenants */
	if (s->opt.idle_timeout_s > 0) {
		for (i = 0; i < s->n; i++) {
			struct kv_tenant *t = s->t[i];
			if (t->state == T_ACTIVE && t->refs == 0 &&
			    now - t->last_used_ms >= (uint64_t)s->opt.idle_timeout_s * 1000) {
				close_locked(s, t);
				done++;
				i = (size_t)-1; /* the table may have changed while unlocked */
				now = mono_ms();
			}
		}
	}
	/* the memory budget: least recently used first */
	while (s->opt.memory_budget > 0 && store_keydir_bytes_locked(s) > s->opt.memory_budget) {
		struct kv_tenant *lru = NULL;
		for (i = 0; i < s->n; i++) {
			struct kv_tenant *t = s->t[i];
			if (t->state == T_ACTIVE && t->refs == 0 &&
			    (lru == NULL || t->last_used_ms < lru->last_used_ms))
				lru = t;
		}
		if (lru == NULL)
			break; /* everything over budget is in use */
		close_locked(s, lru);
		done++;
	}
	pthread_mutex_unlock(&s->mu);
	if (ret_passivated)
		*ret_passivated = done;
	return 0;
}

void kv_store_set_limits(kv_store *s, uint64_t memory_budget, uint32_t idle_timeout_s)
{
	pthread_mutex_lock(&s->mu);
	s->opt.memory_budget = memory_budget;
	s->opt.idle_timeout_s = idle_timeout_s;
	pthread_mutex_unlock(&s->mu);
}

int kv_store_stats(kv_store *s, struct kv_store_stats *ret)
{
	struct kv_store_stats st;
	size_t i;

	memset(&st, 0, sizeof(st));
	pthread_mutex_lock(&s->mu);
	st.tenants = s->n;
	for (i = 0; i < s->n; i++)
		st.active += s->t[i]->state == T_ACTIVE;
	st.keydir_bytes = store_keydir_bytes_locked(s);
	st.activations = s->activations;
	st.passivations = s->passivations;
	pthread_mutex_unlock(&s->mu);
	if (s->stor->ops->stats != NULL) {
		struct kv_stor_stats ss;
		s->stor->ops->stats(s->stor, &ss);
		st.device = true;
		st.device_extents = ss.extents;
		st.device_extents_free = ss.extents_free;
		st.device_extent_size = ss.extent_size;
		st.device_cache_bytes = ss.cache_bytes;
		st.device_cache_hits = ss.cache_hits;
		st.device_cache_misses = ss.cache_misses;
		st.device_superblocks_damaged = ss.superblocks_damaged;
		st.device_extents_reclaimed = ss.extents_reclaimed;
		st.device_nodes = s->stor->nodes;
		st.device_node = s->stor->node;
	}
	*ret = st;
	return 0;
}

/* ---- a shared device ------------------------------------------------------ */

bool kv_store_shared(kv_store *s)
{
	return s->stor->shared;
}

int kv_store_claim(kv_store *s, const char *name, uint64_t epoch)
{
	struct kv_tenant *t, *fresh = NULL;
	bool claimed;
	int rv = 0;

	if (!s->stor->shared)
		return 0;
	if (!kv_tenant_name_valid(name, strlen(name)))
		return -EINVAL;
	pthread_mutex_lock(&s->mu);
	if ((t = find(s, name)) != NULL) {
		t->hold++;
		wait_settled(s, t);
		if (t->state == T_ACTIVE)
			wait_idle(s, t);
		if (t->dropped)
			rv = -EAGAIN;
		else if (t->state == T_ACTIVE)
			rv = t->refs > 0 ? -EBUSY : close_locked(s, t);
		if (rv != 0) {
			hold_drop(t);
			pthread_mutex_unlock(&s->mu);
			return rv == -EAGAIN ? -EBUSY : rv;
		}
	} else {
		if ((t = tenant_new(s, name)) == NULL || (rv = table_insert(s, t)) != 0) {
			tenant_free(t);
			pthread_mutex_unlock(&s->mu);
			return t == NULL ? -ENOMEM : rv;
		}
		t->hold++;
	}
	/* nobody opens it while the device says whose it is */
	t->state = T_CREATING;
	pthread_mutex_unlock(&s->mu);

	rv = s->stor->ops->claim(s->stor, name, epoch);
	claimed = rv == 0;
	if (rv == 0)
		rv = load_tenant(s, name, &fresh); /* its TENANT and STATS as the device has them */

	pthread_mutex_lock(&s->mu);
	t->state = T_PASSIVE;
	if (rv == 0 && fresh != NULL) {
		t->cfg = fresh->cfg;
		t->last = fresh->last;
		free(t->why);
		t->why = fresh->why;
		fresh->why = NULL;
	} else if (rv == 0 || rv == -ENOENT) {
		/* no node has it (any more): not here either */
		table_remove(s, t);
		t->dropped = true;
	}
	pthread_cond_broadcast(&s->cv);
	/* opened now, so the old owner's open segment is sealed where its
	 * records end (durably) before anything is served: what a stale owner
	 * appends to it later is never read */
	if (rv == 0 && !t->dropped && t->why == NULL)
		rv = activate_locked(s, t);
	hold_drop(t);
	if (rv == -ENOENT && strcmp(name, "default") == 0)
		rv = create_locked(s, name, NULL, NULL);
	else if (rv == -ENOENT)
		rv = 0;
	pthread_mutex_unlock(&s->mu);
	tenant_free(fresh);
	/* not taken after all: nothing of it is written from this node */
	if (rv != 0 && claimed)
		s->stor->ops->disown(s->stor, name);
	return rv;
}

int kv_store_disown(kv_store *s, const char *name)
{
	if (!s->stor->shared)
		return 0;
	return s->stor->ops->disown(s->stor, name);
}

static int dev_tenant_cmp(const void *a, const void *b)
{
	return strcmp(((const struct kv_dev_tenant *)a)->name,
	              ((const struct kv_dev_tenant *)b)->name);
}

int kv_store_device_tenants(kv_store *s, struct kv_dev_tenant **ret, size_t *ret_n)
{
	int rv;

	if (!s->stor->shared)
		return -ENOTSUP;
	if ((rv = s->stor->ops->directory(s->stor, ret, ret_n)) == 0)
		qsort(*ret, *ret_n, sizeof(**ret), dev_tenant_cmp);
	return rv;
}

int kv_store_device_find(kv_store *s, const char *name, struct kv_dev_tenant *ret)
{
	struct kv_dev_tenant *v;
	size_t n, i;
	int rv;

	if ((rv = kv_store_device_tenants(s, &v, &n)) != 0)
		return rv;
	rv = -ENOENT;
	for (i = 0; i < n; i++)
		if (strcmp(v[i].name, name) == 0) {
			*ret = v[i];
			rv = 0;
			break;
		}
	free(v);
	return rv;
}

/* ---- for backup.c ---------------------------------------------------------- */

const char *store_dir_of(kv_store *s)
{
	return s->opt.device != NULL ? NULL : s->dir;
}

struct kv_storage *store_storage_of(kv_store *s)
{
	return s->stor;
}
