/*
 * auth.c — the tokens file, its table, and the check of each request
 * (auth.h says what each call does and which thread may make it).
 *
 * Why SHA-256 and no salt or slow hash: kvd's tokens are random strings of
 * AUTH_TOKEN_BYTES (256 bits) that kvd --new-token makes; nobody can guess
 * one or find it in a dictionary, so a slow or salted hash (made for
 * passwords people choose) would only make every request slower. What the
 * hash protects against is a reader of the tokens file (a backup, a
 * configuration repository) learning tokens it could use.
 *
 * Invariants:
 *   1. A table is never written after auth_table_parse/_load returned it;
 *      readers hold a reference (refs), the last release frees it.
 *   2. a->cur changes under a->lk written, and a reference is taken under
 *      a->lk read, so a table is never freed between being read and held.
 *      Requests only read-lock it (they do not wait for each other), and
 *      not at all while no table is configured (a NULL needs no
 *      reference). a->mu guards the failure slots alone.
 *   3. A token (or a certificate's fingerprint) is compared with every
 *      entry, always: the scan has no early exit and the match is selected
 *      without a branch on the secret. A token matches token entries only,
 *      a certificate certificate entries only.
 */
#include "auth.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- hashing ---------------------------------------------------------------- */

void auth_hash(const void *token, size_t len, uint8_t out[AUTH_HASH_LEN])
{
	unsigned int n = AUTH_HASH_LEN;

	/* EVP_Digest fails only without memory or a SHA-256 provider; a hash
	 * of zeros then matches nothing a file can hold (invariant: hashes of
	 * the file are checked to be nonzero, see parse_line) */
	if (EVP_Digest(token, len, out, &n, EVP_sha256(), NULL) != 1)
		memset(out, 0, AUTH_HASH_LEN);
}

void auth_hash_line(const void *token, size_t len, char out[80])
{
	uint8_t h[AUTH_HASH_LEN];
	int o;

	auth_hash(token, len, h);
	o = snprintf(out, 80, "sha256:");
	for (size_t i = 0; i < AUTH_HASH_LEN; i++)
		o += snprintf(out + o, (size_t)(80 - o), "%02x", h[i]);
}

int auth_new_token(char out[2 * AUTH_TOKEN_BYTES + 1])
{
	unsigned char b[AUTH_TOKEN_BYTES];

	if (RAND_bytes(b, sizeof(b)) != 1)
		return -EIO;
	for (size_t i = 0; i < sizeof(b); i++)
		snprintf(out + 2 * i, 3, "%02x", b[i]);
	OPENSSL_cleanse(b, sizeof(b));
	return 0;
}

/* ---- the tokens file ---------------------------------------------------------- */

void auth_table_free(struct auth_table *t)
{
	if (t == NULL)
		return;
	for (size_t i = 0; i < t->n; i++)
		free(t->entries[i].grants);
	free(t->entries);
	free(t);
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static int role_of(const char *s, size_t n)
{
	if (n == 4 && memcmp(s, "read", 4) == 0)
		return WIRE_ROLE_READ;
	if (n == 5 && memcmp(s, "write", 5) == 0)
		return WIRE_ROLE_WRITE;
	if (n == 5 && memcmp(s, "admin", 5) == 0)
		return WIRE_ROLE_ADMIN;
	return -1;
}

/* One field "tenant=NAME:ROLE" or "daemon=admin" into e. */
static int parse_field(struct auth_entry *e, const char *f, size_t n, char *why, size_t whylen)
{
	const char *colon;
	size_t nl;
	int role;

	if (n == 12 && memcmp(f, "daemon=admin", 12) == 0) {
		if (e->daemon_admin) {
			snprintf(why, whylen, "daemon=admin given twice");
			return -EINVAL;
		}
		e->daemon_admin = true;
		return 0;
	}
	if (n < 7 || memcmp(f, "tenant=", 7) != 0) {
		snprintf(why, whylen, "'%.*s' is not tenant=NAME:ROLE or daemon=admin",
		         (int)(n > 80 ? 80 : n), f);
		return -EINVAL;
	}
	f += 7, n -= 7;
	if ((colon = memchr(f, ':', n)) == NULL) {
		snprintf(why, whylen, "tenant=%.*s has no ':ROLE'", (int)(n > 80 ? 80 : n), f);
		return -EINVAL;
	}
	nl = (size_t)(colon - f);
	if (!(nl == 1 && f[0] == '*') && !kv_tenant_name_valid(f, nl)) {
		snprintf(why, whylen, "'%.*s' is not a tenant name (or *)",
		         (int)(nl > 80 ? 80 : nl), f);
		return -EINVAL;
	}
	if ((role = role_of(colon + 1, n - nl - 1)) < 0) {
		snprintf(why, whylen, "role '%.*s' is not read, write or admin",
		         (int)(n - nl - 1 > 40 ? 40 : n - nl - 1), colon + 1);
		return -EINVAL;
	}
	for (size_t i = 0; i < e->ngrants; i++) {
		if (strlen(e->grants[i].tenant) == nl && memcmp(e->grants[i].tenant, f, nl) == 0) {
			snprintf(why, whylen, "tenant '%.*s' granted twice", (int)nl, f);
			return -EINVAL;
		}
	}
	if (e->ngrants == AUTH_GRANTS_MAX) {
		snprintf(why, whylen, "more than %u tenant grants", AUTH_GRANTS_MAX);
		return -EINVAL;
	}
	if ((e->ngrants & (e->ngrants - 1)) == 0) { /* 0, 1, 2, 4 …: grow */
		struct auth_grant *g =
		        realloc(e->grants, (e->ngrants ? 2 * e->ngrants : 1) * sizeof(*g));
		if (g == NULL)
			return -ENOMEM;
		e->grants = g;
	}
	memcpy(e->grants[e->ngrants].tenant, f, nl);
	e->grants[e->ngrants].tenant[nl] = '\0';
	e->grants[e->ngrants].role = (uint8_t)role;
	e->ngrants++;
	return 0;
}

static bool field_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

/* One line (no newline) with a token: "sha256:HEX field…". */
static int parse_line(struct auth_entry *e, const char *s, const char *end, char *why,
                      size_t whylen)
{
	const char *p = s;
	bool zero = true;
	int rv;

	if (end - p >= 12 && memcmp(p, "cert-sha256:", 12) == 0) {
		/* a certificate's fingerprint: 64 hex digits, or 32 pairs with
		 * colons between them as `openssl x509 -fingerprint -sha256`
		 * prints them */
		e->cert = true;
		p += 12;
		for (size_t i = 0; i < AUTH_HASH_LEN; i++) {
			int hi, lo;
			if (i > 0 && p < end && *p == ':')
				p++;
			if (end - p < 2 || (hi = hexval(p[0])) < 0 || (lo = hexval(p[1])) < 0) {
				snprintf(why, whylen,
				         "the certificate's fingerprint is not 64 hex digits");
				return -EINVAL;
			}
			e->hash[i] = (uint8_t)(hi << 4 | lo);
			zero &= e->hash[i] == 0;
			p += 2;
		}
	} else {
		if (end - p < 7 + 2 * AUTH_HASH_LEN || memcmp(p, "sha256:", 7) != 0) {
			snprintf(why, whylen,
			         "a line starts with sha256: and 64 hex digits (a token's hash) "
			         "or cert-sha256: and a certificate's fingerprint");
			return -EINVAL;
		}
		p += 7;
		for (size_t i = 0; i < AUTH_HASH_LEN; i++) {
			int hi = hexval(p[2 * i]), lo = hexval(p[2 * i + 1]);
			if (hi < 0 || lo < 0) {
				snprintf(why, whylen, "the hash is not 64 hex digits");
				return -EINVAL;
			}
			e->hash[i] = (uint8_t)(hi << 4 | lo);
			zero &= e->hash[i] == 0;
		}
		p += 2 * AUTH_HASH_LEN;
	}
	if (p < end && !field_blank(*p)) {
		snprintf(why, whylen, "the hash is not 64 hex digits");
		return -EINVAL;
	}
	if (zero) {
		snprintf(why, whylen, "a hash of all zeros");
		return -EINVAL;
	}
	for (;;) {
		const char *f;
		while (p < end && field_blank(*p))
			p++;
		if (p == end || *p == '#')
			break;
		f = p;
		while (p < end && !field_blank(*p))
			p++;
		if ((rv = parse_field(e, f, (size_t)(p - f), why, whylen)) != 0)
			return rv;
	}
	if (e->ngrants == 0 && !e->daemon_admin) {
		snprintf(why, whylen, "a token without a grant (tenant=NAME:ROLE, daemon=admin)");
		return -EINVAL;
	}
	return 0;
}

/* Adds an entry slot to t; NULL without memory. */
static struct auth_entry *table_add(struct auth_table *t, size_t *cap)
{
	if (t->n == *cap) {
		size_t nc = *cap ? 2 * *cap : 8;
		struct auth_entry *ne = realloc(t->entries, nc * sizeof(*ne));
		if (ne == NULL)
			return NULL;
		t->entries = ne;
		*cap = nc;
	}
	memset(&t->entries[t->n], 0, sizeof(t->entries[0]));
	return &t->entries[t->n++];
}

static struct auth_table *table_new(void)
{
	struct auth_table *t = calloc(1, sizeof(*t));

	if (t != NULL)
		atomic_store(&t->refs, 1);
	return t;
}

int auth_table_parse(const char *text, size_t len, const char *name, struct auth_table **ret,
                     char *err, size_t errlen)
{
	struct auth_table *t = table_new();
	const char *p = text, *end = text + len;
	char why[200];
	unsigned line = 1;
	size_t cap = 0;
	int rv = 0;

	if (t == NULL)
		return -ENOMEM;
	for (; p < end; line++) {
		const char *nl = memchr(p, '\n', (size_t)(end - p)), *e = nl ? nl : end, *s = p;
		struct auth_entry *en;
		p = nl ? nl + 1 : end;
		if (memchr(s, '\0', (size_t)(e - s)) != NULL) {
			snprintf(err, errlen, "%s: line %u: a NUL byte", name, line);
			rv = -EINVAL;
			goto fail;
		}
		while (s < e && field_blank(*s))
			s++;
		while (e > s && field_blank(e[-1]))
			e--;
		if (s == e || *s == '#')
			continue;
		if (t->n == AUTH_TOKENS_MAX) {
			snprintf(err, errlen, "%s: line %u: more than %u tokens", name, line,
			         AUTH_TOKENS_MAX);
			rv = -E2BIG;
			goto fail;
		}
		if ((en = table_add(t, &cap)) == NULL) {
			rv = -ENOMEM;
			goto nomem;
		}
		en->line = line;
		if ((rv = parse_line(en, s, e, why, sizeof(why))) != 0) {
			if (rv == -ENOMEM)
				goto nomem;
			snprintf(err, errlen, "%s: line %u: %s", name, line, why);
			goto fail;
		}
		for (size_t i = 0; i + 1 < t->n; i++) {
			if (t->entries[i].cert == en->cert &&
			    memcmp(t->entries[i].hash, en->hash, AUTH_HASH_LEN) == 0) {
				snprintf(err, errlen, "%s: line %u: the same %s as line %u", name,
				         line, en->cert ? "certificate" : "token",
				         t->entries[i].line);
				rv = -EINVAL;
				goto fail;
			}
		}
	}
	*ret = t;
	return 0;
nomem:
	snprintf(err, errlen, "%s: out of memory", name);
fail:
	auth_table_free(t);
	return rv;
}

static int read_file(const char *path, char **ret, size_t *ret_len, char *err, size_t errlen)
{
	struct stat st;
	char *text = NULL;
	size_t len = 0;
	int fd, rv = 0;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)) < 0) {
		rv = -errno;
		snprintf(err, errlen, "tokens_file %s: %s", path, strerror(-rv));
		return rv;
	}
	if (fstat(fd, &st) != 0) {
		rv = -errno;
		snprintf(err, errlen, "tokens_file %s: %s", path, strerror(-rv));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		rv = -EINVAL;
		snprintf(err, errlen, "tokens_file %s: not a regular file", path);
		goto out;
	}
	if (st.st_mode & S_IWOTH) {
		/* whoever can write it can grant themselves anything */
		rv = -EPERM;
		snprintf(err, errlen,
		         "tokens_file %s: writable by others (mode %03o); chmod o-w it", path,
		         (unsigned)(st.st_mode & 0777));
		goto out;
	}
	if ((text = malloc(AUTH_FILE_MAX + 1)) == NULL) {
		rv = -ENOMEM;
		snprintf(err, errlen, "tokens_file %s: out of memory", path);
		goto out;
	}
	for (;;) {
		ssize_t n = read(fd, text + len, AUTH_FILE_MAX + 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rv = -errno;
			snprintf(err, errlen, "tokens_file %s: %s", path, strerror(-rv));
			goto out;
		}
		if (n == 0 || (len += (size_t)n) > AUTH_FILE_MAX)
			break;
	}
	if (len > AUTH_FILE_MAX) {
		rv = -EFBIG;
		snprintf(err, errlen, "tokens_file %s: larger than %u bytes", path, AUTH_FILE_MAX);
		goto out;
	}
	*ret = text;
	*ret_len = len;
	text = NULL;
out:
	free(text);
	close(fd);
	return rv;
}

int auth_table_load(const char *path, const char *legacy_token, struct auth_table **ret, char *err,
                    size_t errlen)
{
	struct auth_table *t = NULL;
	struct auth_entry *e;
	size_t cap, len = 0;
	char *text = NULL;
	int rv;

	if ((path == NULL || path[0] == '\0') &&
	    (legacy_token == NULL || legacy_token[0] == '\0')) {
		*ret = NULL;
		return 0;
	}
	if (path != NULL && path[0] != '\0') {
		if ((rv = read_file(path, &text, &len, err, errlen)) != 0)
			return rv;
		rv = auth_table_parse(text, len, path, &t, err, errlen);
		free(text);
		if (rv != 0)
			return rv;
	} else if ((t = table_new()) == NULL) {
		goto nomem;
	}
	if (legacy_token != NULL && legacy_token[0] != '\0') {
		cap = t->n; /* table_add grows it from its length */
		if ((e = table_add(t, &cap)) == NULL ||
		    (e->grants = calloc(1, sizeof(*e->grants))) == NULL)
			goto nomem;
		auth_hash(legacy_token, strlen(legacy_token), e->hash);
		e->daemon_admin = true;
		strcpy(e->grants[0].tenant, "*");
		e->grants[0].role = WIRE_ROLE_ADMIN;
		e->ngrants = 1;
	}
	*ret = t;
	return 0;
nomem:
	auth_table_free(t);
	snprintf(err, errlen, "tokens: out of memory");
	return -ENOMEM;
}

/* ---- the check ------------------------------------------------------------------ */

void auth_init(struct auth *a, struct auth_table *t)
{
	memset(a, 0, sizeof(*a));
	pthread_rwlock_init(&a->lk, NULL);
	pthread_mutex_init(&a->mu, NULL);
	atomic_store(&a->cur, t);
	a->ready = true;
}

void auth_fini(struct auth *a)
{
	if (!a->ready)
		return;
	auth_release(atomic_load(&a->cur));
	atomic_store(&a->cur, NULL);
	pthread_rwlock_destroy(&a->lk);
	pthread_mutex_destroy(&a->mu);
	a->ready = false;
}

void auth_swap(struct auth *a, struct auth_table *t)
{
	struct auth_table *old;

	pthread_rwlock_wrlock(&a->lk);
	old = atomic_load(&a->cur);
	atomic_store(&a->cur, t);
	pthread_rwlock_unlock(&a->lk);
	auth_release(old);
}

struct auth_table *auth_acquire(struct auth *a)
{
	struct auth_table *t;

	if (atomic_load_explicit(&a->cur, memory_order_acquire) == NULL)
		return NULL; /* open: nothing to hold (invariant 2) */
	pthread_rwlock_rdlock(&a->lk);
	if ((t = atomic_load(&a->cur)) != NULL)
		atomic_fetch_add(&t->refs, 1);
	pthread_rwlock_unlock(&a->lk);
	return t;
}

void auth_release(struct auth_table *t)
{
	if (t != NULL && atomic_fetch_sub(&t->refs, 1) == 1)
		auth_table_free(t);
}

/* The role e holds on tenant (0: none). */
static int role_on(const struct auth_entry *e, const char *tenant)
{
	int best = 0;

	for (size_t i = 0; i < e->ngrants; i++)
		if ((strcmp(e->grants[i].tenant, "*") == 0 ||
		     strcmp(e->grants[i].tenant, tenant) == 0) &&
		    e->grants[i].role > best)
			best = e->grants[i].role;
	return best;
}

static const char *role_name(int role)
{
	switch (role) {
	case WIRE_ROLE_READ:
		return "read";
	case WIRE_ROLE_WRITE:
		return "write";
	case WIRE_ROLE_ADMIN:
		return "admin";
	default:
		return "?";
	}
}

/* The entry of kind cert whose hash is h, scanning every entry (invariant
 * 3); SIZE_MAX: none. */
static size_t table_match(const struct auth_table *t, const uint8_t h[AUTH_HASH_LEN], bool cert)
{
	size_t match = SIZE_MAX;

	for (size_t i = 0; i < t->n; i++) {
		size_t same = (size_t)(CRYPTO_memcmp(t->entries[i].hash, h, AUTH_HASH_LEN) == 0 &&
		                       t->entries[i].cert == cert);
		match = (match & (same - 1)) | (i & (0 - same));
	}
	return match;
}

int auth_check_peer(const struct auth_table *t, const struct rpc_req *r, const uint8_t *cert_fp,
                    const struct auth_entry **ret_entry, char *msg, size_t msglen)
{
	uint8_t h[AUTH_HASH_LEN];
	const struct auth_entry *e = NULL;
	size_t match;
	int need = rpc_req_role(r);
	const char *who = "token";

	*ret_entry = NULL;
	if (t == NULL || need == WIRE_ROLE_NONE)
		return RPC_OK;
	if (r->token != NULL) {
		auth_hash(r->token, r->token_len, h);
		match = table_match(t, h, false);
		OPENSSL_cleanse(h, sizeof(h));
		if (match == SIZE_MAX) {
			snprintf(msg, msglen, "unknown token");
			return RPC_UNAUTHENTICATED;
		}
	} else if (cert_fp != NULL) {
		who = "certificate";
		if ((match = table_match(t, cert_fp, true)) == SIZE_MAX) {
			snprintf(msg, msglen,
			         "this server requires a token or a client certificate it maps to "
			         "roles (tokens_file's cert-sha256: lines); this one has none");
			return RPC_UNAUTHENTICATED;
		}
	} else {
		snprintf(msg, msglen, "this server requires a token (KVD_TOKEN or --token-file)");
		return RPC_UNAUTHENTICATED;
	}
	e = &t->entries[match];
	*ret_entry = e;
	if (need == WIRE_ROLE_ANY)
		return RPC_OK;
	if (need == WIRE_ROLE_DAEMON) {
		if (e->daemon_admin)
			return RPC_OK;
		snprintf(msg, msglen, "%s needs daemon=admin, which this %s does not have",
		         rpc_method_name(r->method), who);
		return RPC_PERMISSION_DENIED;
	}
	if (role_on(e, r->tenant) >= need)
		return RPC_OK;
	snprintf(msg, msglen, "%s on tenant '%s' needs role %s, which this %s does not have",
	         rpc_method_name(r->method), r->tenant, role_name(need), who);
	return RPC_PERMISSION_DENIED;
}

int auth_check(const struct auth_table *t, const struct rpc_req *r,
               const struct auth_entry **ret_entry, char *msg, size_t msglen)
{
	return auth_check_peer(t, r, NULL, ret_entry, msg, msglen);
}

bool auth_may_see(const void *arg, const char *tenant)
{
	const struct auth_entry *e = arg;

	return e == NULL || e->daemon_admin || role_on(e, tenant) > 0;
}

void auth_source(const char *peer, char *src, size_t len)
{
	const char *p = strstr(peer, " of "), *end;

	/* "nng connection 7 of 10.0.0.1 port 4711", "10.0.0.1 port 4711",
	 * "uid 1000 pid 42", "nng connection 7 of uid 1000" */
	p = p != NULL ? p + 4 : peer;
	if ((end = strstr(p, " port ")) == NULL)
		end = strstr(p, " pid ");
	snprintf(src, len, "%.*s", end != NULL ? (int)(end - p) : (int)strlen(p), p);
}

static size_t src_slot(const char *src)
{
	uint64_t h = 1469598103934665603ull;

	for (; *src; src++)
		h = (h ^ (uint8_t)*src) * 1099511628211ull;
	return (size_t)(h % AUTH_SRC_SLOTS);
}

uint64_t auth_blocked(struct auth *a, const char *src, uint64_t now)
{
	size_t i = src_slot(src);
	uint64_t left = 0;

	pthread_mutex_lock(&a->mu);
	if (strcmp(a->srcs[i].src, src) == 0 && a->srcs[i].blocked_until_ms > now)
		left = a->srcs[i].blocked_until_ms - now;
	pthread_mutex_unlock(&a->mu);
	return left;
}

/* One more unknown token from src; true when that blocks it. [a->mu] */
static bool src_failed_locked(struct auth *a, const char *src, uint64_t now)
{
	size_t i = src_slot(src);

	if (strcmp(a->srcs[i].src, src) != 0 || now - a->srcs[i].since_ms > AUTH_FAIL_WINDOW_MS) {
		/* a new source, or its window is over (a collision takes the slot) */
		snprintf(a->srcs[i].src, sizeof(a->srcs[i].src), "%s", src);
		a->srcs[i].since_ms = now;
		a->srcs[i].fails = 0;
		a->srcs[i].blocked_until_ms = 0;
	}
	if (a->src_fails_max == 0 || ++a->srcs[i].fails < a->src_fails_max ||
	    a->srcs[i].blocked_until_ms > now)
		return false;
	a->srcs[i].blocked_until_ms = now + AUTH_SRC_BLOCK_MS;
	atomic_store(&a->block_horizon_ms, now + AUTH_SRC_BLOCK_MS);
	return true;
}

bool auth_failed(struct auth *a, uint64_t conn, bool can_end, const char *peer, uint64_t now)
{
	size_t i = (size_t)((conn * 0x9e3779b97f4a7c15ull) >> 54) % AUTH_FAIL_SLOTS;
	char src[AUTH_SRC_MAX];
	unsigned fails;
	bool blocked;

	auth_source(peer, src, sizeof(src));
	pthread_mutex_lock(&a->mu);
	blocked = src_failed_locked(a, src, now);
	if (a->slots[i].conn != conn || now - a->slots[i].since_ms > AUTH_FAIL_WINDOW_MS) {
		/* a new connection, or its window is over (a collision takes the slot) */
		a->slots[i].conn = conn;
		a->slots[i].since_ms = now;
		a->slots[i].fails = 0;
	}
	fails = ++a->slots[i].fails;
	if (fails >= AUTH_FAILS_MAX)
		a->slots[i].conn = 0; /* ended: the next connection starts afresh */
	pthread_mutex_unlock(&a->mu);
	if (blocked)
		klog_limited(&a->src_log, 10000, LOG_WARNING,
		             "auth: %s sent %u unknown tokens within %u s: its requests refused for "
		             "%u s",
		             src, a->src_fails_max, AUTH_FAIL_WINDOW_MS / 1000,
		             AUTH_SRC_BLOCK_MS / 1000);
	if (fails >= AUTH_FAILS_MAX)
		klog_limited(&a->end_log, 10000, LOG_WARNING,
		             "auth: %s sent %u unknown tokens within %u s: %s", peer, fails,
		             AUTH_FAIL_WINDOW_MS / 1000,
		             can_end ? "connection ended" : "its transport cannot end it");
	else
		klog_limited(&a->fail_log, 10000, LOG_NOTICE, "auth: unknown token from %s", peer);
	return fails >= AUTH_FAILS_MAX;
}
