/* test_client_kvd_nng.c — nng only: TLS, TCP and the token; a resent write is applied once. */
#include "client_kvd.h"

/* ---- TLS, TCP, token ------------------------------------------------------------------ */

bool tls_skipped;

static int sh(const char *dir, const char *cmd)
{
	char full[2048];
	int st;

	snprintf(full, sizeof(full), "cd '%s' && %s >>openssl.log 2>&1", dir, cmd);
	st = system(full);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static kvc *tls_client(const char *url, const char *ca, const char *name, const char *token)
{
	struct kvc_options o;
	kvc *c = NULL;

	kvc_options_init(&o);
	o.endpoint = url;
	o.tls_ca_file = ca;
	o.tls_server_name = name;
	o.token = token;
	o.timeout_ms = 5000;
	assert_int_equal(kvc_open(&o, &c), 0);
	return c;
}

void test_tls_tcp(void **state)
{
	static const char *const gen[] = {
	        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
	        "-keyout ca.key -out ca.pem -days 2 -subj /CN=kvd-test-ca",
	        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
	        "-keyout other.key -out other.pem -days 2 -subj /CN=kvd-other-ca",
	        "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
	        "-keyout server.key -out server.csr -subj /CN=kvd.test",
	        "printf 'subjectAltName=DNS:kvd.test\\nbasicConstraints=CA:FALSE\\n"
	        "keyUsage=digitalSignature\\nextendedKeyUsage=serverAuth\\n' >ext.cnf",
	        "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
	        "-out server.pem -days 2 -extfile ext.cnf",
	};
	struct kvd_proc k;
	struct kvd_opts o = {0};
	struct kvc_status st;
	struct kvc_call call = {.status = &st};
	struct kvc_value got;
	struct kvc_health h;
	char *dir, cfg[2048], tls_url[64], tcp_url[64], ca[600], other[600], tls_listen[80],
	        tcp_listen[80];
	uint8_t *val;
	kvc *c;
	int p1, p2;

	(void)state;
	if (system("openssl version >/dev/null 2>&1") != 0) {
		fprintf(stderr, "SKIP (TLS part): the openssl command is not installed, so no "
		                "certificate can be made\n");
		tls_skipped = true;
		return;
	}
	dir = tu_mkdtemp("tls");
	for (size_t i = 0; i < sizeof(gen) / sizeof(gen[0]); i++) {
		if (sh(dir, gen[i]) != 0) {
			char log[700];
			snprintf(log, sizeof(log), "cat '%s/openssl.log' >&2", dir);
			if (system(log) != 0)
				fprintf(stderr, "(no openssl log)\n");
			fail_msg("openssl failed: %s", gen[i]);
		}
	}
	snprintf(ca, sizeof(ca), "%s/ca.pem", dir);
	snprintf(other, sizeof(other), "%s/other.pem", dir);
	p1 = h_free_port();
	p2 = h_free_port();
	if (p2 == p1)
		p2 = h_free_port();
	snprintf(cfg, sizeof(cfg),
	         "tls_cert = %s/server.pem\ntls_key = %s/server.key\n"
	         "token = s3cret\n",
	         dir, dir);
	snprintf(tls_url, sizeof(tls_url), "tls+tcp://127.0.0.1:%d", p1);
	snprintf(tcp_url, sizeof(tcp_url), "tcp://127.0.0.1:%d", p2);
	snprintf(tls_listen, sizeof(tls_listen), "--listen=%s", tls_url);
	snprintf(tcp_listen, sizeof(tcp_listen), "--listen=%s", tcp_url);
	o.config_text = cfg;
	o.extra[0] = tls_listen;
	o.extra[1] = tcp_listen;
	assert_int_equal(kvd_start(&k, &o), 0);

	/* TLS with the right CA and server name; a value of many records */
	c = tls_client(tls_url, ca, "kvd.test", "s3cret");
	EXPECT_OK(st, kvc_health(c, &call, &h));
	assert_string_equal(h.status, "serving");
	val = malloc(200000);
	fill_random(val, 200000, 3);
	EXPECT_OK(st, kvc_put(c, &call, "over-tls", 8, val, 200000, NULL, NULL));
	EXPECT_OK(st, kvc_get(c, &call, "over-tls", 8, 0, 0, &got));
	assert_int_equal(got.len, 200000);
	assert_memory_equal(got.data, val, 200000);
	kvc_value_free(&got);
	kvc_close(c);
	/* the token: Health needs none, everything else does */
	c = tls_client(tls_url, ca, "kvd.test", NULL);
	EXPECT_OK(st, kvc_health(c, &call, NULL));
	EXPECT_CODE(st, kvc_get(c, &call, "over-tls", 8, 0, 0, NULL), KVC_UNAUTHENTICATED, "token");
	kvc_close(c);
	c = tls_client(tls_url, ca, "kvd.test", "wrong");
	EXPECT_CODE(st, kvc_put(c, &call, "k", 1, "v", 1, NULL, NULL), KVC_UNAUTHENTICATED, NULL);
	kvc_close(c);
	/* a CA that did not sign the server's certificate; a name the
	 * certificate does not carry */
	c = tls_client(tls_url, other, "kvd.test", "s3cret");
	EXPECT_CODE(st, kvc_put(c, &call, "k", 1, "v", 1, NULL, NULL), KVC_UNAVAILABLE, NULL);
	print_message("wrong CA: %s\n", st.message);
	kvc_close(c);
	c = tls_client(tls_url, ca, "not-kvd.test", "s3cret");
	EXPECT_CODE(st, kvc_health(c, &call, NULL), KVC_UNAVAILABLE, NULL);
	print_message("wrong name: %s\n", st.message);
	kvc_close(c);
	/* a missing CA file is the caller's mistake */
	{
		struct kvc_options bad;
		kvc *c2 = NULL;
		char missing[700];
		snprintf(missing, sizeof(missing), "%s/missing.pem", dir);
		kvc_options_init(&bad);
		bad.endpoint = tls_url;
		bad.tls_ca_file = missing;
		assert_int_equal(kvc_open(&bad, &c2), -KVC_INVALID_ARGUMENT);
	}
	/* plain TCP, same daemon, same data */
	c = tls_client(tcp_url, NULL, NULL, "s3cret");
	EXPECT_OK(st, kvc_get(c, &call, "over-tls", 8, 0, 0, &got));
	assert_int_equal(got.len, 200000);
	assert_memory_equal(got.data, val, 200000);
	kvc_value_free(&got);
	EXPECT_OK(st, kvc_put(c, &call, "over-tcp", 8, "plain", 5, NULL, NULL));
	kvc_close(c);
	c = tls_client(tls_url, ca, "kvd.test", "s3cret");
	EXPECT_OK(st, kvc_get(c, &call, "over-tcp", 8, 0, 0, &got));
	assert_memory_equal(got.data, "plain", 5);
	kvc_value_free(&got);
	kvc_close(c);
	free(val);
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, false);
	tu_rmtree(dir);
	free(dir);
}

/* ---- a resent write is applied once ----------------------------------------------- */

struct vjob {
	kvc *c;
	const char *key;
	size_t n;
	uint64_t first;
	int rv;
};

static void *versions_job(void *arg)
{
	struct vjob *j = arg;
	struct kvc_version *vl = NULL;

	j->rv = kvc_versions(j->c, NULL, j->key, strlen(j->key), 100, 0, false, &vl, &j->n, NULL);
	if (j->rv == 0 && j->n > 0)
		j->first = vl[0].version;
	kvc_versions_free(vl, j->n);
	return NULL;
}

void test_resend_applied_once(void **state)
{
	struct kvd_proc k;
	struct kvd_opts o = {.env = {"KVD_TEST_REPLY_DELAY_MS=2500"},
	                     .extra = {"--log-level", "debug"},
	                     .health_timeout_ms = 5000};
	struct kvc_options co;
	struct kvc_status st;
	struct kvc_call call = {.status = &st};
	struct acall a[2];
	atomic_int done = 0;
	struct kvc_op ops[2] = {
	        {.type = KVC_OP_PUT,
	         .key = "b1",
	         .key_len = 2,
	         .value = "1",
	         .value_len = 1,
	         .if_version = KVC_ANY_VERSION},
	        {.type = KVC_OP_PUT,
	         .key = "b2",
	         .key_len = 2,
	         .value = "2",
	         .value_len = 1,
	         .if_version = KVC_ANY_VERSION},
	};
	struct vjob jobs[4] = {{.key = "once"}, {.key = "cas"}, {.key = "b1"}, {.key = "b2"}};
	pthread_t th[4];
	kvc *c;

	(void)state;
	assert_int_equal(kvd_start(&k, &o), 0);
	kvc_options_init(&co);
	co.endpoint = k.url;
	co.resend_ms = 200; /* the request goes out again every 200 ms */
	co.timeout_ms = 20000;
	assert_int_equal(kvc_open(&co, &c), 0);
	memset(a, 0, sizeof(a));
	a[0].done = a[1].done = &done;
	{
		struct kvc_write w = KVC_WRITE_INIT;
		w.if_version = 0; /* a second application would fail its condition */
		ASYNC_SENT(kvc_put_async(c, &call, "once", 4, "v", 1, NULL, acall_cb, &a[0]));
		ASYNC_SENT(kvc_put_async(c, &call, "cas", 3, "v", 1, &w, acall_cb, &a[1]));
	}
	kvc_drain(c);
	assert_int_equal(a[0].rv, 0);
	assert_int_equal(a[1].rv, 0);
	EXPECT_OK(st, kvc_batch(c, &call, ops, 2, NULL));
	for (int i = 0; i < 4; i++) {
		jobs[i].c = c;
		pthread_create(&th[i], NULL, versions_job, &jobs[i]);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(jobs[i].rv, 0);
		if (jobs[i].n != 1)
			fail_msg("%s: %zu versions after resends, want 1", jobs[i].key, jobs[i].n);
	}
	assert_int_equal(jobs[0].first, a[0].version);
	assert_int_equal(jobs[1].first, a[1].version);
	assert_int_equal(jobs[2].first, ops[0].version);
	assert_int_equal(jobs[3].first, ops[1].version);
	kvc_close(c);
	assert_int_equal(kvd_stop(&k), 0);
	{
		/* the resends did reach kvd: it says it answered repeats */
		FILE *f = fopen(k.log, "r");
		char line[1024];
		int repeats = 0;
		assert_non_null(f);
		while (fgets(line, sizeof(line), f))
			repeats += strstr(line, "repeated") != NULL;
		fclose(f);
		print_message("kvd saw %d repeated writes\n", repeats);
		assert_true(repeats > 0);
	}
	kvd_cleanup(&k, false);
}

/* ---- a handle closed right after its first call ------------------------------- */

/* Handles opened, used once and closed at once, many times over (as a
 * readiness probe or kvctl uses them): every open dials, every close tears
 * the dial and its pipe down while nng's threads may still be at work on
 * them. None may fail, and under the sanitizers none may leave anything
 * behind or touch a freed handle. */
void test_short_lived_handles(void **state)
{
	struct kvd_proc k;
	struct kvc_options co;
	struct kvc_health h;

	(void)state;
	assert_int_equal(kvd_start(&k, NULL), 0);
	kvc_options_init(&co);
	co.endpoint = k.url;
	co.timeout_ms = 10000;
	for (int i = 0; i < 300; i++) {
		kvc *c = NULL;
		assert_int_equal(kvc_open(&co, &c), 0);
		assert_int_equal(kvc_health(c, NULL, &h), 0);
		kvc_close(c);
	}
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, false);
}
