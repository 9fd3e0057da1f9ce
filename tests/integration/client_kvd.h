/*
 * client_kvd.h — what the parts of test_client_kvd share: the transport under
 * test, the status-checking macros, and helpers for handles, scans, puts and
 * tenants (defined in test_client_kvd.c, next to main).
 *
 * Each part defines the tests main runs:
 *   test_client_kvd_api.c      the api group (one shared kvd)
 *   test_client_kvd_model.c    64 threads against a model
 *   test_client_kvd_daemons.c  passivation; TenantDrop during a merge
 *   test_client_kvd_nng.c      TLS/TCP/token and the REQ resend (nng only)
 */
#ifndef KV_TEST_CLIENT_KVD_H
#define KV_TEST_CLIENT_KVD_H

#include "harness.h"

#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sys/socket.h>

#include <cmocka.h> /* after the headers it needs */

#include "kvclient.h"

/* The transport under test: "stream" (kv+ipc://, the default) or "nng"
 * (ipc://), from argv[1]. TLS and the REQ resend are nng's alone and run
 * only with "nng". */
extern bool use_nng;

/* Set by test_tls_tcp when the openssl command is missing: main exits 77
 * if everything else passed. */
extern bool tls_skipped;

/* Each check fills a status that was first filled with junk, so a call that
 * forgets to write it is caught too. */
#define CALL(st, e) (memset(&(st), 'x', sizeof(st)), (e))

#define EXPECT_OK(st, e)                                                                           \
	do {                                                                                       \
		int rv_ = CALL(st, e);                                                             \
		if (rv_ != 0 || (st).code != 0 || (st).message[0] != '\0')                         \
			fail_msg("line %d: %s -> %d %s (status %d '%.200s')", __LINE__, #e, rv_,   \
			         kvc_code_name(rv_), (st).code, (st).message);                     \
	} while (0)

/* The call fails with code, and the status says so with a message; when
 * substr is not NULL the message contains it. */
#define EXPECT_CODE(st, e, want, substr)                                                           \
	do {                                                                                       \
		int rv_ = CALL(st, e);                                                             \
		const char *sub_ = (substr);                                                       \
		if (rv_ != -(want) || (st).code != (want) || (st).message[0] == '\0' ||            \
		    strnlen((st).message, KVC_MESSAGE_MAX) >= KVC_MESSAGE_MAX ||                   \
		    (sub_ != NULL && strstr((st).message, sub_) == NULL))                          \
			fail_msg("line %d: %s -> %d %s (status %d '%.200s'), want %s%s%s",         \
			         __LINE__, #e, rv_, kvc_code_name(rv_), (st).code, (st).message,   \
			         kvc_code_name(want), sub_ ? " with " : "", sub_ ? sub_ : "");     \
	} while (0)

/* An async call that was sent: its outcome comes through the callback (and
 * call->status is not written, kvclient.h: "call->status is not written
 * later"). */
#define ASYNC_SENT(e)                                                                              \
	do {                                                                                       \
		int rv_ = (e);                                                                     \
		if (rv_ != 0)                                                                      \
			fail_msg("line %d: %s -> %d %s", __LINE__, #e, rv_, kvc_code_name(rv_));   \
	} while (0)

/* A whole scan, copied out. */
struct item {
	uint8_t *k;
	size_t kl;
	uint8_t *v; /* NULL: keys_only */
	size_t vl;
	uint64_t version;
};

struct items {
	struct item *a;
	size_t n;
	uint64_t revision;
};

/* An async call's outcome, as acall_cb records it; *done is counted up. */
struct acall {
	atomic_int *done;
	int rv;
	int code;
	char msg[KVC_MESSAGE_MAX];
	uint64_t version;
	uint8_t value[32];
	size_t len;
};

/* The address of k for the transport under test. */
const char *client_url(const struct kvd_proc *k);
uint64_t wall_ms(void);
/* A handle on url (tenant and timeout_ms: the defaults when NULL or 0). */
kvc *client_open(const char *url, const char *tenant, uint32_t timeout_ms);
void fill_random(uint8_t *p, size_t n, uint64_t seed);

void items_free(struct items *it);
/* The whole scan into *out; 0 or the scan's error. */
int scan_collect(kvc *c, const struct kvc_call *call, const struct kvc_scan_opts *o,
                 struct items *out);
/* The whole scan of tenant into *it; fails the test on an error. */
void scan_keys(kvc *c, const char *tenant, const struct kvc_scan_opts *o, struct items *it);
/* x has key k and, unless v is NULL, value v. */
bool item_is(const struct item *x, const char *k, const char *v);

void put_str(kvc *c, const struct kvc_call *call, const char *k, const char *v,
             uint64_t *ret_version);
void make_tenant(kvc *c, const char *name, enum kvc_sync sync, uint32_t history, uint64_t ttl_ms);
/* name is in the list; *active (if not NULL) gets its state. */
bool list_has(const struct kvc_tenant_entry *l, size_t n, const char *name, bool *active);
/* kvc_async_fn for an arg that is a struct acall. */
void acall_cb(void *arg, const struct kvc_async_result *res);

/* test_client_kvd_api.c */
int api_setup(void **state);
int api_teardown(void **state);
void test_keys_and_values(void **state);
void test_conditions(void **state);
void test_ttl(void **state);
void test_history(void **state);
void test_batch(void **state);
void test_scan_options(void **state);
void test_scan_snapshot_paging(void **state);
void test_compact(void **state);
void test_tenants(void **state);
void test_async_raw_and_transport(void **state);

/* test_client_kvd_model.c */
void test_model(void **state);

/* test_client_kvd_daemons.c */
void test_passivation(void **state);
void test_drop_waits_for_merge(void **state);

/* test_client_kvd_nng.c */
void test_tls_tcp(void **state);
void test_resend_applied_once(void **state);
void test_short_lived_handles(void **state);

#endif
