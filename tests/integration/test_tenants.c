/* test_tenants.c — a real kvd: one tenant's damaged or missing TENANT file takes that tenant alone down (UNAVAILABLE naming the file, a log line, kvd --check exit 1) and --auto-create never recreates it; a NUL inside a tenant name is INVALID_ARGUMENT; a TTL near 2^64 from the wire, TenantCreate or [tenant-defaults] leaves the write visible; compression from TenantCreate and [tenant-defaults], reported by Stats, survives a restart; max_bytes and evict = oldest | refuse from TenantCreate and [tenant-defaults]: the oldest keys evicted with their history, RESOURCE_EXHAUSTED under refuse, evictions counted, the order kept across a restart. */
#include "harness.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/stat.h>

#include <cmocka.h> /* after the headers it needs */

#include "kvclient.h"
#include "kvengine.h"

#define ST_OK 0
#define ST_INVALID_ARGUMENT 3
#define ST_NOT_FOUND 5
#define ST_ALREADY_EXISTS 6
#define ST_UNAVAILABLE 14

/* kvd --check DIR: its exit status; its stdout in out (NUL-terminated). */
static int run_check(const char *dir, char *out, size_t cap)
{
	const char *bin = getenv("KVD_BIN");
	char path[2048];
	int fd, status;
	pid_t pid;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/../check.out", dir);
	if (bin == NULL)
		bin = "./build/daemon/kvd";
	if ((pid = fork()) == 0) {
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		dup2(fd, 1);
		dup2(fd, 2);
		execl(bin, bin, "--check", dir, (char *)NULL);
		_exit(127);
	}
	assert_true(pid > 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	n = read(fd, out, cap - 1);
	close(fd);
	out[n > 0 ? n : 0] = '\0';
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

static void create_tenant(nng_socket s, const char *name, uint32_t history, uint64_t ttl_ms)
{
	struct h_req q;
	struct h_reply2 r;

	h_req_begin(&q, "TenantCreate", NULL, 4, 3, 0);
	mp_kv_str(&q.pk, "name", name);
	mp_kv_uint(&q.pk, "history", history);
	mp_kv_uint(&q.pk, "ttl_ms", ttl_ms);
	assert_int_equal(h_call(s, &q, &r), 0);
	assert_int_equal(r.r.status, ST_OK);
	h_reply2_free(&r);
}

/* Get of key in tenant: the status; the message into msg. */
static int get_msg(nng_socket s, const char *tenant, const char *key, char *msg, size_t cap)
{
	struct h_req q;
	struct h_reply2 r;
	int st;

	h_req_begin(&q, "Get", tenant, 2, 1, 0);
	mp_kv_bin(&q.pk, "key", key, strlen(key));
	if (h_call(s, &q, &r) != 0 || !r.r.ok) {
		h_reply2_free(&r);
		return -1;
	}
	st = (int)r.r.status;
	snprintf(msg, cap, "%s", r.r.message);
	h_reply2_free(&r);
	return st;
}

/* The state TenantList gives name ("" when it is not listed). */
static void list_state(nng_socket s, const char *name, char *state, size_t cap)
{
	struct h_req q;
	struct h_reply2 r;
	const msgpack_object *a;

	state[0] = '\0';
	h_req_begin(&q, "TenantList", NULL, 5, 0, 0);
	assert_int_equal(h_call(s, &q, &r), 0);
	assert_int_equal(r.r.status, ST_OK);
	a = mp_map_get(r.r.result, "tenants");
	assert_non_null(a);
	assert_int_equal(a->type, MSGPACK_OBJECT_ARRAY);
	for (uint32_t i = 0; i < a->via.array.size; i++) {
		char n[80];
		const msgpack_object *e = &a->via.array.ptr[i];
		if (mp_str_copy(mp_map_get(e, "name"), n, sizeof(n)) == 0 && strcmp(n, name) == 0)
			mp_str_copy(mp_map_get(e, "state"), state, cap);
	}
	h_reply2_free(&r);
}

/* A kvd with tenants "default" and "w" (history 5) holding a key each,
 * stopped; returns its scratch directory. */
static char *two_tenants(void)
{
	struct kvd_proc k;
	nng_socket s;
	char *dir;

	assert_int_equal(kvd_start(&k, NULL), 0);
	s = h_dial(k.url, 5000);
	create_tenant(s, "w", 5, 0);
	assert_int_equal(h_put(s, "default", "kd", "vd", 2, NULL), ST_OK);
	assert_int_equal(h_put(s, "w", "kw", "vw", 2, NULL), ST_OK);
	nng_close(s);
	assert_int_equal(kvd_stop(&k), 0);
	dir = strdup(k.dir);
	kvd_cleanup(&k, true);
	return dir;
}

/* Starts kvd on dir (with --auto-create), and checks that "default" is
 * served while "w" is refused with a message and a log line naming
 * tenants/w/TENANT and containing why; that --auto-create does not
 * recreate it; and that kvd --check names it and exits 1. */
static void expect_w_refused(const char *dir, const char *why)
{
	struct kvd_opts o = {.reuse_dir = dir, .extra = {"--auto-create"}};
	struct kvd_proc k;
	char msg[512], want[400], out[4096], data[1024];
	nng_socket s;

	snprintf(data, sizeof(data), "%s/data", dir);
	assert_int_equal(run_check(data, out, sizeof(out)), 1);
	snprintf(want, sizeof(want), "w: TENANT: %s", why);
	if (strstr(out, want) == NULL)
		fail_msg("kvd --check: want '%s' in:\n%s", want, out);

	assert_int_equal(kvd_start(&k, &o), 0);
	s = h_dial(k.url, 5000);
	assert_int_equal(get_msg(s, "default", "kd", msg, sizeof(msg)), ST_OK);
	assert_int_equal(get_msg(s, "w", "kw", msg, sizeof(msg)), ST_UNAVAILABLE);
	snprintf(want, sizeof(want), "tenant 'w' is refused: tenants/w/TENANT: %s", why);
	if (strstr(msg, want) == NULL)
		fail_msg("reply: '%s', want '%s'", msg, want);
	/* neither a put (auto-create) nor TenantCreate makes it anew */
	assert_int_equal(h_put(s, "w", "kw", "new", 3, NULL), ST_UNAVAILABLE);
	{
		struct h_req q;
		struct h_reply2 r;
		h_req_begin(&q, "TenantCreate", NULL, 4, 1, 0);
		mp_kv_str(&q.pk, "name", "w");
		assert_int_equal(h_call(s, &q, &r), 0);
		assert_int_equal(r.r.status, ST_ALREADY_EXISTS);
		h_reply2_free(&r);
	}
	assert_int_equal(h_tenant_call(s, "TenantInfo", "w", NULL), ST_UNAVAILABLE);
	list_state(s, "w", msg, sizeof(msg));
	assert_string_equal(msg, "refused");
	{
		/* libkvclient (and so kvctl tenant list) says so too */
		struct kvc_options co;
		struct kvc_tenant_entry *list;
		size_t n, i, found = 0;
		kvc *c;
		kvc_options_init(&co);
		co.endpoint = k.surl;
		assert_int_equal(kvc_open(&co, &c), 0);
		assert_int_equal(kvc_tenant_list(c, NULL, &list, &n), 0);
		for (i = 0; i < n; i++) {
			assert_int_equal(list[i].refused, strcmp(list[i].name, "w") == 0);
			found += strcmp(list[i].name, "w") == 0;
		}
		assert_int_equal(found, 1);
		kvc_tenant_list_free(list);
		kvc_close(c);
	}
	snprintf(want, sizeof(want), "tenant w refused: tenants/w/TENANT: %s", why);
	if (!h_log_has(&k, want)) {
		h_dump_log(&k);
		fail_msg("log lacks '%s'", want);
	}
	nng_close(s);
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, true);
}

static void test_damaged_tenant_file(void **state)
{
	char *dir = two_tenants(), tenant[700], good[512], msg[512];
	struct kvd_opts o = {.extra = {"--auto-create"}};
	struct kvd_proc k;
	nng_socket s;
	FILE *f;
	size_t n;

	(void)state;
	snprintf(tenant, sizeof(tenant), "%s/data/tenants/w/TENANT", dir);
	f = fopen(tenant, "r");
	assert_non_null(f);
	n = fread(good, 1, sizeof(good) - 1, f);
	good[n] = '\0';
	fclose(f);

	/* "[tenant]" -> "[te\xffant]": caught by the checksum */
	tu_flip_byte(tenant, 30);
	expect_w_refused(dir, "checksum mismatch: line 11 says");
	/* a file without a checksum line, with a value out of range */
	write_text(tenant, "# kvd tenant configuration\n[tenant]\nhistory = 4294967296\n");
	expect_w_refused(dir, "line 3: 'history' = 4294967296 is out of range (1..4294967295)");
	/* a stray line */
	write_text(tenant, "[tenant]\nhistory = 0\n");
	expect_w_refused(dir, "line 2: 'history' = 0 is out of range");
	/* a directory */
	assert_int_equal(unlink(tenant), 0);
	assert_int_equal(mkdir(tenant, 0755), 0);
	expect_w_refused(dir, "not a regular file (a directory)");
	assert_int_equal(rmdir(tenant), 0);
	/* missing beside the database */
	expect_w_refused(dir, "no TENANT file, but the directory holds a database");

	/* repaired: everything back, with the old value and settings */
	write_text(tenant, good);
	o.reuse_dir = dir;
	assert_int_equal(kvd_start(&k, &o), 0);
	s = h_dial(k.url, 5000);
	assert_int_equal(h_get(s, "w", "kw", msg, sizeof(msg), NULL), ST_OK);
	assert_string_equal(msg, "vw");
	{
		struct h_reply2 r;
		uint64_t history = 0;
		assert_int_equal(h_tenant_call(s, "TenantInfo", "w", &r), ST_OK);
		assert_int_equal(mp_field_uint(r.r.result, "history", true, &history), 0);
		assert_int_equal(history, 5);
		h_reply2_free(&r);
	}
	nng_close(s);
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, false);
	free(dir);
}

/* Packs key: str of n bytes (NULs included). */
static void pack_strn(msgpack_packer *pk, const char *key, const char *s, size_t n)
{
	mp_pack_cstr(pk, key);
	msgpack_pack_str(pk, n);
	msgpack_pack_str_body(pk, s, n);
}

/* A tenant method with args {name: n bytes}: the status. */
static int tenant_call_n(nng_socket s, const char *method, const char *name, size_t n)
{
	struct h_req q;
	struct h_reply2 r;
	int st;

	h_req_begin(&q, method, NULL, 3, 1, 0);
	pack_strn(&q.pk, "name", name, n);
	assert_int_equal(h_call(s, &q, &r), 0);
	st = (int)r.r.status;
	h_reply2_free(&r);
	return st;
}

static void test_nul_in_tenant_names(void **state)
{
	static const char evil[] = "nul\0/../../../tmp/evil", zzz[] = "nul\0zzz",
	                  other[] = "nul\0whatever";
	struct kvd_proc k;
	struct h_req q;
	struct h_reply2 r;
	nng_socket s;
	char msg[64];

	(void)state;
	assert_int_equal(kvd_start(&k, NULL), 0);
	s = h_dial(k.url, 5000);
	/* not created, and not as "nul" either */
	assert_int_equal(tenant_call_n(s, "TenantCreate", evil, sizeof(evil) - 1),
	                 ST_INVALID_ARGUMENT);
	assert_int_equal(h_tenant_call(s, "TenantInfo", "nul", NULL), ST_NOT_FOUND);
	create_tenant(s, "nul", 1, 0);
	/* a request's tenant: refused, nothing lands in "nul" */
	msgpack_sbuffer_init(&q.sb);
	msgpack_packer_init(&q.pk, &q.sb, msgpack_sbuffer_write);
	msgpack_pack_map(&q.pk, 5);
	mp_kv_uint(&q.pk, "v", 1);
	mp_kv_uint(&q.pk, "id", 7);
	mp_kv_str(&q.pk, "method", "Put");
	pack_strn(&q.pk, "tenant", other, sizeof(other) - 1);
	h_req_args(&q, 2);
	mp_kv_bin(&q.pk, "key", "k", 1);
	mp_kv_bin(&q.pk, "value", "v", 1);
	assert_int_equal(h_call(s, &q, &r), 0);
	assert_int_equal(r.r.status, ST_INVALID_ARGUMENT);
	h_reply2_free(&r);
	assert_int_equal(h_get(s, "nul", "k", msg, sizeof(msg), NULL), ST_NOT_FOUND);
	/* drop, info, passivate, activate: refused, "nul" still there */
	assert_int_equal(tenant_call_n(s, "TenantDrop", zzz, sizeof(zzz) - 1), ST_INVALID_ARGUMENT);
	assert_int_equal(tenant_call_n(s, "TenantInfo", zzz, sizeof(zzz) - 1), ST_INVALID_ARGUMENT);
	assert_int_equal(tenant_call_n(s, "TenantPassivate", zzz, sizeof(zzz) - 1),
	                 ST_INVALID_ARGUMENT);
	assert_int_equal(tenant_call_n(s, "TenantActivate", zzz, sizeof(zzz) - 1),
	                 ST_INVALID_ARGUMENT);
	assert_int_equal(h_tenant_call(s, "TenantInfo", "nul", NULL), ST_OK);
	/* a NUL at the very end is no different */
	assert_int_equal(tenant_call_n(s, "TenantDrop", "nul", 4), ST_INVALID_ARGUMENT);
	assert_int_equal(h_tenant_call(s, "TenantInfo", "nul", NULL), ST_OK);
	nng_close(s);
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, false);
}

/* Put with ttl_ms (absent when 0): the status. */
static int put_ttl(nng_socket s, const char *tenant, const char *key, uint64_t ttl_ms)
{
	struct h_req q;
	struct h_reply2 r;
	int st;

	h_req_begin(&q, "Put", tenant, 1, ttl_ms ? 3 : 2, 0);
	mp_kv_bin(&q.pk, "key", key, strlen(key));
	mp_kv_bin(&q.pk, "value", "v", 1);
	if (ttl_ms)
		mp_kv_uint(&q.pk, "ttl_ms", ttl_ms);
	assert_int_equal(h_call(s, &q, &r), 0);
	st = (int)r.r.status;
	h_reply2_free(&r);
	return st;
}

/* Every way a TTL reaches kvd: one near 2^64 leaves the write visible. */
static void test_ttl_near_max(void **state)
{
	struct kvd_opts o = {.config_text = "[tenant-defaults]\nttl_ms = 18446744073709551615\n",
	                     .extra = {"--auto-create"}};
	struct kvd_proc k;
	nng_socket s;
	char v[16];

	(void)state;
	assert_int_equal(kvd_start(&k, &o), 0);
	s = h_dial(k.url, 5000);
	/* from the wire */
	assert_int_equal(put_ttl(s, "default", "max", UINT64_MAX), ST_OK);
	assert_int_equal(h_get(s, "default", "max", v, sizeof(v), NULL), ST_OK);
	assert_int_equal(put_ttl(s, "default", "kvctl", 18446744073709550000ull), ST_OK);
	assert_int_equal(h_get(s, "default", "kvctl", v, sizeof(v), NULL), ST_OK);
	/* a tenant's default from TenantCreate */
	create_tenant(s, "ttl", 1, UINT64_MAX);
	assert_int_equal(put_ttl(s, "ttl", "k", 0), ST_OK);
	assert_int_equal(h_get(s, "ttl", "k", v, sizeof(v), NULL), ST_OK);
	/* [tenant-defaults] ttl_ms, for an auto-created tenant */
	assert_int_equal(put_ttl(s, "auto", "k", 0), ST_OK);
	assert_int_equal(h_get(s, "auto", "k", v, sizeof(v), NULL), ST_OK);
	assert_string_equal(v, "v");
	nng_close(s);
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, false);
}

/* Compression through kvd: TenantCreate's and [tenant-defaults]'
 * compression, values read back byte-exact across a restart, Stats with
 * stored below logical for text and equal for random bytes, a bad codec
 * INVALID_ARGUMENT. */
static void test_compression(void **state)
{
	struct kvd_opts o = {.config_text = "[tenant-defaults]\ncompression = zstd:9\n",
	                     .extra = {"--auto-create"}};
	static const char *codecs[] = {"lz4", "zstd", "none"};
	struct kvc_options co;
	struct kvc_codec_info ti;
	struct kvc_value v;
	struct kvd_proc k;
	char text[8192], rnd[8192], dir[1024];
	uint64_t x = 88172645463325252ull;
	kvc *c;

	(void)state;
	for (size_t i = 0; i < sizeof(text); i++)
		text[i] = "kvd compresses text "[i % 20];
	for (size_t i = 0; i < sizeof(rnd); i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		rnd[i] = (char)(x >> 24);
	}
	assert_int_equal(kvd_start(&k, &o), 0);
	kvc_options_init(&co);
	co.endpoint = k.surl;
	assert_int_equal(kvc_open(&co, &c), 0);
	for (size_t i = 0; i < 3; i++) {
		struct kvc_call call = {.tenant = codecs[i]};
		assert_int_equal(kvc_tenant_create_codec(c, NULL, codecs[i], NULL, codecs[i]), 0);
		assert_int_equal(kvc_put(c, &call, "text", 4, text, sizeof(text), NULL, NULL), 0);
		assert_int_equal(kvc_put(c, &call, "random", 6, rnd, sizeof(rnd), NULL, NULL), 0);
		assert_int_equal(kvc_stats_codec(c, &call, &ti), 0);
		assert_string_equal(ti.compression, codecs[i]);
		assert_int_equal(ti.value_logical_bytes, 2 * sizeof(text));
		if (strcmp(codecs[i], "none") == 0) {
			assert_int_equal(ti.values_compressed, 0);
			assert_int_equal(ti.value_stored_bytes, 2 * sizeof(text));
		} else {
			assert_int_equal(ti.values_compressed, 1);
			assert_true(ti.value_stored_bytes < sizeof(rnd) + sizeof(text) / 2);
			assert_true(ti.value_stored_bytes > sizeof(rnd));
		}
	}
	/* [tenant-defaults] for an auto-created tenant */
	{
		struct kvc_call call = {.tenant = "auto"};
		assert_int_equal(kvc_put(c, &call, "text", 4, text, sizeof(text), NULL, NULL), 0);
		assert_int_equal(kvc_tenant_codec(c, NULL, "auto", &ti), 0);
		assert_string_equal(ti.compression, "zstd:9");
		assert_int_equal(ti.value_logical_bytes, 0); /* Stats's, not TenantInfo's */
	}
	{
		struct kvc_status st;
		struct kvc_call call = {.status = &st};
		assert_int_equal(kvc_tenant_create_codec(c, &call, "bad", NULL, "gzip"),
		                 -KVC_INVALID_ARGUMENT);
	}
	kvc_close(c);
	assert_int_equal(kvd_stop(&k), 0);

	/* restarted: every value as written */
	snprintf(dir, sizeof(dir), "%s", k.dir);
	kvd_cleanup(&k, true);
	o.reuse_dir = dir;
	assert_int_equal(kvd_start(&k, &o), 0);
	co.endpoint = k.surl;
	assert_int_equal(kvc_open(&co, &c), 0);
	for (size_t i = 0; i < 4; i++) {
		struct kvc_call call = {.tenant = i < 3 ? codecs[i] : "auto"};
		assert_int_equal(kvc_get(c, &call, "text", 4, 0, 0, &v), 0);
		assert_int_equal(v.len, sizeof(text));
		assert_memory_equal(v.data, text, sizeof(text));
		kvc_value_free(&v);
		if (i == 3)
			break;
		assert_int_equal(kvc_get(c, &call, "random", 6, 0, 0, &v), 0);
		assert_int_equal(v.len, sizeof(rnd));
		assert_memory_equal(v.data, rnd, sizeof(rnd));
		kvc_value_free(&v);
	}
	kvc_close(c);
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, false);
}

/* Eviction through kvd: TenantCreate's max_bytes and evict = oldest
 * (puts past the limit succeed, the oldest keys are gone with their
 * history, Stats counts the evictions, TenantInfo shows the settings),
 * evict = refuse RESOURCE_EXHAUSTED, [tenant-defaults] for an
 * auto-created tenant, and the write order after a restart. */
static void test_eviction(void **state)
{
	struct kvd_opts o = {.config_text = "[tenant-defaults]\nmax_bytes = 5000\nevict = oldest\n",
	                     .extra = {"--auto-create"}};
	/* keys of 3 bytes, values of 100: records of 48 + 3 + 100 bytes */
	const uint64_t rec = 48 + 3 + 100;
	struct kvc_evict_opts cache = {.max_bytes = 10 * rec, .evict = "oldest"};
	struct kvc_evict_opts strict = {.max_bytes = 3 * rec, .evict = "refuse"};
	struct kvc_call cc = {.tenant = "cache"}, sc = {.tenant = "strict"};
	struct kvc_options co;
	struct kvc_evict_info ei;
	struct kvc_tenant_info ti;
	struct kvc_version *vs;
	struct kvc_value v;
	struct kvd_proc k;
	char val[100], big[2000], key[8], dir[1024];
	uint64_t first = 0;
	size_t n;
	bool cut;
	kvc *c;

	(void)state;
	memset(val, 'v', sizeof(val));
	memset(big, 'b', sizeof(big));
	assert_int_equal(kvd_start(&k, &o), 0);
	kvc_options_init(&co);
	co.endpoint = k.surl;
	assert_int_equal(kvc_open(&co, &c), 0);
	assert_int_equal(kvc_tenant_create_evict(c, NULL, "cache", NULL, NULL, &cache), 0);
	assert_int_equal(kvc_tenant_create_evict(c, NULL, "strict", NULL, NULL, &strict), 0);
	assert_int_equal(kvc_tenant_evict(c, NULL, "cache", &ei), 0);
	assert_int_equal(ei.max_bytes, 10 * rec);
	assert_string_equal(ei.evict, "oldest");
	assert_int_equal(kvc_tenant_evict(c, NULL, "strict", &ei), 0);
	assert_int_equal(ei.max_bytes, 3 * rec);
	assert_string_equal(ei.evict, "refuse");

	/* 15 puts into room for 10: all succeed, k00..k04 evicted */
	for (int i = 0; i < 15; i++) {
		uint64_t ver;
		snprintf(key, sizeof(key), "k%02d", i);
		assert_int_equal(kvc_put(c, &cc, key, 3, val, sizeof(val), NULL, &ver), 0);
		if (i == 0)
			first = ver;
	}
	assert_int_equal(kvc_stats_evict(c, &cc, &ei), 0);
	assert_int_equal(ei.evictions, 5);
	assert_int_equal(kvc_stats(c, &cc, &ti), 0);
	assert_int_equal(ti.keys, 10);
	/* max_bytes bounds live_bytes without the 5 tombstones (48 + 3 bytes) */
	assert_int_equal(ei.tombstone_bytes, 5 * (48 + 3));
	assert_int_equal(ti.live_bytes - ei.tombstone_bytes, 10 * rec);
	for (int i = 0; i < 15; i++) {
		snprintf(key, sizeof(key), "k%02d", i);
		if (i < 5) {
			assert_int_equal(kvc_get(c, &cc, key, 3, 0, 0, &v), -KVC_NOT_FOUND);
		} else {
			assert_int_equal(kvc_get(c, &cc, key, 3, 0, 0, &v), 0);
			kvc_value_free(&v);
		}
	}
	/* k00's value is gone from its history too */
	assert_int_equal(kvc_get(c, &cc, "k00", 3, 0, first, &v), -KVC_OUT_OF_RANGE);
	assert_int_equal(kvc_versions(c, &cc, "k00", 3, 10, 0, true, &vs, &n, &cut), 0);
	assert_int_equal(n, 1);
	assert_true(vs[0].deleted);
	assert_null(vs[0].data);
	assert_true(cut);
	kvc_versions_free(vs, n);
	/* a value larger than the whole budget: RESOURCE_EXHAUSTED, nothing evicted */
	assert_int_equal(kvc_put(c, &cc, "k99", 3, big, sizeof(big), NULL, NULL),
	                 -KVC_RESOURCE_EXHAUSTED);
	assert_int_equal(kvc_stats_evict(c, &cc, &ei), 0);
	assert_int_equal(ei.evictions, 5);

	/* refuse: the fourth put is RESOURCE_EXHAUSTED, nothing evicted */
	for (int i = 0; i < 4; i++) {
		snprintf(key, sizeof(key), "s%02d", i);
		assert_int_equal(kvc_put(c, &sc, key, 3, val, sizeof(val), NULL, NULL),
		                 i < 3 ? 0 : -KVC_RESOURCE_EXHAUSTED);
	}
	assert_int_equal(kvc_get(c, &sc, "s00", 3, 0, 0, &v), 0);
	kvc_value_free(&v);
	assert_int_equal(kvc_stats_evict(c, &sc, &ei), 0);
	assert_int_equal(ei.evictions, 0);

	/* [tenant-defaults] for an auto-created tenant; a bad evict refused */
	{
		struct kvc_call ac = {.tenant = "auto"};
		struct kvc_evict_opts bad = {.evict = "lru"};
		struct kvc_status st;
		struct kvc_call call = {.status = &st};
		assert_int_equal(kvc_put(c, &ac, "k", 1, "v", 1, NULL, NULL), 0);
		assert_int_equal(kvc_tenant_evict(c, NULL, "auto", &ei), 0);
		assert_int_equal(ei.max_bytes, 5000);
		assert_string_equal(ei.evict, "oldest");
		assert_int_equal(ei.evictions, 0); /* Stats's, not TenantInfo's */
		assert_int_equal(kvc_tenant_create_evict(c, &call, "bad", NULL, NULL, &bad),
		                 -KVC_INVALID_ARGUMENT);
	}
	/* k05 overwritten: k06 is now the oldest */
	assert_int_equal(kvc_put(c, &cc, "k05", 3, val, sizeof(val), NULL, NULL), 0);
	kvc_close(c);
	assert_int_equal(kvd_stop(&k), 0);

	/* restarted: the settings and the write order as they were */
	snprintf(dir, sizeof(dir), "%s", k.dir);
	kvd_cleanup(&k, true);
	o.reuse_dir = dir;
	assert_int_equal(kvd_start(&k, &o), 0);
	co.endpoint = k.surl;
	assert_int_equal(kvc_open(&co, &c), 0);
	assert_int_equal(kvc_tenant_evict(c, NULL, "cache", &ei), 0);
	assert_int_equal(ei.max_bytes, 10 * rec);
	assert_string_equal(ei.evict, "oldest");
	assert_int_equal(kvc_put(c, &cc, "k15", 3, val, sizeof(val), NULL, NULL), 0);
	assert_int_equal(kvc_get(c, &cc, "k06", 3, 0, 0, &v), -KVC_NOT_FOUND);
	assert_int_equal(kvc_get(c, &cc, "k05", 3, 0, 0, &v), 0);
	kvc_value_free(&v);
	assert_int_equal(kvc_get(c, &cc, "k07", 3, 0, 0, &v), 0);
	kvc_value_free(&v);
	assert_int_equal(kvc_stats_evict(c, &cc, &ei), 0);
	assert_int_equal(ei.evictions, 1); /* since this activation */
	kvc_close(c);
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, false);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_damaged_tenant_file),
		cmocka_unit_test(test_nul_in_tenant_names),
		cmocka_unit_test(test_ttl_near_max),
		cmocka_unit_test(test_compression),
		cmocka_unit_test(test_eviction),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
