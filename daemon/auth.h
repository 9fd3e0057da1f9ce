/*
 * auth.h — who may do what: the tokens file (tokens_file in kvd.conf, the
 * format in kvd.conf(5), "TOKENS FILE"), the table it becomes, and the check
 * every request passes before it runs (daemon/request.c, both transports).
 *
 * A token is known by its SHA-256 alone; the table never holds one in
 * plain text. A kv+tls:// client certificate is known by the SHA-256 of its
 * DER encoding (its fingerprint, "cert-sha256:" lines), and gets the roles
 * of its line as a token would. A request's token is hashed and compared with every hash of
 * the table in constant time (CRYPTO_memcmp, no early exit), so neither the
 * time of the answer nor which entry matched tells anything about the
 * secret. The method's required role is rpc/wire.h's (WIRE_METHODS'
 * third column).
 *
 * Errors: STYLE.md's 0/-errno; the loading calls also write one line
 * (naming the file and the line) into err. auth_check answers with a wire
 * status (RPC_OK, RPC_UNAUTHENTICATED, RPC_PERMISSION_DENIED) and a
 * one-line message for the client.
 *
 * Threads: a table is immutable once built and is shared by reference
 * (auth_acquire/auth_release, any thread); auth_swap (the main thread, on
 * SIGHUP) replaces the current one, and the old one is freed when its last
 * request has released it.
 */
#ifndef KVD_AUTH_H
#define KVD_AUTH_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvengine.h"
#include "log.h"
#include "server.h"
#include "wire.h"

#define AUTH_HASH_LEN       32         /* SHA-256 */
#define AUTH_FILE_MAX       (1u << 20) /* bytes of a tokens file, at most */
#define AUTH_TOKENS_MAX     10000u     /* lines with a token in one file */
#define AUTH_GRANTS_MAX     1024u      /* tenant grants of one token */
#define AUTH_TOKEN_BYTES    32u        /* kvd --new-token: random bytes, printed as hex */
#define AUTH_FAILS_MAX      5u         /* unknown tokens a connection may send … */
#define AUTH_FAIL_WINDOW_MS 60000u     /* … within this long before it is ended */
#define AUTH_FAIL_SLOTS     1024u      /* connections with recent failures remembered */
#define AUTH_SRC_FAILS_MAX  20u        /* unknown tokens one source may send (default) … */
#define AUTH_SRC_BLOCK_MS   60000u     /* … within AUTH_FAIL_WINDOW_MS before it is refused this long */
#define AUTH_SRC_SLOTS      1024u      /* sources with recent failures remembered */
#define AUTH_SRC_MAX        64u        /* bytes of a source's name */

/* One tenant (or "*", every tenant) and the role granted on it. */
struct auth_grant {
	char tenant[KV_TENANT_NAME_MAX + 1];
	uint8_t role; /* WIRE_ROLE_READ, _WRITE or _ADMIN; each includes the ones before */
};

struct auth_entry {
	uint8_t hash[AUTH_HASH_LEN]; /* of the token; of the certificate (DER) when cert */
	bool cert;                   /* a "cert-sha256:" line: a kv+tls:// client certificate */
	bool daemon_admin; /* daemon=admin: TenantCreate, TenantDrop, Stats scope daemon */
	unsigned line;     /* in the tokens file; 0: the `token` setting */
	size_t ngrants;
	struct auth_grant *grants;
};

struct auth_table {
	_Atomic unsigned refs;
	size_t n;
	struct auth_entry *entries;
};

/* Parses the text of a tokens file (name is used in messages only) into a
 * new table. -EINVAL with "NAME: line N: why" in err for the first bad line;
 * -E2BIG past AUTH_TOKENS_MAX; -ENOMEM. */
int auth_table_parse(const char *text, size_t len, const char *name, struct auth_table **ret,
                     char *err, size_t errlen);
/* The table kvd serves with: the tokens file at path (NULL or "": none),
 * plus legacy_token (the `token` setting; NULL or "": none), which becomes
 * a token with daemon=admin and tenant=*:admin. *ret is NULL when neither
 * is set: access is then not checked at all. The file must be a regular
 * file, not writable by others (-EPERM). Errors as auth_table_parse, and
 * the file's -errno. */
int auth_table_load(const char *path, const char *legacy_token, struct auth_table **ret, char *err,
                    size_t errlen);
void auth_table_free(struct auth_table *t);

/* SHA-256 of a token. */
void auth_hash(const void *token, size_t len, uint8_t out[AUTH_HASH_LEN]);
/* "sha256:" and 64 hex digits of the token's hash, NUL-terminated. */
void auth_hash_line(const void *token, size_t len, char out[80]);
/* A new random token (AUTH_TOKEN_BYTES from the kernel's generator, in hex).
 * -EIO when no random bytes could be had. */
int auth_new_token(char out[2 * AUTH_TOKEN_BYTES + 1]);

/* The daemon's access state: the current table and the failures of each
 * connection. */
struct auth {
	pthread_rwlock_t lk;            /* taking a reference to cur, replacing it */
	struct auth_table *_Atomic cur; /* NULL: no tokens configured, all open */
	pthread_mutex_t mu;             /* slots */
	struct {
		uint64_t conn; /* 0: free */
		uint64_t since_ms;
		unsigned fails;
	} slots[AUTH_FAIL_SLOTS];
	struct {
		char src[AUTH_SRC_MAX]; /* "": free */
		uint64_t since_ms;
		unsigned fails;
		uint64_t blocked_until_ms;
	} srcs[AUTH_SRC_SLOTS];
	_Atomic uint64_t block_horizon_ms; /* no source is refused past this */
	unsigned src_fails_max;            /* auth_guesses (0: sources are never refused) */
	struct klog_limit fail_log, end_log, src_log;
	bool ready; /* auth_init ran (auth_fini does nothing before) */
};

void auth_init(struct auth *a, struct auth_table *t);
void auth_fini(struct auth *a);
/* Replaces the table (the old one is released). */
void auth_swap(struct auth *a, struct auth_table *t);
/* The current table, held until auth_release (NULL: open). */
struct auth_table *auth_acquire(struct auth *a);
void auth_release(struct auth_table *t);

/* Whether req (decoded) may run with table t. RPC_OK and, when a token
 * matched, its entry in *ret_entry (NULL when t is NULL or the method is
 * open to all); else RPC_UNAUTHENTICATED or RPC_PERMISSION_DENIED and a
 * one-line message in msg. */
int auth_check(const struct auth_table *t, const struct rpc_req *r,
               const struct auth_entry **ret_entry, char *msg, size_t msglen);
/* auth_check for a request that came with a verified client certificate
 * (cert_fp: the SHA-256 of its DER; NULL: none, as auth_check). A request
 * with a token is checked by its token alone, as auth_check does: the
 * token, when given, decides. A request without one is checked against
 * the certificate's "cert-sha256:" entry; a certificate without an entry
 * is UNAUTHENTICATED. Token entries never match a certificate and
 * certificate entries never match a token (a certificate's DER is public:
 * sent as a token, it would otherwise hash to its entry). */
int auth_check_peer(const struct auth_table *t, const struct rpc_req *r, const uint8_t *cert_fp,
                    const struct auth_entry **ret_entry, char *msg, size_t msglen);

/* Whether the entry may see tenant in TenantList (any grant on it, or
 * daemon admin). e is a const struct auth_entry *. */
bool auth_may_see(const void *e, const char *tenant);

/* Counts an unknown token on connection conn (a nonzero transport-chosen
 * id) at now_ms; true when it has now sent AUTH_FAILS_MAX of them within
 * AUTH_FAIL_WINDOW_MS, and is to be ended (can_end false: the transport
 * cannot end it, which the log then says). Logs, rate-limited. */
bool auth_failed(struct auth *a, uint64_t conn, bool can_end, const char *peer, uint64_t now_ms);

/* The source a peer's description names (auth_source): its address
 * without the port on TCP, its uid on a Unix socket, so that reconnecting
 * does not make a new one. Each source may send src_fails_max (kvd.conf
 * auth_guesses, default AUTH_SRC_FAILS_MAX) unknown tokens within
 * AUTH_FAIL_WINDOW_MS (counted by auth_failed); then every
 * request from it is refused, before any token is checked, for
 * AUTH_SRC_BLOCK_MS: auth_blocked says how many ms are left (0: not
 * refused). Logged, rate-limited. */
void auth_source(const char *peer, char *src, size_t len);
uint64_t auth_blocked(struct auth *a, const char *src, uint64_t now_ms);
/* Whether any source may be refused now (one atomic load: the request
 * path asks auth_blocked only then). */
static inline bool auth_any_blocked(struct auth *a, uint64_t now_ms)
{
	return atomic_load_explicit(&a->block_horizon_ms, memory_order_relaxed) > now_ms;
}

#endif
