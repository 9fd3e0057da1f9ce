/* test_auth.c — the tokens file is parsed as kvd.conf(5) says (every bad line refused with its line
 * number), tokens are known by their SHA-256 alone, each method needs its role, client certificates
 * get the roles of their cert-sha256: lines unless a token decides, and a connection's unknown
 * tokens are counted and ended at AUTH_FAILS_MAX. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h> /* after the headers it needs */

#include "auth.h"
#include "mp.h"
#include "protocol_doc.h"

/* sha256("tok-read"), ("tok-write"), ("tok-admin") … computed at run time */
static char line_read[80], line_write[80], line_admin[80], line_daemon[80];

static int setup(void **state)
{
	(void)state;
	auth_hash_line("tok-read", 8, line_read);
	auth_hash_line("tok-write", 9, line_write);
	auth_hash_line("tok-admin", 9, line_admin);
	auth_hash_line("tok-daemon", 10, line_daemon);
	return 0;
}

static struct auth_table *parse_ok(const char *text)
{
	struct auth_table *t = NULL;
	char err[256] = "";
	int rv = auth_table_parse(text, strlen(text), "tokens", &t, err, sizeof(err));

	if (rv != 0)
		fail_msg("refused: %s", err);
	return t;
}

/* A known hash: "sha256:" and the SHA-256 of "abc" (FIPS 180-2's example). */
static void hash_known(void **state)
{
	char line[80];

	(void)state;
	auth_hash_line("abc", 3, line);
	assert_string_equal(
	        line, "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

static void new_token_random(void **state)
{
	char a[2 * AUTH_TOKEN_BYTES + 1], b[2 * AUTH_TOKEN_BYTES + 1];

	(void)state;
	assert_int_equal(auth_new_token(a), 0);
	assert_int_equal(auth_new_token(b), 0);
	assert_int_equal(strlen(a), 2 * AUTH_TOKEN_BYTES);
	assert_true(strspn(a, "0123456789abcdef") == strlen(a));
	assert_string_not_equal(a, b);
}

static void parse_good(void **state)
{
	char text[1024];
	struct auth_table *t;

	(void)state;
	snprintf(text, sizeof(text),
	         "# comment\n"
	         "\n"
	         "   %s tenant=a:read tenant=b:write   # trailing comment\r\n"
	         "%s\tdaemon=admin tenant=*:admin\n",
	         line_read, line_admin);
	/* ".x" is not a tenant name: a fifth line so is refused */
	{
		char bad[1200], err[256];
		snprintf(bad, sizeof(bad), "%s%s tenant=.x:read", text, line_write);
		assert_int_equal(auth_table_parse(bad, strlen(bad), "f", &t, err, sizeof(err)),
		                 -EINVAL);
		assert_non_null(strstr(err, "f: line 5:"));
	}
	t = parse_ok(text);
	assert_int_equal(t->n, 2);
	assert_int_equal(t->entries[0].line, 3);
	assert_int_equal(t->entries[0].ngrants, 2);
	assert_string_equal(t->entries[0].grants[1].tenant, "b");
	assert_int_equal(t->entries[0].grants[1].role, WIRE_ROLE_WRITE);
	assert_false(t->entries[0].daemon_admin);
	assert_true(t->entries[1].daemon_admin);
	assert_string_equal(t->entries[1].grants[0].tenant, "*");
	auth_table_free(t);
}

/* Each bad line is refused, naming its line (the third: two good lines first). */
static void parse_bad_lines(void **state)
{
	static const struct {
		const char *line; /* %s: a good hash line without grants */
		const char *why;
	} bad[] = {
	        {"sha1:abcdef tenant=a:read", "starts with sha256:"},
	        {"sha256:abc tenant=a:read", "starts with sha256:"},
	        {"%sx tenant=a:read", "not 64 hex digits"},
	        {"sha256:zz5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8 "
	         "tenant=a:read",
	         "not 64 hex digits"},
	        {"%s", "without a grant"},
	        {"%s # only a comment", "without a grant"},
	        {"%s tenant=a", "no ':ROLE'"},
	        {"%s tenant=a:owner", "role 'owner'"},
	        {"%s tenant=:read", "not a tenant name"},
	        {"%s tenant=a/b:read", "not a tenant name"},
	        {"%s tenant=a:read tenant=a:write", "granted twice"},
	        {"%s daemon=admin daemon=admin", "given twice"},
	        {"%s daemon=read", "not tenant=NAME:ROLE or daemon=admin"},
	        {"%s user=a", "not tenant=NAME:ROLE or daemon=admin"},
	        {"sha256:0000000000000000000000000000000000000000000000000000000000000000 "
	         "daemon=admin",
	         "all zeros"},
	        {"%s tenant=x:read", "the same token as line 1"}, /* line_read again */
	};
	char head[400], line[600], text[1200], err[256];
	struct auth_table *t;

	(void)state;
	snprintf(head, sizeof(head), "%s tenant=a:read\n# two\n", line_read);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		/* a hash line of its own, but line_read for the duplicate case */
		const char *h = strstr(bad[i].why, "same token") ? line_read : line_daemon;
		snprintf(line, sizeof(line), bad[i].line, h);
		snprintf(text, sizeof(text), "%s%s\n", head, line);
		err[0] = '\0';
		t = NULL;
		assert_int_equal(
		        auth_table_parse(text, strlen(text), "tokens", &t, err, sizeof(err)),
		        -EINVAL);
		assert_null(t);
		if (strstr(err, "tokens: line 3: ") != err || strstr(err, bad[i].why) == NULL)
			fail_msg("case %zu '%s': got \"%s\", want line 3 and \"%s\"", i, line, err,
			         bad[i].why);
	}
	/* a NUL byte */
	memcpy(text, "x\n\0\n", 4);
	assert_int_equal(auth_table_parse(text, 4, "tokens", &t, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "line 1:")); /* "x" is refused before the NUL line */
	assert_int_equal(auth_table_parse(text + 2, 2, "tokens", &t, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "line 1: a NUL byte"));
}

static struct rpc_req *decode(const char *method, const char *tenant, const char *token,
                              const char *scope)
{
	static struct rpc_req r;
	static char buf[512];
	msgpack_sbuffer sb;
	msgpack_packer pk;
	struct rpc_limits lim = {.max_value_size = 1024, .version = "test"};
	const char *msg;
	int st;
	bool named = (strncmp(method, "Tenant", 6) == 0 && strcmp(method, "TenantList") != 0) ||
	             strcmp(method, "Backup") == 0;

	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, 4 + (token != NULL) + (named || scope));
	mp_kv_uint(&pk, "v", 1);
	mp_kv_uint(&pk, "id", 7);
	mp_kv_str(&pk, "method", method);
	mp_kv_str(&pk, "tenant", named ? "default" : tenant);
	if (token != NULL)
		mp_kv_str(&pk, "token", token);
	if (named || scope) {
		mp_pack_cstr(&pk, "args");
		msgpack_pack_map(&pk, 1);
		if (named)
			mp_kv_str(&pk, "name", tenant);
		else
			mp_kv_str(&pk, "scope", scope);
	}
	assert_true(sb.size <= sizeof(buf));
	memcpy(buf, sb.data, sb.size);
	assert_int_equal(rpc_req_decode(&r, &lim, buf, sb.size, &st, &msg), 0);
	msgpack_sbuffer_destroy(&sb);
	return &r;
}

static int check(const struct auth_table *t, const char *method, const char *tenant,
                 const char *token, const char *scope)
{
	struct rpc_req *r = decode(method, tenant, token, scope);
	const struct auth_entry *e;
	char msg[256];
	int st = auth_check(t, r, &e, msg, sizeof(msg));

	rpc_req_release(r);
	return st;
}

/* Each method against the role it needs; TenantList's filter. */
static void roles(void **state)
{
	char text[1024];
	struct auth_table *t;
	const struct auth_entry *e;
	struct rpc_req *r;
	char msg[256];

	(void)state;
	snprintf(text, sizeof(text),
	         "%s tenant=a:read\n%s tenant=a:write\n%s tenant=a:admin\n%s daemon=admin\n",
	         line_read, line_write, line_admin, line_daemon);
	t = parse_ok(text);
	/* open without a table, and Health always */
	assert_int_equal(check(NULL, "Put", "a", NULL, NULL), RPC_OK);
	assert_int_equal(check(t, "Health", "a", NULL, NULL), RPC_OK);
	assert_int_equal(check(t, "Get", "a", NULL, NULL), RPC_UNAUTHENTICATED);
	assert_int_equal(check(t, "Get", "a", "tok-nope", NULL), RPC_UNAUTHENTICATED);
	assert_int_equal(check(t, "Get", "a", "tok-rea", NULL), RPC_UNAUTHENTICATED);
	/* read */
	assert_int_equal(check(t, "Get", "a", "tok-read", NULL), RPC_OK);
	assert_int_equal(check(t, "Scan", "a", "tok-read", NULL), RPC_OK);
	assert_int_equal(check(t, "Stats", "a", "tok-read", "tenant"), RPC_OK);
	assert_int_equal(check(t, "Stats", "a", "tok-read", "daemon"), RPC_PERMISSION_DENIED);
	assert_int_equal(check(t, "Get", "b", "tok-read", NULL), RPC_PERMISSION_DENIED);
	assert_int_equal(check(t, "Put", "a", "tok-read", NULL), RPC_PERMISSION_DENIED);
	/* write includes read */
	assert_int_equal(check(t, "Put", "a", "tok-write", NULL), RPC_OK);
	assert_int_equal(check(t, "Versions", "a", "tok-write", NULL), RPC_OK);
	assert_int_equal(check(t, "Compact", "a", "tok-write", NULL), RPC_PERMISSION_DENIED);
	/* admin of the tenant: named by args.name */
	assert_int_equal(check(t, "TenantInfo", "a", "tok-admin", NULL), RPC_OK);
	assert_int_equal(check(t, "TenantInfo", "b", "tok-admin", NULL), RPC_PERMISSION_DENIED);
	assert_int_equal(check(t, "TenantPassivate", "a", "tok-admin", NULL), RPC_OK);
	assert_int_equal(check(t, "TenantDrop", "a", "tok-admin", NULL), RPC_PERMISSION_DENIED);
	/* the daemon admin: no tenant data */
	assert_int_equal(check(t, "TenantCreate", "c", "tok-daemon", NULL), RPC_OK);
	assert_int_equal(check(t, "Stats", "x", "tok-daemon", "daemon"), RPC_OK);
	assert_int_equal(check(t, "Get", "a", "tok-daemon", NULL), RPC_PERMISSION_DENIED);
	/* cluster mode's release and adopt: the daemon admin's, not a tenant admin's */
	assert_int_equal(check(t, "TenantRelease", "a", "tok-daemon", NULL), RPC_OK);
	assert_int_equal(check(t, "TenantAdopt", "a", "tok-daemon", NULL), RPC_OK);
	assert_int_equal(check(t, "TenantRelease", "a", "tok-admin", NULL), RPC_PERMISSION_DENIED);
	assert_int_equal(check(t, "TenantAdopt", "a", "tok-admin", NULL), RPC_PERMISSION_DENIED);
	/* Backup writes files on kvd's host: the daemon admin's alone */
	assert_int_equal(check(t, "Backup", "a", "tok-daemon", NULL), RPC_OK);
	assert_int_equal(check(t, "Backup", "a", "tok-admin", NULL), RPC_PERMISSION_DENIED);
	/* no token field, or one that is not a str: no token */
	r = decode("Get", "a", NULL, NULL);
	assert_null(r->token);
	rpc_req_release(r);
	/* TenantList: any token, filtered */
	r = decode("TenantList", "default", "tok-read", NULL);
	assert_int_equal(auth_check(t, r, &e, msg, sizeof(msg)), RPC_OK);
	assert_true(auth_may_see(e, "a"));
	assert_false(auth_may_see(e, "b"));
	rpc_req_release(r);
	r = decode("TenantList", "default", "tok-daemon", NULL);
	assert_int_equal(auth_check(t, r, &e, msg, sizeof(msg)), RPC_OK);
	assert_true(auth_may_see(e, "b"));
	rpc_req_release(r);
	/* the message names method, tenant and role */
	r = decode("Put", "a", "tok-read", NULL);
	assert_int_equal(auth_check(t, r, &e, msg, sizeof(msg)), RPC_PERMISSION_DENIED);
	assert_string_equal(msg,
	                    "Put on tenant 'a' needs role write, which this token does not have");
	rpc_req_release(r);
	auth_table_free(t);
}

/* The `token` setting alone: everything; with neither, no table. */
static void legacy_token(void **state)
{
	struct auth_table *t;
	char err[256];

	(void)state;
	assert_int_equal(auth_table_load(NULL, "", &t, err, sizeof(err)), 0);
	assert_null(t);
	assert_int_equal(auth_table_load("", "s3cret", &t, err, sizeof(err)), 0);
	assert_int_equal(t->n, 1);
	assert_int_equal(check(t, "TenantDrop", "a", "s3cret", NULL), RPC_OK);
	assert_int_equal(check(t, "Put", "zz", "s3cret", NULL), RPC_OK);
	assert_int_equal(check(t, "Put", "zz", "s3cre", NULL), RPC_UNAUTHENTICATED);
	auth_table_free(t);
}

/* The file: missing, writable by others, and with the token setting added. */
static void load_file(void **state)
{
	char path[] = "/tmp/test_auth_XXXXXX", err[512];
	struct auth_table *t;
	FILE *f;
	int fd;

	(void)state;
	assert_int_equal(auth_table_load("/nonexistent/tokens", NULL, &t, err, sizeof(err)),
	                 -ENOENT);
	assert_non_null(strstr(err, "/nonexistent/tokens"));
	assert_true((fd = mkstemp(path)) >= 0);
	assert_non_null(f = fdopen(fd, "w"));
	fprintf(f, "%s tenant=a:read\n", line_read);
	fclose(f);
	chmod(path, 0666);
	assert_int_equal(auth_table_load(path, NULL, &t, err, sizeof(err)), -EPERM);
	assert_non_null(strstr(err, "writable by others"));
	chmod(path, 0640);
	assert_int_equal(auth_table_load(path, "legacy", &t, err, sizeof(err)), 0);
	assert_int_equal(t->n, 2);
	assert_int_equal(check(t, "Get", "a", "tok-read", NULL), RPC_OK);
	assert_int_equal(check(t, "TenantCreate", "q", "legacy", NULL), RPC_OK);
	auth_table_free(t);
	unlink(path);
}

/* Unknown tokens on one connection: ended at the AUTH_FAILS_MAX-th within the window. */
static void failures(void **state)
{
	struct auth a;
	uint64_t now = 1000000;

	(void)state;
	log_set_level(LOG_ERR); /* the lines themselves are the integration test's */
	auth_init(&a, NULL);
	for (unsigned i = 1; i < AUTH_FAILS_MAX; i++)
		assert_false(auth_failed(&a, 42, true, "c42", now + i));
	assert_false(auth_failed(&a, 43, true, "c43", now)); /* another connection: its own count */
	assert_true(auth_failed(&a, 42, true, "c42", now + 10));
	/* ended: a connection with the same id later starts afresh */
	assert_false(auth_failed(&a, 42, true, "c42", now + 11));
	/* failures spread beyond the window never end it */
	for (unsigned i = 0; i < 3 * AUTH_FAILS_MAX; i++)
		assert_false(auth_failed(&a, 44, true, "c44",
		                         now + (uint64_t)i * (AUTH_FAIL_WINDOW_MS / 2 + 1)));
	auth_fini(&a);
}

/* Sources: a peer's address or uid, whatever its connection, port or pid;
 * refused once they guessed auth_guesses times within the window, for
 * AUTH_SRC_BLOCK_MS, and never with the limit off. */
static void sources(void **state)
{
	static const char *const peers[][2] = {
	        {"nng connection 7 of 10.0.0.1 port 4711", "10.0.0.1"},
	        {"stream connection of 10.0.0.1 port 80", "10.0.0.1"},
	        {"stream connection of ::1 port 80", "::1"},
	        {"stream connection of uid 1000 pid 42", "uid 1000"},
	        {"nng connection 9 of uid 1000", "uid 1000"},
	        {"nng connection 9", "nng connection 9"},
	};
	struct auth a;
	char src[AUTH_SRC_MAX];
	uint64_t now = 5000000;
	unsigned i;

	(void)state;
	log_set_level(LOG_ERR);
	for (i = 0; i < sizeof(peers) / sizeof(peers[0]); i++) {
		auth_source(peers[i][0], src, sizeof(src));
		assert_string_equal(src, peers[i][1]);
	}
	auth_init(&a, NULL);
	a.src_fails_max = 20;
	/* 20 guesses over 10 connections of one address: the last one blocks it */
	for (i = 0; i < 20; i++) {
		char peer[64];
		snprintf(peer, sizeof(peer), "stream connection of 10.0.0.1 port %u", 1000 + i / 2);
		assert_int_equal(auth_blocked(&a, "10.0.0.1", now + i), 0);
		auth_failed(&a, 100 + i / 2, true, peer, now + i);
	}
	assert_true(auth_any_blocked(&a, now + 20));
	assert_int_equal(auth_blocked(&a, "10.0.0.1", now + 20), AUTH_SRC_BLOCK_MS - 1);
	assert_int_equal(auth_blocked(&a, "10.0.0.2", now + 20), 0);
	assert_int_equal(auth_blocked(&a, "10.0.0.1", now + 19 + AUTH_SRC_BLOCK_MS), 0);
	assert_false(auth_any_blocked(&a, now + 19 + AUTH_SRC_BLOCK_MS));
	auth_fini(&a);
	/* the limit off */
	auth_init(&a, NULL);
	for (i = 0; i < 100; i++)
		auth_failed(&a, 200 + i, true, "stream connection of 10.0.0.1 port 1", now + i);
	assert_false(auth_any_blocked(&a, now + 100));
	assert_int_equal(auth_blocked(&a, "10.0.0.1", now + 100), 0);
	auth_fini(&a);
}

/* PROTOCOL.md states the limit auth.h has, and the role table wire.h has. */
static void protocol_agrees(void **state)
{
	char text[160];

	(void)state;
	snprintf(text, sizeof(text),
	         "A connection that sends %u unknown tokens within %u s is ended", AUTH_FAILS_MAX,
	         AUTH_FAIL_WINDOW_MS / 1000);
	if (!protocol_says(text))
		fail_msg("PROTOCOL.md does not say \"%s\"", text);
	assert_true(protocol_says("| Put, Delete, Batch | `write` on the request's `tenant` |"));
	assert_true(protocol_says("| Health | nothing: no token needed |"));
}

/* A certificate's fingerprint in both forms kvd.conf(5) allows. */
static void fp_forms(const uint8_t fp[AUTH_HASH_LEN], char *hex, char *colons)
{
	for (size_t i = 0; i < AUTH_HASH_LEN; i++) {
		snprintf(hex + 2 * i, 3, "%02x", fp[i]);
		snprintf(colons + 3 * i, 4, "%02X%s", fp[i], i + 1 < AUTH_HASH_LEN ? ":" : "");
	}
}

/* cert-sha256: lines: parsed in both forms, matched by certificates only
 * (never by a token, even one whose hash is the fingerprint), the token
 * deciding when there is one. */
static void certificates(void **state)
{
	uint8_t fa[AUTH_HASH_LEN], fb[AUTH_HASH_LEN], fc[AUTH_HASH_LEN];
	char ha[80], ca[120], hb[80], cb[120], text[1024], msg[256], err[256];
	struct auth_table *t = NULL;
	const struct auth_entry *e;
	struct rpc_req *r;

	(void)state;
	/* the "certificates": fingerprints of some DER bytes; "der-a" is also
	 * sent as a token below, which must not match a's line */
	auth_hash("der-a", 5, fa);
	auth_hash("der-b", 5, fb);
	auth_hash("der-c", 5, fc);
	fp_forms(fa, ha, ca);
	fp_forms(fb, hb, cb);
	snprintf(text, sizeof(text),
	         "cert-sha256:%s tenant=a:read\ncert-sha256:%s tenant=a:write daemon=admin\n"
	         "%s tenant=a:admin\n",
	         ca, hb, line_admin);
	t = parse_ok(text);
	assert_int_equal(t->n, 3);
	assert_true(t->entries[0].cert && t->entries[1].cert && !t->entries[2].cert);
	assert_memory_equal(t->entries[0].hash, fa, AUTH_HASH_LEN);
	assert_memory_equal(t->entries[1].hash, fb, AUTH_HASH_LEN);
	/* a certificate without a token: its line's roles */
	r = decode("Get", "a", NULL, NULL);
	assert_int_equal(auth_check_peer(t, r, fa, &e, msg, sizeof(msg)), RPC_OK);
	assert_ptr_equal(e, &t->entries[0]);
	rpc_req_release(r);
	r = decode("Put", "a", NULL, NULL);
	assert_int_equal(auth_check_peer(t, r, fa, &e, msg, sizeof(msg)), RPC_PERMISSION_DENIED);
	assert_string_equal(
	        msg, "Put on tenant 'a' needs role write, which this certificate does not have");
	assert_int_equal(auth_check_peer(t, r, fb, &e, msg, sizeof(msg)), RPC_OK);
	rpc_req_release(r);
	r = decode("TenantCreate", "x", NULL, NULL);
	assert_int_equal(auth_check_peer(t, r, fb, &e, msg, sizeof(msg)), RPC_OK);
	assert_int_equal(auth_check_peer(t, r, fa, &e, msg, sizeof(msg)), RPC_PERMISSION_DENIED);
	rpc_req_release(r);
	/* a certificate without a line: no roles */
	r = decode("Get", "a", NULL, NULL);
	assert_int_equal(auth_check_peer(t, r, fc, &e, msg, sizeof(msg)), RPC_UNAUTHENTICATED);
	assert_null(e);
	/* no certificate, no token */
	assert_int_equal(auth_check_peer(t, r, NULL, &e, msg, sizeof(msg)), RPC_UNAUTHENTICATED);
	rpc_req_release(r);
	/* a token decides over the certificate: more, less, or unknown */
	r = decode("Compact", "a", "tok-admin", NULL);
	assert_int_equal(auth_check_peer(t, r, fa, &e, msg, sizeof(msg)), RPC_OK);
	rpc_req_release(r);
	r = decode("Get", "a", "tok-nope", NULL);
	assert_int_equal(auth_check_peer(t, r, fb, &e, msg, sizeof(msg)), RPC_UNAUTHENTICATED);
	assert_string_equal(msg, "unknown token");
	rpc_req_release(r);
	/* the certificate's DER as a token hashes to its fingerprint: no match */
	r = decode("Get", "a", "der-a", NULL);
	assert_int_equal(auth_check_peer(t, r, NULL, &e, msg, sizeof(msg)), RPC_UNAUTHENTICATED);
	rpc_req_release(r);
	auth_table_free(t);
	/* the 64-digit form, and a token line with the same hash as a
	 * certificate line (not a duplicate: they never match each other) */
	snprintf(text, sizeof(text), "cert-sha256:%s tenant=a:read\nsha256:%s tenant=a:read\n", ha,
	         ha);
	t = parse_ok(text);
	assert_true(t->entries[0].cert && !t->entries[1].cert);
	auth_table_free(t);
	t = NULL;
	/* refused: the same certificate twice, a short or broken fingerprint */
	snprintf(text, sizeof(text), "cert-sha256:%s tenant=a:read\ncert-sha256:%s tenant=b:read\n",
	         ha, ca);
	assert_int_equal(auth_table_parse(text, strlen(text), "tokens", &t, err, sizeof(err)),
	                 -EINVAL);
	assert_string_equal(err, "tokens: line 2: the same certificate as line 1");
	snprintf(text, sizeof(text), "cert-sha256:%.62s tenant=a:read\n", ha);
	assert_int_equal(auth_table_parse(text, strlen(text), "tokens", &t, err, sizeof(err)),
	                 -EINVAL);
	assert_non_null(strstr(err, "line 1: the certificate's fingerprint is not 64 hex digits"));
	snprintf(text, sizeof(text), "cert-sha256:%.40s::%s tenant=a:read\n", ca, ca + 42);
	assert_int_equal(auth_table_parse(text, strlen(text), "tokens", &t, err, sizeof(err)),
	                 -EINVAL);
	assert_null(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(hash_known),      cmocka_unit_test(new_token_random),
	        cmocka_unit_test(parse_good),      cmocka_unit_test(parse_bad_lines),
	        cmocka_unit_test(roles),           cmocka_unit_test(legacy_token),
	        cmocka_unit_test(load_file),       cmocka_unit_test(failures),
	        cmocka_unit_test(protocol_agrees), cmocka_unit_test(certificates),
	        cmocka_unit_test(sources),
	};

	return cmocka_run_group_tests(tests, setup, NULL);
}
