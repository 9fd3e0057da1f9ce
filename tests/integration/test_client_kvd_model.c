/* test_client_kvd_model.c — 64 threads against a per-key linearizable model, again after a restart.
 */
#include "client_kvd.h"

/* ---- 64 threads against a model ---------------------------------------------- */
/*
 * Every write carries a value that names it (thread, sequence number) and
 * whose bytes are derived from that name, so a read identifies the write it
 * returns and checks it byte for byte. Per key the model keeps the highest
 * version acknowledged to a writer and the highest version a finished read
 * returned. A read must return a version at least as high as both were when
 * it started (linearizable per key: no stale read, never backwards).
 * Afterwards, when every write's outcome is known, each read is matched to
 * its write (same key, that exact version, a write that succeeded), a
 * NOT_FOUND to a delete at least as new as the read's floor that had been
 * sent before the read ended, every version listed by Versions to the write
 * that made it with no acknowledged version of the key left out between
 * two listed ones, every conditional write to its predecessor, and versions
 * to being unique and, within a batch, contiguous.
 */
enum {
	M_THREADS = 64,
	M_SHARED = 48, /* threads 0..47 share one handle; the rest have their own */
	M_KEYS = 64,
	M_RUN_MS = 3000,
	M_WCAP = 1 << 14,
	M_OCAP = 1 << 15,
};

enum { W_PUT = 1, W_DEL = 2 };
enum { WS_PENDING, WS_ACKED, WS_FAILED, WS_NOOP };
enum { O_VAL = 1, O_NF, O_VPUT, O_VDEL };

struct wrec {
	uint8_t key, kind, state, batch; /* batch: op index + 1, 0 alone */
	uint32_t len;
	uint64_t version;
	uint64_t cond; /* if_version, KVC_ANY_VERSION when none */
	uint64_t inv_seq;
};

struct obs {
	uint8_t kind, key, t;
	uint32_t s;
	uint64_t version;
	uint64_t floor;
	uint64_t end_seq;
	uint64_t next_listed; /* O_VPUT/O_VDEL: the newer listed version, 0 for the head */
};

struct mkey {
	pthread_mutex_t mu;
	uint64_t floor_ack;
	uint64_t floor_read;
};

struct model;

struct mthread {
	struct model *m;
	int id;
	kvc *c;
	uint64_t rng;
	struct wrec *w;
	uint32_t nw;
	struct obs *o;
	uint32_t no;
	uint64_t nops[5];
	int errors;
	char err[300];
};

struct model {
	struct kvc_call call;
	struct mkey keys[M_KEYS];
	atomic_uint_fast64_t seq;
	atomic_bool stop;
	atomic_int violations;
	struct mthread th[M_THREADS];
};

static void mkey_bytes(int i, uint8_t out[4])
{
	out[0] = 'm';
	out[1] = 0x00;
	out[2] = (uint8_t)i;
	out[3] = 0xff;
}

static uint64_t mrand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Value of write (t, s): a header naming it, then bytes derived from it. */
static size_t mval_make(uint8_t *buf, int t, uint32_t s, uint32_t len)
{
	buf[0] = 0xa5;
	buf[1] = (uint8_t)t;
	memcpy(buf + 2, &s, 4);
	buf[6] = (uint8_t)len;
	buf[7] = (uint8_t)(len >> 8);
	fill_random(buf + 8, len - 8, ((uint64_t)t << 32 | s) * 0x9e3779b97f4a7c15ull + 1);
	return len;
}

static bool mval_parse(const void *p, size_t n, int *ret_t, uint32_t *ret_s)
{
	const uint8_t *b = p;
	uint8_t want[600];
	uint32_t s, len;

	if (n < 8 || n > sizeof(want) || b[0] != 0xa5 || b[1] >= M_THREADS)
		return false;
	memcpy(&s, b + 2, 4);
	len = (uint32_t)b[6] | (uint32_t)b[7] << 8;
	if (len != n)
		return false;
	mval_make(want, b[1], s, len);
	if (memcmp(want, b, n) != 0)
		return false;
	*ret_t = b[1];
	*ret_s = s;
	return true;
}

/* A call that failed for no reason the model allows; the first is kept. */
__attribute__((format(printf, 2, 3))) static void mt_error(struct mthread *t, const char *fmt, ...)
{
	va_list ap;

	if (t->errors++ == 0) {
		va_start(ap, fmt);
		vsnprintf(t->err, sizeof(t->err), fmt, ap);
		va_end(ap);
	}
}

/* A breach of the model: counted, the first ten said on stderr. */
__attribute__((format(printf, 2, 3))) static void mt_violation(struct mthread *t, const char *fmt,
                                                               ...)
{
	va_list ap;

	if (atomic_fetch_add(&t->m->violations, 1) < 10) {
		va_start(ap, fmt);
		fprintf(stderr, "model violation (thread %d): ", t->id);
		vfprintf(stderr, fmt, ap);
		fputc('\n', stderr);
		va_end(ap);
	}
}

static uint64_t floor_of(struct model *m, int key)
{
	struct mkey *k = &m->keys[key];
	uint64_t f;

	pthread_mutex_lock(&k->mu);
	f = k->floor_ack > k->floor_read ? k->floor_ack : k->floor_read;
	pthread_mutex_unlock(&k->mu);
	return f;
}

static void raise_floor(struct model *m, int key, uint64_t v, bool ack)
{
	struct mkey *k = &m->keys[key];
	uint64_t *f = ack ? &k->floor_ack : &k->floor_read;

	pthread_mutex_lock(&k->mu);
	if (v > *f)
		*f = v;
	pthread_mutex_unlock(&k->mu);
}

static struct wrec *new_write(struct mthread *t, int key, int kind, uint64_t cond, uint64_t inv,
                              uint8_t batch)
{
	struct wrec *w = &t->w[t->nw++];

	w->key = (uint8_t)key;
	w->kind = (uint8_t)kind;
	w->state = WS_PENDING;
	w->batch = batch;
	w->cond = cond;
	w->inv_seq = inv;
	w->len = kind == W_PUT ? 8 + (uint32_t)(mrand(&t->rng) % 300) : 0;
	return w;
}

static void acked(struct mthread *t, struct wrec *w, uint64_t version)
{
	w->version = version;
	w->state = WS_ACKED;
	raise_floor(t->m, w->key, version, true);
}

static void m_put(struct mthread *t)
{
	struct model *m = t->m;
	int key = (int)(mrand(&t->rng) % M_KEYS);
	bool cond = mrand(&t->rng) % 10 == 0;
	struct kvc_write wo = KVC_WRITE_INIT;
	uint8_t k[4], val[600];
	struct kvc_status st;
	struct kvc_call call = m->call;
	struct wrec *w;
	uint64_t v = 0;
	int rv;

	call.status = &st;
	if (cond)
		wo.if_version = floor_of(m, key); /* often stale under contention */
	w = new_write(t, key, W_PUT, wo.if_version, atomic_fetch_add(&m->seq, 1), 0);
	mkey_bytes(key, k);
	mval_make(val, t->id, t->nw - 1, w->len);
	rv = kvc_put(t->c, &call, k, 4, val, w->len, &wo, &v);
	if (rv == 0)
		acked(t, w, v);
	else if (rv == -KVC_FAILED_PRECONDITION && cond)
		w->state = WS_FAILED;
	else
		mt_error(t, "put: %s '%s'", kvc_code_name(rv), st.message);
}

static void m_delete(struct mthread *t)
{
	struct model *m = t->m;
	int key = (int)(mrand(&t->rng) % M_KEYS);
	bool cond = mrand(&t->rng) % 5 == 0;
	uint64_t ifv = cond ? floor_of(m, key) : KVC_ANY_VERSION;
	struct kvc_status st;
	struct kvc_call call = m->call;
	struct wrec *w;
	uint8_t k[4];
	uint64_t v = 0;
	int rv;

	call.status = &st;
	w = new_write(t, key, W_DEL, ifv, atomic_fetch_add(&m->seq, 1), 0);
	mkey_bytes(key, k);
	rv = kvc_delete(t->c, &call, k, 4, ifv, &v);
	if (rv == 0)
		acked(t, w, v);
	else if (rv == -KVC_NOT_FOUND)
		w->state = WS_NOOP;
	else if (rv == -KVC_FAILED_PRECONDITION && cond)
		w->state = WS_FAILED;
	else
		mt_error(t, "delete: %s '%s'", kvc_code_name(rv), st.message);
}

static void m_batch(struct mthread *t)
{
	struct model *m = t->m;
	int n = 2 + (int)(mrand(&t->rng) % 3), condop = -1;
	struct kvc_op ops[4];
	uint8_t keys[4][4], vals[4][600];
	struct wrec *w[4];
	struct kvc_status st;
	struct kvc_call call = m->call;
	uint64_t inv;
	size_t failed = 99;
	int rv;

	call.status = &st;
	if (mrand(&t->rng) % 4 == 0)
		condop = (int)(mrand(&t->rng) % (uint64_t)n);
	inv = atomic_fetch_add(&m->seq, 1);
	for (int i = 0; i < n; i++) {
		int key = (int)(mrand(&t->rng) % M_KEYS);
		bool del = mrand(&t->rng) % 4 == 0;
		uint64_t cond = i == condop ? floor_of(m, key) : KVC_ANY_VERSION;
		w[i] = new_write(t, key, del ? W_DEL : W_PUT, cond, inv, (uint8_t)(i + 1));
		mkey_bytes(key, keys[i]);
		ops[i] = (struct kvc_op){.type = del ? KVC_OP_DELETE : KVC_OP_PUT,
		                         .key = keys[i],
		                         .key_len = 4,
		                         .if_version = cond};
		if (!del) {
			mval_make(vals[i], t->id, t->nw - 1, w[i]->len);
			ops[i].value = vals[i];
			ops[i].value_len = w[i]->len;
		}
	}
	rv = kvc_batch(t->c, &call, ops, (size_t)n, &failed);
	if (rv == 0) {
		uint64_t prev = 0;
		for (int i = 0; i < n; i++) {
			if (ops[i].version == 0) {
				if (ops[i].type != KVC_OP_DELETE)
					mt_violation(t, "batch put got version 0");
				w[i]->state = WS_NOOP;
				continue;
			}
			if (prev != 0 && ops[i].version != prev + 1)
				mt_violation(t, "batch versions not contiguous: %llu after %llu",
				             (unsigned long long)ops[i].version,
				             (unsigned long long)prev);
			prev = ops[i].version;
			acked(t, w[i], ops[i].version);
		}
	} else if (rv == -KVC_FAILED_PRECONDITION && condop >= 0) {
		if (failed != (size_t)condop)
			mt_violation(t, "batch failed_op %zu, the condition was on op %d", failed,
			             condop);
		for (int i = 0; i < n; i++)
			w[i]->state = WS_FAILED;
	} else {
		mt_error(t, "batch: %s '%s'", kvc_code_name(rv), st.message);
	}
}

static void m_get(struct mthread *t)
{
	struct model *m = t->m;
	int key = (int)(mrand(&t->rng) % M_KEYS), wt;
	uint64_t floor = floor_of(m, key);
	struct kvc_status st;
	struct kvc_call call = m->call;
	struct kvc_value v;
	uint8_t k[4];
	uint32_t ws;
	int rv;

	call.status = &st;
	mkey_bytes(key, k);
	rv = kvc_get(t->c, &call, k, 4, 0, 0, &v);
	if (rv == -KVC_NOT_FOUND) {
		t->o[t->no++] = (struct obs){.kind = O_NF,
		                             .key = (uint8_t)key,
		                             .floor = floor,
		                             .end_seq = atomic_fetch_add(&m->seq, 1)};
		return;
	}
	if (rv != 0) {
		mt_error(t, "get: %s '%s'", kvc_code_name(rv), st.message);
		return;
	}
	if (!mval_parse(v.data, v.len, &wt, &ws))
		mt_violation(t, "get key %d: a value no writer wrote (%zu bytes)", key, v.len);
	else if (v.version < floor)
		mt_violation(t, "get key %d: version %llu, older than %llu known before it started",
		             key, (unsigned long long)v.version, (unsigned long long)floor);
	else
		t->o[t->no++] = (struct obs){.kind = O_VAL,
		                             .key = (uint8_t)key,
		                             .t = (uint8_t)wt,
		                             .s = ws,
		                             .version = v.version,
		                             .floor = floor};
	raise_floor(m, key, v.version, false);
	kvc_value_free(&v);
}

static void m_versions(struct mthread *t)
{
	struct model *m = t->m;
	int key = (int)(mrand(&t->rng) % M_KEYS);
	bool values = mrand(&t->rng) % 2 == 0;
	uint64_t floor = floor_of(m, key);
	struct kvc_status st;
	struct kvc_call call = m->call;
	struct kvc_version *vl = NULL;
	size_t n = 0;
	uint8_t k[4];
	int rv;

	call.status = &st;
	mkey_bytes(key, k);
	rv = kvc_versions(t->c, &call, k, 4, 4, 0, values, &vl, &n, NULL);
	if (rv != 0) {
		mt_error(t, "versions: %s '%s'", kvc_code_name(rv), st.message);
		return;
	}
	if (floor > 0 && (n == 0 || vl[0].version < floor))
		mt_violation(t,
		             "versions key %d: head %llu, older than %llu known before it started",
		             key, n ? (unsigned long long)vl[0].version : 0ull,
		             (unsigned long long)floor);
	for (size_t i = 0; i < n; i++) {
		struct obs o = {.kind = vl[i].deleted ? O_VDEL : O_VPUT,
		                .key = (uint8_t)key,
		                .version = vl[i].version,
		                .s = UINT32_MAX,
		                .next_listed = i ? vl[i - 1].version : 0};
		int wt;
		if (i > 0 && vl[i].version >= vl[i - 1].version)
			mt_violation(t, "versions key %d: not newest first", key);
		if (vl[i].deleted && vl[i].data != NULL)
			mt_violation(t, "versions key %d: a delete with a value", key);
		if (!vl[i].deleted && values) {
			if (!mval_parse(vl[i].data, vl[i].len, &wt, &o.s))
				mt_violation(t, "versions key %d: a value no writer wrote", key);
			o.t = (uint8_t)wt;
		}
		if (!vl[i].deleted && !values && vl[i].data != NULL)
			mt_violation(t, "versions key %d: a value not asked for", key);
		t->o[t->no++] = o;
	}
	if (n > 0)
		raise_floor(m, key, vl[0].version, false);
	kvc_versions_free(vl, n);
}

static void *m_thread(void *arg)
{
	struct mthread *t = arg;

	while (!atomic_load(&t->m->stop) && t->nw + 8 < M_WCAP && t->no + 8 < M_OCAP &&
	       t->errors < 5) {
		uint64_t r = mrand(&t->rng) % 100;
		if (r < 30) {
			m_put(t);
			t->nops[0]++;
		} else if (r < 60) {
			m_get(t);
			t->nops[1]++;
		} else if (r < 70) {
			m_delete(t);
			t->nops[2]++;
		} else if (r < 85) {
			m_batch(t);
			t->nops[3]++;
		} else {
			m_versions(t);
			t->nops[4]++;
		}
	}
	return NULL;
}

/* The write that holds version v (a table built once every outcome is known). */
struct vslot {
	uint8_t t;
	uint32_t s; /* UINT32_MAX: no write has this version */
};

struct mcheck {
	struct vslot *byv;
	uint64_t maxv;
	uint64_t *head;         /* per key: the highest acknowledged version, 0 none */
	uint64_t *dels[M_KEYS]; /* per key: versions of acknowledged deletes, newest first */
	size_t ndels[M_KEYS];
	int violations;
};

static const struct wrec *rec_of(struct model *m, const struct mcheck *mc, uint64_t v)
{
	if (v == 0 || v > mc->maxv || mc->byv[v].s == UINT32_MAX)
		return NULL;
	return &m->th[mc->byv[v].t].w[mc->byv[v].s];
}

#define MC_FAIL(mc, ...)                                                                           \
	do {                                                                                       \
		if ((mc)->violations++ < 10) {                                                     \
			fprintf(stderr, "model check: " __VA_ARGS__);                              \
			fputc('\n', stderr);                                                       \
		}                                                                                  \
	} while (0)

static void model_index(struct model *m, struct mcheck *mc)
{
	memset(mc, 0, sizeof(*mc));
	for (int t = 0; t < M_THREADS; t++)
		for (uint32_t s = 0; s < m->th[t].nw; s++)
			if (m->th[t].w[s].state == WS_ACKED && m->th[t].w[s].version > mc->maxv)
				mc->maxv = m->th[t].w[s].version;
	mc->byv = malloc((mc->maxv + 1) * sizeof(*mc->byv));
	mc->head = calloc(M_KEYS, sizeof(*mc->head));
	for (uint64_t v = 0; v <= mc->maxv; v++)
		mc->byv[v].s = UINT32_MAX;
	for (int t = 0; t < M_THREADS; t++) {
		for (uint32_t s = 0; s < m->th[t].nw; s++) {
			const struct wrec *w = &m->th[t].w[s];
			if (w->state == WS_PENDING)
				MC_FAIL(mc, "thread %d write %u has no outcome", t, s);
			if (w->state != WS_ACKED)
				continue;
			if (mc->byv[w->version].s != UINT32_MAX)
				MC_FAIL(mc, "version %llu given to two writes",
				        (unsigned long long)w->version);
			mc->byv[w->version] = (struct vslot){(uint8_t)t, s};
			if (w->version > mc->head[w->key])
				mc->head[w->key] = w->version;
		}
	}
	for (int key = 0; key < M_KEYS; key++)
		mc->dels[key] = malloc((mc->maxv + 1) * sizeof(uint64_t));
	for (uint64_t v = mc->maxv; v > 0; v--) {
		const struct wrec *w = rec_of(m, mc, v);
		if (w != NULL && w->kind == W_DEL)
			mc->dels[w->key][mc->ndels[w->key]++] = v;
	}
}

static void model_index_free(struct mcheck *mc)
{
	for (int key = 0; key < M_KEYS; key++)
		free(mc->dels[key]);
	free(mc->byv);
	free(mc->head);
}

/* The acknowledged version of key just below v (0: none). */
static uint64_t prev_of_key(struct model *m, const struct mcheck *mc, int key, uint64_t v)
{
	while (--v > 0) {
		const struct wrec *w = rec_of(m, mc, v);
		if (w != NULL && w->key == key)
			return v;
	}
	return 0;
}

static void model_check_history(struct model *m, struct mcheck *mc)
{
	/* deletes of each key, for the NOT_FOUND reads */
	for (int t = 0; t < M_THREADS; t++) {
		struct mthread *th = &m->th[t];
		for (uint32_t i = 0; i < th->no; i++) {
			const struct obs *o = &th->o[i];
			const struct wrec *w = rec_of(m, mc, o->version);
			switch (o->kind) {
			case O_VAL:
			case O_VPUT:
				if (w == NULL || w->key != o->key || w->kind != W_PUT ||
				    (o->s != UINT32_MAX && (&m->th[o->t].w[o->s] != w)))
					MC_FAIL(mc,
					        "read of key %u at version %llu does not match the "
					        "write that got that version",
					        o->key, (unsigned long long)o->version);
				break;
			case O_VDEL:
				if (w == NULL || w->key != o->key || w->kind != W_DEL)
					MC_FAIL(mc,
					        "Versions lists a delete of key %u at %llu that "
					        "did "
					        "not happen",
					        o->key, (unsigned long long)o->version);
				break;
			case O_NF: {
				bool ok = o->floor == 0;
				for (size_t j = 0; j < mc->ndels[o->key] && !ok; j++) {
					uint64_t v = mc->dels[o->key][j];
					if (v < o->floor)
						break;
					ok = rec_of(m, mc, v)->inv_seq < o->end_seq;
				}
				if (!ok)
					MC_FAIL(mc,
					        "NOT_FOUND for key %u, but version %llu existed "
					        "before the read and no later delete was sent",
					        o->key, (unsigned long long)o->floor);
				break;
			}
			}
			/* Versions: nothing acknowledged left out between two listed */
			if ((o->kind == O_VPUT || o->kind == O_VDEL) && o->next_listed != 0 &&
			    prev_of_key(m, mc, o->key, o->next_listed) != o->version)
				MC_FAIL(mc,
				        "Versions of key %u skipped a version between %llu and "
				        "%llu",
				        o->key, (unsigned long long)o->version,
				        (unsigned long long)o->next_listed);
		}
	}
	/* conditional writes that succeeded followed exactly what they named */
	for (int t = 0; t < M_THREADS; t++) {
		for (uint32_t s = 0; s < m->th[t].nw; s++) {
			const struct wrec *w = &m->th[t].w[s];
			uint64_t p;
			const struct wrec *pw;
			if (w->state != WS_ACKED || w->cond == KVC_ANY_VERSION)
				continue;
			p = prev_of_key(m, mc, w->key, w->version);
			pw = rec_of(m, mc, p);
			if (w->cond == 0 ? (pw != NULL && pw->kind != W_DEL)
			                 : (p != w->cond || pw == NULL || pw->kind != W_PUT))
				MC_FAIL(mc,
				        "write %llu on key %u had if_version %llu but followed "
				        "%llu",
				        (unsigned long long)w->version, w->key,
				        (unsigned long long)w->cond, (unsigned long long)p);
		}
	}
}

/* Each key holds what its newest acknowledged write left. */
static void model_check_final(struct model *m, struct mcheck *mc, kvc *c)
{
	struct kvc_status st;
	struct kvc_call call = m->call;

	call.status = &st;
	for (int key = 0; key < M_KEYS; key++) {
		const struct wrec *w = rec_of(m, mc, mc->head[key]);
		struct kvc_value v;
		uint8_t k[4];
		int rv, wt;
		uint32_t ws;

		mkey_bytes(key, k);
		rv = kvc_get(c, &call, k, 4, 0, 0, &v);
		if (w == NULL || w->kind == W_DEL) {
			if (rv != -KVC_NOT_FOUND)
				MC_FAIL(mc, "key %d: %s, want NOT_FOUND", key, kvc_code_name(rv));
			if (rv == 0)
				kvc_value_free(&v);
			continue;
		}
		if (rv != 0) {
			MC_FAIL(mc, "key %d: %s '%s'", key, kvc_code_name(rv), st.message);
			continue;
		}
		if (v.version != mc->head[key] || !mval_parse(v.data, v.len, &wt, &ws) ||
		    &m->th[wt].w[ws] != w)
			MC_FAIL(mc, "key %d: version %llu, want %llu", key,
			        (unsigned long long)v.version, (unsigned long long)mc->head[key]);
		kvc_value_free(&v);
	}
}

void test_model(void **state)
{
	struct kvd_proc k, k2;
	struct kvd_opts again;
	struct model *m = calloc(1, sizeof(*m));
	struct kvc_options o;
	struct kvc_status st;
	struct kvc_tenant_info ti;
	struct mcheck mc;
	pthread_t th[M_THREADS];
	kvc *shared;
	uint64_t t0, elapsed, total[5] = {0}, v = 0, seed;

	(void)state;
	assert_int_equal(kvd_start(&k, NULL), 0);
	kvc_options_init(&o);
	o.endpoint = client_url(&k);
	o.tenant = "model";
	o.contexts = M_SHARED;
	o.timeout_ms = 20000;
	assert_int_equal(kvc_open(&o, &shared), 0);
	make_tenant(shared, "model", KVC_SYNC_ALWAYS, 4, 0);
	m->call.tenant = "model";
	for (int i = 0; i < M_KEYS; i++)
		pthread_mutex_init(&m->keys[i].mu, NULL);
	seed = tu_seed("test_model", 0x2545f4914f6cdd1dull);
	for (int i = 0; i < M_THREADS; i++) {
		struct mthread *t = &m->th[i];
		t->m = m;
		t->id = i;
		t->rng = seed * (uint64_t)(i + 1);
		t->w = calloc(M_WCAP, sizeof(*t->w));
		t->o = calloc(M_OCAP, sizeof(*t->o));
		if (i < M_SHARED) {
			t->c = shared;
		} else {
			o.contexts = 2;
			assert_int_equal(kvc_open(&o, &t->c), 0);
		}
	}
	t0 = h_now_ms();
	for (int i = 0; i < M_THREADS; i++)
		assert_int_equal(pthread_create(&th[i], NULL, m_thread, &m->th[i]), 0);
	while (h_now_ms() - t0 < M_RUN_MS)
		poll(NULL, 0, 50);
	atomic_store(&m->stop, true);
	for (int i = 0; i < M_THREADS; i++)
		pthread_join(th[i], NULL);
	elapsed = h_now_ms() - t0;
	for (int i = 0; i < M_THREADS; i++) {
		struct mthread *t = &m->th[i];
		for (int j = 0; j < 5; j++)
			total[j] += t->nops[j];
		if (t->errors)
			fprintf(stderr, "thread %d: %d errors, first: %s\n", i, t->errors, t->err);
		assert_int_equal(t->errors, 0);
	}
	print_message("model: %llu puts, %llu gets, %llu deletes, %llu batches, %llu versions "
	              "in %llu ms (%.0f ops/s)\n",
	              (unsigned long long)total[0], (unsigned long long)total[1],
	              (unsigned long long)total[2], (unsigned long long)total[3],
	              (unsigned long long)total[4], (unsigned long long)elapsed,
	              (double)(total[0] + total[1] + total[2] + total[3] + total[4]) * 1000.0 /
	                      (double)elapsed);
	assert_int_equal(atomic_load(&m->violations), 0);
	assert_true(total[0] > 100 && total[1] > 100 && total[3] > 10);

	model_index(m, &mc);
	model_check_history(m, &mc);
	model_check_final(m, &mc, shared);
	EXPECT_OK(st, kvc_stats(shared, &(struct kvc_call){.status = &st}, &ti));
	assert_int_equal(ti.last_version, mc.maxv);
	assert_int_equal(mc.violations, 0);

	/* SIGTERM, start again on the same directory: the same state */
	for (int i = M_SHARED; i < M_THREADS; i++)
		kvc_close(m->th[i].c);
	kvc_close(shared);
	assert_int_equal(kvd_stop(&k), 0);
	again = (struct kvd_opts){.reuse_dir = k.dir};
	assert_int_equal(kvd_start(&k2, &again), 0);
	o.contexts = 4;
	assert_int_equal(kvc_open(&o, &shared), 0);
	model_check_final(m, &mc, shared);
	assert_int_equal(mc.violations, 0);
	EXPECT_OK(st, kvc_stats(shared, &(struct kvc_call){.status = &st}, &ti));
	assert_int_equal(ti.last_version, mc.maxv);
	/* versions go on from there, never reused */
	EXPECT_OK(st,
	          kvc_put(shared, &(struct kvc_call){.status = &st}, "after", 5, "x", 1, NULL, &v));
	assert_true(v > mc.maxv);
	kvc_close(shared);
	assert_int_equal(kvd_stop(&k2), 0);
	kvd_cleanup(&k2, true);
	kvd_cleanup(&k, false);
	for (int i = 0; i < M_THREADS; i++) {
		free(m->th[i].w);
		free(m->th[i].o);
	}
	model_index_free(&mc);
	free(m);
}
