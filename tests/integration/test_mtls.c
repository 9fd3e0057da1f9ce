/* test_mtls.c — kv+tls:// against a real kvd: client certificates mapped to roles (a read-only one
 * reads and is denied writes), refused when untrusted, expired or missing, the token deciding over
 * the certificate, the server verified by the client, pipelined and large requests, the handshake
 * bounded by frame_timeout, and settings kvd refuses.
 */
#include "harness.h"
#include "tls_certs.h"

#include <openssl/evp.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>

#include <cmocka.h> /* after the headers it needs */

#include "kvclient.h"

#define ADMIN "mtls-admin-token-0123456789abcdef"

static struct tls_certs certs;
static bool have_certs;

/* "sha256:HEX" of a token, as the tokens file holds it (kvd.conf(5)). */
static void token_line(const char *token, char out[80])
{
	unsigned char h[32];
	unsigned int n = sizeof(h);
	int o;

	assert_int_equal(EVP_Digest(token, strlen(token), h, &n, EVP_sha256(), NULL), 1);
	o = snprintf(out, 80, "sha256:");
	for (unsigned i = 0; i < n; i++)
		o += snprintf(out + o, (size_t)(80 - o), "%02x", h[i]);
}

/* The writer's fingerprint as 64 lower-case hex digits (the other form the
 * file takes). */
static void fp_plain(const char *colons, char *out, size_t len)
{
	size_t o = 0;

	for (const char *p = colons; *p && o + 1 < len; p++)
		if (*p != ':')
			out[o++] = (char)(*p >= 'A' && *p <= 'F' ? *p - 'A' + 'a' : *p);
	out[o] = '\0';
}

struct tls_kvd {
	struct kvd_proc k;
	char url[64];    /* kv+tls://127.0.0.1:PORT */
	char listen[64]; /* the same, for --listen */
	char *tokens;
};

/* Starts kvd with a kv+tls:// listener, the tokens file (the admin token,
 * reader read-only and writer read-write on "default"), auth as
 * tls_client_auth ("": the default) and more settings. */
static int start(struct tls_kvd *t, const char *auth, const char *more)
{
	struct kvd_opts o = {0};
	char conf[4096], line[80], wfp[80];
	FILE *f;
	int port = h_free_port(), rv;

	assert_true(port > 0);
	snprintf(t->url, sizeof(t->url), "kv+tls://127.0.0.1:%d", port);
	snprintf(t->listen, sizeof(t->listen), "%s", t->url);
	t->tokens = tu_path(certs.dir, "tokens-%d", port);
	assert_non_null(f = fopen(t->tokens, "w"));
	token_line(ADMIN, line);
	fp_plain(certs.writer_fp, wfp, sizeof(wfp));
	fprintf(f, "%s daemon=admin tenant=*:admin\n", line);
	fprintf(f, "cert-sha256:%s tenant=default:read\n", certs.reader_fp);
	fprintf(f, "cert-sha256:%s tenant=default:write # the 64-digit form\n", wfp);
	fclose(f);
	snprintf(conf, sizeof(conf),
	         "[kvd]\ntls_cert = %s\ntls_key = %s\ntls_client_ca = %s\n%s%s%s"
	         "tokens_file = %s\nworkers = 2\n%s",
	         certs.server_cert, certs.server_key, certs.ca, auth[0] ? "tls_client_auth = " : "",
	         auth, auth[0] ? "\n" : "", t->tokens, more ? more : "");
	o.config_text = conf;
	o.extra[0] = "--listen";
	o.extra[1] = t->listen;
	rv = kvd_start(&t->k, &o);
	return rv;
}

static void stop(struct tls_kvd *t)
{
	assert_int_equal(kvd_stop(&t->k), 0);
	kvd_cleanup(&t->k, false);
	free(t->tokens);
}

/* A client of url, verifying the server with ca, presenting cert/key
 * (NULL: none), with token (NULL: none). */
static kvc *client(const char *url, const char *ca, const char *cert, const char *key,
                   const char *token)
{
	struct kvc_options o;
	kvc *c = NULL;

	kvc_options_init(&o);
	o.endpoint = url;
	o.tls_ca_file = ca;
	o.token = token;
	o.timeout_ms = 5000;
	assert_int_equal(kvc_open_tls(&o, cert, key, &c), 0);
	return c;
}

static int put(kvc *c, const char *key, const char *val, struct kvc_status *st)
{
	struct kvc_call call = {.status = st};

	return kvc_put(c, &call, key, strlen(key), val, strlen(val), NULL, NULL);
}

static int get(kvc *c, const char *key, char *buf, size_t cap, struct kvc_status *st)
{
	struct kvc_call call = {.status = st};
	struct kvc_value v;
	int rv = kvc_get(c, &call, key, strlen(key), 0, 0, &v);

	if (rv == 0) {
		snprintf(buf, cap, "%.*s", (int)v.len, (const char *)v.data);
		kvc_value_free(&v);
	}
	return rv;
}

/* Polls kvd's log, up to 10 s, for a line with all of a and b. */
static bool log_within(const struct kvd_proc *k, const char *a, const char *b)
{
	uint64_t t0 = h_now_ms();

	while (h_now_ms() - t0 < 10000) {
		FILE *f = fopen(k->log, "r");
		char l[2048];
		bool found = false;
		while (f != NULL && !found && fgets(l, sizeof(l), f))
			found = strstr(l, a) != NULL && (b == NULL || strstr(l, b) != NULL);
		if (f != NULL)
			fclose(f);
		if (found)
			return true;
		poll(NULL, 0, 20);
	}
	return false;
}

/* ---- roles ------------------------------------------------------------------------- */

static void test_read_only_cert(void **state)
{
	struct tls_kvd t;
	struct kvc_status st;
	char got[64];
	kvc *admin, *reader, *writer, *reader_admin, *reader_guess, *stranger;

	(void)state;
	assert_int_equal(start(&t, "require", NULL), 0);
	admin = client(t.url, certs.ca, certs.stranger_cert, certs.stranger_key, ADMIN);
	assert_int_equal(put(admin, "k", "v1", &st), 0);
	/* the read-only certificate: reads without a token, is denied writes */
	reader = client(t.url, certs.ca, certs.reader_cert, certs.reader_key, NULL);
	assert_int_equal(get(reader, "k", got, sizeof(got), &st), 0);
	assert_string_equal(got, "v1");
	assert_int_equal(put(reader, "k", "v2", &st), -KVC_PERMISSION_DENIED);
	assert_non_null(strstr(st.message, "needs role write, which this certificate does not"));
	assert_int_equal(get(reader, "k", got, sizeof(got), &st), 0);
	assert_string_equal(got, "v1");
	/* … and only on its tenant */
	{
		struct kvc_call call = {.tenant = "other", .status = &st};
		struct kvc_value v;
		assert_int_equal(kvc_get(reader, &call, "k", 1, 0, 0, &v), -KVC_PERMISSION_DENIED);
	}
	/* the read-write one writes (its line is in the 64-digit form) */
	writer = client(t.url, certs.ca, certs.writer_cert, certs.writer_key, NULL);
	assert_int_equal(put(writer, "k", "v3", &st), 0);
	assert_int_equal(get(reader, "k", got, sizeof(got), &st), 0);
	assert_string_equal(got, "v3");
	/* a token, when given, decides: the admin token writes over the
	 * read-only certificate, an unknown one is refused despite it */
	reader_admin = client(t.url, certs.ca, certs.reader_cert, certs.reader_key, ADMIN);
	assert_int_equal(put(reader_admin, "k", "v4", &st), 0);
	reader_guess = client(t.url, certs.ca, certs.reader_cert, certs.reader_key, "guess");
	assert_int_equal(get(reader_guess, "k", got, sizeof(got), &st), -KVC_UNAUTHENTICATED);
	assert_string_equal(st.message, "unknown token");
	/* a trusted certificate without a line of its own: no roles */
	stranger = client(t.url, certs.ca, certs.stranger_cert, certs.stranger_key, NULL);
	assert_int_equal(get(stranger, "k", got, sizeof(got), &st), -KVC_UNAUTHENTICATED);
	assert_non_null(strstr(st.message, "client certificate"));
	kvc_close(stranger);
	kvc_close(reader_guess);
	kvc_close(reader_admin);
	kvc_close(writer);
	kvc_close(reader);
	kvc_close(admin);
	stop(&t);
}

/* ---- certificates refused ------------------------------------------------------------ */

/* A call with cert/key fails UNAVAILABLE (the handshake, or the first read
 * after it in TLS 1.3, where the server checks the client's certificate
 * after the client has finished), and kvd says why. */
static void refused(struct tls_kvd *t, const char *cert, const char *key, const char *why)
{
	struct kvc_status st;
	char got[64];
	kvc *c = client(t->url, certs.ca, cert, key, NULL);

	assert_int_equal(get(c, "k", got, sizeof(got), &st), -KVC_UNAVAILABLE);
	assert_non_null(strstr(st.message, "TLS"));
	kvc_close(c);
	assert_true(log_within(&t->k, "TLS handshake with 127.0.0.1", why));
}

static void test_untrusted_cert(void **state)
{
	struct tls_kvd t;

	(void)state;
	assert_int_equal(start(&t, "require", NULL), 0);
	refused(&t, certs.untrusted_cert, certs.untrusted_key,
	        "unable to get local issuer certificate");
	stop(&t);
}

static void test_expired_cert(void **state)
{
	struct tls_kvd t;

	(void)state;
	assert_int_equal(start(&t, "require", NULL), 0);
	refused(&t, certs.expired_cert, certs.expired_key, "certificate has expired");
	stop(&t);
}

/* require: no certificate, no connection; optional: the token decides, and
 * a certificate that is sent must still verify. */
static void test_no_cert(void **state)
{
	struct tls_kvd t;
	struct kvc_status st;
	char got[64];
	kvc *c;

	(void)state;
	assert_int_equal(start(&t, "", NULL), 0); /* with tls_client_ca: require */
	refused(&t, NULL, NULL, "peer did not return a certificate");
	stop(&t);

	assert_int_equal(start(&t, "optional", NULL), 0);
	c = client(t.url, certs.ca, NULL, NULL, ADMIN);
	assert_int_equal(put(c, "k", "v", &st), 0);
	kvc_close(c);
	c = client(t.url, certs.ca, NULL, NULL, NULL);
	assert_int_equal(get(c, "k", got, sizeof(got), &st), -KVC_UNAUTHENTICATED);
	kvc_close(c);
	c = client(t.url, certs.ca, certs.reader_cert, certs.reader_key, NULL);
	assert_int_equal(get(c, "k", got, sizeof(got), &st), 0);
	assert_string_equal(got, "v");
	kvc_close(c);
	refused(&t, certs.expired_cert, certs.expired_key, "certificate has expired");
	stop(&t);
}

/* The client verifies the server: against its CA, and the endpoint's name. */
static void test_server_verified(void **state)
{
	struct tls_kvd t;
	struct kvc_options o;
	struct kvc_status st;
	char got[64], url[80];
	kvc *c;

	(void)state;
	assert_int_equal(start(&t, "require", NULL), 0);
	/* a CA that did not sign the server's certificate */
	c = client(t.url, certs.other_ca, certs.reader_cert, certs.reader_key, NULL);
	assert_int_equal(get(c, "k", got, sizeof(got), &st), -KVC_UNAVAILABLE);
	assert_non_null(strstr(st.message, "certificate verify failed"));
	kvc_close(c);
	/* a name the certificate does not have */
	kvc_options_init(&o);
	o.endpoint = t.url;
	o.tls_ca_file = certs.ca;
	o.tls_server_name = "kvd.example";
	o.timeout_ms = 5000;
	assert_int_equal(kvc_open_tls(&o, certs.reader_cert, certs.reader_key, &c), 0);
	assert_int_equal(get(c, "k", got, sizeof(got), &st), -KVC_UNAVAILABLE);
	assert_non_null(strstr(st.message, "hostname mismatch"));
	kvc_close(c);
	/* localhost by name (DNS) as well as 127.0.0.1 (IP) */
	snprintf(url, sizeof(url), "kv+tls://localhost:%s", strrchr(t.url, ':') + 1);
	c = client(url, certs.ca, certs.reader_cert, certs.reader_key, NULL);
	assert_int_equal(get(c, "k", got, sizeof(got), &st), -KVC_NOT_FOUND);
	kvc_close(c);
	/* only one of certificate and key */
	assert_int_equal(kvc_open_tls(&o, certs.reader_cert, NULL, &c), -KVC_INVALID_ARGUMENT);
	/* a key that is not the certificate's */
	assert_int_equal(kvc_open_tls(&o, certs.reader_cert, certs.writer_key, &c),
	                 -KVC_INVALID_ARGUMENT);
	stop(&t);
}

/* ---- traffic ---------------------------------------------------------------------- */

struct acount {
	atomic_uint ok, bad;
};

static void on_done(void *arg, const struct kvc_async_result *res)
{
	struct acount *a = arg;

	if (res->rv == 0)
		atomic_fetch_add(&a->ok, 1);
	else
		atomic_fetch_add(&a->bad, 1);
}

static void on_get(void *arg, const struct kvc_async_result *res)
{
	struct acount *a = arg;

	if (res->rv == 0 && res->value_len == 8 && memcmp(res->value, "value-", 6) == 0)
		atomic_fetch_add(&a->ok, 1);
	else
		atomic_fetch_add(&a->bad, 1);
}

struct loader {
	const char *url;
	unsigned calls, bad;
};

static void *load_main(void *arg)
{
	struct loader *l = arg;
	kvc *c = client(l->url, certs.ca, certs.writer_cert, certs.writer_key, NULL);
	struct kvc_status st;
	char key[32], got[64];

	for (unsigned i = 0; i < 200; i++) {
		snprintf(key, sizeof(key), "t%p-%u", (void *)l, i % 10);
		if (put(c, key, "x", &st) != 0 || get(c, key, got, sizeof(got), &st) != 0 ||
		    strcmp(got, "x") != 0)
			l->bad++;
		l->calls += 2;
	}
	kvc_close(c);
	return NULL;
}

/* Pipelined requests on the shared connection (its reader and writers on
 * different threads), blocking calls from several threads, and values of
 * several records each way. */
static void test_traffic(void **state)
{
	struct tls_kvd t;
	struct acount a = {0}, g = {0};
	struct kvc_status st;
	struct kvc_value v;
	struct kvc_call call = {.status = &st};
	struct loader l[4];
	pthread_t th[4];
	size_t big = 3u << 20;
	uint8_t *val = malloc(big);
	char key[32];
	kvc *c;

	(void)state;
	assert_int_equal(start(&t, "require", NULL), 0);
	c = client(t.url, certs.ca, certs.writer_cert, certs.writer_key, NULL);
	for (unsigned i = 0; i < 500; i++) {
		snprintf(key, sizeof(key), "a%u", i);
		assert_int_equal(
		        kvc_put_async(c, &call, key, strlen(key), "value-xx", 8, NULL, on_done, &a),
		        0);
	}
	kvc_drain(c);
	assert_int_equal(atomic_load(&a.ok), 500);
	for (unsigned i = 0; i < 500; i++) {
		snprintf(key, sizeof(key), "a%u", i);
		assert_int_equal(kvc_get_async(c, &call, key, strlen(key), on_get, &g), 0);
	}
	kvc_drain(c);
	assert_int_equal(atomic_load(&g.ok), 500);
	assert_int_equal(atomic_load(&g.bad), 0);
	/* a value of many TLS records, both ways */
	for (size_t i = 0; i < big; i++)
		val[i] = (uint8_t)(i * 2654435761u >> 13);
	assert_int_equal(kvc_put(c, &call, "big", 3, val, big, NULL, NULL), 0);
	assert_int_equal(kvc_get(c, &call, "big", 3, 0, 0, &v), 0);
	assert_int_equal(v.len, big);
	assert_memory_equal(v.data, val, big);
	kvc_value_free(&v);
	for (int i = 0; i < 4; i++) {
		l[i] = (struct loader){t.url, 0, 0};
		assert_int_equal(pthread_create(&th[i], NULL, load_main, &l[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(l[i].calls, 400);
		assert_int_equal(l[i].bad, 0);
	}
	kvc_close(c);
	free(val);
	stop(&t);
}

/* ---- limits and settings --------------------------------------------------------- */

/* A client that connects and never finishes its handshake is ended after
 * frame_timeout, as one that never sends its hello. */
static void test_handshake_timeout(void **state)
{
	struct tls_kvd t;
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct pollfd p;
	uint64_t t0;
	char b[16];
	int fd;

	(void)state;
	assert_int_equal(start(&t, "require", "frame_timeout = 1\n"), 0);
	sa.sin_port = htons((uint16_t)atoi(strrchr(t.url, ':') + 1));
	assert_true((fd = socket(AF_INET, SOCK_STREAM, 0)) >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	/* half a ClientHello record header, then silence */
	assert_int_equal(write(fd, "\x16\x03\x01", 3), 3);
	t0 = h_now_ms();
	p = (struct pollfd){fd, POLLIN, 0};
	assert_int_equal(poll(&p, 1, 10000), 1);
	assert_true(read(fd, b, sizeof(b)) <= 0); /* closed, not answered */
	assert_true(h_now_ms() - t0 < 10000);
	close(fd);
	assert_true(
	        log_within(&t.k, "did not finish a hello or frame within frame_timeout", t.url));
	stop(&t);
}

/* kvd refuses to start: kv+tls:// without tls_cert and tls_key, and a
 * client auth that needs a CA without one. */
static void test_refused_settings(void **state)
{
	struct kvd_proc k;
	struct kvd_opts o = {0};
	char listen[64], conf[2048];

	(void)state;
	snprintf(listen, sizeof(listen), "kv+tls://127.0.0.1:%d", h_free_port());
	o.extra[0] = "--listen";
	o.extra[1] = listen;
	o.health_timeout_ms = 100;
	o.config_text = "[kvd]\n";
	assert_int_equal(kvd_start(&k, &o), -1);
	assert_true(h_log_has(&k, "needs tls_cert and tls_key"));
	kvd_cleanup(&k, false);
	snprintf(conf, sizeof(conf),
	         "[kvd]\ntls_cert = %s\ntls_key = %s\ntls_client_auth = optional\n",
	         certs.server_cert, certs.server_key);
	o.config_text = conf;
	assert_int_equal(kvd_start(&k, &o), -1);
	assert_true(h_log_has(&k, "tls_client_auth = optional needs tls_client_ca"));
	kvd_cleanup(&k, false);
	/* a key that does not belong to the certificate */
	snprintf(conf, sizeof(conf), "[kvd]\ntls_cert = %s\ntls_key = %s\n", certs.server_cert,
	         certs.reader_key);
	o.config_text = conf;
	assert_int_equal(kvd_start(&k, &o), -1);
	assert_true(h_log_has(&k, "key values mismatch"));
	kvd_cleanup(&k, false);
}

static int setup(void **state)
{
	(void)state;
	have_certs = tls_certs_make(&certs);
	if (!have_certs)
		fprintf(stderr, "openssl could not make the certificates: see %s/openssl.log\n",
		        certs.dir);
	return have_certs ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	tls_certs_free(&certs);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_read_only_cert),    cmocka_unit_test(test_untrusted_cert),
	        cmocka_unit_test(test_expired_cert),      cmocka_unit_test(test_no_cert),
	        cmocka_unit_test(test_server_verified),   cmocka_unit_test(test_traffic),
	        cmocka_unit_test(test_handshake_timeout), cmocka_unit_test(test_refused_settings),
	};

	signal(SIGPIPE, SIG_IGN);
	if (system("openssl version >/dev/null 2>&1") != 0) {
		printf("# skipped: no openssl command to make certificates with\n");
		return 77;
	}
	return cmocka_run_group_tests(tests, setup, teardown);
}
