/* test_corruption_device.c — bytes flipped at random in a device image a real kvd wrote (sealed
 * segments' records and headers, hint data in AUX extents, extent headers): kvd --check names the
 * damage, a read returns the exact value or DATA_LOSS and never other bytes, a record flip costs
 * that record's key alone; a damaged superblock copy or catalog slot falls back to the other, both
 * refuse clearly. */
/*
 * A kvd formats nothing: `kvd --format IMG --extent-size 1M` does, then a
 * kvd serving `--device IMG` writes a tenant of N keys (values of random
 * sizes, derived from the key) into small segments and stops (sealing them
 * and writing their hints). `kvd --check IMG` must find nothing. Where each
 * thing lies is taken from the format's own structures (the catalog as the
 * backend loads it: each segment's extent and length, each hint's extents
 * and offset; docs/FORMAT.md "Device layout"), and the records of each
 * sealed segment are walked with the extent's seed. Then, round after
 * round, on a fresh copy of the image (cp --sparse=always), one byte is
 * flipped in a segment's records or header, in a hint stored in an AUX
 * extent, or in an extent header, and
 *   - `kvd --check` must name it: the segment (exit 1), the hint (a note,
 *     exit 0: a cache the next open rebuilds) or the extent (exit 1);
 *   - the tenant opened with the engine gives, for every key, its exact
 *     value or KV_ECORRUPT; a flip in a put record costs exactly that
 *     record's key, anywhere else none;
 *   - every ROUNDS_WITH_KVD-th round a kvd serving the copy answers the
 *     same over libkvclient (DATA_LOSS) and logs the damage.
 * Then the superblock copies and catalog slots: one damaged, the device
 * opens on the other and serves every key exactly (the older catalog slot:
 * exact value, DATA_LOSS or not found, never other bytes); both damaged,
 * check and open refuse it. Rounds: 60, or $KVTEST_CORRUPTION_ROUNDS; the
 * seed is fixed, or $KVTEST_SEED, and printed.
 */
#include "harness.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/stat.h>

#include <cmocka.h> /* after the headers it needs */

#include "dev_internal.h"
#include "kvclient.h"
#include "kvengine.h"

#include "flips.h"
#include "record.h"
#include "segment.h"

#define ROUNDS_DEFAULT  60
#define ROUNDS_WITH_KVD 20
#define IMG_SIZE        (64ll << 20)

static const char *kvd_bin(void)
{
	const char *bin = getenv("KVD_BIN");
	return bin ? bin : "./build/daemon/kvd";
}

/* Runs `kvd ARG img`; its exit status, its output in out. */
static int run_kvd(const char *arg, const char *img, char *out, size_t cap)
{
	char cmd[8192];
	FILE *p;
	size_t n;
	int status;

	snprintf(cmd, sizeof(cmd), "'%s' %s '%s' 2>&1", kvd_bin(), arg, img);
	if ((p = popen(cmd, "r")) == NULL)
		return -1;
	n = fread(out, 1, cap - 1, p);
	out[n] = '\0';
	status = pclose(p);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void copy_image(const char *from, const char *to)
{
	char *cmd;
	int rv;

	assert_true(asprintf(&cmd, "cp --sparse=always '%s' '%s'", from, to) > 0);
	rv = system(cmd);
	free(cmd);
	assert_true(WIFEXITED(rv) && WEXITSTATUS(rv) == 0);
}

/* ---- where things lie ---------------------------------------------------- */

struct rec_at {
	uint64_t off, size; /* in the segment */
	int key;            /* the key index of a put; -1: another record */
};

struct seg_at {
	uint32_t id, extent;
	uint64_t data, len; /* device offset of the segment's byte 0, its length */
	struct rec_at *recs;
	size_t nrecs;
};

struct hint_at {
	uint32_t seg;
	uint64_t at, len; /* device offset and bytes in its first extent */
};

struct layout {
	struct seg_at segs[64];
	int nsegs;
	struct hint_at hints[64];
	int nhints;
	uint64_t ext_hdr[128]; /* device offsets of the tenant's extent headers */
	uint32_t ext_id[128];
	int nexts;
	struct dev_super sb;
	int newest_slot;
	uint64_t slot_len[2]; /* header and body of each catalog slot */
};

static int key_index(const uint8_t *k, uint32_t len)
{
	char buf[32];

	if (len >= sizeof(buf) || len < 4 || memcmp(k, "key/", 4) != 0)
		return -1;
	memcpy(buf, k, len);
	buf[len] = '\0';
	return atoi(buf + 4);
}

/* Every record of a sealed segment, walked with its extent's seed: the
 * whole length must be records. */
static void walk_records(int fd, struct seg_at *s, uint32_t seed)
{
	uint8_t *b = malloc(s->len);
	uint64_t off = SEG_HEADER_SIZE;
	size_t cap = 0;

	assert_non_null(b);
	assert_int_equal(pread(fd, b, s->len, (off_t)s->data), (ssize_t)s->len);
	while (off < s->len) {
		struct rec_header h;
		uint64_t size;
		rec_decode_header(b + off, &h);
		size = rec_size(h.key_len, h.value_len);
		assert_int_equal(
		        rec_check_header(&h, KV_KEY_SIZE_MAX, KV_VALUE_SIZE_MAX, s->len - off), 0);
		assert_int_equal(rec_verify(b + off, size, seed), 0);
		if (s->nrecs == cap) {
			cap = cap ? cap * 2 : 64;
			s->recs = realloc(s->recs, cap * sizeof(*s->recs));
			assert_non_null(s->recs);
		}
		s->recs[s->nrecs++] = (struct rec_at){
		        off, size,
		        h.type == 1 ? key_index(b + off + REC_HEADER_SIZE, h.key_len) : -1};
		off += size;
	}
	assert_int_equal(off, s->len);
	free(b);
}

static void find_layout(const char *img, struct layout *l)
{
	struct kv_storage *st;
	struct dev_storage *d;
	struct dev_tenant *t = NULL;
	int fd = open(img, O_RDONLY | O_CLOEXEC);

	memset(l, 0, sizeof(*l));
	assert_true(fd >= 0);
	assert_int_equal(kv_storage_dev_open(img, 1u << 20, true, NULL, &st), 0);
	d = (struct dev_storage *)st;
	l->sb = d->sb;
	l->newest_slot = d->cat_slot;
	for (size_t i = 0; i < d->ntenants; i++)
		if (strcmp(d->tenants[i]->name, TENANT) == 0)
			t = d->tenants[i];
	assert_non_null(t);
	for (uint32_t i = 0; i < d->sb.extent_count && l->nexts < 128; i++)
		if (d->ext[i].tenant == t->id) {
			l->ext_hdr[l->nexts] = dev_extent_off(&d->sb, i);
			l->ext_id[l->nexts++] = i;
		}
	/* the sealed segments that have a hint, as the file form flips */
	for (size_t i = 0; i < t->nblobs && l->nhints < 64; i++) {
		const struct dev_blob *b = &t->blobs[i];
		struct dev_segment *s = NULL;
		if (b->kind != KV_STOR_HINT)
			continue;
		for (size_t j = 0; j < t->nsegs; j++)
			if (t->segs[j]->id == b->id && t->segs[j]->sealed && t->segs[j]->len_known)
				s = t->segs[j];
		if (s == NULL)
			continue;
		l->segs[l->nsegs] = (struct seg_at){.id = s->id,
		                                    .extent = s->extent,
		                                    .data = data_off(d, s->extent),
		                                    .len = s->len};
		walk_records(fd, &l->segs[l->nsegs],
		             dev_seg_seed(d->sb.uuid, s->extent, d->ext[s->extent].generation));
		l->nsegs++;
		/* a hint of the catalog (inline) is the catalog's bytes: those
		 * are flipped as catalog slots below */
		if (b->nexts > 0) {
			uint64_t first = d->cap - b->off;
			l->hints[l->nhints++] =
			        (struct hint_at){b->id, data_off(d, b->exts[0]) + b->off,
			                         b->len < first ? b->len : first};
		}
	}
	for (int i = 0; i < 2; i++) {
		struct dev_cat_header h;
		uint8_t *buf = NULL;
		assert_int_equal(dev_cat_slot_read(fd, NULL, &d->sb, 1, i, &buf, &h), 0);
		l->slot_len[i] = DEV_CAT_HEADER + h.body_len;
		free(buf);
	}
	kv_storage_close(st);
	close(fd);
	assert_true(l->nsegs >= 3);
	assert_true(l->nhints >= 2);
}

static void free_layout(struct layout *l)
{
	for (int i = 0; i < l->nsegs; i++)
		free(l->segs[i].recs);
}

/* ---- reading it back ----------------------------------------------------- */

/* Every key through the engine on the device img: its exact value, or
 * KV_ECORRUPT (or, when notfound_ok, KV_ENOTFOUND). lost_key gets the one
 * key read KV_ECORRUPT (the last, -1: none). Returns the count of keys not
 * served; fails on other bytes or another error. */
static int read_all_engine(const char *img, bool notfound_ok, int *lost_key)
{
	struct kv_store_options so;
	kv_store *s;
	kv_tenant *t;
	kv_db *db;
	uint8_t want[VALUE_MAX];
	int lost = 0;

	kv_store_options_init(&so);
	so.device = img;
	so.device_cache_bytes = 1u << 20;
	assert_int_equal(kv_store_open(NULL, &so, &s), 0);
	assert_int_equal(kv_store_get(s, TENANT, &t), 0);
	db = kv_tenant_db(t);
	*lost_key = -1;
	for (int i = 0; i < N_KEYS; i++) {
		char key[32];
		struct kv_value v;
		size_t len = value_of(i, want);
		int rv;

		key_of(i, key, sizeof(key));
		rv = kv_get(db, key, strlen(key), NULL, &v);
		if (rv == KV_ECORRUPT || (notfound_ok && rv == KV_ENOTFOUND)) {
			lost++;
			*lost_key = i;
			continue;
		}
		if (rv != 0)
			fail_msg("%s: %s", key, kv_strerror(rv));
		if (v.len != len || (len > 0 && memcmp(v.data, want, len) != 0))
			fail_msg("%s: %zu bytes that are not its value (%zu bytes)", key, v.len,
			         len);
		kv_value_release(&v);
	}
	kv_store_put(s, t);
	assert_int_equal(kv_store_close(s), 0);
	return lost;
}

static void start_kvd(struct kvd_proc *k, const char *dir, const char *img, const char *conf)
{
	struct kvd_opts o = {.config_text = conf, .reuse_dir = dir, .extra = {"--device", img}};

	if (dir != NULL) {
		char *log = tu_path(dir, "kvd.log");
		unlink(log);
		free(log);
	}
	assert_int_equal(kvd_start(k, &o), 0);
}

static kvc *client(struct kvd_proc *k)
{
	struct kvc_options co;
	kvc *c;

	kvc_options_init(&co);
	co.endpoint = k->surl;
	co.tenant = TENANT;
	assert_int_equal(kvc_open(&co, &c), 0);
	return c;
}

/* A kvd serving img: DATA_LOSS for as many keys as the engine lost; the
 * log says so when it read a damaged record, and has log_want (what
 * activation found) when given. */
static void read_all_kvd(const char *dir, const char *img, int lost_engine, const char *log_want)
{
	struct kvd_proc k;
	kvc *c;
	int lost;

	start_kvd(&k, dir, img, NULL);
	c = client(&k);
	lost = read_all_wire(c);
	kvc_close(c);
	assert_int_equal(lost, lost_engine);
	assert_int_equal(kvd_stop(&k), 0);
	assert_int_equal(h_log_has(&k, "read a damaged record (DATA_LOSS)"), lost > 0);
	if (log_want != NULL && !h_log_has(&k, log_want))
		fail_msg("kvd's log does not say '%s'", log_want);
	kvd_cleanup(&k, true);
}

/* The tenant, written by a real kvd serving a fresh image, which then
 * stops; kvd --check finds nothing. */
static void write_tenant(const char *dir, const char *img)
{
	struct kvd_proc k;
	struct kvc_tenant_opts to = {0};
	uint8_t val[VALUE_MAX];
	char out[16384];
	kvc *c;
	int fd = open(img, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, IMG_SIZE), 0);
	close(fd);
	if (run_kvd("--extent-size 1M --format", img, out, sizeof(out)) != 0)
		fail_msg("kvd --format: %s", out);
	/* segments of 256 KiB: their hints pass the catalog's inline limit */
	start_kvd(&k, dir, img, "segment_size = 256K\n[tenant-defaults]\nsync = none\n");
	c = client(&k);
	to.sync = KVC_SYNC_NONE;
	to.history = 1;
	assert_int_equal(kvc_tenant_create(c, NULL, TENANT, &to), 0);
	for (int i = 0; i < N_KEYS; i++) {
		char key[32];
		size_t len = value_of(i, val);
		key_of(i, key, sizeof(key));
		assert_int_equal(kvc_put(c, NULL, key, strlen(key), val, len, NULL, NULL), 0);
	}
	kvc_close(c);
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, true);
	if (run_kvd("--check", img, out, sizeof(out)) != 0 || strstr(out, "no damage") == NULL)
		fail_msg("kvd --check of the clean image said:\n%s", out);
}

static void flip_at(const char *img, uint64_t off)
{
	tu_flip_byte(img, (off_t)off);
}

static void test_random_flips(void **state)
{
	char *dir = tu_mkdtemp("devflips"), out[65536], name[64];
	char *img = tu_path(dir, "dev.img"), *copy = tu_path(dir, "copy.img"),
	     *ecopy = tu_path(dir, "engine.img");
	const char *env = getenv("KVTEST_CORRUPTION_ROUNDS");
	int rounds = env != NULL ? atoi(env) : ROUNDS_DEFAULT;
	uint64_t seed = tu_seed("test_random_flips_device", 1);
	int n_rec = 0, n_hdr = 0, n_hint = 0, n_ext = 0, keys_lost = 0, kvd_rounds = 0;
	struct layout l;
	char kvd_kinds[128] = "";

	(void)state;
	if (rounds <= 0)
		fail_msg("KVTEST_CORRUPTION_ROUNDS=%s: want a positive number", env);
	rng ^= seed * 0x2545f4914f6cdd1dull;
	print_message("%d rounds (KVTEST_CORRUPTION_ROUNDS)\n", rounds);
	write_tenant(dir, img);
	find_layout(img, &l);
	print_message("%d sealed segments, %d hints in AUX extents, %d extents\n", l.nsegs,
	              l.nhints, l.nexts);

	for (int r = 0; r < rounds; r++) {
		uint64_t pick = next_rand() % 10, at;
		int want_exit, want_key = -1, lost, lost_key;
		const char *kind, *log_want;

		if (pick < 6) { /* a sealed segment: a record, or (1 in 6) its header */
			const struct seg_at *s = &l.segs[next_rand() % (uint64_t)l.nsegs];
			uint64_t off = pick == 5 ? next_rand() % SEG_HEADER_SIZE
			                         : SEG_HEADER_SIZE +
			                                   next_rand() % (s->len - SEG_HEADER_SIZE);
			at = s->data + off;
			for (size_t i = 0; i < s->nrecs; i++)
				if (off >= s->recs[i].off && off < s->recs[i].off + s->recs[i].size)
					want_key = s->recs[i].key;
			snprintf(name, sizeof(name), "%08x.seg", s->id);
			kind = pick == 5 ? "segment header" : "record";
			if (pick == 5)
				n_hdr++;
			else
				n_rec++;
			want_exit = 1;
			log_want = pick == 5 ? "damaged region" : NULL;
		} else if (pick < 9) { /* a hint's bytes in an AUX extent */
			const struct hint_at *h = &l.hints[next_rand() % (uint64_t)l.nhints];
			at = h->at + next_rand() % h->len;
			snprintf(name, sizeof(name), "%08x.hint", h->seg);
			kind = "hint";
			n_hint++;
			want_exit = 0;
			log_want = "hint file(s) unusable";
		} else { /* an extent header's 60 bytes and CRC */
			int e = (int)(next_rand() % (uint64_t)l.nexts);
			at = l.ext_hdr[e] + next_rand() % DEV_EXT_HEADER;
			snprintf(name, sizeof(name), "extent %u", l.ext_id[e]);
			kind = "extent header";
			n_ext++;
			want_exit = 1;
			log_want = NULL;
		}
		copy_image(img, copy);
		flip_at(copy, at);

		{
			int st = run_kvd("--check", copy, out, sizeof(out));
			if (st != want_exit || strstr(out, name) == NULL)
				fail_msg("round %d: %s byte at %llu (%s) flipped: kvd --check exit "
				         "%d "
				         "(want %d naming %s), said:\n%s",
				         r, kind, (unsigned long long)at, name, st, want_exit, name,
				         out);
		}
		/* the engine on a copy (opening rewrites a rejected hint: kvd
		 * below sees the damage as it was) */
		copy_image(copy, ecopy);
		lost = read_all_engine(ecopy, false, &lost_key);
		if (lost != (want_key >= 0 ? 1 : 0) || lost_key != want_key)
			fail_msg(
			        "round %d: %s byte at %llu (%s) flipped: %d keys lost (key %d; the "
			        "record's key: %d)",
			        r, kind, (unsigned long long)at, name, lost, lost_key, want_key);
		keys_lost += lost;
		/* through kvd every ROUNDS_WITH_KVD-th round and the first round
		 * of each kind */
		if (r % ROUNDS_WITH_KVD == 0 || strstr(kvd_kinds, kind) == NULL) {
			print_message("round %d: %s byte at %llu flipped, through kvd\n", r, kind,
			              (unsigned long long)at);
			read_all_kvd(dir, copy, lost, log_want);
			snprintf(kvd_kinds + strlen(kvd_kinds),
			         sizeof(kvd_kinds) - strlen(kvd_kinds), "%s,", kind);
			kvd_rounds++;
		}
	}
	print_message(
	        "%d bytes flipped (%d in records, %d in segment headers, %d in hints, %d in "
	        "extent headers): all named by kvd --check, %d keys read as DATA_LOSS, 0 wrong "
	        "reads; %d rounds also through kvd\n",
	        rounds, n_rec, n_hdr, n_hint, n_ext, keys_lost, kvd_rounds);
	free_layout(&l);
	free(img);
	free(copy);
	free(ecopy);
	tu_rmtree(dir);
	free(dir);
}

/* One superblock copy or catalog slot damaged: check names it (exit 1),
 * the device opens on the other; both: check and open refuse it. */
static void test_super_and_catalog(void **state)
{
	char *dir = tu_mkdtemp("devmeta"), out[65536];
	char *img = tu_path(dir, "dev.img"), *copy = tu_path(dir, "copy.img");
	struct layout l;
	uint64_t sb_at[2], cat_at[2];
	int lost, lost_key;

	(void)state;
	write_tenant(dir, img);
	find_layout(img, &l);
	sb_at[0] = 0;
	sb_at[1] = (uint64_t)IMG_SIZE - l.sb.block_size;
	for (int i = 0; i < 2; i++)
		cat_at[i] = l.sb.catalog_off + (uint64_t)i * l.sb.catalog_slot;

	for (int i = 0; i < 2; i++) {
		char where[32];
		copy_image(img, copy);
		flip_at(copy, sb_at[i] + next_rand() % DEV_SB_SIZE);
		snprintf(where, sizeof(where), "superblock %d", i);
		if (run_kvd("--check", copy, out, sizeof(out)) != 1 || strstr(out, where) == NULL)
			fail_msg("%s flipped: kvd --check said:\n%s", where, out);
		assert_int_equal(read_all_engine(copy, false, &lost_key), 0);
	}
	copy_image(img, copy);
	flip_at(copy, sb_at[0] + 8);
	flip_at(copy, sb_at[1] + 8);
	if (run_kvd("--check", copy, out, sizeof(out)) != 2 ||
	    strstr(out, "no superblock copy") == NULL)
		fail_msg("both superblocks flipped: kvd --check said:\n%s", out);
	{
		struct kv_store_options so;
		kv_store *s;
		kv_store_options_init(&so);
		so.device = copy;
		assert_int_equal(kv_store_open(NULL, &so, &s), KV_ECORRUPT);
	}

	/* the older catalog slot, then the newest: the other one serves */
	for (int n = 0; n < 2; n++) {
		int slot = n == 0 ? 1 - l.newest_slot : l.newest_slot;
		char where[32];
		copy_image(img, copy);
		flip_at(copy, cat_at[slot] + next_rand() % l.slot_len[slot]);
		snprintf(where, sizeof(where), "catalog slot %d", slot);
		if (run_kvd("--check", copy, out, sizeof(out)) != 1 || strstr(out, where) == NULL)
			fail_msg("%s flipped: kvd --check said:\n%s", where, out);
		/* the newest damaged, the one a catalog write older serves:
		 * what it names reads exactly, or not at all */
		lost = read_all_engine(copy, slot == l.newest_slot, &lost_key);
		print_message("%s (%s) flipped: opens on the other slot, %d keys not served\n",
		              where, n == 0 ? "older" : "newest", lost);
		if (n == 0)
			assert_int_equal(lost, 0);
	}
	copy_image(img, copy);
	flip_at(copy, cat_at[0] + 60);
	flip_at(copy, cat_at[1] + 60);
	if (run_kvd("--check", copy, out, sizeof(out)) != 2 || strstr(out, "catalog") == NULL)
		fail_msg("both catalog slots flipped: kvd --check said:\n%s", out);
	{
		struct kv_store_options so;
		kv_store *s;
		kv_store_options_init(&so);
		so.device = copy;
		assert_int_equal(kv_store_open(NULL, &so, &s), KV_ECORRUPT);
	}
	free_layout(&l);
	free(img);
	free(copy);
	tu_rmtree(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_random_flips),
	        cmocka_unit_test(test_super_and_catalog),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
