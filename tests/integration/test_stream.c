/* test_stream.c — kvd's stream transport on real sockets: the hello, pipelined requests, every
 * framing error answered and the connection ended cleanly, hostile messages answered while the
 * connection goes on, half-close, bounded memory under a client that does not read,
 * max_connections, peers leaving mid-frame, SIGTERM with requests in flight, kv+tcp://; one tenant
 * through both transports; the de-duplication window of 65,536 writes. */
/*
 * The client side here is plain sockets, written from rpc/PROTOCOL.md
 * ("Stream framing"), not libkvclient: what is tested is what any client in
 * any language would see. Nothing waits by sleeping: reads have deadlines,
 * and what kvd does in the background (closing a connection) is polled for
 * with one.
 */
#include "harness.h"
#include "hostile.h"
#include "kvclient.h"

#include <dirent.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cmocka.h> /* after the headers it needs */

#include "stream_client.h"

/* ---- tests ------------------------------------------------------------------- */

/* The hello, the Health example of PROTOCOL.md byte for byte, and a write
 * and read on kv+ipc:// and on kv+tcp://. */
static void test_hello_and_calls(void **state)
{
	static const uint8_t health[] = {0x83, 0xa1, 0x76, 0x01, 0xa2, 0x69, 0x64, 0x12,
	                                 0xa6, 0x6d, 0x65, 0x74, 0x68, 0x6f, 0x64, 0xa6,
	                                 0x48, 0x65, 0x61, 0x6c, 0x74, 0x68};
	struct kvd_proc k;
	struct kvd_opts o = {0};
	char tcp[64], listen[96];
	const char *urls[2];
	int port = h_free_port();

	(void)state;
	assert_true(port > 0);
	snprintf(tcp, sizeof(tcp), "kv+tcp://127.0.0.1:%d", port);
	snprintf(listen, sizeof(listen), "--listen=%s", tcp);
	o.extra[0] = listen;
	assert_int_equal(kvd_start(&k, &o), 0);
	urls[0] = k.surl;
	urls[1] = tcp;
	for (int u = 0; u < 2; u++) {
		int fd = st_connect(urls[u]);
		uint8_t got[8], buf[64];
		char v[32];
		struct h_reply r;
		uint8_t *rep;
		size_t n;

		assert_true(fd >= 0);
		/* hello and the first request in one write */
		memcpy(buf, hello, 8);
		buf[8] = buf[9] = buf[10] = 0;
		buf[11] = sizeof(health);
		memcpy(buf + 12, health, sizeof(health));
		st_write(fd, buf, 12 + sizeof(health));
		assert_int_equal(st_read(fd, got, 8, 5000), 0);
		assert_memory_equal(got, hello, 8);
		assert_int_equal(st_recv_frame(fd, 5000, &rep, &n), 0);
		assert_int_equal(h_parse(rep, n, &r), 0);
		assert_int_equal(r.id, 0x12);
		assert_int_equal(r.status, 0);
		h_reply_free(&r);
		free(rep);
		snprintf(v, sizeof(v), "value %d", u);
		assert_int_equal(st_call(fd, "Put", 2, NULL, "k", v, strlen(v)), 0);
		assert_int_equal(st_call(fd, "Get", 3, NULL, "k", NULL, 0), 0);
		assert_int_equal(st_call(fd, "Get", 4, NULL, "absent", NULL, 0), 5);
		close(fd);
		/* what one transport wrote, the other reads */
		{
			nng_socket s = h_dial(k.url, 5000);
			assert_int_equal(h_get(s, NULL, "k", v, sizeof(v), NULL), 0);
			assert_int_equal(strncmp(v, "value ", 6), 0);
			assert_int_equal(v[6] - '0', u);
			nng_close(s);
		}
	}
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, false);
}

/* 1500 requests in one write, to two tenants (so two workers may answer),
 * read back afterwards: each id answered exactly once, in whatever order. */
static void test_pipelining(void **state)
{
	enum { N = 1500 };
	struct kvd_proc k;
	msgpack_sbuffer all;
	uint8_t *seen = calloc(N + 1, 1);
	int fd;

	(void)state;
	assert_int_equal(kvd_start(&k, NULL), 0);
	fd = st_open(k.surl);
	{
		struct h_req q;
		h_req_begin(&q, "TenantCreate", NULL, 1, 1, 0);
		mp_kv_str(&q.pk, "name", "other");
		assert_int_equal(st_status(fd, q.sb.data, q.sb.size, 1), 0);
		msgpack_sbuffer_destroy(&q.sb);
	}
	msgpack_sbuffer_init(&all);
	for (uint64_t id = 1; id <= N; id++) {
		struct h_req q;
		char key[16];
		snprintf(key, sizeof(key), "p%llu", (unsigned long long)(id % 100));
		st_req(&q,
		       id % 3 == 0   ? "Get"
		       : id % 3 == 1 ? "Put"
		                     : "Health",
		       id, id % 2 ? "other" : NULL, id % 3 == 2 ? NULL : key,
		       id % 3 == 1 ? "v" : NULL, 1);
		st_frame_into(&all, q.sb.data, q.sb.size);
		msgpack_sbuffer_destroy(&q.sb);
	}
	st_write(fd, all.data, all.size);
	msgpack_sbuffer_destroy(&all);
	for (int i = 0; i < N; i++) {
		struct h_reply r;
		uint8_t *rep;
		size_t n;
		assert_int_equal(st_recv_frame(fd, 10000, &rep, &n), 0);
		assert_int_equal(h_parse(rep, n, &r), 0);
		assert_true(r.id >= 1 && r.id <= N);
		assert_int_equal(seen[r.id], 0);
		seen[r.id] = 1;
		/* a Get may run before the Put of its key: NOT_FOUND then */
		assert_true(r.status == 0 || (r.id % 3 == 0 && r.status == 5));
		h_reply_free(&r);
		free(rep);
	}
	free(seen);
	close(fd);
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, false);
}

struct writer {
	int fd;
	const uint8_t *p;
	size_t n;
	int err; /* errno of a failed write */
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	size_t off = 0;

	while (off < w->n) {
		ssize_t n = send(w->fd, w->p + off, w->n - off, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			w->err = errno;
			break;
		}
		off += (size_t)n;
	}
	return NULL;
}

/* A bad hello (an nng client's SP header), a frame of length 0, and one
 * over max_message_size whose body the client goes on sending: each gets
 * one reply of id 0 with its status and then a clean end of stream, and
 * kvd serves the next connection. */
static void test_framing_errors(void **state)
{
	static const uint8_t sp[8] = {0, 'S', 'P', 0, 0, 0x30, 0, 0};
	struct kvd_proc k;
	struct kvd_opts o = {.config_text = "max_value_size = 1M\nmax_message_size = 2M\n"};
	int fd;

	(void)state;
	assert_int_equal(kvd_start(&k, &o), 0);
	fd = st_connect(k.surl);
	st_write(fd, sp, sizeof(sp));
	{
		uint8_t got[8];
		assert_int_equal(st_read(fd, got, 8, 5000), 0);
		assert_memory_equal(got, hello, 8);
	}
	st_expect_refusal(fd, 3, "hello");
	close(fd);

	fd = st_open(k.surl);
	st_write(fd, "\0\0\0\0", 4);
	st_expect_refusal(fd, 3, "frame of 0 bytes");
	close(fd);

	fd = st_open(k.surl);
	{
		size_t n = 3u << 20;
		uint8_t *big = calloc(1, 4 + n);
		struct writer w = {fd, big, 4 + n, 0};
		pthread_t th;
		big[1] = 0x30; /* 3 MiB */
		assert_int_equal(pthread_create(&th, NULL, writer_main, &w), 0);
		st_expect_refusal(fd, 8, "frame of 3145728 bytes");
		pthread_join(th, NULL);
		assert_int_equal(w.err, 0); /* the whole body went out: no reset */
		free(big);
	}
	close(fd);

	fd = st_open(k.surl);
	assert_int_equal(st_call(fd, "Health", 7, NULL, NULL, NULL, 0), 0);
	close(fd);
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, false);
}

/* A bad hello followed by more bytes and a half-close, 300 times over
 * kv+ipc:// and kv+tcp://, the bytes sent before or after the refusal came
 * back: each time the refusal, then an orderly end of stream, never a reset
 * (bytes still unread when both sides are shut down are read and dropped
 * before the connection is closed). */
static void test_framing_error_then_half_close(void **state)
{
	static const uint8_t sp[8] = {0, 'S', 'P', 0, 0, 0x30, 0, 0};
	static uint8_t junk[16384];
	struct kvd_proc k;
	struct kvd_opts o = {0};
	char tcp[64], listen[96];
	int port = h_free_port(), resets = 0;

	(void)state;
	assert_true(port > 0);
	memset(junk, 0x5a, sizeof(junk));
	snprintf(tcp, sizeof(tcp), "kv+tcp://127.0.0.1:%d", port);
	snprintf(listen, sizeof(listen), "--listen=%s", tcp);
	o.extra[0] = listen;
	assert_int_equal(kvd_start(&k, &o), 0);
	for (int i = 0; i < 300; i++) {
		const char *url = i % 2 ? tcp : k.surl;
		struct h_reply r;
		uint8_t got[8], *rep, b;
		size_t n;
		int fd = st_connect(url), rv;

		/* odd rounds: all at once, before the server's hello is read;
		 * even rounds: the junk only after the refusal came back, when the
		 * server has already shut its side down */
		if (i % 4 < 2) {
			st_write(fd, sp, sizeof(sp));
			st_write(fd, junk, 1 + (size_t)(i * 97) % sizeof(junk));
			assert_int_equal(shutdown(fd, SHUT_WR), 0);
		}
		assert_int_equal(st_read(fd, got, 8, 5000), 0);
		if (i % 4 >= 2)
			st_write(fd, sp, sizeof(sp));
		rv = st_recv_frame(fd, 5000, &rep, &n);
		if (rv == 0) {
			assert_int_equal(h_parse(rep, n, &r), 0);
			assert_int_equal(r.status, 3);
			h_reply_free(&r);
			free(rep);
			if (i % 4 >= 2) {
				st_write(fd, junk, 1 + (size_t)(i * 97) % sizeof(junk));
				assert_int_equal(shutdown(fd, SHUT_WR), 0);
			}
			rv = st_read(fd, &b, 1, 5000);
		}
		if (rv != -2)
			resets++;
		close(fd);
	}
	if (resets != 0)
		fail_msg("%d of 300 connections ended without the refusal and an orderly end", resets);
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, false);
}

/* Every hostile message of hostile.h (but the empty one, which is a
 * framing error here) and 2000 random ones on one connection: each
 * answered with its status, and the connection goes on. */
static void test_hostile_messages(void **state)
{
	struct kvd_proc k;
	struct hostile *h;
	size_t n = hostile_cases(&h);
	uint64_t seed = tu_seed("hostile random bytes", 0x2545f4914f6cdd1dull);
	int fd;

	(void)state;
	assert_int_equal(kvd_start(&k, NULL), 0);
	fd = st_open(k.surl);
	for (size_t i = 0; i < n; i++) {
		int st;
		if (h[i].len == 0)
			continue;
		st = st_status(fd, h[i].body, h[i].len, 0);
		if (st != h[i].status)
			fail_msg("%s: status %d, want %d", h[i].what, st, h[i].status);
	}
	hostile_free(h, n);
	for (int i = 0; i < 2000; i++) {
		uint8_t buf[64];
		size_t len = 1 + (size_t)(i % 63);
		hostile_random(&seed, buf, len);
		assert_true(hostile_random_status(st_status(fd, buf, len, 0)));
	}
	assert_int_equal(st_call(fd, "Put", 5, NULL, "alive", "yes", 3), 0);
	assert_int_equal(st_call(fd, "Get", 6, NULL, "alive", NULL, 0), 0);
	close(fd);
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, false);
}

/* A client that sends its requests and shuts down its sending side gets
 * every reply, then the end of the stream. */
static void test_half_close(void **state)
{
	enum { N = 50 };
	struct kvd_proc k;
	msgpack_sbuffer all;
	uint8_t b;
	int fd;

	(void)state;
	assert_int_equal(kvd_start(&k, NULL), 0);
	fd = st_open(k.surl);
	msgpack_sbuffer_init(&all);
	for (uint64_t id = 1; id <= N; id++) {
		struct h_req q;
		char key[16];
		snprintf(key, sizeof(key), "h%llu", (unsigned long long)id);
		st_req(&q, "Put", id, NULL, key, "v", 1);
		st_frame_into(&all, q.sb.data, q.sb.size);
		msgpack_sbuffer_destroy(&q.sb);
	}
	st_write(fd, all.data, all.size);
	msgpack_sbuffer_destroy(&all);
	assert_int_equal(shutdown(fd, SHUT_WR), 0);
	for (int i = 0; i < N; i++) {
		struct h_reply r;
		uint8_t *rep;
		size_t n;
		assert_int_equal(st_recv_frame(fd, 10000, &rep, &n), 0);
		assert_int_equal(h_parse(rep, n, &r), 0);
		assert_int_equal(r.status, 0);
		h_reply_free(&r);
		free(rep);
	}
	assert_int_equal(st_read(fd, &b, 1, 5000), -2);
	close(fd);
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, false);
}

/* 4000 Gets of a 128 KiB value (500 MiB of replies) sent before reading
 * any: kvd stops reading the connection while replies wait, so its peak
 * memory grows by far less than the replies add up to, and every reply
 * still arrives. */
static void test_client_not_reading(void **state)
{
	enum { N = 4000, VLEN = 128 << 10 };
	struct kvd_proc k;
	/* under ASan, freed memory waits in a quarantine (256 MiB by default)
	 * and would count as kept */
	struct kvd_opts o = {.config_text = "[tenant-defaults]\nsync = none\n",
	                     .env = {"ASAN_OPTIONS=quarantine_size_mb=16:halt_on_error=1:"
	                             "abort_on_error=1:print_summary=1"}};
	msgpack_sbuffer all;
	long before, after;
	int fd, got = 0;

	(void)state;
	assert_int_equal(kvd_start(&k, &o), 0);
	fd = st_open(k.surl);
	st_big_gets(fd, VLEN, N, &all);
	before = peak_kib(k.pid);
	st_write(fd, all.data, all.size); /* ~140 KB: fits the socket's buffers */
	msgpack_sbuffer_destroy(&all);
	for (; got < N; got++) {
		uint8_t *rep;
		size_t n;
		if (st_recv_frame(fd, 20000, &rep, &n) != 0)
			break;
		assert_true(n > VLEN);
		free(rep);
	}
	assert_int_equal(got, N);
	after = peak_kib(k.pid);
	print_message("kvd peak memory %ld KiB before, %ld KiB after %d MiB of replies\n", before,
	              after, (int)((long)N * VLEN >> 20));
	assert_true(before > 0 && after - before < 200 * 1024);
	close(fd);
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, false);
}

/* max_connections = 3: a fourth connection is closed before the hello;
 * once one of the three closes, a new one is served again. */
static void test_max_connections(void **state)
{
	struct kvd_proc k;
	struct kvd_opts o = {.config_text = "max_connections = 3\n"};
	int fds[3], extra, ok = -1;
	uint8_t got[8];
	uint64_t t0;

	(void)state;
	assert_int_equal(kvd_start(&k, &o), 0);
	for (int i = 0; i < 3; i++)
		fds[i] = st_open(k.surl);
	extra = st_connect(k.surl);
	assert_true(extra >= 0);
	assert_int_equal(st_read(extra, got, 8, 5000), -2);
	close(extra);
	/* libkvclient says why */
	{
		struct kvc_options co;
		struct kvc_status st;
		kvc *c;
		kvc_options_init(&co);
		co.endpoint = k.surl;
		assert_int_equal(kvc_open(&co, &c), 0);
		assert_int_equal(kvc_health(c, &(struct kvc_call){.status = &st}, NULL),
		                 -KVC_UNAVAILABLE);
		assert_non_null(strstr(st.message, "max_connections"));
		kvc_close(c);
	}
	close(fds[0]);
	/* kvd sees the close on its own time: poll for it */
	t0 = h_now_ms();
	while (h_now_ms() - t0 < 10000) {
		int fd = st_connect(k.surl);
		assert_true(fd >= 0);
		/* refused while kvd still counts the old one: closed at once */
		if (send(fd, hello, 8, MSG_NOSIGNAL) != 8) {
			close(fd);
			continue;
		}
		ok = st_read(fd, got, 8, 2000);
		if (ok == 0) {
			assert_int_equal(st_call(fd, "Health", 1, NULL, NULL, NULL, 0), 0);
			close(fd);
			break;
		}
		close(fd);
	}
	assert_int_equal(ok, 0);
	close(fds[1]);
	close(fds[2]);
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, false);
}

/* Peers that leave at every point: before the hello, inside it, inside a
 * frame's header or body, after a request without reading its reply, with
 * a TCP reset. kvd goes on serving and holds no descriptor for any of them
 * afterwards. */
static void test_peers_leaving(void **state)
{
	struct kvd_proc k;
	struct kvd_opts o = {0};
	char tcp[64], listen[96];
	int port = h_free_port(), base, now = -1, keep;
	uint64_t t0;
	struct h_req q;

	(void)state;
	assert_true(port > 0);
	snprintf(tcp, sizeof(tcp), "kv+tcp://127.0.0.1:%d", port);
	snprintf(listen, sizeof(listen), "--listen=%s", tcp);
	o.extra[0] = listen;
	assert_int_equal(kvd_start(&k, &o), 0);
	/* a connection of our own, open throughout; the tenant's files opened */
	keep = st_open(k.surl);
	assert_int_equal(st_call(keep, "Put", 1, NULL, "left", "v", 1), 0);
	assert_int_equal(st_call(keep, "Get", 2, NULL, "left", NULL, 0), 0);
	base = count_fds(k.pid);
	st_req(&q, "Put", 1, NULL, "left", "v", 1);
	for (int round = 0; round < 40; round++) {
		const char *url = round % 2 ? tcp : k.surl;
		for (int how = 0; how < 6; how++) {
			int fd = st_connect(url);
			uint8_t hdr[4] = {0, 0, 0, 100};
			assert_true(fd >= 0);
			switch (how) {
			case 0:
				break;
			case 1:
				st_write(fd, hello, 3);
				break;
			case 2:
				st_write(fd, hello, 8);
				st_write(fd, hdr, 2);
				break;
			case 3:
				st_write(fd, hello, 8);
				st_write(fd, hdr, 4);
				st_write(fd, "0123456789", 10);
				break;
			case 4:
				st_write(fd, hello, 8);
				st_send_frame(fd, q.sb.data, q.sb.size);
				break;
			default:
				if (url == tcp) { /* a reset */
					struct linger lg = {1, 0};
					setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
				}
				st_write(fd, hello, 8);
				break;
			}
			close(fd);
		}
	}
	msgpack_sbuffer_destroy(&q.sb);
	assert_int_equal(st_call(keep, "Health", 3, NULL, NULL, NULL, 0), 0);
	{
		int fd = st_open(k.surl);
		assert_int_equal(st_call(fd, "Health", 2, NULL, NULL, NULL, 0), 0);
		close(fd);
	}
	/* every one of them closed on kvd's side too */
	t0 = h_now_ms();
	while (h_now_ms() - t0 < 10000 && (now = count_fds(k.pid)) > base)
		poll(NULL, 0, 20);
	assert_int_equal(now, base);
	close(keep);
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, false);
}

/* SIGTERM with 300 pipelined writes sent: each one kvd read is answered
 * (OK, or UNAVAILABLE when it came after the stop), then the stream ends;
 * kvd exits 0; after a restart every write answered OK is there and no
 * other is. */
static void test_sigterm_with_requests(void **state)
{
	enum { N = 300 };
	struct kvd_proc k, k2;
	struct kvd_opts again = {0};
	msgpack_sbuffer all;
	uint8_t *okd = calloc(N + 1, 1);
	int fd, answered = 0, ok = 0, end, status;

	(void)state;
	assert_int_equal(kvd_start(&k, NULL), 0);
	fd = st_open(k.surl);
	msgpack_sbuffer_init(&all);
	for (uint64_t id = 1; id <= N; id++) {
		struct h_req q;
		char key[16];
		snprintf(key, sizeof(key), "t%llu", (unsigned long long)id);
		st_req(&q, "Put", id, NULL, key, "v", 1);
		st_frame_into(&all, q.sb.data, q.sb.size);
		msgpack_sbuffer_destroy(&q.sb);
	}
	st_write(fd, all.data, all.size);
	msgpack_sbuffer_destroy(&all);
	kill(k.pid, SIGTERM);
	for (;;) {
		struct h_reply r;
		uint8_t *rep;
		size_t n;
		if ((end = st_recv_frame(fd, 20000, &rep, &n)) != 0)
			break;
		assert_int_equal(h_parse(rep, n, &r), 0);
		assert_true(r.id >= 1 && r.id <= N);
		assert_true(r.status == 0 || r.status == 14);
		if (r.status == 0) {
			okd[r.id] = 1;
			ok++;
		}
		answered++;
		h_reply_free(&r);
		free(rep);
	}
	/* the end of the stream (requests kvd never read go unanswered) */
	assert_true(end == -2 || end == -3);
	close(fd);
	assert_int_equal(waitpid(k.pid, &status, 0), k.pid);
	h_track(k.pid, false);
	k.pid = 0;
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	print_message("%d of %d writes answered (%d OK) before the stop\n", answered, N, ok);
	again.reuse_dir = k.dir;
	assert_int_equal(kvd_start(&k2, &again), 0);
	fd = st_open(k2.surl);
	for (int id = 1; id <= N; id++) {
		char key[16];
		snprintf(key, sizeof(key), "t%d", id);
		assert_int_equal(st_call(fd, "Get", (uint64_t)id, NULL, key, NULL, 0),
		                 okd[id] ? 0 : 5);
	}
	close(fd);
	assert_int_equal(kvd_stop(&k2), 0);
	kvd_cleanup(&k2, true);
	free(okd);
	kvd_cleanup(&k, false);
}

/* The value of key in tenant over the stream transport; the status. */
static int st_get(int fd, const char *tenant, const char *key, char *buf, size_t cap)
{
	struct h_req q;
	struct h_reply r;
	uint8_t *rep;
	size_t n;
	int st;

	st_req(&q, "Get", 61, tenant, key, NULL, 0);
	st_send_frame(fd, q.sb.data, q.sb.size);
	msgpack_sbuffer_destroy(&q.sb);
	if (st_recv_frame(fd, 5000, &rep, &n) != 0)
		return -1;
	assert_int_equal(h_parse(rep, n, &r), 0);
	st = (int)r.status;
	if (st == 0) {
		const void *v;
		size_t vl;
		assert_int_equal(mp_field_bin(r.result, "value", true, &v, &vl), 0);
		assert_true(vl < cap);
		memcpy(buf, v, vl);
		buf[vl] = '\0';
	}
	h_reply_free(&r);
	free(rep);
	return st;
}

/* A tenant written through one transport is read through the other: one
 * kvd, its nng and its stream listener, the same tenant. */
static void test_one_tenant_both_transports(void **state)
{
	struct kvd_proc k;
	struct h_req q;
	struct h_reply2 r;
	char got[32];
	nng_socket s;
	int fd;

	(void)state;
	assert_int_equal(kvd_start(&k, NULL), 0);
	s = h_dial(k.url, 5000);
	fd = st_open(k.surl);
	h_req_begin(&q, "TenantCreate", NULL, 1, 1, 0);
	mp_kv_str(&q.pk, "name", "both");
	assert_int_equal(h_call(s, &q, &r), 0);
	assert_int_equal(r.r.status, 0);
	h_reply2_free(&r);
	assert_int_equal(h_put(s, "both", "from-nng", "over nng", 8, NULL), 0);
	assert_int_equal(st_call(fd, "Put", 62, "both", "from-stream", "over stream", 11), 0);
	assert_int_equal(st_get(fd, "both", "from-nng", got, sizeof(got)), 0);
	assert_string_equal(got, "over nng");
	assert_int_equal(h_get(s, "both", "from-stream", got, sizeof(got), NULL), 0);
	assert_string_equal(got, "over stream");
	/* and the default tenant is not that tenant */
	assert_int_equal(st_get(fd, NULL, "from-nng", got, sizeof(got)), 5);
	close(fd);
	nng_close(s);
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, false);
}

/* Frames a Put of key=value in tenant "dd" by client with request id. */
static void dd_put_into(msgpack_sbuffer *all, uint64_t client, uint64_t id, const char *key)
{
	struct h_req q;

	h_req_begin(&q, "Put", "dd", id, 2, 1);
	mp_kv_uint(&q.pk, "client", client);
	h_req_args(&q, 2);
	mp_kv_bin(&q.pk, "key", key, strlen(key));
	mp_kv_bin(&q.pk, "value", "v", 1);
	st_frame_into(all, q.sb.data, q.sb.size);
	msgpack_sbuffer_destroy(&q.sb);
}

/* Puts ids first..last of client (pipelined, 512 at a time, within the
 * flow-control window); each must succeed. The version of the last. */
static uint64_t dd_puts(int fd, uint64_t client, uint64_t first, uint64_t last, const char *key)
{
	uint64_t ver = 0;

	for (uint64_t at = first; at <= last;) {
		msgpack_sbuffer all;
		uint64_t end = at + 511 < last ? at + 511 : last;
		msgpack_sbuffer_init(&all);
		for (uint64_t id = at; id <= end; id++)
			dd_put_into(&all, client, id, key);
		st_write(fd, all.data, all.size);
		msgpack_sbuffer_destroy(&all);
		for (uint64_t id = at; id <= end; id++) {
			struct h_reply r;
			uint8_t *rep;
			size_t n;
			assert_int_equal(st_recv_frame(fd, 10000, &rep, &n), 0);
			assert_int_equal(h_parse(rep, n, &r), 0);
			assert_int_equal(r.status, 0);
			if (r.id == last)
				assert_int_equal(mp_field_uint(r.result, "version", true, &ver), 0);
			h_reply_free(&r);
			free(rep);
		}
		at = end + 1;
	}
	return ver;
}

/* The de-duplication window by count (PROTOCOL.md): a worker remembers the
 * last 65,536 writes; a repeat within them gets the first answer and
 * applies nothing, one older than that is applied as a new write. One
 * worker, so that every write goes through the same window. */
static void test_dedup_window_by_count(void **state)
{
	const uint64_t client = 0x5eedf00dull;
	struct kvd_opts o = {.extra = {"--workers", "1"}};
	struct kvd_proc k;
	uint64_t v1, again;
	int fd;

	(void)state;
	assert_int_equal(kvd_start(&k, &o), 0);
	fd = st_open(k.surl);
	{
		struct h_req q;
		h_req_begin(&q, "TenantCreate", NULL, 1, 2, 0);
		mp_kv_str(&q.pk, "name", "dd");
		mp_kv_str(&q.pk, "sync", "none");
		assert_int_equal(st_status(fd, q.sb.data, q.sb.size, 1), 0);
		msgpack_sbuffer_destroy(&q.sb);
	}
	v1 = dd_puts(fd, client, 1, 1, "first");
	assert_true(v1 > 0);
	/* 65,535 more writes: the first is still among the last 65,536 (also
	 * once kvd trimmed its window, which it does once a second: wait for
	 * that, and make the worker take a turn) */
	dd_puts(fd, client, 2, 65536, "filler");
	poll(NULL, 0, 1200);
	assert_int_equal(st_call(fd, "Health", 2, NULL, NULL, NULL, 0), 0);
	again = dd_puts(fd, client, 1, 1, "first");
	assert_int_equal(again, v1);
	/* one more: now it is not, and a repeat is a new write */
	dd_puts(fd, client, 65537, 65537, "filler");
	poll(NULL, 0, 1200);
	assert_int_equal(st_call(fd, "Health", 2, NULL, NULL, NULL, 0), 0);
	again = dd_puts(fd, client, 1, 1, "first");
	assert_true(again > v1);
	close(fd);
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, false);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_hello_and_calls),
	        cmocka_unit_test(test_one_tenant_both_transports),
	        cmocka_unit_test(test_pipelining),
	        cmocka_unit_test(test_dedup_window_by_count),
	        cmocka_unit_test(test_framing_errors),
	        cmocka_unit_test(test_hostile_messages),
	        cmocka_unit_test(test_half_close),
	        cmocka_unit_test(test_framing_error_then_half_close),
	        cmocka_unit_test(test_client_not_reading),
	        cmocka_unit_test(test_max_connections),
	        cmocka_unit_test(test_peers_leaving),
	        cmocka_unit_test(test_sigterm_with_requests),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
