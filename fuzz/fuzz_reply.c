/*
 * fuzz_reply — libkvclient's reply decoding (rpc/client_codec.c: crep_*,
 * rpc/mp.c: mp_parse, rpc/client_op.c: client_status_set) against arbitrary
 * bytes, as a hostile or broken server could send them.
 *
 * The input is one reply body. It goes the way client_op.c's
 * client_op_decode_reply takes it (mp_parse, crep_envelope, the status and
 * its message), then through every result decoder, and the per-element
 * decoders over every element of the arrays the result holds.
 *
 * Invariants:
 *   - nothing crashes, and memory stays in proportion to the reply;
 *   - every pointer a decoder returns (values, keys, continuation, message)
 *     lies inside the reply buffer with its length;
 *   - strings copied into fixed arrays are NUL-terminated inside them;
 *   - outputs are untouched when a decoder fails (STYLE.md habit 2), also
 *     crep_batch's ops, which are only written when every version checks;
 *   - client_status_set keeps a line: NUL-terminated, under
 *     KVC_MESSAGE_MAX, no control characters, and a cut never splits a
 *     UTF-8 sequence (valid UTF-8 in, valid UTF-8 out).
 */
#include "fuzz.h"

#include "client_codec.h"
#include "client_op.h"
#include "mp.h"

#include <errno.h>
#include <string.h>

static const uint8_t *in_buf;
static size_t in_len;

static bool inside(const void *p, size_t n)
{
	const uint8_t *q = p;

	if (n == 0)
		return p == NULL || (q >= in_buf && q <= in_buf + in_len);
	return q >= in_buf && q <= in_buf + in_len && n <= (size_t)(in_buf + in_len - q);
}

static bool nul_inside(const char *s, size_t cap)
{
	return memchr(s, '\0', cap) != NULL;
}

/* Well-formed UTF-8 (no overlongs, no surrogates, at most U+10FFFF). */
static bool utf8_valid(const uint8_t *s, size_t n)
{
	size_t i = 0;

	while (i < n) {
		uint8_t c = s[i];
		size_t k;
		uint32_t cp, min;
		if (c < 0x80) {
			i++;
			continue;
		}
		if ((c & 0xe0) == 0xc0)
			k = 1, cp = c & 0x1f, min = 0x80;
		else if ((c & 0xf0) == 0xe0)
			k = 2, cp = c & 0x0f, min = 0x800;
		else if ((c & 0xf8) == 0xf0)
			k = 3, cp = c & 0x07, min = 0x10000;
		else
			return false;
		if (n - i - 1 < k)
			return false;
		for (size_t j = 1; j <= k; j++) {
			if ((s[i + j] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (s[i + j] & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += k + 1;
	}
	return true;
}

static void check_status_set(int code, const char *msg, size_t len)
{
	struct kvc_status st;
	size_t n;

	memset(&st, 0xa5, sizeof(st));
	client_status_set(&st, code, msg, len);
	FZ_CHECK(st.code == code);
	FZ_CHECK(nul_inside(st.message, sizeof(st.message)));
	n = strlen(st.message);
	if (len < KVC_MESSAGE_MAX)
		FZ_CHECK(n == len); /* a NUL in it is a control character too */
	else
		FZ_CHECK(n < KVC_MESSAGE_MAX);
	for (size_t i = 0; i < n; i++) {
		uint8_t c = (uint8_t)st.message[i], o = (uint8_t)msg[i];
		FZ_CHECK(c >= 0x20 && c != 0x7f);
		FZ_CHECK(c == o || (c == ' ' && (o < 0x20 || o == 0x7f)));
	}
	if (utf8_valid((const uint8_t *)msg, len)) {
		FZ_CHECK(utf8_valid((const uint8_t *)st.message, n));
		/* a cut gives up at most the bytes of one incomplete sequence */
		FZ_CHECK(n == len || n + 3 >= KVC_MESSAGE_MAX - 1);
	}
}

/* Runs dec into a canary-filled output; on failure the output is untouched. */
#define DECODE(out, call)                                                                  \
	({                                                                                 \
		__typeof__(out) canary_;                                                   \
		int rv_;                                                                   \
		memset(&(out), 0xa5, sizeof(out));                                         \
		memset(&canary_, 0xa5, sizeof(canary_));                                   \
		rv_ = (call);                                                              \
		FZ_CHECK(rv_ == 0 || rv_ == -EINVAL);                                      \
		if (rv_ != 0)                                                              \
			FZ_CHECK(memcmp(&(out), &canary_, sizeof(out)) == 0);              \
		rv_;                                                                       \
	})

static void check_array_elements(const msgpack_object *arr)
{
	uint32_t i;

	if (arr == NULL || arr->type != MSGPACK_OBJECT_ARRAY)
		return;
	for (i = 0; i < arr->via.array.size; i++) {
		const msgpack_object *el = &arr->via.array.ptr[i];
		struct kvc_item it;
		struct kvc_version ver;
		struct kvc_tenant_entry te;

		if (DECODE(it, crep_scan_item(el, &it)) == 0) {
			FZ_CHECK(it.key != NULL && inside(it.key, it.key_len));
			FZ_CHECK(inside(it.value, it.value_len));
		}
		if (DECODE(ver, crep_version_entry(el, &ver)) == 0)
			FZ_CHECK(inside(ver.data, ver.len) && (ver.data != NULL || ver.len == 0));
		if (DECODE(te, crep_tenant_entry(el, &te)) == 0)
			FZ_CHECK(nul_inside(te.name, sizeof(te.name)));
	}
}

static void check_result(const msgpack_object *result)
{
	uint64_t u;
	struct {
		const void *value;
		size_t len;
		uint64_t version, ts, exp;
	} get;
	struct {
		const msgpack_object *list;
		bool truncated;
	} vs;
	struct crep_scan_page pg;
	const msgpack_object *list;
	struct kvc_compact_result cr;
	struct kvc_tenant_info ti;
	struct kvc_daemon_stats ds;
	struct kvc_health h;
	size_t idx;

	DECODE(u, crep_version(result, &u));
	if (DECODE(get, crep_get(result, &get.value, &get.len, &get.version, &get.ts, &get.exp)) ==
	    0)
		FZ_CHECK(get.value != NULL && inside(get.value, get.len));
	if (DECODE(pg, crep_scan(result, &pg)) == 0) {
		FZ_CHECK(pg.items != NULL && pg.items->type == MSGPACK_OBJECT_ARRAY);
		if (pg.more)
			FZ_CHECK(pg.cont != NULL && inside(pg.cont, pg.cont_len));
		else
			FZ_CHECK(pg.cont == NULL && pg.cont_len == 0);
		check_array_elements(pg.items);
	}
	if (DECODE(vs, crep_versions(result, &vs.list, &vs.truncated)) == 0) {
		FZ_CHECK(vs.list != NULL && vs.list->type == MSGPACK_OBJECT_ARRAY);
		check_array_elements(vs.list);
	}
	if (DECODE(list, crep_tenant_list(result, &list)) == 0) {
		FZ_CHECK(list != NULL && list->type == MSGPACK_OBJECT_ARRAY);
		check_array_elements(list);
	}
	/* Batch: n taken from the reply, as a client that sent that many ops */
	{
		const msgpack_object *vl = mp_map_get(result, "versions");
		size_t n = vl && vl->type == MSGPACK_OBJECT_ARRAY ? vl->via.array.size : 1;
		struct kvc_op *ops, *copy;
		int rv;

		if (n > 10000)
			n = 10000;
		fz_alloc_pause(); /* the harness's own memory does not count */
		ops = calloc(n + 1, sizeof(*ops));
		copy = calloc(n + 1, sizeof(*copy));
		fz_alloc_resume();
		FZ_CHECK(ops != NULL && copy != NULL);
		memset(ops, 0xa5, (n + 1) * sizeof(*ops));
		memcpy(copy, ops, (n + 1) * sizeof(*ops));
		rv = crep_batch(result, ops, n);
		FZ_CHECK(rv == 0 || rv == -EINVAL);
		if (rv != 0) {
			FZ_CHECK(memcmp(ops, copy, (n + 1) * sizeof(*ops)) == 0);
		} else {
			for (size_t i = 0; i < n; i++) {
				FZ_CHECK(ops[i].version == vl->via.array.ptr[i].via.u64);
				ops[i].version = copy[i].version;
			}
			/* nothing but the versions was written, not even past n */
			FZ_CHECK(memcmp(ops, copy, (n + 1) * sizeof(*ops)) == 0);
		}
		free(ops);
		free(copy);
		if (DECODE(idx, crep_batch_failed(result, n, &idx)) == 0)
			FZ_CHECK(idx < n);
	}
	DECODE(cr, crep_compact(result, &cr));
	if (DECODE(ti, crep_tenant_info(result, &ti)) == 0) {
		FZ_CHECK(nul_inside(ti.name, sizeof(ti.name)));
		FZ_CHECK(ti.sync == KVC_SYNC_ALWAYS || ti.sync == KVC_SYNC_INTERVAL ||
		         ti.sync == KVC_SYNC_NONE);
	}
	if (DECODE(ds, crep_daemon_stats(result, &ds)) == 0)
		FZ_CHECK(nul_inside(ds.version, sizeof(ds.version)));
	DECODE(u, crep_activate(result, &u));
	if (DECODE(h, crep_health(result, &h)) == 0)
		FZ_CHECK(nul_inside(h.status, sizeof(h.status)) &&
		         nul_inside(h.version, sizeof(h.version)));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	msgpack_zone zone;
	msgpack_object root;
	struct crep_envelope env;
	size_t bytes;
	int rv;

	in_buf = data;
	in_len = size;
	fz_alloc_begin();
	FZ_CHECK(msgpack_zone_init(&zone, 2048));
	rv = mp_parse(data, size, &zone, &root);
	FZ_CHECK(rv == 0 || rv == -EINVAL || rv == -E2BIG || rv == -ELOOP); /* -ELOOP: nested too deep */
	if (rv == 0 && DECODE(env, crep_envelope(&root, &env)) == 0) {
		int code;
		FZ_CHECK(env.result == NULL || env.result->type == MSGPACK_OBJECT_MAP);
		FZ_CHECK(env.message == NULL || inside(env.message, env.message_len));
		/* reply_decode's mapping of the status */
		code = env.status <= KVC_UNAUTHENTICATED ? (int)env.status : KVC_UNKNOWN;
		FZ_CHECK(code >= 0 && code <= KVC_UNAUTHENTICATED);
		FZ_CHECK(strcmp(kvc_code_name(code), "") != 0);
		if (env.message != NULL)
			check_status_set(code, env.message, env.message_len);
		check_result(env.result);
		/* a decoder handed the whole reply, or nothing, does no harm either */
		check_result(&root);
		check_result(NULL);
	}
	msgpack_zone_destroy(&zone);
	bytes = fz_alloc_end();
	fz_alloc_report("reply", bytes, size);
	/* msgpack objects are 24 bytes (a map entry 48) for at least 1 byte (2)
	 * of input, and zone chunks round up to twice that */
	FZ_CHECK(bytes <= 64 * 1024 + 256 * size);
	return 0;
}
