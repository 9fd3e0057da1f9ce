/*
 * etcd.c — etcd's v3 API over its JSON gateway (etcd.h says what each call
 * does and returns).
 *
 * A call is one HTTP POST of a JSON object to /v3/<service>/<method> on the
 * first endpoint that accepts a connection, then the answer checked field by
 * field. A watch (/v3/watch) is the same POST whose answer is a stream of
 * JSON objects, one a line: it is read line by line as it comes (only the
 * unfinished line is kept) and cut off at the first line with changes, a
 * cancel or an error. Invariants:
 *  1. Nothing from the network is trusted: every field is checked for its
 *     type before use, a missing field is its zero value only where etcd
 *     leaves zero values out, anything else is -EPROTO. Answers are read into
 *     a buffer bounded by ETCD_RESPONSE_MAX.
 *  2. A request goes to the next endpoint only when the previous one refused
 *     or could not be reached (nothing was sent), so no write is sent twice.
 *     The endpoint that answered last is tried first next time.
 *  3. The timeout bounds the whole call, every endpoint tried included.
 *  4. Outputs are written only once the whole answer has been checked.
 *
 * Threads: a struct etcd is used by one thread at a time (etcd.h).
 */
#include "etcd.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct etcd {
	CURL *curl;
	char *endpoints[ETCD_ENDPOINTS_MAX];
	size_t n_endpoints;
	size_t current; /* the endpoint tried first */
	int timeout_ms;
	struct curl_slist *headers;
	char *buf; /* the answer being read */
	size_t len, cap;
	bool too_big;
	/* While etcd_watch_prefix() reads its stream (one JSON object a line): */
	bool watching;
	bool created;        /* the watch's first answer ("created") came */
	int64_t created_rev; /* and its header's revision */
	json_t *watch_ans;   /* the first answer with events, a cancel or an error */
	int watch_err;       /* a line that is not etcd's: -EPROTO */
	char err[ETCD_ERRMSG_MAX];
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc = CURLE_FAILED_INIT;

static void curl_init_once(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

void etcd_global_cleanup(void)
{
	if (curl_init_rc == CURLE_OK)
		curl_global_cleanup();
}

static int fail(struct etcd *e, int rv, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(struct etcd *e, int rv, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(e->err, sizeof(e->err), fmt, ap);
	va_end(ap);
	return rv;
}

const char *etcd_errmsg(const struct etcd *e)
{
	return e->err;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* ---- opening and closing ---- */

void etcd_close(struct etcd *e)
{
	if (e == NULL)
		return;
	if (e->curl != NULL)
		curl_easy_cleanup(e->curl);
	curl_slist_free_all(e->headers);
	for (size_t i = 0; i < e->n_endpoints; i++)
		free(e->endpoints[i]);
	free(e->buf);
	free(e);
}

/* Splits "url[,url...]" into e->endpoints, each without a trailing '/'. */
static int parse_endpoints(struct etcd *e, const char *list)
{
	const char *p = list;

	while (*p != '\0') {
		const char *end = strchr(p, ',');
		size_t n = end != NULL ? (size_t)(end - p) : strlen(p);

		while (n > 0 && (*p == ' ' || *p == '\t'))
			p++, n--;
		while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t' || p[n - 1] == '/'))
			n--;
		if (n > 0) {
			if (e->n_endpoints == ETCD_ENDPOINTS_MAX)
				return -EINVAL;
			if (!(n > 7 && strncmp(p, "http://", 7) == 0) &&
			    !(n > 8 && strncmp(p, "https://", 8) == 0))
				return -EINVAL;
			if ((e->endpoints[e->n_endpoints] = strndup(p, n)) == NULL)
				return -ENOMEM;
			e->n_endpoints++;
		}
		if (end == NULL)
			break;
		p = end + 1;
	}
	return e->n_endpoints > 0 ? 0 : -EINVAL;
}

static bool watch_lines(struct etcd *e);

static size_t on_body(char *data, size_t size, size_t nmemb, void *arg)
{
	struct etcd *e = arg;
	size_t n = size * nmemb;

	if (n > ETCD_RESPONSE_MAX - e->len) {
		e->too_big = true;
		return 0; /* curl stops with CURLE_WRITE_ERROR */
	}
	if (e->len + n + 1 > e->cap) {
		size_t cap = e->cap != 0 ? e->cap : 4096;
		char *nb;

		while (cap < e->len + n + 1)
			cap *= 2;
		if ((nb = realloc(e->buf, cap)) == NULL)
			return 0;
		e->buf = nb;
		e->cap = cap;
	}
	memcpy(e->buf + e->len, data, n);
	e->len += n;
	e->buf[e->len] = '\0';
	if (e->watching && !watch_lines(e))
		return 0; /* the watch has its answer: curl stops with CURLE_WRITE_ERROR */
	return n;
}

/* http and https only: no other scheme, not even through a redirection. */
static CURLcode set_protocols(CURL *c)
{
#if LIBCURL_VERSION_NUM >= 0x075500 /* 7.85 has the string form, and deprecates the mask */
	return curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
#else
	return curl_easy_setopt(c, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
}

int etcd_open(const char *endpoints, int timeout_ms, struct etcd **ret_etcd)
{
	struct etcd *e;
	struct curl_slist *h;
	int rv;

	if (endpoints == NULL || timeout_ms <= 0 || ret_etcd == NULL)
		return -EINVAL;
	pthread_once(&curl_once, curl_init_once);
	if (curl_init_rc != CURLE_OK)
		return -EIO;
	if ((e = calloc(1, sizeof(*e))) == NULL)
		return -ENOMEM;
	e->timeout_ms = timeout_ms;
	if ((rv = parse_endpoints(e, endpoints)) != 0)
		goto fail;
	rv = -ENOMEM;
	if ((h = curl_slist_append(NULL, "Content-Type: application/json")) == NULL)
		goto fail;
	e->headers = h;
	/* No "Expect: 100-continue" pause before larger bodies. */
	if ((h = curl_slist_append(e->headers, "Expect:")) == NULL)
		goto fail;
	e->headers = h;
	rv = -EIO;
	if ((e->curl = curl_easy_init()) == NULL)
		goto fail;
	if (curl_easy_setopt(e->curl, CURLOPT_NOSIGNAL, 1L) != CURLE_OK ||
	    curl_easy_setopt(e->curl, CURLOPT_HTTPHEADER, e->headers) != CURLE_OK ||
	    curl_easy_setopt(e->curl, CURLOPT_WRITEFUNCTION, on_body) != CURLE_OK ||
	    curl_easy_setopt(e->curl, CURLOPT_WRITEDATA, e) != CURLE_OK ||
	    set_protocols(e->curl) != CURLE_OK ||
	    curl_easy_setopt(e->curl, CURLOPT_FOLLOWLOCATION, 0L) != CURLE_OK)
		goto fail;
	*ret_etcd = e;
	return 0;
fail:
	etcd_close(e);
	return rv;
}

/* ---- base64 and JSON fields ---- */

/* The base64 text of n bytes, NUL-terminated, or NULL (out of memory). */
static char *b64_encode(const void *data, size_t n)
{
	size_t out_len = 4 * ((n + 2) / 3) + 1;
	char *out = malloc(out_len);

	if (out == NULL)
		return NULL;
	if (n == 0) {
		out[0] = '\0';
		return out;
	}
	EVP_EncodeBlock((unsigned char *)out, data, (int)n);
	return out;
}

/* Decodes base64 `in` into a new NUL-terminated buffer: 0, -EPROTO (not
 * base64), -ENOMEM. */
static int b64_decode(const char *in, size_t in_len, char **ret, size_t *ret_len)
{
	size_t pad = 0;
	char *out;
	int n;

	if (in_len % 4 != 0 || in_len > (size_t)ETCD_RESPONSE_MAX)
		return -EPROTO;
	if ((out = malloc(in_len / 4 * 3 + 1)) == NULL)
		return -ENOMEM;
	if (in_len > 0) {
		if ((n = EVP_DecodeBlock((unsigned char *)out, (const unsigned char *)in,
		                         (int)in_len)) < 0) {
			free(out);
			return -EPROTO;
		}
		/* EVP_DecodeBlock counts the padding as zero bytes. */
		pad = (in[in_len - 1] == '=') + (in_len > 1 && in[in_len - 2] == '=');
		if ((size_t)n < pad) {
			free(out);
			return -EPROTO;
		}
		n -= (int)pad;
	} else {
		n = 0;
	}
	out[n] = '\0';
	*ret = out;
	*ret_len = (size_t)n;
	return 0;
}

/* An int64 field: a decimal string (the gateway's form) or a JSON integer;
 * absent is 0 (a zero value is left out). 0 or -EPROTO. */
static int get_i64(const json_t *obj, const char *name, int64_t *ret)
{
	const json_t *v = json_object_get(obj, name);
	const char *s, *end;
	long long x;

	if (v == NULL || json_is_null(v)) {
		*ret = 0;
		return 0;
	}
	if (json_is_integer(v)) {
		*ret = (int64_t)json_integer_value(v);
		return 0;
	}
	if (!json_is_string(v))
		return -EPROTO;
	s = json_string_value(v);
	if (*s == '\0' || (*s != '-' && (*s < '0' || *s > '9')))
		return -EPROTO;
	errno = 0;
	x = strtoll(s, (char **)&end, 10);
	if (errno != 0 || *end != '\0')
		return -EPROTO;
	*ret = (int64_t)x;
	return 0;
}

/* A bool field; absent is false. 0 or -EPROTO. */
static int get_bool(const json_t *obj, const char *name, bool *ret)
{
	const json_t *v = json_object_get(obj, name);

	if (v == NULL || json_is_null(v)) {
		*ret = false;
		return 0;
	}
	if (!json_is_boolean(v))
		return -EPROTO;
	*ret = json_is_true(v);
	return 0;
}

/* A base64 bytes field; absent is empty. 0, -EPROTO, -ENOMEM. */
static int get_bytes(const json_t *obj, const char *name, char **ret, size_t *ret_len)
{
	const json_t *v = json_object_get(obj, name);

	if (v == NULL || json_is_null(v))
		return b64_decode("", 0, ret, ret_len);
	if (!json_is_string(v))
		return -EPROTO;
	return b64_decode(json_string_value(v), json_string_length(v), ret, ret_len);
}

/* An object field, or NULL (absent or not an object). */
static const json_t *get_obj(const json_t *obj, const char *name)
{
	const json_t *v = json_object_get(obj, name);

	return json_is_object(v) ? v : NULL;
}

/* The "header" of an answer and its revision. */
static int get_header_rev(const json_t *ans, int64_t *ret)
{
	const json_t *h = get_obj(ans, "header");

	if (h == NULL)
		return -EPROTO;
	if (get_i64(h, "revision", ret) != 0 || *ret < 0)
		return -EPROTO;
	return 0;
}

void etcd_kv_clear(struct etcd_kv *kv)
{
	if (kv == NULL)
		return;
	free(kv->key);
	free(kv->value);
	memset(kv, 0, sizeof(*kv));
}

void etcd_kvs_free(struct etcd_kvs *kvs)
{
	if (kvs == NULL)
		return;
	for (size_t i = 0; i < kvs->n; i++)
		etcd_kv_clear(&kvs->kv[i]);
	free(kvs->kv);
	memset(kvs, 0, sizeof(*kvs));
}

/* One mvccpb.KeyValue. 0, -EPROTO, -ENOMEM; *kv untouched on failure. */
static int parse_kv(const json_t *j, struct etcd_kv *kv)
{
	struct etcd_kv k = {0};
	int rv;

	if (!json_is_object(j))
		return -EPROTO;
	if (get_i64(j, "create_revision", &k.create_rev) != 0 ||
	    get_i64(j, "mod_revision", &k.mod_rev) != 0 || get_i64(j, "version", &k.version) != 0 ||
	    get_i64(j, "lease", &k.lease) != 0)
		return -EPROTO;
	if (json_object_get(j, "key") == NULL)
		return -EPROTO; /* a key is never empty */
	if ((rv = get_bytes(j, "key", &k.key, &k.key_len)) != 0)
		return rv;
	if ((rv = get_bytes(j, "value", &k.value, &k.value_len)) != 0) {
		free(k.key);
		return rv;
	}
	*kv = k;
	return 0;
}

/* A RangeResponse's "kvs" (absent: none). */
static int parse_kvs(const json_t *range, struct etcd_kvs *ret)
{
	const json_t *arr = json_object_get(range, "kvs");
	struct etcd_kvs out = {0};
	bool more;
	int rv;

	if (get_bool(range, "more", &more) != 0)
		return -EPROTO;
	if (arr != NULL && !json_is_array(arr))
		return -EPROTO;
	if (arr != NULL && json_array_size(arr) > 0) {
		if ((out.kv = calloc(json_array_size(arr), sizeof(*out.kv))) == NULL)
			return -ENOMEM;
		for (size_t i = 0; i < json_array_size(arr); i++) {
			if ((rv = parse_kv(json_array_get(arr, i), &out.kv[i])) != 0) {
				etcd_kvs_free(&out);
				return rv;
			}
			out.n++;
		}
	}
	out.more = more;
	*ret = out;
	return 0;
}

/* ---- one HTTP call ---- */

/* A gRPC status code (in an error answer) as an errno. */
static int grpc_errno(int64_t code)
{
	switch (code) {
	case 3: /* INVALID_ARGUMENT */
	case 9: /* FAILED_PRECONDITION */
		return -EINVAL;
	case 4: /* DEADLINE_EXCEEDED */
		return -ETIMEDOUT;
	case 5: /* NOT_FOUND */
		return -ENOENT;
	case 8: /* RESOURCE_EXHAUSTED */
		return -ENOSPC;
	case 14: /* UNAVAILABLE */
		return -EAGAIN;
	default:
		return -EIO;
	}
}

/* If `ans` is an error answer, its errno (and e->err); 0 otherwise. The
 * unary form is {"error": "text", "code": N, "message": "text"}; a stream's
 * is {"error": {"grpc_code": N, "http_code": N, "message": "text"}}. */
static int answer_error(struct etcd *e, const json_t *ans, const char *path)
{
	const json_t *err = json_object_get(ans, "error");
	const json_t *msg;
	int64_t code = 0;

	if (err == NULL)
		return 0;
	if (json_is_object(err)) {
		if (get_i64(err, "grpc_code", &code) != 0)
			return fail(e, -EPROTO, "etcd %s: malformed error answer", path);
		msg = json_object_get(err, "message");
	} else {
		if (get_i64(ans, "code", &code) != 0)
			return fail(e, -EPROTO, "etcd %s: malformed error answer", path);
		msg = json_object_get(ans, "message");
		if (!json_is_string(msg))
			msg = err;
	}
	fail(e, grpc_errno(code), "etcd %s: %s (code %" PRId64 ")", path,
	     json_is_string(msg) ? json_string_value(msg) : "error", code);
	return grpc_errno(code);
}

static int curl_errno(CURLcode c)
{
	switch (c) {
	case CURLE_COULDNT_CONNECT:
		return -ECONNREFUSED;
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
		return -EHOSTUNREACH;
	case CURLE_OPERATION_TIMEDOUT:
		return -ETIMEDOUT;
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
		return -ECONNRESET;
	case CURLE_UNSUPPORTED_PROTOCOL: /* also an answer that is not HTTP (HTTP/0.9) */
	case CURLE_PARTIAL_FILE:
	case CURLE_WEIRD_SERVER_REPLY:
	case CURLE_BAD_CONTENT_ENCODING:
	case CURLE_HTTP2:
		return -EPROTO;
	case CURLE_OUT_OF_MEMORY:
		return -ENOMEM;
	default:
		return -EIO;
	}
}

/* POSTs `req` to `path` on the endpoints in turn (invariant 2), for at most
 * timeout_ms in all, the answer read into e->buf: 0 and curl's result in
 * *ret_c (and the words for it in *ret_where), or -ENOMEM / -EIO (e->err
 * says). */
static int post(struct etcd *e, const char *path, json_t *req, int timeout_ms, CURLcode *ret_c,
                const char **ret_where)
{
	uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
	char *body = NULL;
	char url[512];
	CURLcode c = CURLE_COULDNT_CONNECT;
	size_t tried;

	e->err[0] = '\0';
	if (req == NULL || (body = json_dumps(req, JSON_COMPACT)) == NULL)
		return fail(e, -ENOMEM, "etcd %s: out of memory", path);
	for (tried = 0; tried < e->n_endpoints; tried++) {
		size_t i = (e->current + tried) % e->n_endpoints;
		uint64_t now = now_ms();

		if (now >= deadline) {
			c = CURLE_OPERATION_TIMEDOUT;
			break;
		}
		snprintf(url, sizeof(url), "%s%s", e->endpoints[i], path);
		e->len = 0;
		e->too_big = false;
		if (curl_easy_setopt(e->curl, CURLOPT_URL, url) != CURLE_OK ||
		    curl_easy_setopt(e->curl, CURLOPT_POSTFIELDS, body) != CURLE_OK ||
		    curl_easy_setopt(e->curl, CURLOPT_POSTFIELDSIZE, (long)strlen(body)) !=
		            CURLE_OK ||
		    curl_easy_setopt(e->curl, CURLOPT_TIMEOUT_MS, (long)(deadline - now)) !=
		            CURLE_OK) {
			free(body);
			return fail(e, -EIO, "etcd %s: cannot set up the request", path);
		}
		c = curl_easy_perform(e->curl);
		if (c == CURLE_COULDNT_CONNECT || c == CURLE_COULDNT_RESOLVE_HOST)
			continue; /* nothing sent: the next endpoint */
		e->current = i;
		break;
	}
	free(body);
	*ret_c = c;
	*ret_where = tried == e->n_endpoints ? " (every endpoint)" : "";
	return 0;
}

/* A failure of curl's as an errno, e->err saying it. */
static int curl_failed(struct etcd *e, const char *path, CURLcode c, const char *where)
{
	if (c == CURLE_WRITE_ERROR && e->too_big)
		return fail(e, -EMSGSIZE, "etcd %s: answer larger than %u bytes", path,
		            ETCD_RESPONSE_MAX);
	return fail(e, curl_errno(c), "etcd %s: %s%s", path, curl_easy_strerror(c), where);
}

/* POSTs `req` to `path` ("/v3/kv/range") and parses the answer into
 * *ret_ans (a JSON object; an error answer is turned into its errno). A
 * stream's answer (keepalive) is its first JSON value. */
static int call(struct etcd *e, const char *path, json_t *req, json_t **ret_ans)
{
	const char *where = "";
	CURLcode c = CURLE_OK;
	long status = 0;
	json_error_t jerr;
	json_t *ans;
	int rv;

	if ((rv = post(e, path, req, e->timeout_ms, &c, &where)) != 0)
		return rv;
	if (c != CURLE_OK)
		return curl_failed(e, path, c, where);
	curl_easy_getinfo(e->curl, CURLINFO_RESPONSE_CODE, &status);
	if (e->len == 0)
		return fail(e, -EPROTO, "etcd %s: empty answer (HTTP %ld)", path, status);
	ans = json_loadb(e->buf, e->len, JSON_DISABLE_EOF_CHECK | JSON_REJECT_DUPLICATES, &jerr);
	if (ans == NULL)
		return fail(e, -EPROTO, "etcd %s: answer is not JSON (HTTP %ld): %s", path, status,
		            jerr.text);
	if (!json_is_object(ans)) {
		json_decref(ans);
		return fail(e, -EPROTO, "etcd %s: answer is not a JSON object (HTTP %ld)", path,
		            status);
	}
	if ((rv = answer_error(e, ans, path)) != 0) {
		json_decref(ans);
		return rv;
	}
	if (status != 200) {
		json_decref(ans);
		return fail(e, -EPROTO, "etcd %s: HTTP %ld without an error", path, status);
	}
	*ret_ans = ans;
	return 0;
}

static int malformed(struct etcd *e, const char *path, const char *what)
{
	return fail(e, -EPROTO, "etcd %s: malformed answer (%s)", path, what);
}

/* ---- leases ---- */

static json_t *i64_string(int64_t v)
{
	char s[24];

	snprintf(s, sizeof(s), "%" PRId64, v);
	return json_string(s);
}

int etcd_lease_grant(struct etcd *e, int64_t ttl_s, int64_t *ret_id, int64_t *ret_ttl)
{
	static const char path[] = "/v3/lease/grant";
	json_t *req, *ans = NULL;
	int64_t id, ttl;
	int rv;

	if (ttl_s <= 0)
		return fail(e, -EINVAL, "etcd %s: TTL %" PRId64 " is not positive", path, ttl_s);
	req = json_pack("{s:o}", "TTL", i64_string(ttl_s));
	rv = call(e, path, req, &ans);
	json_decref(req);
	if (rv != 0)
		return rv;
	if (get_obj(ans, "header") == NULL || get_i64(ans, "ID", &id) != 0 ||
	    get_i64(ans, "TTL", &ttl) != 0 || id == 0 || ttl <= 0)
		rv = malformed(e, path, "no lease ID or TTL");
	json_decref(ans);
	if (rv != 0)
		return rv;
	*ret_id = id;
	*ret_ttl = ttl;
	return 0;
}

int etcd_lease_keepalive(struct etcd *e, int64_t id, int64_t *ret_ttl)
{
	static const char path[] = "/v3/lease/keepalive";
	const json_t *res;
	json_t *req, *ans = NULL;
	int64_t rid, ttl;
	int rv;

	req = json_pack("{s:o}", "ID", i64_string(id));
	rv = call(e, path, req, &ans);
	json_decref(req);
	if (rv != 0)
		return rv;
	/* A stream's answer: {"result": LeaseKeepAliveResponse}. */
	if ((res = get_obj(ans, "result")) == NULL || get_obj(res, "header") == NULL ||
	    get_i64(res, "ID", &rid) != 0 || get_i64(res, "TTL", &ttl) != 0)
		rv = malformed(e, path, "no result");
	else if (rid != id && rid != 0)
		rv = malformed(e, path, "another lease's ID");
	json_decref(ans);
	if (rv != 0)
		return rv;
	if (ttl <= 0) /* etcd answers a lease it does not know with TTL 0 (left out) */
		return fail(e, ETCD_LEASE_GONE, "etcd %s: lease %" PRIx64 " is gone", path,
		            (uint64_t)id);
	*ret_ttl = ttl;
	return 0;
}

int etcd_lease_revoke(struct etcd *e, int64_t id)
{
	static const char path[] = "/v3/lease/revoke";
	json_t *req, *ans = NULL;
	int rv;

	req = json_pack("{s:o}", "ID", i64_string(id));
	rv = call(e, path, req, &ans);
	json_decref(req);
	if (rv == -ENOENT)
		return ETCD_LEASE_GONE; /* "requested lease not found"; e->err says so */
	if (rv != 0)
		return rv;
	if (get_obj(ans, "header") == NULL)
		rv = malformed(e, path, "no header");
	json_decref(ans);
	return rv;
}

/* ---- keys ---- */

static int check_key(struct etcd *e, const char *path, size_t key_len)
{
	if (key_len == 0 || key_len > ETCD_KEY_MAX)
		return fail(e, key_len == 0 ? -EINVAL : -EMSGSIZE, "etcd %s: key of %zu bytes",
		            path, key_len);
	return 0;
}

/* The one response of a transaction's branch: its object named `type`
 * ("response_range"), or NULL. */
static const json_t *txn_response(const json_t *ans, const char *type)
{
	const json_t *arr = json_object_get(ans, "responses");

	if (!json_is_array(arr) || json_array_size(arr) != 1)
		return NULL;
	return get_obj(json_array_get(arr, 0), type);
}

int etcd_put_if_absent(struct etcd *e, const void *key, size_t key_len, const void *value,
                       size_t value_len, int64_t lease, int64_t *ret_rev, struct etcd_kv *ret_cur)
{
	static const char path[] = "/v3/kv/txn";
	char *k64 = NULL, *v64 = NULL;
	const json_t *range;
	json_t *req = NULL, *ans = NULL;
	struct etcd_kvs kvs = {0};
	bool ok = false;
	int64_t rev;
	int rv;

	if ((rv = check_key(e, path, key_len)) != 0)
		return rv;
	if (value_len > ETCD_VALUE_MAX)
		return fail(e, -EMSGSIZE, "etcd %s: value of %zu bytes", path, value_len);
	if ((k64 = b64_encode(key, key_len)) != NULL &&
	    (v64 = b64_encode(value, value_len)) != NULL)
		req = json_pack("{s:[{s:s,s:s,s:s,s:s}],s:[{s:{s:s,s:s,s:o}}],s:[{s:{s:s}}]}",
		                "compare", "key", k64, "target", "CREATE", "result", "EQUAL",
		                "create_revision", "0", "success", "request_put", "key", k64,
		                "value", v64, "lease", i64_string(lease), "failure",
		                "request_range", "key", k64);
	rv = call(e, path, req, &ans);
	json_decref(req);
	free(k64);
	free(v64);
	if (rv != 0)
		return rv;
	if (get_header_rev(ans, &rev) != 0 || get_bool(ans, "succeeded", &ok) != 0) {
		rv = malformed(e, path, "no header or succeeded");
	} else if (ok) {
		if (txn_response(ans, "response_put") == NULL || rev <= 0)
			rv = malformed(e, path, "no put");
	} else if ((range = txn_response(ans, "response_range")) == NULL) {
		rv = malformed(e, path, "no range");
	} else if ((rv = parse_kvs(range, &kvs)) != 0) {
		if (rv == -EPROTO)
			malformed(e, path, "bad kvs");
	} else if (kvs.n != 1 || kvs.kv[0].key_len != key_len ||
	           memcmp(kvs.kv[0].key, key, key_len) != 0) {
		/* The compare failed, so the key existed at that revision. */
		rv = malformed(e, path, "the existing key is missing");
	}
	json_decref(ans);
	if (rv != 0) {
		etcd_kvs_free(&kvs);
		return rv;
	}
	if (ok) {
		*ret_rev = rev;
		return 0;
	}
	*ret_cur = kvs.kv[0];
	free(kvs.kv);
	return ETCD_EXISTS;
}

/* A transaction that deletes `key` when the comparison `cmp` holds. */
static int delete_if(struct etcd *e, const void *key, size_t key_len, json_t *cmp)
{
	static const char path[] = "/v3/kv/txn";
	char *k64 = NULL;
	json_t *req = NULL, *ans = NULL;
	bool ok = false;
	int rv;

	if ((rv = check_key(e, path, key_len)) != 0) {
		json_decref(cmp);
		return rv;
	}
	if (cmp != NULL && (k64 = b64_encode(key, key_len)) != NULL &&
	    json_object_set_new(cmp, "key", json_string(k64)) == 0)
		req = json_pack("{s:[O],s:[{s:{s:s}}]}", "compare", cmp, "success",
		                "request_delete_range", "key", k64);
	json_decref(cmp);
	rv = call(e, path, req, &ans);
	json_decref(req);
	free(k64);
	if (rv != 0)
		return rv;
	if (get_obj(ans, "header") == NULL || get_bool(ans, "succeeded", &ok) != 0)
		rv = malformed(e, path, "no header or succeeded");
	else if (ok && txn_response(ans, "response_delete_range") == NULL)
		rv = malformed(e, path, "no delete");
	json_decref(ans);
	if (rv != 0)
		return rv;
	return ok ? 0 : ETCD_NOT_MATCHED;
}

int etcd_delete_if_value(struct etcd *e, const void *key, size_t key_len, const void *value,
                         size_t value_len)
{
	char *v64;
	json_t *cmp = NULL;

	if (value_len > ETCD_VALUE_MAX)
		return fail(e, -EMSGSIZE, "etcd /v3/kv/txn: value of %zu bytes", value_len);
	if ((v64 = b64_encode(value, value_len)) != NULL)
		cmp = json_pack("{s:s,s:s,s:s}", "target", "VALUE", "result", "EQUAL", "value",
		                v64);
	free(v64);
	return delete_if(e, key, key_len, cmp);
}

int etcd_delete_if_mod(struct etcd *e, const void *key, size_t key_len, int64_t mod_rev)
{
	if (mod_rev <= 0)
		return fail(e, -EINVAL, "etcd /v3/kv/txn: mod_revision %" PRId64, mod_rev);
	return delete_if(e, key, key_len,
	                 json_pack("{s:s,s:s,s:o}", "target", "MOD", "result", "EQUAL",
	                           "mod_revision", i64_string(mod_rev)));
}

size_t etcd_prefix_end(const void *prefix, size_t plen, unsigned char *out)
{
	const unsigned char *p = prefix;

	for (size_t n = plen; n > 0; n--) {
		if (p[n - 1] != 0xff) {
			memcpy(out, p, n - 1);
			out[n - 1] = (unsigned char)(p[n - 1] + 1);
			return n;
		}
	}
	out[0] = '\0';
	return 1;
}

/* A range request on [key, end) (end NULL: the key alone). */
static int range(struct etcd *e, const void *key, size_t key_len, const void *end, size_t end_len,
                 int64_t min_mod_rev, int64_t limit, struct etcd_kvs *ret)
{
	static const char path[] = "/v3/kv/range";
	char *k64 = NULL, *e64 = NULL;
	json_t *req = NULL, *ans = NULL;
	struct etcd_kvs kvs = {0};
	int64_t rev;
	int rv;

	if ((rv = check_key(e, path, key_len)) != 0)
		return rv;
	if (min_mod_rev < 0 || limit < 0)
		return fail(e, -EINVAL, "etcd %s: negative revision or limit", path);
	if ((k64 = b64_encode(key, key_len)) != NULL && (req = json_pack("{s:s}", "key", k64)) &&
	    end != NULL &&
	    ((e64 = b64_encode(end, end_len)) == NULL ||
	     json_object_set_new(req, "range_end", json_string(e64)) != 0 ||
	     (min_mod_rev > 0 &&
	      json_object_set_new(req, "min_mod_revision", i64_string(min_mod_rev)) != 0) ||
	     (limit > 0 && json_object_set_new(req, "limit", i64_string(limit)) != 0))) {
		json_decref(req);
		req = NULL;
	}
	free(k64);
	free(e64);
	rv = call(e, path, req, &ans);
	json_decref(req);
	if (rv != 0)
		return rv;
	if (get_header_rev(ans, &rev) != 0)
		rv = malformed(e, path, "no header");
	else if ((rv = parse_kvs(ans, &kvs)) == -EPROTO)
		malformed(e, path, "bad kvs");
	json_decref(ans);
	if (rv != 0)
		return rv;
	kvs.revision = rev;
	*ret = kvs;
	return 0;
}

int etcd_get(struct etcd *e, const void *key, size_t key_len, struct etcd_kv *ret_kv,
             int64_t *ret_rev)
{
	struct etcd_kvs kvs;
	int rv;

	if ((rv = range(e, key, key_len, NULL, 0, 0, 0, &kvs)) != 0)
		return rv;
	if (kvs.n > 1 || (kvs.n == 1 && (kvs.kv[0].key_len != key_len ||
	                                 memcmp(kvs.kv[0].key, key, key_len) != 0))) {
		etcd_kvs_free(&kvs);
		return malformed(e, "/v3/kv/range", "another key");
	}
	if (ret_rev != NULL)
		*ret_rev = kvs.revision;
	if (kvs.n == 0) {
		etcd_kvs_free(&kvs);
		return ETCD_ABSENT;
	}
	*ret_kv = kvs.kv[0];
	free(kvs.kv);
	return 0;
}

int etcd_list(struct etcd *e, const void *prefix, size_t plen, int64_t min_mod_rev, int64_t limit,
              struct etcd_kvs *ret)
{
	unsigned char *end;
	size_t end_len;
	int rv;

	if (plen == 0 || plen > ETCD_KEY_MAX)
		return check_key(e, "/v3/kv/range", plen == 0 ? 0 : plen);
	if ((end = malloc(plen)) == NULL)
		return fail(e, -ENOMEM, "etcd /v3/kv/range: out of memory");
	end_len = etcd_prefix_end(prefix, plen, end);
	rv = range(e, prefix, plen, end, end_len, min_mod_rev, limit, ret);
	free(end);
	return rv;
}

/* ---- watches ---- */

/* One line of a watch's stream: false when the watch has its answer (kept
 * in e->watch_ans) or the line is not etcd's (e->watch_err). */
static bool watch_line(struct etcd *e, const char *line, size_t len)
{
	const json_t *res, *events;
	json_t *ans;
	bool canceled = false, created = false;

	while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == ' '))
		len--;
	if (len == 0)
		return true;
	ans = json_loadb(line, len, JSON_REJECT_DUPLICATES, NULL);
	if (ans == NULL || !json_is_object(ans)) {
		json_decref(ans);
		e->watch_err = -EPROTO;
		return false;
	}
	if (json_object_get(ans, "error") != NULL) {
		e->watch_ans = ans;
		return false;
	}
	res = get_obj(ans, "result");
	events = res != NULL ? json_object_get(res, "events") : NULL;
	if (res == NULL || get_bool(res, "canceled", &canceled) != 0 ||
	    get_bool(res, "created", &created) != 0 || (events != NULL && !json_is_array(events))) {
		json_decref(ans);
		e->watch_err = -EPROTO;
		return false;
	}
	if (canceled || json_array_size(events) > 0) {
		e->watch_ans = ans;
		return false;
	}
	if (created) {
		if (get_header_rev(res, &e->created_rev) != 0) {
			json_decref(ans);
			e->watch_err = -EPROTO;
			return false;
		}
		e->created = true;
	}
	json_decref(ans); /* "created", or a progress notice */
	return true;
}

/* Splits what a watch has read into lines, keeps the unfinished one. */
static bool watch_lines(struct etcd *e)
{
	size_t used = 0;
	char *nl;

	while ((nl = memchr(e->buf + used, '\n', e->len - used)) != NULL) {
		size_t len = (size_t)(nl - (e->buf + used));

		if (!watch_line(e, e->buf + used, len))
			return false;
		used += len + 1;
	}
	memmove(e->buf, e->buf + used, e->len - used);
	e->len -= used;
	e->buf[e->len] = '\0';
	return true;
}

void etcd_events_free(struct etcd_events *evs)
{
	if (evs == NULL)
		return;
	for (size_t i = 0; i < evs->n; i++)
		etcd_kv_clear(&evs->ev[i].kv);
	free(evs->ev);
	memset(evs, 0, sizeof(*evs));
}

/* The events of a watch's answer (its "result"). */
static int parse_events(struct etcd *e, const json_t *res, struct etcd_events *ret)
{
	static const char path[] = "/v3/watch";
	const json_t *arr = json_object_get(res, "events");
	struct etcd_events out = {0};
	int64_t rev;
	int rv;

	if (get_header_rev(res, &rev) != 0)
		return malformed(e, path, "no header");
	if ((out.ev = calloc(json_array_size(arr), sizeof(*out.ev))) == NULL)
		return fail(e, -ENOMEM, "etcd %s: out of memory", path);
	for (size_t i = 0; i < json_array_size(arr); i++) {
		const json_t *ev = json_array_get(arr, i);
		const json_t *type = json_object_get(ev, "type");

		if (!json_is_object(ev) || (type != NULL && !json_is_string(type))) {
			rv = malformed(e, path, "bad event");
			goto fail;
		}
		if (type == NULL || strcmp(json_string_value(type), "PUT") == 0)
			out.ev[i].type = ETCD_EVENT_PUT;
		else if (strcmp(json_string_value(type), "DELETE") == 0)
			out.ev[i].type = ETCD_EVENT_DELETE;
		else {
			rv = malformed(e, path, "unknown event type");
			goto fail;
		}
		if ((rv = parse_kv(json_object_get(ev, "kv"), &out.ev[i].kv)) != 0) {
			if (rv == -EPROTO)
				malformed(e, path, "bad event kv");
			goto fail;
		}
		out.n++;
	}
	out.revision = rev;
	*ret = out;
	return 0;
fail:
	etcd_events_free(&out);
	return rv;
}

int etcd_watch_prefix(struct etcd *e, const void *prefix, size_t plen, int64_t start_rev,
                      int wait_ms, struct etcd_events *ret)
{
	static const char path[] = "/v3/watch";
	unsigned char end[ETCD_KEY_MAX];
	char *k64 = NULL, *e64 = NULL;
	const char *where = "";
	const json_t *res;
	json_t *req = NULL;
	CURLcode c = CURLE_OK;
	int64_t compact = 0;
	bool canceled = false;
	int rv;

	if ((rv = check_key(e, path, plen)) != 0)
		return rv;
	if (start_rev <= 0 || wait_ms <= 0)
		return fail(e, -EINVAL, "etcd %s: start revision %" PRId64 ", wait %d ms", path,
		            start_rev, wait_ms);
	if ((k64 = b64_encode(prefix, plen)) != NULL &&
	    (e64 = b64_encode(end, etcd_prefix_end(prefix, plen, end))) != NULL)
		req = json_pack("{s:{s:s,s:s,s:o}}", "create_request", "key", k64, "range_end", e64,
		                "start_revision", i64_string(start_rev));
	free(k64);
	free(e64);
	e->watching = true;
	e->created = false;
	e->watch_ans = NULL;
	e->watch_err = 0;
	rv = post(e, path, req, wait_ms, &c, &where);
	json_decref(req);
	/* A last line without its newline (the stream ended). */
	if (rv == 0 && e->watch_ans == NULL && e->watch_err == 0 && e->len > 0)
		watch_line(e, e->buf, e->len);
	e->watching = false;
	if (rv != 0)
		goto out;
	if (e->watch_err != 0) {
		rv = fail(e, e->watch_err, "etcd %s: a stream line that is not etcd's", path);
		goto out;
	}
	if (e->watch_ans == NULL) {
		if (c != CURLE_OK && c != CURLE_OPERATION_TIMEDOUT)
			rv = curl_failed(e, path, c, where);
		else if (!e->created)
			rv = c == CURLE_OK ? malformed(e, path, "the stream ended before it began")
			                   : curl_failed(e, path, c, where);
		else /* wait_ms passed with nothing */
			*ret = (struct etcd_events){.revision = e->created_rev};
		goto out;
	}
	if ((rv = answer_error(e, e->watch_ans, path)) != 0)
		goto out;
	res = get_obj(e->watch_ans, "result");
	if (get_bool(res, "canceled", &canceled) != 0 ||
	    get_i64(res, "compact_revision", &compact) != 0) {
		rv = malformed(e, path, "bad cancel");
	} else if (canceled) {
		const json_t *why = json_object_get(res, "cancel_reason");

		if (compact > 0)
			rv = fail(e, -ESTALE,
			          "etcd %s: revision %" PRId64 " is compacted (up to %" PRId64 ")",
			          path, start_rev, compact);
		else
			rv = fail(e, -EIO, "etcd %s: watch canceled: %s", path,
			          json_is_string(why) ? json_string_value(why) : "no reason");
	} else {
		rv = parse_events(e, res, ret);
	}
out:
	json_decref(e->watch_ans);
	e->watch_ans = NULL;
	return rv;
}
