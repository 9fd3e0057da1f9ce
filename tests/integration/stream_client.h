/*
 * stream_client.h — a client of kvd's stream framing (kv+ipc://, kv+tcp://)
 * on plain blocking sockets, written from rpc/PROTOCOL.md ("Stream
 * framing"), and what tests read of a kvd process from /proc (descriptors,
 * memory). Include after <cmocka.h>: failures are cmocka assertions.
 */
#ifndef KV_TEST_STREAM_CLIENT_H
#define KV_TEST_STREAM_CLIENT_H

#include "harness.h"

#include <dirent.h>

static const uint8_t hello[8] = {'k', 'v', 'd', 0, 0, 0, 0, 1};

/* ---- a stream client --------------------------------------------------------- */

/* A connected, blocking socket to a kv+ipc:// or kv+tcp://127.0.0.1:PORT
 * URL; -1 on failure. */
static __attribute__((unused)) int st_connect(const char *url)
{
	int fd;

	if (strncmp(url, "kv+ipc://", 9) == 0) {
		struct sockaddr_un sa = {.sun_family = AF_UNIX};
		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", url + 9);
		if ((fd = socket(AF_UNIX, SOCK_STREAM, 0)) < 0)
			return -1;
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
			close(fd);
			return -1;
		}
	} else {
		const char *colon = strrchr(url, ':');
		struct sockaddr_in sa = {.sin_family = AF_INET,
		                         .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
		if (colon == NULL || (fd = socket(AF_INET, SOCK_STREAM, 0)) < 0)
			return -1;
		sa.sin_port = htons((uint16_t)atoi(colon + 1));
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
			close(fd);
			return -1;
		}
	}
	return fd;
}

static __attribute__((unused)) void st_write(int fd, const void *p, size_t n)
{
	const uint8_t *b = p;

	while (n > 0) {
		ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		assert_true(w > 0);
		b += w;
		n -= (size_t)w;
	}
}

/* Reads exactly n bytes within ms: 0; -1 timed out; -2 EOF; -3 error
 * (errno kept). */
static __attribute__((unused)) int st_read(int fd, void *p, size_t n, int ms)
{
	uint8_t *b = p;
	uint64_t deadline = h_now_ms() + (uint64_t)ms;

	while (n > 0) {
		struct pollfd pf = {fd, POLLIN, 0};
		uint64_t now = h_now_ms();
		ssize_t r;
		if (now >= deadline || poll(&pf, 1, (int)(deadline - now)) == 0)
			return -1;
		r = read(fd, b, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r == 0)
			return -2;
		if (r < 0)
			return -3;
		b += r;
		n -= (size_t)r;
	}
	return 0;
}

static __attribute__((unused)) void st_send_frame(int fd, const void *body, size_t len)
{
	uint8_t hdr[4] = {(uint8_t)(len >> 24), (uint8_t)(len >> 16), (uint8_t)(len >> 8),
	                  (uint8_t)len};

	st_write(fd, hdr, 4);
	st_write(fd, body, len);
}

/* Appends a frame to a buffer (to send many in one write). */
static __attribute__((unused)) void st_frame_into(msgpack_sbuffer *out, const void *body,
                                                  size_t len)
{
	uint8_t hdr[4] = {(uint8_t)(len >> 24), (uint8_t)(len >> 16), (uint8_t)(len >> 8),
	                  (uint8_t)len};

	msgpack_sbuffer_write(out, (const char *)hdr, 4);
	msgpack_sbuffer_write(out, body, len);
}

/* One frame (malloc'd body) within ms: 0, or st_read's error. */
static __attribute__((unused)) int st_recv_frame(int fd, int ms, uint8_t **ret, size_t *ret_len)
{
	uint8_t hdr[4];
	size_t len;
	uint8_t *b;
	int rv;

	if ((rv = st_read(fd, hdr, 4, ms)) != 0)
		return rv;
	len = (size_t)hdr[0] << 24 | (size_t)hdr[1] << 16 | (size_t)hdr[2] << 8 | hdr[3];
	assert_true(len > 0);
	b = malloc(len);
	if ((rv = st_read(fd, b, len, ms)) != 0) {
		free(b);
		return rv;
	}
	*ret = b;
	*ret_len = len;
	return 0;
}

/* A connection that has sent its hello and checked the server's. */
static __attribute__((unused)) int st_open(const char *url)
{
	uint8_t got[8];
	int fd = st_connect(url);

	assert_true(fd >= 0);
	st_write(fd, hello, sizeof(hello));
	assert_int_equal(st_read(fd, got, sizeof(got), 5000), 0);
	assert_memory_equal(got, hello, sizeof(hello));
	return fd;
}

/* One request, one reply: the reply's status (its id must be `id` unless
 * the server could not read one: then 0). -1 without a reply. */
static __attribute__((unused)) int st_status(int fd, const void *body, size_t len, uint64_t id)
{
	struct h_reply r;
	uint8_t *rep;
	size_t n;
	int st;

	st_send_frame(fd, body, len);
	if (st_recv_frame(fd, 5000, &rep, &n) != 0)
		return -1;
	assert_int_equal(h_parse(rep, n, &r), 0);
	if (r.id != id && r.id != 0)
		fail_msg("reply id %llu, want %llu", (unsigned long long)r.id,
		         (unsigned long long)id);
	st = (int)r.status;
	h_reply_free(&r);
	free(rep);
	return st;
}

/* A request {v:1, id, method[, tenant], args:{key[, value]}} in q. */
static __attribute__((unused)) void st_req(struct h_req *q, const char *method, uint64_t id,
                                           const char *tenant, const char *key, const void *value,
                                           size_t vlen)
{
	h_req_begin(q, method, tenant, id, key == NULL ? 0 : value == NULL ? 1 : 2, 0);
	if (key != NULL)
		mp_kv_bin(&q->pk, "key", key, strlen(key));
	if (value != NULL)
		mp_kv_bin(&q->pk, "value", value, vlen);
}

static __attribute__((unused)) int st_call(int fd, const char *method, uint64_t id,
                                           const char *tenant, const char *key, const void *value,
                                           size_t vlen)
{
	struct h_req q;
	int st;

	st_req(&q, method, id, tenant, key, value, vlen);
	st = st_status(fd, q.sb.data, q.sb.size, id);
	msgpack_sbuffer_destroy(&q.sb);
	return st;
}

/* A connection whose hello the server answers, tried again (a new
 * connection every time, each given 1 s for the hello) for up to ms while
 * the listener refuses or drops it; fails the test after that. */
static __attribute__((unused)) int st_open_retry(const char *url, int ms)
{
	uint64_t t0 = h_now_ms();
	uint8_t got[8];
	int fd = -1, ok = -1;

	while (ok != 0 && h_now_ms() - t0 < (uint64_t)ms) {
		if (fd >= 0)
			close(fd);
		fd = st_connect(url);
		assert_true(fd >= 0);
		st_write(fd, hello, sizeof(hello));
		ok = st_read(fd, got, 8, 1000);
	}
	assert_int_equal(ok, 0);
	return fd;
}

/* The load of a peer that reads its replies slowly or not at all: Puts a
 * vlen-byte value under "big" and Gets it once through fd (both must
 * succeed), then frames n Gets of it, ids 1..n, into *out (initialised here,
 * destroyed by the caller) to be sent in one write. */
static __attribute__((unused)) void st_big_gets(int fd, size_t vlen, uint64_t n,
                                                msgpack_sbuffer *out)
{
	uint8_t *val = malloc(vlen);

	assert_non_null(val);
	memset(val, 'v', vlen);
	assert_int_equal(st_call(fd, "Put", 1, NULL, "big", val, vlen), 0);
	assert_int_equal(st_call(fd, "Get", 2, NULL, "big", NULL, 0), 0);
	free(val);
	msgpack_sbuffer_init(out);
	for (uint64_t id = 1; id <= n; id++) {
		struct h_req q;
		st_req(&q, "Get", id, NULL, "big", NULL, 0);
		st_frame_into(out, q.sb.data, q.sb.size);
		msgpack_sbuffer_destroy(&q.sb);
	}
}

/* After a framing error: one reply of id 0 with this status, then EOF
 * (not a reset). */
static __attribute__((unused)) void st_expect_refusal(int fd, int status, const char *substr)
{
	struct h_reply r;
	uint8_t *rep, b;
	size_t n;

	assert_int_equal(st_recv_frame(fd, 5000, &rep, &n), 0);
	assert_int_equal(h_parse(rep, n, &r), 0);
	assert_int_equal(r.id, 0);
	assert_int_equal(r.status, status);
	if (strstr(r.message, substr) == NULL)
		fail_msg("refusal '%s' does not say '%s'", r.message, substr);
	h_reply_free(&r);
	free(rep);
	assert_int_equal(st_read(fd, &b, 1, 5000), -2);
}

static __attribute__((unused)) int count_fds(pid_t pid)
{
	char path[64];
	int n = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	if ((d = opendir(path)) == NULL)
		return -1;
	while (readdir(d) != NULL)
		n++;
	closedir(d);
	return n - 2;
}

/* A field of /proc/PID/status given in kB ("VmHWM", "VmRSS"), in KiB; -1
 * when it cannot be read. */
static __attribute__((unused)) long proc_status_kib(pid_t pid, const char *field)
{
	char path[64], line[256];
	size_t flen = strlen(field);
	long kib = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if ((f = fopen(path, "r")) == NULL)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, field, flen) == 0 && line[flen] == ':' &&
		    sscanf(line + flen + 1, " %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

/* VmHWM (peak resident memory) of pid, in KiB. */
static __attribute__((unused)) long peak_kib(pid_t pid)
{
	return proc_status_kib(pid, "VmHWM");
}

/* VmRSS (resident memory now) of pid, in KiB. */
static __attribute__((unused)) long rss_kib(pid_t pid)
{
	return proc_status_kib(pid, "VmRSS");
}

/* Whether the server closed fd (EOF or a reset) within ms, dropping what it
 * sent before (its hello). */
static __attribute__((unused)) bool st_closed_within(int fd, int ms)
{
	uint64_t deadline = h_now_ms() + (uint64_t)ms;
	uint8_t buf[4096];

	for (;;) {
		struct pollfd pf = {fd, POLLIN, 0};
		uint64_t now = h_now_ms();
		ssize_t r;
		if (poll(&pf, 1, now >= deadline ? 0 : (int)(deadline - now)) == 0)
			return false;
		r = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
			return true;
	}
}

#endif
