/* test_powerloss.c — power cuts replayed at every point of a recorded workload (unsynced writes dropped, kept in part or torn, directory changes not yet synced lost): recovery always succeeds, keeps every write acknowledged under sync=always, and recovers a prefix of the issued history (blobs and uploads never committed among it); likewise for cuts and I/O errors during recovery itself. */
#include "testutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <inttypes.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "io.h"

/* ---- the record ---------------------------------------------------------- */

enum { EV_WRITE = 1, EV_SYNC_FILE, EV_SYNC_DIR, EV_CREATE, EV_RENAME, EV_UNLINK, EV_TRUNCATE, EV_ACK };

struct ev {
	int type;
	uint64_t ino;
	uint64_t off; /* write offset, truncate size */
	uint8_t *data;
	size_t len;
	char name[64], name2[64];
	uint64_t version; /* EV_ACK: the highest version acknowledged so far */
};

struct recorder {
	struct ev *v;
	size_t n, cap;
	uint64_t dir_ino;
	bool on;
};

static uint64_t ino_of(int fd)
{
	struct stat st;

	if (fstat(fd, &st) != 0)
		abort();
	return (uint64_t)st.st_ino;
}

static struct ev *ev_new(struct recorder *r, int type)
{
	struct ev *e;

	if (r->n == r->cap) {
		r->cap = r->cap ? r->cap * 2 : 1024;
		r->v = realloc(r->v, r->cap * sizeof(*r->v));
	}
	e = &r->v[r->n++];
	memset(e, 0, sizeof(*e));
	e->type = type;
	return e;
}

static void rec_cb(void *arg, const struct kv_io_event *x)
{
	struct recorder *r = arg;
	struct ev *e;

	if (!r->on)
		return;
	switch (x->type) {
	case KV_IO_EV_WRITE:
		e = ev_new(r, EV_WRITE);
		e->ino = ino_of(x->fd);
		e->off = x->off;
		e->len = x->len;
		e->data = malloc(x->len);
		memcpy(e->data, x->buf, x->len);
		break;
	case KV_IO_EV_SYNC: {
		uint64_t ino = ino_of(x->fd);
		e = ev_new(r, ino == r->dir_ino ? EV_SYNC_DIR : EV_SYNC_FILE);
		e->ino = ino;
		break;
	}
	case KV_IO_EV_CREATE:
		if (strcmp(x->name, "LOCK") == 0)
			return;
		e = ev_new(r, EV_CREATE);
		e->ino = ino_of(x->fd);
		snprintf(e->name, sizeof(e->name), "%s", x->name);
		break;
	case KV_IO_EV_RENAME:
		e = ev_new(r, EV_RENAME);
		snprintf(e->name, sizeof(e->name), "%s", x->name);
		snprintf(e->name2, sizeof(e->name2), "%s", x->name2);
		break;
	case KV_IO_EV_UNLINK:
		e = ev_new(r, EV_UNLINK);
		snprintf(e->name, sizeof(e->name), "%s", x->name);
		break;
	case KV_IO_EV_TRUNCATE:
		e = ev_new(r, EV_TRUNCATE);
		e->ino = ino_of(x->fd);
		e->off = x->off;
		break;
	}
}

/* ---- the disk model ------------------------------------------------------ */

struct file {
	uint64_t ino;
	uint8_t *data; /* durable content */
	size_t len;
	size_t first_pending; /* index in the model's pending list, for ordering */
};

struct dent {
	char name[64];
	uint64_t ino;
};

struct pend {
	int type; /* EV_WRITE, EV_TRUNCATE (per file) or a directory change */
	const struct ev *e;
};

struct model {
	struct ev **own; /* events the model made up (truncates of O_TRUNC) */
	size_t nown;
	struct file *f;
	size_t nf;
	struct dent *d; /* durable directory */
	size_t nd;
	struct pend *p; /* not yet durable, in order */
	size_t np, capp;
};

static struct file *m_file(struct model *m, uint64_t ino, bool create)
{
	for (size_t i = 0; i < m->nf; i++)
		if (m->f[i].ino == ino)
			return &m->f[i];
	if (!create)
		return NULL;
	m->f = realloc(m->f, (m->nf + 1) * sizeof(*m->f));
	memset(&m->f[m->nf], 0, sizeof(m->f[0]));
	m->f[m->nf].ino = ino;
	return &m->f[m->nf++];
}

static void f_write(uint8_t **data, size_t *len, uint64_t off, const uint8_t *src, size_t n)
{
	if (off + n > *len) {
		*data = realloc(*data, off + n);
		memset(*data + *len, 0, off + n - *len);
		*len = off + n;
	}
	if (n > 0) /* (memcpy must not be given a NULL buffer, even for 0 bytes) */
		memcpy(*data + off, src, n);
}

static void f_truncate(uint8_t **data, size_t *len, uint64_t size)
{
	if (size > *len) {
		*data = realloc(*data, size);
		memset(*data + *len, 0, size - *len);
	}
	*len = size;
}

static void d_apply(struct dent **d, size_t *nd, const struct ev *e)
{
	size_t i;

	switch (e->type) {
	case EV_CREATE:
		for (i = 0; i < *nd; i++)
			if (strcmp((*d)[i].name, e->name) == 0) {
				(*d)[i].ino = e->ino;
				return;
			}
		*d = realloc(*d, (*nd + 1) * sizeof(**d));
		snprintf((*d)[*nd].name, sizeof((*d)[0].name), "%s", e->name);
		(*d)[*nd].ino = e->ino;
		(*nd)++;
		return;
	case EV_RENAME: {
		uint64_t ino = 0;
		bool found = false;
		for (i = 0; i < *nd; i++)
			if (strcmp((*d)[i].name, e->name) == 0) {
				ino = (*d)[i].ino;
				found = true;
				memmove(*d + i, *d + i + 1, (*nd - i - 1) * sizeof(**d));
				(*nd)--;
				break;
			}
		if (!found)
			return; /* its creation was lost: nothing to rename */
		struct ev c = {.type = EV_CREATE, .ino = ino};
		snprintf(c.name, sizeof(c.name), "%s", e->name2);
		d_apply(d, nd, &c);
		return;
	}
	case EV_UNLINK:
		for (i = 0; i < *nd; i++)
			if (strcmp((*d)[i].name, e->name) == 0) {
				memmove(*d + i, *d + i + 1, (*nd - i - 1) * sizeof(**d));
				(*nd)--;
				return;
			}
		return;
	}
}

static void m_pend(struct model *m, const struct ev *e)
{
	if (m->np == m->capp) {
		m->capp = m->capp ? m->capp * 2 : 256;
		m->p = realloc(m->p, m->capp * sizeof(*m->p));
	}
	m->p[m->np].type = e->type;
	m->p[m->np].e = e;
	m->np++;
}

/* A pending change becomes durable: applied and taken out of the list. */
static void m_commit(struct model *m, size_t i)
{
	const struct ev *e = m->p[i].e;

	if (e->type == EV_WRITE) {
		struct file *f = m_file(m, e->ino, true);
		f_write(&f->data, &f->len, e->off, e->data, e->len);
	} else if (e->type == EV_TRUNCATE) {
		struct file *f = m_file(m, e->ino, true);
		f_truncate(&f->data, &f->len, e->off);
	} else {
		d_apply(&m->d, &m->nd, e);
	}
	memmove(m->p + i, m->p + i + 1, (m->np - i - 1) * sizeof(*m->p));
	m->np--;
}

static void m_event(struct model *m, const struct ev *e)
{
	size_t i;

	switch (e->type) {
	case EV_WRITE:
	case EV_TRUNCATE:
		m_file(m, e->ino, true);
		m_pend(m, e);
		break;
	case EV_CREATE: {
		bool existed = m_file(m, e->ino, false) != NULL;
		m_file(m, e->ino, true);
		if (existed) {
			/* O_TRUNC of an existing file: its data goes when synced */
			struct ev *t = calloc(1, sizeof(*t));
			t->type = EV_TRUNCATE;
			t->ino = e->ino;
			m->own = realloc(m->own, (m->nown + 1) * sizeof(*m->own));
			m->own[m->nown++] = t;
			m_pend(m, t);
		}
		m_pend(m, e);
		break;
	}
	case EV_RENAME:
	case EV_UNLINK:
		m_pend(m, e);
		break;
	case EV_SYNC_FILE:
		/* fdatasync makes the file's data (and size) durable, not its name */
		for (i = 0; i < m->np;) {
			if ((m->p[i].type == EV_WRITE || m->p[i].type == EV_TRUNCATE) &&
			    m->p[i].e->ino == e->ino)
				m_commit(m, i);
			else
				i++;
		}
		break;
	case EV_SYNC_DIR:
		for (i = 0; i < m->np;) {
			int t = m->p[i].type;
			if (t == EV_CREATE || t == EV_RENAME || t == EV_UNLINK)
				m_commit(m, i);
			else
				i++;
		}
		break;
	}
}

static void m_free(struct model *m)
{
	for (size_t i = 0; i < m->nown; i++) {
		free(m->own[i]->data);
		free(m->own[i]);
	}
	free(m->own);
	for (size_t i = 0; i < m->nf; i++)
		free(m->f[i].data);
	free(m->f);
	free(m->d);
	free(m->p);
	memset(m, 0, sizeof(*m));
}

/* What of the unsynced changes a power cut keeps: none, all, a prefix with
 * the last write torn, or any subset of the 512-byte sectors of the
 * unsynced writes (writeback in any order; directory changes kept). */
enum cut { CUT_DROP, CUT_KEEP, CUT_PREFIX_TORN, CUT_SECTORS };

static uint64_t rng = 0x2545f4914f6cdd1dull;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Writes into dir what the disk holds after a power cut with this model:
 * what is durable, plus (by variant) none, all, or a prefix of what is not,
 * the last kept write torn. */
static void m_materialize(struct model *m, enum cut how, const char *dir)
{
	struct model w;
	size_t keep = how == CUT_DROP                         ? 0
	              : how == CUT_KEEP || how == CUT_SECTORS ? m->np
	                                                      : rnd() % (m->np + 1);
	size_t torn = SIZE_MAX;

	/* work on a copy of the durable state */
	memset(&w, 0, sizeof(w));
	w.nf = m->nf;
	w.f = calloc(m->nf + 1, sizeof(*w.f));
	for (size_t i = 0; i < m->nf; i++) {
		w.f[i].ino = m->f[i].ino;
		w.f[i].len = m->f[i].len;
		w.f[i].data = malloc(m->f[i].len + 1);
		if (m->f[i].len > 0)
			memcpy(w.f[i].data, m->f[i].data, m->f[i].len);
	}
	w.nd = m->nd;
	w.d = calloc(m->nd + 1, sizeof(*w.d));
	if (m->nd > 0)
		memcpy(w.d, m->d, m->nd * sizeof(*w.d));
	if (how == CUT_PREFIX_TORN && keep > 0 && m->p[keep - 1].type == EV_WRITE)
		torn = keep - 1;
	for (size_t i = 0; i < keep; i++) {
		const struct ev *e = m->p[i].e;
		if (e->type == EV_WRITE && how == CUT_SECTORS) {
			struct file *f = m_file(&w, e->ino, true);
			uint64_t at = e->off;
			while (at < e->off + e->len) {
				uint64_t end = (at / 512 + 1) * 512;
				if (end > e->off + e->len)
					end = e->off + e->len;
				if (rnd() % 2)
					f_write(&f->data, &f->len, at, e->data + (at - e->off),
					        (size_t)(end - at));
				at = end;
			}
		} else if (e->type == EV_WRITE) {
			struct file *f = m_file(&w, e->ino, true);
			size_t n = i == torn ? rnd() % (e->len + 1) : e->len;
			f_write(&f->data, &f->len, e->off, e->data, n);
		} else if (e->type == EV_TRUNCATE) {
			struct file *f = m_file(&w, e->ino, true);
			f_truncate(&f->data, &f->len, e->off);
		} else {
			d_apply(&w.d, &w.nd, e);
		}
	}
	mkdir(dir, 0755);
	for (size_t i = 0; i < w.nd; i++) {
		struct file *f = m_file(&w, w.d[i].ino, false);
		char *p = tu_path(dir, "%s", w.d[i].name);
		int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0)
			abort();
		if (f && f->len && write(fd, f->data, f->len) != (ssize_t)f->len)
			abort();
		close(fd);
		free(p);
	}
	m_free(&w);
}

/* ---- the workload ---------------------------------------------------------- */

enum { NKEYS = 12, MAXV = 600 };

struct issued {
	int key;
	bool tomb;
	size_t len;
	uint8_t val[10000]; /* a value (< 2048 bytes) or a blob's bytes */
	int batch; /* id of its batch, or -1 */
	bool blob; /* val is a blob's bytes */
};

static struct issued hist[MAXV + 1]; /* by version */
static uint64_t nissued;
static unsigned nblobs; /* of them, blobs */

static void mkval(uint64_t version, uint8_t *out, size_t len)
{
	uint64_t x = version * 0x9e3779b97f4a7c15ull;
	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		out[i] = (uint8_t)x;
	}
}

static void key_name(int k, char *buf)
{
	snprintf(buf, 16, "pk%02d", k);
}

static void ack(struct recorder *r, uint64_t version)
{
	struct ev *e = ev_new(r, EV_ACK);
	e->version = version;
}

static void opts(struct kv_options *o, struct kv_io_fault *f)
{
	kv_options_init(o);
	o->background = false;
	o->segment_size = 4096;
	o->history_versions = 1000000; /* merge keeps every version: all stay checkable */
	o->merge_ratio_pct = 0;
	o->fault = f;
}

static void run_workload(const char *dir, struct recorder *r)
{
	struct kv_io_fault f = {.record = rec_cb, .arg = r};
	struct kv_options o;
	kv_db *db;
	int batch_id = 0;

	opts(&o, &f);
	mkdir(dir, 0755);
	{
		int dfd = open(dir, O_RDONLY | O_DIRECTORY);
		r->dir_ino = ino_of(dfd);
		close(dfd);
	}
	r->on = true;
	assert_int_equal(kv_open(dir, &o, &db), 0);
	for (int step = 0; step < 170 && nissued + 4 < MAXV; step++) {
		unsigned what = (unsigned)(rnd() % 20);
		char key[16];
		if (step == 60 || step == 130) {
			assert_int_equal(kv_merge(db), 0);
			continue;
		}
		if (step == 100) {
			/* a clean close and reopen in the middle of the history */
			assert_int_equal(kv_close(db), 0);
			assert_int_equal(kv_open(dir, &o, &db), 0);
			continue;
		}
		if (what < 3) {
			/* a batch of 2-4 puts */
			struct kv_op ops[4];
			size_t n = 2 + rnd() % 3;
			uint8_t vals[4][2048];
			char keys[4][16];
			for (size_t i = 0; i < n; i++) {
				size_t len = rnd() % 700;
				int k = (int)(rnd() % NKEYS);
				key_name(k, keys[i]);
				mkval(nissued + 1 + i, vals[i], len);
				ops[i] = (struct kv_op){.type = KV_OP_PUT, .key = keys[i],
				                        .key_len = strlen(keys[i]), .value = vals[i],
				                        .value_len = len, .if_version = KV_ANY_VERSION};
				hist[nissued + 1 + i] = (struct issued){.key = k, .len = len,
				                                        .batch = batch_id};
				memcpy(hist[nissued + 1 + i].val, vals[i], len);
			}
			batch_id++;
			assert_int_equal(kv_batch(db, ops, n), 0);
			assert_int_equal(ops[0].version, nissued + 1);
			nissued += n;
		} else if (what < 5) {
			int k = (int)(rnd() % NKEYS);
			uint64_t v;
			int rv;
			key_name(k, key);
			rv = kv_delete(db, key, strlen(key), NULL, &v);
			if (rv == KV_ENOTFOUND)
				continue;
			assert_int_equal(rv, 0);
			assert_int_equal(v, nissued + 1);
			hist[++nissued] = (struct issued){.key = k, .tomb = true, .batch = -1};
		} else if (what == 19) {
			/* a blob of up to 3 chunks, its whole ones written before
			 * the commit (unsynced: the commit syncs them), after the
			 * chunk of an upload never committed */
			uint8_t val[10000], junk[KV_BLOB_CHUNK_MIN];
			size_t len = 1 + rnd() % sizeof(val);
			int k = (int)(rnd() % NKEYS);
			kv_upload *u;
			uint64_t v;
			key_name(k, key);
			memset(junk, 0xab, sizeof(junk));
			assert_int_equal(kv_upload_open(db, key, strlen(key), KV_BLOB_CHUNK_MIN, &u), 0);
			assert_int_equal(kv_upload_write(u, junk, sizeof(junk)), 0);
			kv_upload_close(u);
			mkval(nissued + 1, val, len);
			assert_int_equal(kv_upload_open(db, key, strlen(key), KV_BLOB_CHUNK_MIN, &u), 0);
			assert_int_equal(kv_upload_write(u, val, len / 2), 0);
			assert_int_equal(kv_upload_write(u, val + len / 2, len - len / 2), 0);
			assert_int_equal(kv_upload_commit(u, NULL, &v), 0);
			kv_upload_close(u);
			assert_int_equal(v, nissued + 1);
			hist[++nissued] = (struct issued){.key = k, .len = len, .batch = -1, .blob = true};
			nblobs++;
			memcpy(hist[nissued].val, val, len);
		} else {
			size_t len = rnd() % (rnd() % 4 == 0 ? 2000 : 200);
			int k = (int)(rnd() % NKEYS);
			uint8_t val[2048];
			uint64_t v;
			key_name(k, key);
			mkval(nissued + 1, val, len);
			assert_int_equal(kv_put(db, key, strlen(key), val, len, NULL, &v), 0);
			assert_int_equal(v, nissued + 1);
			hist[++nissued] = (struct issued){.key = k, .len = len, .batch = -1};
			memcpy(hist[nissued].val, val, len);
		}
		ack(r, nissued);
	}
	assert_int_equal(kv_close(db), 0);
	r->on = false;
}

/* ---- checking a recovered state -------------------------------------------- */

/* The blob of version v of key reads back whole and byte-exact. */
static void check_blob(kv_db *db, const char *key, uint64_t v)
{
	struct kv_read_opts ro = {.version = v};
	uint8_t buf[10000];
	size_t n;

	assert_int_equal(kv_blob_read(db, key, strlen(key), &ro, 0, buf, sizeof(buf), &n, NULL), 0);
	assert_int_equal(n, hist[v].len);
	assert_memory_equal(buf, hist[v].val, n);
}

/* ... or, after a segment was lost, KV_ECORRUPT when a chunk of it was
 * there: the loss is reported, never other bytes. */
static void check_blob_or_lost(kv_db *db, const char *key, uint64_t v)
{
	struct kv_read_opts ro = {.version = v};
	uint8_t buf[10000];
	size_t n;
	int rv = kv_blob_read(db, key, strlen(key), &ro, 0, buf, sizeof(buf), &n, NULL);

	if (rv == KV_ECORRUPT)
		return;
	assert_int_equal(rv, 0);
	assert_int_equal(n, hist[v].len);
	assert_memory_equal(buf, hist[v].val, n);
}

/* Recovery must succeed; what it holds must be a prefix 1..k of the issued
 * history with k >= acked, every version byte-exact. */
static void check_state(const char *dir, uint64_t acked, struct kv_io_fault *fault)
{
	struct kv_options o;
	bool present[MAXV + 1];
	uint64_t k = 0;
	kv_db *db;

	memset(present, 0, sizeof(present));
	opts(&o, fault);
	o.io = KV_IO_PSYNC; /* thousands of opens: no ring to set up each time */
	assert_int_equal(kv_open(dir, &o, &db), 0);
	for (int key = 0; key < NKEYS; key++) {
		struct kv_version *list;
		size_t n;
		char name[16];
		key_name(key, name);
		assert_int_equal(kv_versions(db, name, strlen(name), 0, 0, true, &list, &n, NULL), 0);
		for (size_t i = 0; i < n; i++) {
			uint64_t v = list[i].version;
			/* never anything that was not issued, never other bytes */
			assert_true(v >= 1 && v <= nissued);
			assert_int_equal(hist[v].key, key);
			assert_int_equal(list[i].tombstone, hist[v].tomb);
			assert_int_equal(list[i].blob, hist[v].blob);
			if (hist[v].blob) {
				assert_int_equal(list[i].blob_size, hist[v].len);
				check_blob(db, name, v);
			} else if (!hist[v].tomb) {
				assert_int_equal(list[i].len, hist[v].len);
				if (hist[v].len)
					assert_memory_equal(list[i].data, hist[v].val, hist[v].len);
			}
			present[v] = true;
		}
		kv_versions_free(list, n);
	}
	while (k < nissued && present[k + 1])
		k++;
	/* a prefix: nothing after the first missing version */
	for (uint64_t v = k + 1; v <= nissued; v++)
		assert_false(present[v]);
	/* every acknowledged write survived */
	assert_true(k >= acked);
	/* batches: all or nothing (a prefix cannot end inside one) */
	if (k > 0 && k < nissued && hist[k].batch >= 0)
		assert_true(hist[k + 1].batch != hist[k].batch);
	{
		struct kv_stats st;
		kv_stats(db, &st);
		assert_true(st.last_version >= k); /* versions never go back */
	}
	assert_int_equal(kv_close(db), 0);
}

static uint64_t acked_before(const struct recorder *r, size_t cut)
{
	uint64_t a = 0;

	for (size_t i = 0; i < cut; i++)
		if (r->v[i].type == EV_ACK)
			a = r->v[i].version;
	return a;
}

static void free_recorder(struct recorder *r)
{
	for (size_t i = 0; i < r->n; i++)
		free(r->v[i].data);
	free(r->v);
}

/* ---- tests ----------------------------------------------------------------- */

static struct recorder rec;
static char *work;

static int setup(void **state)
{
	(void)state;
	/* the disk is the model's: tmpfs, when there is one, only makes the
	 * thousands of directories it writes cheaper */
	if (access("/dev/shm", W_OK) == 0)
		setenv("TMPDIR", "/dev/shm", 1);
	work = tu_mkdtemp("powerloss");
	{
		char *d = tu_path(work, "orig");
		run_workload(d, &rec);
		free(d);
	}
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	free_recorder(&rec);
	tu_rmtree(work);
	free(work);
	return 0;
}

/* After a power cut, one sealed segment (one with a hint) deleted, cut in
 * half or replaced by a directory: recovery reports the loss, every version
 * still read is byte-exact, and no acknowledged version is handed out
 * again. Returns false when there was no sealed segment to damage. */
static bool check_after_loss(const char *dir, uint64_t acked, unsigned turn)
{
	char hints[256][64], *p;
	struct kv_options o;
	struct kv_recovery_info ri;
	kv_db *db;
	uint64_t v;
	int n = tu_list_ext(dir, ".hint", hints, 256);

	if (n == 0)
		return false;
	p = tu_path(dir, "%.8s.seg", hints[turn % (unsigned)n]);
	if (access(p, F_OK) != 0) {
		free(p);
		return false; /* a hint of a retired segment, not yet removed */
	}
	if (turn % 3 == 0) {
		assert_int_equal(unlink(p), 0);
	} else if (turn % 3 == 1) {
		assert_int_equal(truncate(p, tu_file_size(p) / 2), 0);
	} else {
		assert_int_equal(unlink(p), 0);
		assert_int_equal(mkdir(p, 0755), 0);
	}
	free(p);
	opts(&o, NULL);
	o.io = KV_IO_PSYNC;
	assert_int_equal(kv_open(dir, &o, &db), 0);
	assert_int_equal(kv_recovery_info(db, &ri), 0);
	assert_true(ri.lost_segments > 0 || ri.lost_bytes > 0);
	for (int key = 0; key < NKEYS; key++) {
		struct kv_version *list;
		size_t nv;
		char name[16];
		int rv;
		key_name(key, name);
		rv = kv_versions(db, name, strlen(name), 0, 0, true, &list, &nv, NULL);
		if (rv == KV_ECORRUPT)
			continue; /* its newest record was in what was lost */
		assert_int_equal(rv, 0);
		for (size_t i = 0; i < nv; i++) {
			uint64_t ver = list[i].version;
			assert_true(ver >= 1 && ver <= nissued);
			assert_int_equal(hist[ver].key, key);
			if (hist[ver].blob)
				check_blob_or_lost(db, name, ver);
			else if (!hist[ver].tomb && hist[ver].len)
				assert_memory_equal(list[i].data, hist[ver].val, hist[ver].len);
		}
		kv_versions_free(list, nv);
	}
	assert_int_equal(kv_put(db, "after-loss", 10, "x", 1, NULL, &v), 0);
	assert_true(v > acked);
	assert_int_equal(kv_close(db), 0);
	return true;
}

static void test_every_cut_point(void **state)
{
	struct model m;
	size_t cuts = 0, with_pending = 0, damaged = 0;

	(void)state;
	memset(&m, 0, sizeof(m));
	assert_true(rec.n > 200);
	for (size_t cut = 0; cut <= rec.n; cut++) {
		if (cut > 0)
			m_event(&m, &rec.v[cut - 1]);
		for (int how = CUT_DROP; how <= CUT_SECTORS; how++) {
			char *d = tu_path(work, "cut-%zu-%d", cut, how);
			m_materialize(&m, (enum cut)how, d);
			check_state(d, acked_before(&rec, cut), NULL);
			/* every 17th cut, once more with a sealed segment lost */
			if (how == CUT_KEEP && cut % 17 == 0)
				damaged += check_after_loss(d, acked_before(&rec, cut),
				                            (unsigned)(cut / 17));
			tu_rmtree(d);
			free(d);
			cuts++;
		}
		with_pending += m.np > 0;
	}
	fprintf(stderr, "# %zu recorded events, %zu power cuts replayed (%zu with unsynced "
	                "changes, %zu also with a sealed segment lost), %" PRIu64 " writes issued "
	                "(%u blobs)\n",
	        rec.n, cuts, with_pending, damaged, nissued, nblobs);
	assert_true(nblobs >= 3);
	assert_true(with_pending > 50); /* the cuts did land between writes and syncs */
	assert_true(damaged > 20);
	m_free(&m);
}

/* A cut while recovery runs (it truncates, creates, renames, syncs): the next
 * recovery still holds everything acknowledged. */
static void test_cut_during_recovery(void **state)
{
	struct model m;
	size_t nested = 0;

	(void)state;
	memset(&m, 0, sizeof(m));
	for (size_t cut = 0; cut <= rec.n; cut++) {
		struct recorder r2;
		struct kv_io_fault f2 = {.record = rec_cb, .arg = &r2};
		struct model m2;
		char *d, *d2;
		uint64_t acked;

		if (cut > 0)
			m_event(&m, &rec.v[cut - 1]);
		if (cut % 23 != 0 && cut != rec.n)
			continue;
		acked = acked_before(&rec, cut);
		d = tu_path(work, "rcut-%zu", cut);
		m_materialize(&m, CUT_PREFIX_TORN, d);
		/* the state as it was before recovery: all durable */
		memset(&m2, 0, sizeof(m2));
		{
			char names[256][64];
			int n = tu_list_ext(d, "", names, 256);
			for (int i = 0; i < n; i++) {
				char *p;
				FILE *fp;
				struct ev *e, *w;
				struct stat st;
				if (names[i][0] == '.')
					continue;
				p = tu_path(d, "%s", names[i]);
				fp = fopen(p, "rb");
				e = calloc(1, sizeof(*e));
				w = calloc(1, sizeof(*w));
				m2.own = realloc(m2.own, (m2.nown + 2) * sizeof(*m2.own));
				m2.own[m2.nown++] = e;
				m2.own[m2.nown++] = w;
				stat(p, &st);
				e->type = EV_CREATE;
				e->ino = (uint64_t)st.st_ino;
				memcpy(e->name, names[i], sizeof(e->name));
				e->name[sizeof(e->name) - 1] = '\0';
				w->type = EV_WRITE;
				w->ino = e->ino;
				w->len = (size_t)st.st_size;
				w->data = malloc(w->len + 1);
				if (fread(w->data, 1, w->len, fp) != w->len)
					abort();
				fclose(fp);
				free(p);
				m_event(&m2, e);
				m_event(&m2, w);
				struct ev sync = {.type = EV_SYNC_FILE, .ino = e->ino};
				m_event(&m2, &sync);
			}
			struct ev dsync = {.type = EV_SYNC_DIR};
			m_event(&m2, &dsync);
		}
		/* recovery, recorded */
		memset(&r2, 0, sizeof(r2));
		{
			int dfd = open(d, O_RDONLY | O_DIRECTORY);
			r2.dir_ino = ino_of(dfd);
			close(dfd);
		}
		r2.on = true;
		check_state(d, acked, &f2);
		r2.on = false;
		/* cut recovery at each of its own steps */
		for (size_t c2 = 0; c2 <= r2.n; c2++) {
			if (c2 > 0)
				m_event(&m2, &r2.v[c2 - 1]);
			d2 = tu_path(work, "rcut-%zu-%zu", cut, c2);
			m_materialize(&m2, CUT_PREFIX_TORN, d2);
			check_state(d2, acked, NULL);
			tu_rmtree(d2);
			free(d2);
			nested++;
		}
		free_recorder(&r2);
		m_free(&m2);
		tu_rmtree(d);
		free(d);
	}
	fprintf(stderr, "# %zu cuts inside recovery replayed\n", nested);
	assert_true(nested > 10);
	m_free(&m);
}

/* I/O errors while recovery runs: it may fail, but a later recovery without
 * the fault holds everything acknowledged. */
struct eio {
	int at, count;
};

static int eio_hit(struct eio *x)
{
	return ++x->count == x->at ? -EIO : 0;
}
static int eio_write(void *a, int fd, uint64_t off, size_t len)
{
	(void)fd, (void)off, (void)len;
	return eio_hit(a);
}
static int eio_sync(void *a, int fd)
{
	(void)fd;
	return eio_hit(a);
}
static int eio_read(void *a, int fd, uint64_t off, size_t len)
{
	(void)fd, (void)off, (void)len;
	return eio_hit(a);
}
static int eio_dirop(void *a, const struct kv_io_event *ev)
{
	(void)ev;
	return eio_hit(a);
}

static void test_eio_during_recovery(void **state)
{
	struct model m;
	size_t tried = 0, failed = 0;

	(void)state;
	memset(&m, 0, sizeof(m));
	for (size_t cut = 0; cut <= rec.n; cut++) {
		if (cut > 0)
			m_event(&m, &rec.v[cut - 1]);
		if (cut % 37 != 0 && cut != rec.n)
			continue;
		for (int at = 1; at < 400; at++) {
			struct eio x = {at, 0};
			struct kv_io_fault f = {.on_write = eio_write, .on_sync = eio_sync,
			                        .on_read = eio_read, .on_dirop = eio_dirop, .arg = &x};
			struct kv_options o;
			char *d = tu_path(work, "eio-%zu-%d", cut, at);
			kv_db *db;
			int rv;
			m_materialize(&m, CUT_DROP, d);
			opts(&o, &f);
			rv = kv_open(d, &o, &db);
			if (rv == 0) {
				int before = x.count;
				/* close fails only when the injected error hit it */
				if (kv_close(db) != 0)
					assert_true(before < at && x.count >= at);
			} else {
				failed++;
			}
			tried++;
			/* whatever the error did, a clean recovery keeps everything */
			check_state(d, acked_before(&rec, cut), NULL);
			tu_rmtree(d);
			free(d);
			if (x.count < at)
				break; /* recovery needed fewer I/Os than that: done */
		}
	}
	fprintf(stderr, "# %zu recoveries with an injected EIO, %zu of them failed cleanly\n",
	        tried, failed);
	assert_true(failed > 0);
	m_free(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_cut_point),
		cmocka_unit_test(test_cut_during_recovery),
		cmocka_unit_test(test_eio_during_recovery),
	};
	rng = tu_seed("powerloss", rng);
	return cmocka_run_group_tests(tests, setup, teardown);
}
