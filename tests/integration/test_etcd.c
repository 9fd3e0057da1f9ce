/* test_etcd.c — daemon/etcd.c against a real etcd started here: leases (grant, keepalive, revoke,
 * expiry), put-if-absent with monotonic epochs, compare-and-delete, prefix lists at byte edges, and
 * the errors of an etcd that is down, silent or answering garbage (a socket of the test's own). */
/*
 * The etcd is etcd_proc.h's (a real one on free loopback ports, removed by
 * the group teardown; without etcd installed the test fails, it does not
 * skip). Nothing waits by sleeping: lease expiry is polled for with a
 * deadline.
 */
#include "etcd.h"
#include "etcd_proc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h> /* after the headers it needs */
#include <curl/curl.h>

#define CALL_MS   5000  /* the client's timeout against the real etcd */
#define EXPIRE_MS 15000 /* a lease of the minimum TTL is gone within this */

static struct etcd_proc g_proc = {.pid = -1};
#define g_url (g_proc.url)
#define now_ms etcd_proc_now_ms
#define poll_pause etcd_proc_pause
#define free_port etcd_proc_free_port

static int group_teardown(void **state)
{
	(void)state;
	etcd_proc_stop(&g_proc);
	etcd_global_cleanup();
	return 0;
}

static int group_setup(void **state)
{
	(void)state;
	return etcd_proc_start(&g_proc) == 0 ? 0 : -1;
}

static struct etcd *client(void)
{
	struct etcd *e = NULL;

	assert_int_equal(etcd_open(g_url, CALL_MS, &e), 0);
	return e;
}

/* Asserts rv == want, printing the client's line when not. */
#define EXPECT(e, call, want)                                                                      \
	do {                                                                                       \
		int rv_ = (call);                                                                  \
		if (rv_ != (want))                                                                 \
			print_error("%s: %d, wanted %d: %s\n", #call, rv_, (int)(want),            \
			            etcd_errmsg(e));                                               \
		assert_int_equal(rv_, (want));                                                     \
	} while (0)

/* ---- leases ---- */

static void test_lease_keepalive(void **state)
{
	struct etcd *e = client();
	int64_t id = 0, ttl = 0, left = 0;

	(void)state;
	EXPECT(e, etcd_lease_grant(e, 30, &id, &ttl), 0);
	assert_true(id != 0);
	assert_true(ttl >= 30);
	EXPECT(e, etcd_lease_keepalive(e, id, &left), 0);
	assert_true(left > 0 && left <= ttl);
	assert_string_equal(etcd_errmsg(e), "");
	EXPECT(e, etcd_lease_revoke(e, id), 0);
	EXPECT(e, etcd_lease_grant(e, 0, &id, &ttl), -EINVAL);
	etcd_close(e);
}

static void test_lease_revoked(void **state)
{
	struct etcd *e = client();
	int64_t id = 0, ttl = 0, left = -7;

	(void)state;
	EXPECT(e, etcd_lease_grant(e, 30, &id, &ttl), 0);
	EXPECT(e, etcd_lease_revoke(e, id), 0);
	EXPECT(e, etcd_lease_keepalive(e, id, &left), ETCD_LEASE_GONE);
	assert_int_equal(left, -7); /* untouched */
	assert_non_null(strstr(etcd_errmsg(e), "gone"));
	EXPECT(e, etcd_lease_revoke(e, id), ETCD_LEASE_GONE);
	/* A lease that never was. */
	EXPECT(e, etcd_lease_keepalive(e, 0x1234567, &left), ETCD_LEASE_GONE);
	etcd_close(e);
}

static void test_lease_expiry(void **state)
{
	static const char key[] = "/kvd/u1/nodes/n1";
	struct etcd *e = client();
	struct etcd_kv kv = {0};
	int64_t id = 0, ttl = 0, rev = 0, left = 0;
	uint64_t start, deadline;
	int rv;

	(void)state;
	EXPECT(e, etcd_lease_grant(e, 1, &id, &ttl), 0);
	start = now_ms();
	print_message("lease of TTL 1 granted with TTL %" PRId64 "\n", ttl);
	assert_true(ttl >= 1 && ttl <= 10);
	EXPECT(e, etcd_put_if_absent(e, key, strlen(key), "127.0.0.1:7001", 14, id, &rev, &kv), 0);
	EXPECT(e, etcd_get(e, key, strlen(key), &kv, NULL), 0);
	assert_int_equal(kv.lease, id);
	assert_int_equal(kv.create_rev, rev);
	assert_memory_equal(kv.value, "127.0.0.1:7001", 14);
	etcd_kv_clear(&kv);
	/* No keepalive: the key goes with the lease. */
	deadline = now_ms() + (uint64_t)ttl * 1000u + EXPIRE_MS;
	while ((rv = etcd_get(e, key, strlen(key), &kv, NULL)) == 0) {
		etcd_kv_clear(&kv);
		assert_true(now_ms() < deadline);
		poll_pause();
	}
	assert_int_equal(rv, ETCD_ABSENT);
	print_message("key gone %" PRIu64 " ms after the grant\n", now_ms() - start);
	assert_true(now_ms() - start >= 900); /* not before the TTL */
	EXPECT(e, etcd_lease_keepalive(e, id, &left), ETCD_LEASE_GONE);
	/* A put attached to the gone lease is refused, and nothing is written. */
	EXPECT(e, etcd_put_if_absent(e, key, strlen(key), "x", 1, id, &rev, &kv), -ENOENT);
	EXPECT(e, etcd_get(e, key, strlen(key), &kv, NULL), ETCD_ABSENT);
	etcd_close(e);
}

/* ---- put-if-absent, compare-and-delete ---- */

static void test_put_if_absent_epochs(void **state)
{
	static const char key[] = "/kvd/u1/tenants/alpha/owner";
	struct etcd *a = client(), *b = client();
	struct etcd_kv cur = {0};
	int64_t la, lb, ttl, r1 = 0, r2 = 0, rb = -1;

	(void)state;
	EXPECT(a, etcd_lease_grant(a, 60, &la, &ttl), 0);
	EXPECT(b, etcd_lease_grant(b, 60, &lb, &ttl), 0);
	EXPECT(a, etcd_put_if_absent(a, key, strlen(key), "node-a", 6, la, &r1, &cur), 0);
	assert_true(r1 > 0);
	assert_null(cur.key); /* untouched when taken */
	EXPECT(b, etcd_put_if_absent(b, key, strlen(key), "node-b", 6, lb, &rb, &cur), ETCD_EXISTS);
	assert_int_equal(rb, -1); /* untouched when it exists */
	assert_int_equal(cur.key_len, strlen(key));
	assert_memory_equal(cur.key, key, strlen(key));
	assert_int_equal(cur.value_len, 6);
	assert_string_equal(cur.value, "node-a");
	assert_int_equal(cur.create_rev, r1);
	assert_int_equal(cur.mod_rev, r1);
	assert_int_equal(cur.version, 1);
	assert_int_equal(cur.lease, la);
	etcd_kv_clear(&cur);
	assert_null(cur.value);

	/* The owner lets go; the next owner's epoch is larger. */
	EXPECT(a, etcd_delete_if_value(a, key, strlen(key), "node-a", 6), 0);
	EXPECT(b, etcd_put_if_absent(b, key, strlen(key), "node-b", 6, lb, &r2, &cur), 0);
	assert_true(r2 > r1);
	/* Its lease revoked, the owner key is gone and a third takes it, later still. */
	EXPECT(b, etcd_lease_revoke(b, lb), 0);
	EXPECT(a, etcd_put_if_absent(a, key, strlen(key), "node-c", 6, 0, &r1, &cur), 0);
	assert_true(r1 > r2);
	EXPECT(a, etcd_get(a, key, strlen(key), &cur, &r2), 0);
	assert_int_equal(cur.lease, 0);
	assert_int_equal(cur.create_rev, r1);
	assert_true(r2 >= r1);
	etcd_kv_clear(&cur);
	EXPECT(a, etcd_delete_if_value(a, key, strlen(key), "node-c", 6), 0);
	EXPECT(a, etcd_lease_revoke(a, la), 0);
	etcd_close(a);
	etcd_close(b);
}

static void test_compare_and_delete(void **state)
{
	static const char key[] = "/kvd/u1/tenants/beta/owner";
	static const char bin[] = {'v', '\0', '\xff', '1'};
	struct etcd *e = client();
	struct etcd_kv kv = {0};
	int64_t rev = 0;

	(void)state;
	EXPECT(e, etcd_put_if_absent(e, key, strlen(key), bin, sizeof(bin), 0, &rev, &kv), 0);
	EXPECT(e, etcd_delete_if_value(e, key, strlen(key), "v", 1), ETCD_NOT_MATCHED);
	EXPECT(e, etcd_delete_if_value(e, key, strlen(key), bin, 3), ETCD_NOT_MATCHED);
	EXPECT(e, etcd_delete_if_mod(e, key, strlen(key), rev + 1000), ETCD_NOT_MATCHED);
	EXPECT(e, etcd_get(e, key, strlen(key), &kv, NULL), 0);
	assert_int_equal(kv.value_len, sizeof(bin));
	assert_memory_equal(kv.value, bin, sizeof(bin));
	assert_int_equal(kv.mod_rev, rev);
	etcd_kv_clear(&kv);
	EXPECT(e, etcd_delete_if_mod(e, key, strlen(key), rev), 0);
	EXPECT(e, etcd_get(e, key, strlen(key), &kv, NULL), ETCD_ABSENT);
	EXPECT(e, etcd_delete_if_value(e, key, strlen(key), bin, sizeof(bin)), ETCD_NOT_MATCHED);
	EXPECT(e, etcd_delete_if_mod(e, key, strlen(key), rev), ETCD_NOT_MATCHED);
	/* The value compared is exact, binary bytes included. */
	EXPECT(e, etcd_put_if_absent(e, key, strlen(key), bin, sizeof(bin), 0, &rev, &kv), 0);
	EXPECT(e, etcd_delete_if_value(e, key, strlen(key), bin, sizeof(bin)), 0);
	EXPECT(e, etcd_delete_if_value(e, key, 0, bin, 1), -EINVAL);
	etcd_close(e);
}

/* ---- lists ---- */

struct bkey {
	const char *p;
	size_t n;
};
#define BK(s)                                                                                      \
	{                                                                                          \
		s, sizeof(s) - 1                                                                   \
	}

static void put_all(struct etcd *e, const struct bkey *k, size_t n)
{
	struct etcd_kv kv = {0};
	int64_t rev;

	for (size_t i = 0; i < n; i++)
		EXPECT(e, etcd_put_if_absent(e, k[i].p, k[i].n, k[i].p, k[i].n, 0, &rev, &kv), 0);
}

/* Lists `prefix` and asserts it holds exactly `want` (in key order). */
static void expect_list(struct etcd *e, struct bkey prefix, const struct bkey *want, size_t n)
{
	struct etcd_kvs l = {0};

	EXPECT(e, etcd_list(e, prefix.p, prefix.n, 0, 0, &l), 0);
	if (l.n != n)
		for (size_t i = 0; i < l.n; i++)
			print_error("listed %zu bytes: %.*s\n", l.kv[i].key_len,
			            (int)l.kv[i].key_len, l.kv[i].key);
	assert_int_equal(l.n, n);
	assert_int_equal(l.more, 0);
	assert_true(l.revision > 0);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(l.kv[i].key_len, want[i].n);
		assert_memory_equal(l.kv[i].key, want[i].p, want[i].n);
		assert_int_equal(l.kv[i].value_len, want[i].n);
		assert_memory_equal(l.kv[i].value, want[i].p, want[i].n);
		assert_true(l.kv[i].create_rev > 0 && l.kv[i].mod_rev >= l.kv[i].create_rev);
		assert_true(l.kv[i].mod_rev <= l.revision);
	}
	etcd_kvs_free(&l);
}

static void test_prefix_end(void **state)
{
	unsigned char out[8];

	(void)state;
	assert_int_equal(etcd_prefix_end("/a/", 3, out), 3);
	assert_memory_equal(out, "/a0", 3);
	assert_int_equal(etcd_prefix_end("a\xff", 2, out), 1);
	assert_memory_equal(out, "b", 1);
	assert_int_equal(etcd_prefix_end("a\xfe\xff\xff", 4, out), 2);
	assert_memory_equal(out, "a\xff", 2);
	assert_int_equal(etcd_prefix_end("\xff\xff", 2, out), 1);
	assert_int_equal(out[0], 0);
}

static void test_list_prefix(void **state)
{
	static const struct bkey inside[] = {
	        BK("/l/p/"),      BK("/l/p/\x01"),     BK("/l/p//"),    BK("/l/p/a"),
	        BK("/l/p/a/b/c"), BK("/l/p/\x7f\xff"), BK("/l/p/\xff"), BK("/l/p/\xff\xff"),
	};
	static const struct bkey outside[] = {
	        BK("/l/p"), BK("/l/p0"), BK("/l/p."), BK("/l/o/z"), BK("/l/q/"), BK("/l/p\xff/"),
	};
	static const struct bkey ff_inside[] = {
	        BK("/l/q\xff"),
	        BK("/l/q\xff\x00"),
	        BK("/l/q\xff/x"),
	        BK("/l/q\xff\xff\xff"),
	};
	static const struct bkey ff_outside[] = {
	        BK("/l/q\xfe\xff"),
	        BK("/l/r"),
	        BK("/l/r\x00"),
	};
	static const struct bkey top[] = {BK("\xff\xff"), BK("\xff\xff\x00"), BK("\xff\xff\xff")};
	struct etcd *e = client();
	struct etcd_kvs l = {0};
	struct etcd_kv kv = {0};
	int64_t rev = 0;

	(void)state;
	put_all(e, inside, 8);
	put_all(e, outside, 6);
	put_all(e, ff_inside, 4);
	put_all(e, ff_outside, 3);
	put_all(e, top, 3);
	expect_list(e, (struct bkey)BK("/l/p/"), inside, 8);
	expect_list(e, (struct bkey)BK("/l/q\xff"), ff_inside, 4);
	/* A prefix of only 0xff bytes runs to the last key. */
	expect_list(e, (struct bkey)BK("\xff\xff"), top, 3);
	expect_list(e, (struct bkey)BK("/l/none/"), NULL, 0);

	/* A limit says there is more. */
	EXPECT(e, etcd_list(e, "/l/p/", 5, 0, 3, &l), 0);
	assert_int_equal(l.n, 3);
	assert_int_equal(l.more, 1);
	assert_memory_equal(l.kv[2].key, inside[2].p, inside[2].n);
	rev = l.revision;
	etcd_kvs_free(&l);
	assert_null(l.kv);

	/* Polling with min_mod_rev: only what was written since. */
	EXPECT(e, etcd_put_if_absent(e, "/l/p/new", 8, "n", 1, 0, &rev, &kv), 0);
	EXPECT(e, etcd_list(e, "/l/p/", 5, rev, 0, &l), 0);
	assert_int_equal(l.n, 1);
	assert_memory_equal(l.kv[0].key, "/l/p/new", 8);
	assert_int_equal(l.kv[0].mod_rev, rev);
	assert_int_equal(l.revision, rev);
	etcd_kvs_free(&l);
	EXPECT(e, etcd_list(e, "/l/p/", 5, rev + 1, 0, &l), 0);
	assert_int_equal(l.n, 0);
	etcd_kvs_free(&l);
	EXPECT(e, etcd_list(e, "", 0, 0, 0, &l), -EINVAL);
	etcd_close(e);
}

/* ---- watches ---- */

/* Compacts etcd's history up to `rev` (a call the client does not have). */
static void compact(int64_t rev)
{
	char url[128], body[96];
	CURL *c = curl_easy_init();
	long status = 0;
	FILE *null = fopen("/dev/null", "w");

	assert_non_null(c);
	assert_non_null(null);
	snprintf(url, sizeof(url), "%s/v3/kv/compaction", g_url);
	snprintf(body, sizeof(body), "{\"revision\":\"%" PRId64 "\",\"physical\":true}", rev);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, null);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)CALL_MS);
	assert_int_equal(curl_easy_perform(c), CURLE_OK);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	assert_int_equal(status, 200);
	curl_easy_cleanup(c);
	fclose(null);
}

static void *put_later(void *arg)
{
	struct etcd *e = NULL;
	struct etcd_kv kv = {0};
	int64_t rev;
	intptr_t rv;

	(void)arg;
	if ((rv = etcd_open(g_url, CALL_MS, &e)) == 0)
		rv = etcd_put_if_absent(e, "/w/b", 4, "b", 1, 0, &rev, &kv);
	etcd_kv_clear(&kv);
	etcd_close(e);
	return (void *)rv;
}

static void test_watch(void **state)
{
	struct etcd *e = client();
	struct etcd_events ev = {0};
	struct etcd_kvs l = {0};
	struct etcd_kv kv = {0};
	int64_t rev0, rev1, next;
	pthread_t t;
	void *trv;
	uint64_t t0;

	(void)state;
	EXPECT(e, etcd_list(e, "/w/", 3, 0, 0, &l), 0);
	rev0 = l.revision;
	etcd_kvs_free(&l);
	/* A change older than the watch comes at once. */
	EXPECT(e, etcd_put_if_absent(e, "/w/a", 4, "a", 1, 0, &rev1, &kv), 0);
	EXPECT(e, etcd_watch_prefix(e, "/w/", 3, rev0 + 1, 5000, &ev), 0);
	assert_int_equal(ev.n, 1);
	assert_int_equal(ev.ev[0].type, ETCD_EVENT_PUT);
	assert_int_equal(ev.ev[0].kv.key_len, 4);
	assert_memory_equal(ev.ev[0].kv.key, "/w/a", 4);
	assert_string_equal(ev.ev[0].kv.value, "a");
	assert_int_equal(ev.ev[0].kv.mod_rev, rev1);
	assert_true(ev.revision >= rev1);
	etcd_events_free(&ev);
	assert_null(ev.ev);
	/* A delete. */
	EXPECT(e, etcd_delete_if_value(e, "/w/a", 4, "a", 1), 0);
	EXPECT(e, etcd_watch_prefix(e, "/w/", 3, rev1 + 1, 5000, &ev), 0);
	assert_int_equal(ev.n, 1);
	assert_int_equal(ev.ev[0].type, ETCD_EVENT_DELETE);
	assert_memory_equal(ev.ev[0].kv.key, "/w/a", 4);
	assert_true(ev.ev[0].kv.mod_rev > rev1);
	next = ev.ev[0].kv.mod_rev + 1;
	etcd_events_free(&ev);
	/* Nothing happens: the wait ends with no change. */
	t0 = now_ms();
	EXPECT(e, etcd_watch_prefix(e, "/w/", 3, next, 300, &ev), 0);
	t0 = now_ms() - t0;
	assert_int_equal(ev.n, 0);
	assert_int_equal(ev.revision, next - 1);
	assert_true(t0 >= 250 && t0 < 3000);
	/* Keys beside the prefix are not seen; a change while it waits is. */
	EXPECT(e, etcd_put_if_absent(e, "/w0", 3, "x", 1, 0, &rev1, &kv), 0);
	EXPECT(e, etcd_put_if_absent(e, "/wx/", 4, "x", 1, 0, &rev1, &kv), 0);
	assert_int_equal(pthread_create(&t, NULL, put_later, NULL), 0);
	t0 = now_ms();
	EXPECT(e, etcd_watch_prefix(e, "/w/", 3, next, 10000, &ev), 0);
	assert_int_equal(pthread_join(t, &trv), 0);
	assert_int_equal((intptr_t)trv, 0);
	assert_true(now_ms() - t0 < 5000);
	assert_int_equal(ev.n, 1);
	assert_int_equal(ev.ev[0].type, ETCD_EVENT_PUT);
	assert_memory_equal(ev.ev[0].kv.key, "/w/b", 4);
	assert_true(ev.ev[0].kv.mod_rev > rev1);
	etcd_events_free(&ev);
	/* A start revision compacted away. */
	compact(rev1);
	EXPECT(e, etcd_watch_prefix(e, "/w/", 3, rev0, 5000, &ev), -ESTALE);
	print_message("compacted: %s\n", etcd_errmsg(e));
	EXPECT(e, etcd_watch_prefix(e, "/w/", 3, 0, 5000, &ev), -EINVAL);
	etcd_close(e);
}

/* ---- etcd down, silent, or not etcd ---- */

static void test_down(void **state)
{
	char url[160];
	int port = free_port();
	struct etcd *e = NULL;
	struct etcd_kv kv = {0};
	int64_t id, ttl;
	uint64_t t;

	(void)state;
	assert_true(port > 0);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d,http://127.0.0.1:%d/", port, port);
	assert_int_equal(etcd_open(url, 2000, &e), 0);
	t = now_ms();
	EXPECT(e, etcd_lease_grant(e, 5, &id, &ttl), -ECONNREFUSED);
	assert_true(now_ms() - t < 2000);
	print_message("etcd down: %s\n", etcd_errmsg(e));
	assert_non_null(strstr(etcd_errmsg(e), "/v3/lease/grant"));
	EXPECT(e, etcd_get(e, "k", 1, &kv, NULL), -ECONNREFUSED);
	etcd_close(e);

	/* The first endpoint down, the second answers; and it stays first. */
	snprintf(url, sizeof(url), "http://127.0.0.1:%d, %s", port, g_url);
	assert_int_equal(etcd_open(url, 2000, &e), 0);
	EXPECT(e, etcd_get(e, "/down/k", 7, &kv, NULL), ETCD_ABSENT);
	EXPECT(e, etcd_get(e, "/down/k", 7, &kv, NULL), ETCD_ABSENT);
	etcd_close(e);

	e = NULL;
	assert_int_equal(etcd_open("", 1000, &e), -EINVAL);
	assert_int_equal(etcd_open(" , ", 1000, &e), -EINVAL);
	assert_int_equal(etcd_open("ftp://127.0.0.1:1", 1000, &e), -EINVAL);
	assert_int_equal(etcd_open(g_url, 0, &e), -EINVAL);
	assert_null(e);
	etcd_close(NULL);
}

/* A server of the test's own on a loopback port: each connection reads one
 * request and gets the canned answer current at the time, then is closed. */
enum op { OP_GET, OP_LIST, OP_GRANT, OP_KEEPALIVE, OP_REVOKE, OP_PUT, OP_DEL, OP_WATCH };

struct canned {
	const char *what;
	enum op op;
	int want;           /* what the call returns */
	const char *status; /* "200 OK"; NULL: `body` is the whole answer, raw */
	const char *body;
	long claim;   /* Content-Length when not the body's length (> 0) */
	size_t flood; /* then this many more bytes of spaces */
	bool silent;  /* no answer at all: wait for the client to leave */
};

struct server {
	int lfd, stop[2];
	int port;
	pthread_t thread;
	const struct canned *_Atomic cur;
	atomic_int served;
};

static bool write_all(int fd, const void *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w <= 0)
			return false;
		p = (const char *)p + w;
		n -= (size_t)w;
	}
	return true;
}

/* Reads a request's head and its body (Content-Length) so that closing
 * does not reset the connection under the answer. */
static void read_request(int fd)
{
	char buf[8192];
	size_t len = 0;
	const char *end = NULL;
	long body = 0;

	while (len < sizeof(buf) - 1) {
		struct pollfd p = {fd, POLLIN, 0};
		ssize_t r;

		if (end != NULL && len >= (size_t)(end - buf) + 4 + (size_t)body)
			return;
		if (poll(&p, 1, 5000) <= 0 ||
		    (r = recv(fd, buf + len, sizeof(buf) - 1 - len, 0)) <= 0)
			return;
		len += (size_t)r;
		buf[len] = '\0';
		if (end == NULL && (end = strstr(buf, "\r\n\r\n")) != NULL) {
			const char *cl = strcasestr(buf, "Content-Length:");

			if (cl != NULL && cl < end)
				body = strtol(cl + 15, NULL, 10);
		}
	}
}

/* Waits (bounded) for the client to close its side. */
static void drain(int fd, int ms)
{
	char buf[4096];
	uint64_t deadline = now_ms() + (uint64_t)ms;

	while (now_ms() < deadline) {
		struct pollfd p = {fd, POLLIN, 0};

		if (poll(&p, 1, 100) > 0 && recv(fd, buf, sizeof(buf), 0) <= 0)
			return;
	}
}

static void serve(int fd, const struct canned *c)
{
	char head[256];
	size_t blen = strlen(c->body);

	read_request(fd);
	if (c->silent) {
		drain(fd, 10000);
		return;
	}
	if (c->status == NULL) {
		write_all(fd, c->body, blen);
	} else {
		snprintf(head, sizeof(head),
		         "HTTP/1.1 %s\r\nContent-Type: application/json\r\n"
		         "Content-Length: %ld\r\nConnection: close\r\n\r\n",
		         c->status, c->claim > 0 ? c->claim : (long)(blen + c->flood));
		if (write_all(fd, head, strlen(head)) && write_all(fd, c->body, blen) &&
		    c->flood > 0) {
			static char spaces[65536];

			memset(spaces, ' ', sizeof(spaces));
			for (size_t sent = 0; sent < c->flood; sent += sizeof(spaces))
				if (!write_all(fd, spaces, sizeof(spaces)))
					break;
		}
	}
	shutdown(fd, SHUT_WR);
	drain(fd, 2000);
}

static void *server_main(void *arg)
{
	struct server *s = arg;

	for (;;) {
		struct pollfd p[2] = {{s->lfd, POLLIN, 0}, {s->stop[0], POLLIN, 0}};
		int fd;

		if (poll(p, 2, -1) < 0 || p[1].revents != 0)
			break;
		if ((fd = accept(s->lfd, NULL, NULL)) < 0)
			continue;
		serve(fd, atomic_load(&s->cur));
		atomic_fetch_add(&s->served, 1);
		close(fd);
	}
	return NULL;
}

static void server_start(struct server *s)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof(sa);

	memset(s, 0, sizeof(*s));
	assert_true((s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) >= 0);
	assert_int_equal(bind(s->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(getsockname(s->lfd, (struct sockaddr *)&sa, &sl), 0);
	assert_int_equal(listen(s->lfd, 16), 0);
	assert_int_equal(pipe2(s->stop, O_CLOEXEC), 0);
	s->port = ntohs(sa.sin_port);
	assert_int_equal(pthread_create(&s->thread, NULL, server_main, s), 0);
}

static void server_stop(struct server *s)
{
	assert_int_equal(write(s->stop[1], "x", 1), 1);
	pthread_join(s->thread, NULL);
	close(s->lfd);
	close(s->stop[0]);
	close(s->stop[1]);
}

static int run_op(struct etcd *e, enum op op)
{
	struct etcd_kv kv = {0};
	struct etcd_kvs l = {0};
	struct etcd_events ev = {0};
	int64_t a = -5, b = -5;
	int rv;

	switch (op) {
	case OP_GET:
		rv = etcd_get(e, "k", 1, &kv, &a);
		break;
	case OP_LIST:
		rv = etcd_list(e, "k/", 2, 0, 0, &l);
		break;
	case OP_GRANT:
		rv = etcd_lease_grant(e, 5, &a, &b);
		break;
	case OP_KEEPALIVE:
		rv = etcd_lease_keepalive(e, 77, &a);
		break;
	case OP_REVOKE:
		rv = etcd_lease_revoke(e, 77);
		break;
	case OP_PUT:
		rv = etcd_put_if_absent(e, "k", 1, "v", 1, 0, &a, &kv);
		break;
	case OP_WATCH:
		rv = etcd_watch_prefix(e, "k/", 2, 5, 2000, &ev);
		break;
	default:
		rv = etcd_delete_if_value(e, "k", 1, "v", 1);
		break;
	}
	if (rv < 0) { /* nothing given back on failure */
		assert_null(kv.key);
		assert_null(l.kv);
		assert_null(ev.ev);
		assert_int_equal(a, -5);
		assert_int_equal(b, -5);
	}
	etcd_kv_clear(&kv);
	etcd_kvs_free(&l);
	etcd_events_free(&ev);
	return rv;
}

static void test_silent(void **state)
{
	static const struct canned silent = {.what = "no answer",
	                                     .op = OP_GET,
	                                     .want = -ETIMEDOUT,
	                                     .status = "200 OK",
	                                     .body = "",
	                                     .silent = true};
	struct server s;
	struct etcd *e = NULL;
	char url[64];
	uint64_t t;

	(void)state;
	server_start(&s);
	atomic_store(&s.cur, &silent);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", s.port);
	assert_int_equal(etcd_open(url, 500, &e), 0);
	t = now_ms();
	EXPECT(e, run_op(e, OP_GET), -ETIMEDOUT);
	t = now_ms() - t;
	print_message("silent server: %s after %" PRIu64 " ms\n", etcd_errmsg(e), t);
	assert_true(t >= 400 && t < 3000);
	EXPECT(e, run_op(e, OP_PUT), -ETIMEDOUT);
	etcd_close(e);
	server_stop(&s);
}

#define HDR "\"header\":{\"revision\":\"9\"}"

/* An entry of the table: what, op, want, status, body. */
#define G(w, o, r, st, b)                                                                          \
	{                                                                                          \
		.what = (w), .op = (o), .want = (r), .status = (st), .body = (b)                   \
	}

static const struct canned garbage[] = {
        G("an HTML page", OP_GET, -EPROTO, "200 OK", "<html><body>It works!</body></html>"),
        G("truncated JSON", OP_GET, -EPROTO, "200 OK", "{" HDR ",\"kvs\":[{\"key\":\"aw==\","),
        {.what = "a body cut short",
         .op = OP_GET,
         .want = -EPROTO,
         .status = "200 OK",
         .body = "{" HDR ",\"kvs\":[",
         .claim = 4000},
        G("an empty body", OP_LIST, -EPROTO, "200 OK", ""),
        G("a JSON array", OP_GET, -EPROTO, "200 OK", "[1,2,3]"),
        G("a JSON string", OP_GET, -EPROTO, "200 OK", "\"kvs\""),
        G("no header", OP_GET, -EPROTO, "200 OK", "{\"kvs\":[]}"),
        G("a revision object", OP_GET, -EPROTO, "200 OK", "{\"header\":{\"revision\":{}}}"),
        G("a revision not a number", OP_LIST, -EPROTO, "200 OK",
          "{\"header\":{\"revision\":\"12abc\"}}"),
        G("a revision too large", OP_LIST, -EPROTO, "200 OK",
          "{\"header\":{\"revision\":\"99999999999999999999999\"}}"),
        G("kvs not an array", OP_LIST, -EPROTO, "200 OK", "{" HDR ",\"kvs\":{\"key\":\"aw==\"}}"),
        G("a kv not an object", OP_LIST, -EPROTO, "200 OK", "{" HDR ",\"kvs\":[3]}"),
        G("a key not base64", OP_LIST, -EPROTO, "200 OK", "{" HDR ",\"kvs\":[{\"key\":\"!!!\"}]}"),
        G("a value of bad length", OP_LIST, -EPROTO, "200 OK",
          "{" HDR ",\"kvs\":[{\"key\":\"aw==\",\"value\":\"abc\"}]}"),
        G("a kv without key", OP_LIST, -EPROTO, "200 OK",
          "{" HDR ",\"kvs\":[{\"value\":\"aw==\"}]}"),
        G("a lease of the wrong type", OP_LIST, -EPROTO, "200 OK",
          "{" HDR ",\"kvs\":[{\"key\":\"aw==\",\"lease\":true}]}"),
        G("another key for a get", OP_GET, -EPROTO, "200 OK",
          "{" HDR ",\"kvs\":[{\"key\":\"eg==\"}],\"count\":\"1\"}"),
        G("more a string", OP_LIST, -EPROTO, "200 OK", "{" HDR ",\"more\":\"yes\"}"),
        G("a lease ID not a number", OP_GRANT, -EPROTO, "200 OK",
          "{" HDR ",\"ID\":\"abc\",\"TTL\":\"5\"}"),
        G("a grant without TTL", OP_GRANT, -EPROTO, "200 OK", "{" HDR ",\"ID\":\"5\"}"),
        G("a keepalive without result", OP_KEEPALIVE, -EPROTO, "200 OK",
          "{" HDR ",\"ID\":\"77\",\"TTL\":\"5\"}"),
        G("a keepalive result not an object", OP_KEEPALIVE, -EPROTO, "200 OK", "{\"result\":7}"),
        G("a keepalive for another lease", OP_KEEPALIVE, -EPROTO, "200 OK",
          "{\"result\":{" HDR ",\"ID\":\"78\",\"TTL\":\"5\"}}"),
        G("a stream error of the wrong form", OP_KEEPALIVE, -EPROTO, "200 OK",
          "{\"error\":{\"grpc_code\":\"x\"}}"),
        G("a revoke without header", OP_REVOKE, -EPROTO, "200 OK", "{}"),
        G("succeeded a string", OP_PUT, -EPROTO, "200 OK", "{" HDR ",\"succeeded\":\"yes\"}"),
        G("a txn without responses", OP_PUT, -EPROTO, "200 OK", "{" HDR ",\"succeeded\":true}"),
        G("a failed txn without its range", OP_PUT, -EPROTO, "200 OK",
          "{" HDR ",\"responses\":[{\"response_put\":{}}]}"),
        G("a failed txn with an empty range", OP_PUT, -EPROTO, "200 OK",
          "{" HDR ",\"responses\":[{\"response_range\":{" HDR "}}]}"),
        G("a delete txn without its delete", OP_DEL, -EPROTO, "200 OK",
          "{" HDR ",\"succeeded\":true,\"responses\":[]}"),
        G("HTTP 500 in text", OP_GET, -EPROTO, "500 Internal Server Error", "oops"),
        G("HTTP 404 with a JSON object", OP_GET, -EPROTO, "404 Not Found", "{\"x\":1}"),
        G("not HTTP at all", OP_GET, -EPROTO, NULL, "SSH-2.0-OpenSSH_9.2\r\n\r\n"),
        {.what = "an answer too large",
         .op = OP_GET,
         .want = -EMSGSIZE,
         .status = "200 OK",
         .body = "{",
         .flood = ETCD_RESPONSE_MAX + 65536},
        G("a watch line not JSON", OP_WATCH, -EPROTO, "200 OK",
          "{\"result\":{" HDR ",\"created\":true}}\n<html>\n"),
        G("a watch result not an object", OP_WATCH, -EPROTO, "200 OK", "{\"result\":[]}\n"),
        G("a watch without created", OP_WATCH, -EPROTO, "200 OK", ""),
        G("watch events not an array", OP_WATCH, -EPROTO, "200 OK",
          "{\"result\":{" HDR ",\"events\":{}}}\n"),
        G("a watch event of unknown type", OP_WATCH, -EPROTO, "200 OK",
          "{\"result\":{" HDR ",\"events\":[{\"type\":\"MOVE\",\"kv\":{\"key\":\"aw==\"}}]}}\n"),
        G("a watch event without kv", OP_WATCH, -EPROTO, "200 OK",
          "{\"result\":{" HDR ",\"created\":true}}\n{\"result\":{" HDR
          ",\"events\":[{\"type\":\"DELETE\"}]}}\n"),
        G("a watch canceled by compaction", OP_WATCH, -ESTALE, "200 OK",
          "{\"result\":{" HDR ",\"canceled\":true,\"compact_revision\":\"7\"}}\n"),
        G("a watch that ends with a change", OP_WATCH, 0, "200 OK",
          "{\"result\":{" HDR ",\"created\":true}}\n{\"result\":{" HDR
          ",\"events\":[{\"kv\":{\"key\":\"aw==\"}}]}}"),
        /* Errors etcd itself gives, for comparison. */
        G("etcd unavailable", OP_GET, -EAGAIN, "503 Service Unavailable",
          "{\"error\":\"etcdserver: no leader\",\"code\":14,\"message\":\"etcdserver: no "
          "leader\"}"),
        G("etcd out of space", OP_PUT, -ENOSPC, "500 Internal Server Error",
          "{\"error\":\"mvcc: database space exceeded\",\"code\":8}"),
        G("a stream error", OP_KEEPALIVE, -EAGAIN, "200 OK",
          "{\"error\":{\"grpc_code\":14,\"http_code\":503,\"message\":\"no leader\"}}"),
        /* And what is not garbage: zero values left out. */
        G("a put that succeeded", OP_PUT, 0, "200 OK",
          "{" HDR ",\"succeeded\":true,\"responses\":[{\"response_put\":{" HDR "}}]}"),
        G("a get of nothing", OP_GET, ETCD_ABSENT, "200 OK", "{" HDR "}"),
        G("a delete that did not match", OP_DEL, ETCD_NOT_MATCHED, "200 OK",
          "{" HDR ",\"responses\":[]}"),
        G("a keepalive of a gone lease", OP_KEEPALIVE, ETCD_LEASE_GONE, "200 OK",
          "{\"result\":{" HDR ",\"ID\":\"77\"}}"),
};

static void test_garbage(void **state)
{
	size_t n = sizeof(garbage) / sizeof(garbage[0]);
	struct server s;
	struct etcd *e = NULL;
	char url[64];

	(void)state;
	server_start(&s);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", s.port);
	assert_int_equal(etcd_open(url, 3000, &e), 0);
	for (size_t i = 0; i < n; i++) {
		const struct canned *c = &garbage[i];
		int rv;

		atomic_store(&s.cur, c);
		rv = run_op(e, c->op);
		print_message("%-34s -> %4d %s\n", c->what, rv, etcd_errmsg(e));
		if (rv != c->want)
			print_error("%s: %d, wanted %d\n", c->what, rv, c->want);
		assert_int_equal(rv, c->want);
		if (rv < 0)
			assert_true(strlen(etcd_errmsg(e)) > 0);
	}
	/* counted once the server saw the client hang up: after etcd_close
	 * and the server thread's end, not before (the last answer reaches
	 * the client before its connection is counted) */
	etcd_close(e);
	server_stop(&s);
	assert_int_equal(atomic_load(&s.served), (int)n);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_prefix_end),
	        cmocka_unit_test(test_lease_keepalive),
	        cmocka_unit_test(test_lease_revoked),
	        cmocka_unit_test(test_lease_expiry),
	        cmocka_unit_test(test_put_if_absent_epochs),
	        cmocka_unit_test(test_compare_and_delete),
	        cmocka_unit_test(test_list_prefix),
	        cmocka_unit_test(test_watch),
	        cmocka_unit_test(test_down),
	        cmocka_unit_test(test_silent),
	        cmocka_unit_test(test_garbage),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
