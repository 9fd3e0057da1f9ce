/* test_peers.c — hostile and careless peers against a real kvd: slowloris on kv+tcp:// neither
 * lasts past frame_timeout nor locks out kv+ipc://, idle connections end after client_timeout, huge
 * partial frames stay within input_budget, unread replies within output_budget. */
/*
 * Every peer here is a plain socket on loopback or a Unix socket. Nothing
 * waits by sleeping: what kvd does on its own time (closing a connection)
 * is polled for with a bound. The only pauses are a slow peer's pace, which
 * is what the test is about.
 */
#include "harness.h"
#include "kvclient.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h> /* after the headers it needs */

#include "stream_client.h"

/* "--listen=kv+tcp://127.0.0.1:PORT" in o->extra[0]; the URL in tcp. */
static void add_tcp_listener(struct kvd_opts *o, char *tcp, size_t tcplen, char *arg, size_t arglen)
{
	int port = h_free_port();

	assert_true(port > 0);
	snprintf(tcp, tcplen, "kv+tcp://127.0.0.1:%d", port);
	snprintf(arg, arglen, "--listen=%s", tcp);
	o->extra[0] = arg;
}

/* Non-blocking sends of up to n bytes; what was sent (0 when the socket
 * takes nothing now), or -1 when the connection is gone. */
static ssize_t send_some(int fd, const void *p, size_t n)
{
	ssize_t w = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);

	if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return 0;
	return w < 0 ? -1 : w;
}

/* Slowloris on kv+tcp:// with max_connections = 16 and frame_timeout = 2:
 * 8 peers that never send their hello and 8 that send it and then a frame
 * one byte every 250 ms fill the listener, which refuses a 17th; the
 * kv+ipc:// listener serves at once all along (its own max_connections);
 * every slow peer is closed once its hello or frame is 2 s old (not
 * before 1.5 s, by 6 s), and kv+tcp:// serves again. */
static void test_slowloris(void **state)
{
	enum { N = 16 };
	struct kvd_proc k;
	struct kvd_opts o = {.config_text = "max_connections = 16\nframe_timeout = 2\n"};
	char tcp[64], arg[96];
	int fds[N], extra;
	uint64_t t0, closed_at[N] = {0};
	const uint8_t frame_start[4] = {0, 0, 0, 20};
	uint8_t got[8];
	int open_n = N;
	size_t trickled[N] = {0};

	(void)state;
	add_tcp_listener(&o, tcp, sizeof(tcp), arg, sizeof(arg));
	assert_int_equal(kvd_start(&k, &o), 0);
	t0 = h_now_ms();
	for (int i = 0; i < N; i++) {
		fds[i] = st_connect(tcp);
		assert_true(fds[i] >= 0);
		if (i % 2 == 1) {
			st_write(fds[i], hello, sizeof(hello));
			st_write(fds[i], frame_start, 1);
			trickled[i] = 1;
		}
	}
	/* the 17th is closed before its hello */
	extra = st_connect(tcp);
	assert_true(extra >= 0);
	assert_int_equal(st_read(extra, got, 8, 5000), -2);
	close(extra);
	/* the local socket is not locked out */
	{
		int fd = st_open(k.surl);
		assert_int_equal(st_call(fd, "Health", 1, NULL, NULL, NULL, 0), 0);
		close(fd);
	}
	/* trickle until kvd ends every one of them (bounded) */
	while (open_n > 0 && h_now_ms() - t0 < 10000) {
		for (int i = 0; i < N; i++) {
			/* the rest of a 20-byte frame's header, then its body */
			uint8_t b = trickled[i] < 4 ? frame_start[trickled[i]] : 0xc0;
			if (closed_at[i] != 0)
				continue;
			if (i % 2 == 1)
				trickled[i]++;
			if ((i % 2 == 1 && send_some(fds[i], &b, 1) < 0) ||
			    st_closed_within(fds[i], 0)) {
				closed_at[i] = h_now_ms();
				open_n--;
			}
		}
		poll(NULL, 0, 250); /* the slow peer's pace */
	}
	assert_int_equal(open_n, 0);
	for (int i = 0; i < N; i++) {
		if (closed_at[i] - t0 < 1500 || closed_at[i] - t0 > 6000)
			fail_msg("slow peer %d closed after %llu ms, want 1500..6000", i,
			         (unsigned long long)(closed_at[i] - t0));
		close(fds[i]);
	}
	print_message("16 slow peers closed %llu..%llu ms after they connected\n",
	              (unsigned long long)(closed_at[0] - t0),
	              (unsigned long long)(closed_at[N - 1] - t0));
	/* kv+tcp:// serves again; the log says why they went */
	{
		int fd = -1, ok = -1;
		t0 = h_now_ms();
		/* kvd may still count the last ones for a moment */
		while (ok != 0 && h_now_ms() - t0 < 5000) {
			if (fd >= 0)
				close(fd);
			fd = st_connect(tcp);
			assert_true(fd >= 0);
			st_write(fd, hello, sizeof(hello));
			ok = st_read(fd, got, 8, 1000);
		}
		assert_int_equal(ok, 0);
		assert_int_equal(st_call(fd, "Health", 1, NULL, NULL, NULL, 0), 0);
		close(fd);
	}
	assert_true(h_log_has(&k, "within frame_timeout"));
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, false);
}

/* client_timeout = 2: a connection left idle after a request is closed
 * (between 1.5 and 6 s later); one that sends a request every 300 ms for
 * 3.5 s is not. */
static void test_idle_timeout(void **state)
{
	struct kvd_proc k;
	struct kvd_opts o = {.config_text = "client_timeout = 2\n"};
	int idle, busy;
	uint64_t t0, idle_closed = 0;
	uint64_t id = 1;

	(void)state;
	assert_int_equal(kvd_start(&k, &o), 0);
	idle = st_open(k.surl);
	busy = st_open(k.surl);
	assert_int_equal(st_call(idle, "Health", 1, NULL, NULL, NULL, 0), 0);
	t0 = h_now_ms();
	while (h_now_ms() - t0 < 3500) {
		assert_int_equal(st_call(busy, "Health", ++id, NULL, NULL, NULL, 0), 0);
		if (idle_closed == 0 && st_closed_within(idle, 300))
			idle_closed = h_now_ms();
	}
	if (idle_closed == 0 && st_closed_within(idle, 4000))
		idle_closed = h_now_ms();
	assert_true(idle_closed != 0);
	assert_true(idle_closed - t0 >= 1500 && idle_closed - t0 <= 6000);
	assert_int_equal(st_call(busy, "Health", ++id, NULL, NULL, NULL, 0), 0);
	close(idle);
	close(busy);
	assert_true(h_log_has(&k, "idle for client_timeout"));
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, false);
}

/* 12 peers each declare a frame of 8 MiB and send all of it but its last
 * byte, as fast as kvd reads; input_budget = 24M. kvd's resident memory
 * grows by less than 44 MiB (the budget and slack; it would be 96 MiB if
 * every partial frame were held). Small requests are served all along; a
 * 1 MiB Put sent behind them completes once frame_timeout (2 s) ended the
 * stalled peers ahead of it; every peer is closed. */
static void test_partial_frames_bounded(void **state)
{
	enum { N = 12, DECLARED = 8 << 20 };
	struct kvd_proc k;
	struct kvd_opts o = {.config_text = "max_value_size = 4M\nmax_message_size = 8M\n"
	                                    "input_budget = 24M\nframe_timeout = 2\n"};
	int fds[N], good, big;
	size_t sent[N] = {0};
	uint8_t *junk = calloc(1, 1 << 20), *val = malloc(1 << 20);
	const uint8_t hdr[4] = {DECLARED >> 24, (DECLARED >> 16) & 0xff, (DECLARED >> 8) & 0xff,
	                        DECLARED & 0xff};
	long rss0, peak = 0;
	uint64_t t0;
	struct h_req q;
	int idle_rounds = 0, open_n = N;

	(void)state;
	assert_int_equal(kvd_start(&k, &o), 0);
	good = st_open(k.surl);
	assert_int_equal(st_call(good, "Health", 1, NULL, NULL, NULL, 0), 0);
	rss0 = rss_kib(k.pid);
	for (int i = 0; i < N; i++) {
		fds[i] = st_open(k.surl);
		st_write(fds[i], hdr, 4);
	}
	/* feed them while kvd takes bytes; stop after 3 rounds without progress */
	t0 = h_now_ms();
	while (idle_rounds < 3 && h_now_ms() - t0 < 10000) {
		bool progress = false;
		long r;
		for (int i = 0; i < N; i++) {
			size_t left = DECLARED - 1 - sent[i];
			ssize_t w;
			if (left == 0)
				continue;
			w = send_some(fds[i], junk, left < (1 << 20) ? left : (1 << 20));
			if (w > 0) {
				sent[i] += (size_t)w;
				progress = true;
			}
		}
		if ((r = rss_kib(k.pid)) > peak)
			peak = r;
		idle_rounds = progress ? 0 : idle_rounds + 1;
		if (!progress)
			poll(NULL, 0, 100); /* the peers wait for kvd to read */
	}
	/* small requests are not held up */
	assert_int_equal(st_call(good, "Put", 2, NULL, "small", "v", 1), 0);
	/* a large one waits its turn, and gets it */
	big = st_open(k.surl);
	memset(val, 'x', 1 << 20);
	st_req(&q, "Put", 3, NULL, "big", val, 1 << 20);
	st_send_frame(big, q.sb.data, q.sb.size);
	msgpack_sbuffer_destroy(&q.sb);
	t0 = h_now_ms();
	{
		uint8_t *rep = NULL;
		size_t n;
		struct h_reply r;
		int rv = -1;
		while (rv != 0 && h_now_ms() - t0 < 20000) {
			long now = rss_kib(k.pid);
			if (now > peak)
				peak = now;
			/* the peers kvd is reading are fed on */
			for (int i = 0; i < N; i++) {
				size_t left = DECLARED - 1 - sent[i];
				ssize_t w = left ? send_some(fds[i], junk,
				                             left < (1 << 20) ? left : (1 << 20))
				                 : 0;
				if (w > 0)
					sent[i] += (size_t)w;
			}
			rv = st_recv_frame(big, 200, &rep, &n);
			assert_true(rv == 0 || rv == -1);
		}
		assert_int_equal(rv, 0);
		assert_int_equal(h_parse(rep, n, &r), 0);
		assert_int_equal(r.status, 0);
		h_reply_free(&r);
		free(rep);
	}
	print_message("kvd RSS %ld KiB before, peak %ld KiB with %d partial frames of %d MiB "
	              "(input_budget 24 MiB)\n",
	              rss0, peak, N, DECLARED >> 20);
	assert_true(peak - rss0 < 44 * 1024);
	/* every stalled peer is ended (bounded) */
	t0 = h_now_ms();
	for (int i = 0; i < N; i++) {
		uint64_t now = h_now_ms();
		if (st_closed_within(fds[i], now - t0 < 20000 ? (int)(20000 - (now - t0)) : 0))
			open_n--;
		close(fds[i]);
	}
	assert_int_equal(open_n, 0);
	assert_int_equal(st_call(good, "Get", 4, NULL, "big", NULL, 0), 0);
	close(good);
	close(big);
	free(junk);
	free(val);
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, false);
}

/* 16 connections each send 64 Gets of a 256 KiB value (256 MiB of replies
 * in all) and read none; output_budget = 4M. kvd's resident memory grows by
 * less than 80 MiB (without the budget, 16 connections pause at 8 MiB of
 * queued replies each only: 128 MiB and more, 200 MiB measured); a client
 * that reads its replies is served meanwhile. */
static void test_unread_replies_bounded(void **state)
{
	enum { N = 16, GETS = 64, VLEN = 256 << 10 };
	struct kvd_proc k;
	struct kvd_opts o = {.config_text = "output_budget = 4M\n[tenant-defaults]\nsync = none\n",
	                     .env = {"ASAN_OPTIONS=quarantine_size_mb=16:halt_on_error=1:"
	                             "abort_on_error=1:print_summary=1"}};
	int fds[N], good;
	uint8_t *val = malloc(VLEN);
	msgpack_sbuffer all;
	long rss0, peak = 0, prev = -1;
	uint64_t t0;
	int stable = 0;

	(void)state;
	assert_int_equal(kvd_start(&k, &o), 0);
	good = st_open(k.surl);
	memset(val, 'v', VLEN);
	assert_int_equal(st_call(good, "Put", 1, NULL, "big", val, VLEN), 0);
	assert_int_equal(st_call(good, "Get", 2, NULL, "big", NULL, 0), 0);
	rss0 = rss_kib(k.pid);
	msgpack_sbuffer_init(&all);
	for (uint64_t id = 1; id <= GETS; id++) {
		struct h_req q;
		st_req(&q, "Get", id, NULL, "big", NULL, 0);
		st_frame_into(&all, q.sb.data, q.sb.size);
		msgpack_sbuffer_destroy(&q.sb);
	}
	for (int i = 0; i < N; i++) {
		fds[i] = st_open(k.surl);
		st_write(fds[i], all.data, all.size);
	}
	msgpack_sbuffer_destroy(&all);
	/* until kvd's memory stops moving (bounded) */
	t0 = h_now_ms();
	while (stable < 5 && h_now_ms() - t0 < 10000) {
		long r = rss_kib(k.pid);
		if (r > peak)
			peak = r;
		stable = r == prev ? stable + 1 : 0;
		prev = r;
		poll(NULL, 0, 100); /* sampling period */
	}
	print_message("kvd RSS %ld KiB before, peak %ld KiB with %d MiB of replies unread "
	              "(output_budget 4 MiB)\n",
	              rss0, peak, (int)((long)N * GETS * VLEN >> 20));
	assert_true(peak - rss0 < 80 * 1024);
	assert_int_equal(st_call(good, "Get", 3, NULL, "big", NULL, 0), 0);
	for (int i = 0; i < N; i++)
		close(fds[i]);
	close(good);
	free(val);
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, false);
}

/* Lines of kvd's log containing text. */
static int log_count(const struct kvd_proc *k, const char *text)
{
	FILE *f = fopen(k->log, "r");
	char line[2048];
	int n = 0;

	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, text) != NULL;
	fclose(f);
	return n;
}

/* RLIMIT_NOFILE = 64 with the default settings: kvd says at start that the
 * limit is too low; one client's first Put and Get to each of 150 tenants
 * all succeed (kvd sizes the segment budget and the active tenants to the
 * limit); 80 connections that run kvd out of descriptors make accept fail
 * for 2.5 s and log it once, not every 100 ms; once they go, kvd serves. */
static void test_low_fd_limit(void **state)
{
	enum { TENANTS = 150, FLOOD = 80 };
	struct kvd_proc k;
	struct kvd_opts o = {.nofile = 64, .extra = {"--auto-create"}};
	int fd, flood[FLOOD], failed = 0;
	uint64_t t0;

	(void)state;
	assert_int_equal(kvd_start(&k, &o), 0);
	assert_true(h_log_has(&k, "the open file limit (64) is below"));
	fd = st_open(k.surl);
	for (int i = 0; i < TENANTS; i++) {
		char t[16];
		snprintf(t, sizeof(t), "t%03d", i);
		if (st_call(fd, "Put", 2 * (uint64_t)i + 1, t, "k", "v", 1) != 0 ||
		    st_call(fd, "Get", 2 * (uint64_t)i + 2, t, "k", NULL, 0) != 0)
			failed++;
	}
	print_message("%d of %d tenants failed their first Put or Get under ulimit -n 64\n", failed,
	              TENANTS);
	assert_int_equal(failed, 0);
	for (int i = 0; i < FLOOD; i++) {
		flood[i] = st_connect(k.surl);
		assert_true(flood[i] >= 0);
	}
	/* an observation window: accept keeps failing all along */
	t0 = h_now_ms();
	while (h_now_ms() - t0 < 2500)
		poll(NULL, 0, 100);
	print_message("accept failures logged %d time(s) in 2.5 s\n", log_count(&k, "accept: "));
	assert_true(log_count(&k, "accept: ") >= 1);
	assert_true(log_count(&k, "accept: ") <= 1);
	for (int i = 0; i < FLOOD; i++)
		close(flood[i]);
	assert_int_equal(st_call(fd, "Health", 1000, NULL, NULL, NULL, 0), 0);
	close(fd);
	{
		int ok = -1, c = -1;
		uint8_t got[8];
		t0 = h_now_ms();
		while (ok != 0 && h_now_ms() - t0 < 10000) {
			if (c >= 0)
				close(c);
			c = st_connect(k.surl);
			assert_true(c >= 0);
			st_write(c, hello, sizeof(hello));
			ok = st_read(c, got, 8, 1000);
		}
		assert_int_equal(ok, 0);
		assert_int_equal(st_call(c, "Health", 1, NULL, NULL, NULL, 0), 0);
		close(c);
	}
	assert_int_equal(kvd_stop(&k), 0);
	kvd_cleanup(&k, false);
}

/* nng ipc:// and peers that leave mid-handshake (nng 1.5 stops the
 * listener): 20 of them, one every 250 ms, while two established nng
 * clients call Health throughout and a new client connects every 500 ms.
 * kvd replaces the listener and keeps the established connections: they
 * see no error. New clients may fail while the listener is down (printed);
 * once the peers stop, a new client is served within 10 s; the socket file
 * goes when kvd stops. */
static void test_nng_handshake_abort(void **state)
{
	enum { ABORTS = 20, KEPT = 2 };
	struct kvd_proc k;
	nng_socket kept[KEPT];
	int kept_fail = 0, kept_calls = 0, fresh_fail = 0, fresh_calls = 0;
	uint64_t t0;
	bool ok = false;
	char ipc[100]; /* a Unix socket's path fits 108 bytes */

	(void)state;
	assert_int_equal(kvd_start(&k, NULL), 0);
	assert_true(strlen(k.url) < sizeof(ipc));
	snprintf(ipc, sizeof(ipc), "%s", k.url);
	for (int i = 0; i < KEPT; i++) {
		kept[i] = h_dial(k.url, 3000);
		struct h_req q;
		struct h_reply2 r;
		h_req_begin(&q, "Health", NULL, 1, 0, 0);
		assert_int_equal(h_call(kept[i], &q, &r), 0);
		h_reply2_free(&r);
	}
	for (int a = 0; a < ABORTS; a++) {
		uint64_t until = h_now_ms() + 250;
		assert_int_equal(h_connect_and_leave(ipc, 0), 0);
		/* the established clients call on, paced by their replies */
		while (h_now_ms() < until) {
			for (int i = 0; i < KEPT; i++) {
				struct h_req q;
				struct h_reply2 r;
				h_req_begin(&q, "Health", NULL, 1, 0, 0);
				kept_calls++;
				if (h_call(kept[i], &q, &r) != 0 || r.r.status != 0)
					kept_fail++;
				h_reply2_free(&r);
			}
			poll(NULL, 0, 10); /* their pace */
		}
		if (a % 2 == 0) {
			fresh_calls++;
			fresh_fail += !h_health_t(k.url, 1000);
		}
	}
	t0 = h_now_ms();
	while (!ok && h_now_ms() - t0 < 10000)
		ok = h_health_t(k.url, 1000);
	print_message("%d peers left mid-handshake: established clients %d of %d calls failed, "
	              "new clients %d of %d; listener replaced (log): %s\n",
	              ABORTS, kept_fail, kept_calls, fresh_fail, fresh_calls,
	              h_log_has(&k, "replacing the listener") ? "yes" : "no");
	assert_true(ok);
	assert_int_equal(kept_fail, 0);
	assert_true(kept_calls > 100);
	assert_true(h_log_has(&k, "replacing the listener"));
	for (int i = 0; i < KEPT; i++)
		nng_close(kept[i]);
	assert_int_equal(kvd_stop(&k), 0);
	/* the socket file went with kvd, and no listener's file was left */
	assert_int_not_equal(access(ipc + 6, F_OK), 0);
	{
		char pattern[128];
		DIR *dir = opendir(k.dir);
		struct dirent *de;
		assert_non_null(dir);
		snprintf(pattern, sizeof(pattern), "%s.kvd-", strrchr(ipc, '/') + 1);
		while ((de = readdir(dir)) != NULL)
			if (strncmp(de->d_name, pattern, strlen(pattern)) == 0)
				fail_msg("%s left in %s", de->d_name, k.dir);
		closedir(dir);
	}
	kvd_cleanup(&k, false);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_slowloris),
	        cmocka_unit_test(test_idle_timeout),
	        cmocka_unit_test(test_partial_frames_bounded),
	        cmocka_unit_test(test_unread_replies_bounded),
	        cmocka_unit_test(test_low_fd_limit),
	        cmocka_unit_test(test_nng_handshake_abort),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
