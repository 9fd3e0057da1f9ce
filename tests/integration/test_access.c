/* test_access.c — tokens and roles against a real kvd over both transports and TLS (kv+ipc://,
 * ipc://, kv+tls://): every cell of tokens x tenants x methods answers its expected status,
 * TenantList shows only granted tenants, SIGHUP swaps tokens under open connections (a bad file
 * keeps the old ones), and unknown tokens end a stream connection after 5 (an nng one is logged),
 * logged at a bounded rate.
 */
/*
 * The expected statuses are written out below, row by row, not derived
 * from the rules daemon/auth.c applies: the table is the specification
 * (kvd.conf(5), TOKENS FILE; PROTOCOL.md, "Authentication and roles").
 */
#include "harness.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sys/stat.h>

#include <cmocka.h> /* after the headers it needs */

#include "auth.h"
#include "kvclient.h"
#include "stream_client.h"
#include "tls_certs.h"

/* ---- a connection over any transport --------------------------------------- */

enum tr {
	TR_KVIPC, /* kv+ipc://: stream_client.h's plain socket */
	TR_IPC,   /* ipc://: an nng REQ socket */
	TR_KVTLS, /* kv+tls://: libkvclient's kvc_raw (the stream framing over TLS) */
	TR_N
};
static const char *const tr_name[TR_N] = {"kv+ipc", "ipc", "kv+tls"};

/* The certificates of kv+tls:// (made once), and the running kvd's URL. */
static struct tls_certs certs;
static char tls_url[64];

struct tconn {
	enum tr tr;
	bool stream;  /* kv+ipc:// or kv+tls:// (ended after too many unknown tokens) */
	int fd;       /* kv+ipc */
	nng_socket s; /* ipc */
	kvc *c;       /* kv+tls */
	const char *url;
};

static void tc_open(struct tconn *c, const struct kvd_proc *k, enum tr tr)
{
	memset(c, 0, sizeof(*c));
	c->tr = tr;
	c->stream = tr != TR_IPC;
	c->url = tr == TR_KVIPC ? k->surl : tr == TR_IPC ? k->url : tls_url;
	if (tr == TR_KVIPC) {
		c->fd = st_open(c->url);
	} else if (tr == TR_IPC) {
		c->s = h_dial(c->url, 5000);
	} else {
		struct kvc_options o;
		kvc_options_init(&o);
		o.endpoint = c->url;
		o.tls_ca_file = certs.ca;
		o.timeout_ms = 5000;
		o.contexts = 1; /* one connection: the cells' connection-bound counts */
		assert_int_equal(kvc_open(&o, &c->c), 0);
	}
}

static void tc_close(struct tconn *c)
{
	if (c->tr == TR_KVIPC)
		close(c->fd);
	else if (c->tr == TR_IPC)
		nng_close(c->s);
	else
		kvc_close(c->c);
}

/* One request's reply bytes over c (malloc'd; NULL: none came). */
static uint8_t *tc_roundtrip(struct tconn *c, const void *body, size_t len, size_t *ret_len)
{
	uint8_t *rep = NULL;
	void *raw = NULL;
	int err = 0;

	switch (c->tr) {
	case TR_KVIPC:
		st_send_frame(c->fd, body, len);
		if (st_recv_frame(c->fd, 5000, &rep, ret_len) != 0)
			rep = NULL;
		return rep;
	case TR_IPC:
		return h_rawcall(c->s, body, len, ret_len, &err);
	default:
		if (kvc_raw(c->c, 5000, body, len, &raw, ret_len) != 0)
			return NULL;
		return raw;
	}
}

/* Sends q (consumed); the reply's status and, if msg, its message. -1: no reply. */
static int tc_call(struct tconn *c, struct h_req *q, char *msg, size_t msglen)
{
	struct h_reply r;
	uint8_t *rep = NULL;
	size_t n = 0;
	int st = -1;

	rep = tc_roundtrip(c, q->sb.data, q->sb.size, &n);
	msgpack_sbuffer_destroy(&q->sb);
	if (rep == NULL)
		return -1;
	assert_int_equal(h_parse(rep, n, &r), 0);
	st = (int)r.status;
	if (msg)
		snprintf(msg, msglen, "%s", r.message);
	h_reply_free(&r);
	free(rep);
	return st;
}

/* ---- the matrix ------------------------------------------------------------------ */

/* The methods, in the order of the expected rows' letters. */
enum m {
	M_GET,
	M_PUT,
	M_DELETE,
	M_SCAN,
	M_VERSIONS,
	M_BATCH,
	M_STATS_T,
	M_STATS_D,
	M_COMPACT,
	M_INFO,
	M_PASSIVATE,
	M_ACTIVATE,
	M_LIST,
	M_HEALTH,
	M_CREATE,
	M_DROP,
	M_N
};
static const char *const mname[M_N] = {
        "Get",        "Put",    "Delete",       "Scan",       "Versions",        "Batch",
        "Stats",      "Stats",  "Compact",      "TenantInfo", "TenantPassivate", "TenantActivate",
        "TenantList", "Health", "TenantCreate", "TenantDrop",
};

/* One request of method m on tenant, with token (NULL: none). TenantCreate
 * and TenantDrop name "<tenant>-x", so that they can succeed in turn. */
static void build(struct h_req *q, enum m m, const char *tenant, const char *token, uint64_t id)
{
	char other[80];
	uint32_t nargs;

	snprintf(other, sizeof(other), "%s-x", tenant);
	switch (m) {
	case M_GET:
	case M_DELETE:
	case M_VERSIONS:
	case M_BATCH:
	case M_STATS_T:
	case M_STATS_D:
	case M_INFO:
	case M_PASSIVATE:
	case M_ACTIVATE:
	case M_CREATE:
	case M_DROP:
		nargs = 1;
		break;
	case M_PUT:
		nargs = 2;
		break;
	default:
		nargs = 0;
	}
	h_req_begin(q, mname[m], tenant, id, nargs, token ? 1 : 0);
	if (token) {
		mp_kv_str(&q->pk, "token", token);
		h_req_args(q, nargs);
	}
	switch (m) {
	case M_GET:
	case M_DELETE:
	case M_VERSIONS:
		mp_kv_bin(&q->pk, "key", "k", 1);
		break;
	case M_PUT:
		mp_kv_bin(&q->pk, "key", "k", 1);
		mp_kv_bin(&q->pk, "value", "v", 1);
		break;
	case M_BATCH:
		mp_pack_cstr(&q->pk, "ops");
		msgpack_pack_array(&q->pk, 1);
		msgpack_pack_map(&q->pk, 3);
		mp_kv_str(&q->pk, "op", "put");
		mp_kv_bin(&q->pk, "key", "k", 1);
		mp_kv_bin(&q->pk, "value", "v", 1);
		break;
	case M_STATS_T:
		mp_kv_str(&q->pk, "scope", "tenant");
		break;
	case M_STATS_D:
		mp_kv_str(&q->pk, "scope", "daemon");
		break;
	case M_INFO:
	case M_PASSIVATE:
	case M_ACTIVATE:
		mp_kv_str(&q->pk, "name", tenant);
		break;
	case M_CREATE:
	case M_DROP:
		mp_kv_str(&q->pk, "name", other);
		break;
	default:
		break;
	}
}

#define LEGACY "legacy-token-0123456789abcdef"

static const struct {
	const char *token;  /* NULL: none */
	const char *grants; /* its line's grants in the tokens file; NULL: not in it */
	/* per tenant a, b: one letter per method (enum m): o OK, d PERMISSION_DENIED,
	 * u UNAUTHENTICATED */
	const char *want[2];
} rows[] = {
        /*                                       GPDSVBsSCIPALHcd */
        {NULL, NULL, {"uuuuuuuuuuuuuouu", "uuuuuuuuuuuuuouu"}},
        {"not-a-token", NULL, {"uuuuuuuuuuuuuouu", "uuuuuuuuuuuuuouu"}},
        {"tok-read-a", "tenant=a:read", {"oddoododddddoodd", "ddddddddddddoodd"}},
        {"tok-write-a", "tenant=a:write", {"ooooooodddddoodd", "ddddddddddddoodd"}},
        {"tok-admin-a", "tenant=a:admin", {"ooooooodoooooodd", "ddddddddddddoodd"}},
        {"tok-read-all", "tenant=*:read", {"oddoododddddoodd", "oddoododddddoodd"}},
        {"tok-daemon", "daemon=admin", {"dddddddoddddoooo", "dddddddoddddoooo"}},
        {"tok-mixed", "tenant=b:admin tenant=*:read", {"oddoododddddoodd", "ooooooodoooooodd"}},
        {LEGACY, NULL, {"oooooooooooooooo", "oooooooooooooooo"}},
};
#define NROWS (sizeof(rows) / sizeof(rows[0]))

/* Writes the tokens file of rows[] (and extra lines) to path. */
static void write_tokens(const char *path, const char *extra)
{
	FILE *f = fopen(path, "w");
	char line[80];

	assert_non_null(f);
	fprintf(f, "# test_access\n");
	for (size_t i = 0; i < NROWS; i++) {
		if (rows[i].grants == NULL)
			continue;
		auth_hash_line(rows[i].token, strlen(rows[i].token), line);
		fprintf(f, "%s %s\n", line, rows[i].grants);
	}
	if (extra)
		fputs(extra, f);
	fclose(f);
}

static int status_of(char c)
{
	return c == 'o' ? RPC_OK : c == 'd' ? RPC_PERMISSION_DENIED : RPC_UNAUTHENTICATED;
}

/* A kvd with the tokens file; guesses: its auth_guesses line (NULL: the
 * default's). */
static void start_with(struct kvd_proc *k, char **ret_tokdir, char **ret_tokens,
                       const char *guesses)
{
	struct kvd_opts o = {0};
	char *dir = tu_mkdtemp("tokens"), *path = tu_path(dir, "tokens"), conf[4096];

	write_tokens(path, NULL);
	snprintf(conf, sizeof(conf),
	         "[kvd]\ntokens_file = %s\ntoken = %s\nworkers = 2\ntls_cert = %s\ntls_key = %s\n%s",
	         path, LEGACY, certs.server_cert, certs.server_key, guesses ? guesses : "");
	snprintf(tls_url, sizeof(tls_url), "kv+tls://127.0.0.1:%d", h_free_port());
	o.config_text = conf;
	o.extra[0] = "--listen";
	o.extra[1] = tls_url;
	assert_int_equal(kvd_start(k, &o), 0);
	*ret_tokdir = dir;
	*ret_tokens = path;
}

/* The matrix and the other tests send many unknown tokens on purpose from
 * one source: no per-source limit there (test_brute_force has it). */
static void start(struct kvd_proc *k, char **ret_tokdir, char **ret_tokens)
{
	start_with(k, ret_tokdir, ret_tokens, "auth_guesses = 0\n");
}

/* TenantCreate of name with the legacy token: its status. */
static int create(struct tconn *c, const char *name)
{
	struct h_req q;

	h_req_begin(&q, "TenantCreate", NULL, 1, 1, 1);
	mp_kv_str(&q.pk, "token", LEGACY);
	h_req_args(&q, 1);
	mp_kv_str(&q.pk, "name", name);
	return tc_call(c, &q, NULL, 0);
}

/* A status from a fresh legacy-token call (setup between cells). */
static int admin_call(struct tconn *c, enum m m, const char *tenant)
{
	struct h_req q;

	build(&q, m, tenant, LEGACY, 1);
	return tc_call(c, &q, NULL, 0);
}

static void test_matrix(void **state)
{
	struct kvd_proc k;
	char *tokdir, *tokens;
	static const char *const tenants[2] = {"a", "b"};
	unsigned cells = 0, failed = 0;

	(void)state;
	start(&k, &tokdir, &tokens);
	for (int tr = 0; tr < TR_N; tr++) {
		struct tconn adm;
		tc_open(&adm, &k, (enum tr)tr);
		/* the tenants, with the key every cell reads */
		for (int t = 0; t < 2; t++) {
			int st = create(&adm, tenants[t]);
			assert_true(st == RPC_OK || st == RPC_ALREADY_EXISTS);
		}
		for (size_t i = 0; i < NROWS; i++) {
			struct tconn c;
			tc_open(&c, &k, (enum tr)tr);
			for (int t = 0; t < 2; t++) {
				for (int m = 0; m < M_N; m++) {
					char msg[256];
					struct h_req q;
					int want = status_of(rows[i].want[t][m]), got;
					/* every cell starts from the same state: k in the tenant */
					assert_int_equal(admin_call(&adm, M_PUT, tenants[t]),
					                 RPC_OK);
					if (m == M_ACTIVATE)
						admin_call(&adm, M_PASSIVATE, tenants[t]);
					/* an unknown token ends a connection after 5:
					 * each of its cells gets a connection of its own */
					if (rows[i].token != NULL && rows[i].grants == NULL &&
					    strcmp(rows[i].token, LEGACY) != 0) {
						tc_close(&c);
						tc_open(&c, &k, (enum tr)tr);
					}
					build(&q, (enum m)m, tenants[t], rows[i].token,
					      100 + (uint64_t)m);
					got = tc_call(&c, &q, msg, sizeof(msg));
					cells++;
					if (got != want) {
						failed++;
						print_error("%s: token %s, tenant %s, %s%s: status "
						            "%d (%s), want %d\n",
						            tr_name[tr],
						            rows[i].token ? rows[i].token
						                          : "(none)",
						            tenants[t], mname[m],
						            m == M_STATS_D ? " (daemon)" : "", got,
						            msg, want);
					}
					/* a denial names the method and the role */
					if (got == RPC_PERMISSION_DENIED && want == got)
						assert_non_null(strstr(msg, mname[m]));
				}
			}
			tc_close(&c);
		}
		tc_close(&adm);
	}
	printf("# access matrix: %zu tokens x 2 tenants x %d methods x %d transports = %u cells, "
	       "%u wrong\n",
	       NROWS, M_N, TR_N, cells, failed);
	assert_int_equal(cells, NROWS * 2 * M_N * TR_N);
	if (failed)
		h_dump_log(&k);
	assert_int_equal(failed, 0);
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, false);
	tu_rmtree(tokdir);
	free(tokdir);
	free(tokens);
}

/* The tenants a TenantList reply names, comma-separated, sorted. */
static void list_of(struct tconn *c, const char *token, char *out, size_t cap)
{
	struct h_req q;
	struct h_reply r;
	uint8_t *rep = NULL;
	size_t n = 0;
	const msgpack_object *arr;

	build(&q, M_LIST, "default", token, 9);
	rep = tc_roundtrip(c, q.sb.data, q.sb.size, &n);
	assert_non_null(rep);
	msgpack_sbuffer_destroy(&q.sb);
	assert_int_equal(h_parse(rep, n, &r), 0);
	assert_int_equal(r.status, 0);
	arr = mp_map_get(r.result, "tenants");
	assert_non_null(arr);
	out[0] = '\0';
	for (uint32_t i = 0; i < arr->via.array.size; i++) {
		char name[80];
		mp_str_copy(mp_map_get(&arr->via.array.ptr[i], "name"), name, sizeof(name));
		snprintf(out + strlen(out), cap - strlen(out), "%s%s", i ? "," : "", name);
	}
	h_reply_free(&r);
	free(rep);
}

static void test_tenant_list(void **state)
{
	struct kvd_proc k;
	char *tokdir, *tokens, got[256];

	(void)state;
	start(&k, &tokdir, &tokens);
	for (int tr = 0; tr < TR_N; tr++) {
		struct tconn c;
		tc_open(&c, &k, (enum tr)tr);
		/* "a-x" and "b-x" (build's TenantCreate names "<tenant>-x") */
		assert_int_equal(admin_call(&c, M_CREATE, "a"),
		                 tr == 0 ? RPC_OK : RPC_ALREADY_EXISTS);
		assert_int_equal(admin_call(&c, M_CREATE, "b"),
		                 tr == 0 ? RPC_OK : RPC_ALREADY_EXISTS);
		assert_int_equal(create(&c, "a"), tr == 0 ? RPC_OK : RPC_ALREADY_EXISTS);
		list_of(&c, "tok-read-a", got, sizeof(got));
		assert_string_equal(got, "a");
		list_of(&c, "tok-write-a", got, sizeof(got));
		assert_string_equal(got, "a");
		list_of(&c, "tok-mixed", got, sizeof(got));
		assert_string_equal(got, "a,a-x,b-x,default");
		list_of(&c, "tok-daemon", got, sizeof(got));
		assert_string_equal(got, "a,a-x,b-x,default");
		tc_close(&c);
	}
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, false);
	tu_rmtree(tokdir);
	free(tokdir);
	free(tokens);
}

/* ---- SIGHUP ---------------------------------------------------------------------- */

static int put_with(struct tconn *c, const char *token)
{
	struct h_req q;

	build(&q, M_PUT, "default", token, 5);
	return tc_call(c, &q, NULL, 0);
}

/* Lines of kvd's log with text in them. */
static unsigned log_count(const struct kvd_proc *k, const char *text)
{
	FILE *f = fopen(k->log, "r");
	char l[2048];
	unsigned n = 0;

	if (f == NULL)
		return 0;
	while (fgets(l, sizeof(l), f))
		n += strstr(l, text) != NULL;
	fclose(f);
	return n;
}

/* Polls kvd's log, up to 10 s, for at least n lines with text. */
static bool log_n_within(const struct kvd_proc *k, const char *text, unsigned n)
{
	uint64_t t0 = h_now_ms();

	while (h_now_ms() - t0 < 10000) {
		if (log_count(k, text) >= n)
			return true;
		poll(NULL, 0, 20);
	}
	return false;
}

static bool log_within(const struct kvd_proc *k, const char *text)
{
	return log_n_within(k, text, 1);
}

static void test_sighup(void **state)
{
	struct kvd_proc k;
	struct tconn c[TR_N];
	char *tokdir, *tokens, line[80], extra[256];

	(void)state;
	start(&k, &tokdir, &tokens);
	/* "tok-new" is not known yet; "tok-write-a" is, but not on default */
	auth_hash_line("tok-old", 7, line);
	snprintf(extra, sizeof(extra), "%s tenant=default:write\n", line);
	write_tokens(tokens, extra);
	kill(k.pid, SIGHUP);
	assert_true(log_within(&k, "reload: 8 token(s)"));
	for (int tr = 0; tr < TR_N; tr++) {
		tc_open(&c[tr], &k, (enum tr)tr);
		assert_int_equal(put_with(&c[tr], "tok-old"), RPC_OK);
		assert_int_equal(put_with(&c[tr], "tok-new"), RPC_UNAUTHENTICATED);
	}
	/* tok-old revoked, tok-new granted: the same connections see both */
	auth_hash_line("tok-new", 7, line);
	snprintf(extra, sizeof(extra), "%s tenant=default:write\n", line);
	write_tokens(tokens, extra);
	kill(k.pid, SIGHUP);
	assert_true(log_n_within(&k, "reload: 8 token(s)", 2));
	for (int tr = 0; tr < TR_N; tr++) {
		assert_int_equal(put_with(&c[tr], "tok-new"), RPC_OK);
		assert_int_equal(put_with(&c[tr], "tok-old"), RPC_UNAUTHENTICATED);
	}
	/* a bad file: logged, and the tokens in force stay */
	{
		FILE *f = fopen(tokens, "a");
		fprintf(f, "sha256:nothex tenant=a:read\n");
		fclose(f);
	}
	kill(k.pid, SIGHUP);
	assert_true(log_within(&k, "SIGHUP: keeping the current tokens"));
	assert_true(h_log_has(&k, "line 9: a line starts with sha256:"));
	for (int tr = 0; tr < TR_N; tr++) {
		assert_int_equal(put_with(&c[tr], "tok-new"), RPC_OK);
		tc_close(&c[tr]);
	}
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, false);
	tu_rmtree(tokdir);
	free(tokdir);
	free(tokens);
}

/* ---- brute force ----------------------------------------------------------------- */

static void test_brute_force(void **state)
{
	struct kvd_proc k;
	struct tconn c;
	char *tokdir, *tokens, msg[256], guess[32];
	uint64_t t0 = h_now_ms();
	int st;

	(void)state;
	start_with(&k, &tokdir, &tokens, NULL);
	/* no token at all is not a guess: never ends the connection */
	tc_open(&c, &k, TR_KVIPC);
	for (int i = 0; i < 3 * (int)AUTH_FAILS_MAX; i++)
		assert_int_equal(put_with(&c, NULL), RPC_UNAUTHENTICATED);
	assert_int_equal(put_with(&c, LEGACY), RPC_OK);
	tc_close(&c);
	/* nng: counted and logged, not ended (daemon/request.c says why): every
	 * guess is answered, and the connection goes on serving
	 * (first: the log is rate-limited, and this is its first line of each kind) */
	tc_open(&c, &k, TR_IPC);
	for (unsigned i = 1; i <= 2 * AUTH_FAILS_MAX; i++) {
		struct h_req q;
		snprintf(guess, sizeof(guess), "guess-%u", i);
		build(&q, M_GET, "a", guess, i);
		assert_int_equal(tc_call(&c, &q, msg, sizeof(msg)), RPC_UNAUTHENTICATED);
		assert_string_equal(msg, "unknown token");
	}
	assert_true(log_within(&k, "unknown tokens within 60 s: its transport cannot end it"));
	{
		/* the log names who sent them: the peer's uid on a Unix socket */
		char who[64];
		snprintf(who, sizeof(who), "auth: nng connection");
		assert_true(h_log_has(&k, who));
		snprintf(who, sizeof(who), "of uid %u sent %u unknown tokens", (unsigned)getuid(),
		         AUTH_FAILS_MAX);
		assert_true(h_log_has(&k, who));
	}
	assert_int_equal(put_with(&c, LEGACY), RPC_OK);
	tc_close(&c);
	/* stream: 4 guesses answered, the fifth answered and the connection ended */
	tc_open(&c, &k, TR_KVIPC);
	for (unsigned i = 1; i <= AUTH_FAILS_MAX; i++) {
		struct h_req q;
		snprintf(guess, sizeof(guess), "guess-%u", i);
		build(&q, M_GET, "a", guess, i);
		st = tc_call(&c, &q, msg, sizeof(msg));
		assert_int_equal(st, RPC_UNAUTHENTICATED);
	}
	assert_non_null(strstr(msg, "connection ended"));
	assert_true(st_closed_within(c.fd, 5000));
	tc_close(&c);
	/* kv+tls: the same (the reply says so; the handle's next call would
	 * find its connection closed) */
	tc_open(&c, &k, TR_KVTLS);
	for (unsigned i = 1; i <= AUTH_FAILS_MAX; i++) {
		struct h_req q;
		snprintf(guess, sizeof(guess), "guess-%u", i);
		build(&q, M_GET, "a", guess, i);
		assert_int_equal(tc_call(&c, &q, msg, sizeof(msg)), RPC_UNAUTHENTICATED);
	}
	assert_non_null(strstr(msg, "connection ended"));
	tc_close(&c);
	tc_open(&c, &k, TR_KVTLS); /* a new connection is served */
	assert_int_equal(put_with(&c, LEGACY), RPC_OK);
	tc_close(&c);
	/* guessing on from new connections of the same source (this uid: the
	 * 10 nng and 5 kv+ipc guesses above count): after auth_guesses (20)
	 * within a minute, every request of the source is refused, a right
	 * token's too, before any token is checked; other sources are served */
	{
		unsigned guesses = 2 * AUTH_FAILS_MAX + AUTH_FAILS_MAX, conns = 0;
		bool refused = false;
		char who[64];
		while (!refused && conns < 20) {
			tc_open(&c, &k, TR_KVIPC);
			conns++;
			for (unsigned i = 1; i <= AUTH_FAILS_MAX && !refused; i++) {
				struct h_req q;
				build(&q, M_GET, "a", "guess", i);
				assert_int_equal(tc_call(&c, &q, msg, sizeof(msg)),
				                 RPC_UNAUTHENTICATED);
				refused = strstr(msg, "too many unknown tokens") != NULL;
				guesses += !refused;
			}
			tc_close(&c);
		}
		assert_true(refused);
		assert_int_equal(guesses, AUTH_SRC_FAILS_MAX);
		snprintf(who, sizeof(who), "too many unknown tokens from uid %u: refused for",
		         (unsigned)getuid());
		assert_non_null(strstr(msg, who));
		tc_open(&c, &k, TR_IPC);
		assert_int_equal(put_with(&c, LEGACY), RPC_UNAUTHENTICATED);
		tc_close(&c);
		tc_open(&c, &k, TR_KVTLS); /* 127.0.0.1: another source */
		assert_int_equal(put_with(&c, LEGACY), RPC_OK);
		tc_close(&c);
		snprintf(who, sizeof(who), "auth: uid %u sent %u unknown tokens within 60 s",
		         (unsigned)getuid(), AUTH_SRC_FAILS_MAX);
		assert_true(log_within(&k, who));
		assert_true(h_log_has(&k, "its requests refused for 60 s"));
	}
	{
		unsigned secs = (unsigned)((h_now_ms() - t0) / 1000), most = 3 + secs / 10;
		unsigned ended = log_count(&k, "unknown tokens within 60 s"),
		         unknown = log_count(&k, "auth: unknown token from");
		printf("# brute force: log lines: %u 'unknown token', %u "
		       "'unknown tokens within 60 s' in %u s\n",
		       unknown, ended, secs);
		assert_true(ended >= 1 && ended <= most);
		assert_true(unknown >= 1 && unknown <= most);
	}
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, false);
	tu_rmtree(tokdir);
	free(tokdir);
	free(tokens);
}

/* Requests while SIGHUP replaces the table again and again: each is checked
 * against a whole table (TenantList reads its grant while it lists), none is
 * refused, none crashes kvd (run under ASan for the tables' lifetime). */
struct loader {
	const struct kvd_proc *k;
	enum tr tr;
	atomic_bool *stop;
	unsigned calls, bad;
};

static void *load_main(void *arg)
{
	struct loader *l = arg;
	struct tconn c;
	char got[256];

	tc_open(&c, l->k, l->tr);
	while (!atomic_load(l->stop)) {
		struct h_req q;
		build(&q, M_GET, "default", "tok-old", 1);
		if (tc_call(&c, &q, NULL, 0) != RPC_NOT_FOUND)
			l->bad++;
		list_of(&c, "tok-old", got, sizeof(got));
		if (strcmp(got, "default") != 0)
			l->bad++;
		l->calls += 2;
	}
	tc_close(&c);
	return NULL;
}

static void test_reload_under_load(void **state)
{
	struct kvd_proc k;
	char *tokdir, *tokens, line[80], extra[256];
	struct loader l[4];
	pthread_t th[4];
	atomic_bool stop = false;
	unsigned calls = 0, bad = 0;

	(void)state;
	start(&k, &tokdir, &tokens);
	auth_hash_line("tok-old", 7, line);
	snprintf(extra, sizeof(extra), "%s tenant=default:read\n", line);
	write_tokens(tokens, extra);
	kill(k.pid, SIGHUP);
	assert_true(log_within(&k, "reload: 8 token(s)"));
	for (int i = 0; i < 4; i++) {
		l[i] = (struct loader){&k, (enum tr)(i % TR_N), &stop, 0, 0};
		assert_int_equal(pthread_create(&th[i], NULL, load_main, &l[i]), 0);
	}
	for (unsigned n = 2; n <= 31; n++) {
		write_tokens(tokens, extra);
		kill(k.pid, SIGHUP);
		assert_true(log_n_within(&k, "reload: 8 token(s)", n));
	}
	atomic_store(&stop, true);
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		calls += l[i].calls;
		bad += l[i].bad;
	}
	printf("# 30 reloads under %u requests: %u answered otherwise\n", calls, bad);
	assert_true(calls > 0);
	assert_int_equal(bad, 0);
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, false);
	tu_rmtree(tokdir);
	free(tokdir);
	free(tokens);
}

/* A bad tokens file stops kvd at start, naming its line; so does one that
 * others may write. */
static void test_refused_at_start(void **state)
{
	struct kvd_proc k;
	struct kvd_opts o = {0};
	char *dir = tu_mkdtemp("tokens"), *path = tu_path(dir, "tokens"), conf[1024], line[80];
	FILE *f;

	(void)state;
	auth_hash_line("tok", 3, line);
	assert_non_null(f = fopen(path, "w"));
	fprintf(f, "%s tenant=a:read\n%s tenant=a:owner\n", line, line);
	fclose(f);
	chmod(path, 0640);
	snprintf(conf, sizeof(conf), "[kvd]\ntokens_file = %s\n", path);
	o.config_text = conf;
	o.health_timeout_ms = 100;
	assert_int_equal(kvd_start(&k, &o), -1);
	assert_true(h_log_has(&k, "line 2: role 'owner' is not read, write or admin"));
	kvd_cleanup(&k, false);
	/* a good file that anyone may write is refused for its mode */
	assert_non_null(f = fopen(path, "w"));
	fprintf(f, "%s tenant=a:read\n", line);
	fclose(f);
	chmod(path, 0666);
	assert_int_equal(kvd_start(&k, &o), -1);
	assert_true(h_log_has(&k, "writable by others"));
	kvd_cleanup(&k, false);
	chmod(path, 0644);
	assert_int_equal(kvd_start(&k, &o), 0);
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, false);
	tu_rmtree(dir);
	free(dir);
	free(path);
}

static int setup(void **state)
{
	(void)state;
	if (tls_certs_make(&certs))
		return 0;
	fprintf(stderr, "openssl could not make the certificates: see %s/openssl.log\n", certs.dir);
	return -1;
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
	        cmocka_unit_test(test_matrix),           cmocka_unit_test(test_tenant_list),
	        cmocka_unit_test(test_sighup),           cmocka_unit_test(test_brute_force),
	        cmocka_unit_test(test_refused_at_start), cmocka_unit_test(test_reload_under_load),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, setup, teardown);
}
