/* test_client_stream.c — libkvclient's stream transport against a scripted server: pipelined async
 * calls answered out of order, deadlines of blocking and async calls (a late reply never reaches
 * another call), lost connections failing what was in flight, stale pooled connections, malformed
 * frames. */
/*
 * The server is a thread on a Unix socket that speaks the framing of
 * rpc/PROTOCOL.md ("Stream framing") and answers each request as the test
 * tells it to (normally, late, never, out of order, with a bad frame, or by
 * hanging up). Requests are answered with Health-style replies carrying
 * their own id.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h> /* after the headers it needs */

#include <msgpack.h>

#include "kvclient.h"
#include "mp.h"

static const uint8_t hello[8] = {'k', 'v', 'd', 0, 0, 0, 0, 1};

enum mode {
	M_ANSWER,    /* every request, at once */
	M_SILENT,    /* none */
	M_REVERSE,   /* collect `batch` requests, answer them last first */
	M_LATE,      /* answer each after late_ms */
	M_HANGUP,    /* read requests, then close after `batch` of them */
	M_BAD_FRAME, /* answer with a frame of length 0 */
};

struct server {
	char path[108];
	int lfd;
	pthread_t th;
	atomic_int mode;
	int batch;
	int late_ms;
	atomic_int accepted; /* connections */
	atomic_int requests; /* requests read */
	atomic_int conn;     /* the connection being served, or -1 */
	atomic_bool quit;
};

static int read_full(int fd, void *p, size_t n)
{
	uint8_t *b = p;

	while (n > 0) {
		ssize_t r = read(fd, b, n);
		if (r <= 0)
			return -1;
		b += r;
		n -= (size_t)r;
	}
	return 0;
}

static void write_full(int fd, const void *p, size_t n)
{
	const uint8_t *b = p;

	while (n > 0) {
		ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
		if (w <= 0)
			return;
		b += w;
		n -= (size_t)w;
	}
}

struct req {
	uint64_t id;
	bool get;     /* a Get (else a Health) */
	char key[64]; /* a Get's key */
};

/* Reads one request frame. -1 on EOF. */
static int read_request(int fd, struct req *ret)
{
	uint8_t hdr[4], *body;
	size_t len;
	msgpack_zone z;
	msgpack_object root;
	int rv = -1;

	if (read_full(fd, hdr, 4) != 0)
		return -1;
	len = (size_t)hdr[0] << 24 | (size_t)hdr[1] << 16 | (size_t)hdr[2] << 8 | hdr[3];
	if (len == 0 || len > (1u << 20) || (body = malloc(len)) == NULL)
		return -1;
	memset(ret, 0, sizeof(*ret));
	if (read_full(fd, body, len) == 0) {
		const char *m;
		size_t ml;
		msgpack_zone_init(&z, 1024);
		if (mp_parse(body, len, &z, &root) == 0 &&
		    mp_field_uint(&root, "id", true, &ret->id) == 0 &&
		    mp_field_str(&root, "method", true, &m, &ml) == 0) {
			ret->get = ml == 3 && memcmp(m, "Get", 3) == 0;
			if (ret->get) {
				const msgpack_object *args = mp_map_get(&root, "args");
				const void *k;
				size_t kl;
				if (args != NULL && mp_field_bin(args, "key", true, &k, &kl) == 0 &&
				    kl < sizeof(ret->key))
					memcpy(ret->key, k, kl);
			}
			rv = 0;
		}
		msgpack_zone_destroy(&z);
	}
	free(body);
	return rv;
}

/* A reply with the request's id: a Health's, or a Get's whose value is the
 * key asked for (so a call can tell its own reply). */
static void send_reply(int fd, const struct req *r)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	uint8_t hdr[4];

	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, 4);
	mp_kv_uint(&pk, "v", 1);
	mp_kv_uint(&pk, "id", r->id);
	mp_kv_uint(&pk, "status", 0);
	mp_pack_cstr(&pk, "result");
	if (r->get) {
		msgpack_pack_map(&pk, 2);
		mp_kv_bin(&pk, "value", r->key, strlen(r->key));
		mp_kv_uint(&pk, "version", r->id);
	} else {
		msgpack_pack_map(&pk, 1);
		mp_kv_str(&pk, "status", "serving");
	}
	hdr[0] = (uint8_t)(sb.size >> 24);
	hdr[1] = (uint8_t)(sb.size >> 16);
	hdr[2] = (uint8_t)(sb.size >> 8);
	hdr[3] = (uint8_t)sb.size;
	write_full(fd, hdr, 4);
	write_full(fd, sb.data, sb.size);
	msgpack_sbuffer_destroy(&sb);
}

static void serve_conn(struct server *s, int fd)
{
	uint8_t got[8];
	struct req pend[256];
	int n = 0;

	if (read_full(fd, got, 8) != 0 || memcmp(got, hello, 8) != 0)
		return;
	write_full(fd, hello, 8);
	for (;;) {
		struct req r;
		if (read_request(fd, &r) != 0)
			return;
		atomic_fetch_add(&s->requests, 1);
		switch (atomic_load(&s->mode)) {
		case M_ANSWER:
			send_reply(fd, &r);
			break;
		case M_SILENT:
			break;
		case M_LATE:
			poll(NULL, 0, s->late_ms);
			send_reply(fd, &r);
			break;
		case M_REVERSE:
			pend[n++] = r;
			if (n == s->batch) {
				while (n > 0)
					send_reply(fd, &pend[--n]);
			}
			break;
		case M_HANGUP:
			if (++n == s->batch)
				return;
			break;
		case M_BAD_FRAME:
			write_full(fd, "\0\0\0\0", 4);
			break;
		}
	}
}

/* One connection at a time, each served to its end. */
static void *server_main(void *arg)
{
	struct server *s = arg;

	while (!atomic_load(&s->quit)) {
		struct pollfd p = {s->lfd, POLLIN, 0};
		int fd;
		if (poll(&p, 1, 50) <= 0)
			continue;
		if ((fd = accept(s->lfd, NULL, NULL)) < 0)
			continue;
		atomic_fetch_add(&s->accepted, 1);
		atomic_store(&s->conn, fd);
		serve_conn(s, fd);
		atomic_store(&s->conn, -1);
		close(fd);
	}
	return NULL;
}

/* A server on path (NULL: a new one). */
static struct server *server_start_at(enum mode m, const char *path)
{
	struct server *s = calloc(1, sizeof(*s));
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	static atomic_int seq;

	if (path != NULL)
		snprintf(s->path, sizeof(s->path), "%s", path);
	else
		snprintf(s->path, sizeof(s->path), "/tmp/kvtest-cstream-%d-%d.sock", (int)getpid(),
		         atomic_fetch_add(&seq, 1));
	atomic_store(&s->conn, -1);
	memcpy(sa.sun_path, s->path, strlen(s->path) + 1);
	unlink(s->path);
	s->lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_true(s->lfd >= 0);
	assert_int_equal(bind(s->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(s->lfd, 16), 0);
	atomic_store(&s->mode, m);
	assert_int_equal(pthread_create(&s->th, NULL, server_main, s), 0);
	return s;
}

static struct server *server_start(enum mode m)
{
	return server_start_at(m, NULL);
}

/* Stops it; the connection it serves is closed (the client sees a hang-up). */
static void server_stop(struct server *s)
{
	int fd;

	atomic_store(&s->quit, true);
	shutdown(s->lfd, SHUT_RDWR);
	if ((fd = atomic_load(&s->conn)) >= 0)
		shutdown(fd, SHUT_RDWR);
	pthread_join(s->th, NULL);
	close(s->lfd);
	unlink(s->path);
	free(s);
}

static kvc *open_client(const struct server *s, uint32_t timeout_ms, uint32_t contexts)
{
	struct kvc_options o;
	char url[160];
	kvc *c;

	snprintf(url, sizeof(url), "kv+ipc://%s", s->path);
	kvc_options_init(&o);
	o.endpoint = url;
	o.timeout_ms = timeout_ms;
	o.contexts = contexts;
	assert_int_equal(kvc_open(&o, &c), 0);
	return c;
}

struct tally {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int done, ok, deadline, unavailable, internal, other, wrong;
};

/* One async Get: the tally, and the key it asked for. */
struct call_arg {
	struct tally *t;
	char key[16];
};

static void tally_cb(void *arg, const struct kvc_async_result *res)
{
	struct call_arg *a = arg;
	struct tally *t = a->t;

	pthread_mutex_lock(&t->mu);
	t->done++;
	if (res->rv == 0 &&
	    (res->value_len != strlen(a->key) || memcmp(res->value, a->key, res->value_len) != 0))
		t->wrong++; /* another call's reply */
	else if (res->rv == 0)
		t->ok++;
	else if (res->rv == -KVC_DEADLINE_EXCEEDED)
		t->deadline++;
	else if (res->rv == -KVC_UNAVAILABLE)
		t->unavailable++;
	else if (res->rv == -KVC_INTERNAL)
		t->internal++;
	else
		t->other++;
	pthread_cond_broadcast(&t->cv);
	pthread_mutex_unlock(&t->mu);
}

static void tally_wait(struct tally *t, int n)
{
	pthread_mutex_lock(&t->mu);
	while (t->done < n)
		pthread_cond_wait(&t->cv, &t->mu);
	pthread_mutex_unlock(&t->mu);
}

static void tally_init(struct tally *t)
{
	memset(t, 0, sizeof(*t));
	pthread_mutex_init(&t->mu, NULL);
	pthread_cond_init(&t->cv, NULL);
}

/* Gets in flight at once, the server answers each batch of 8 in reverse
 * order: each completes with its own reply. */
static void test_out_of_order(void **state)
{
	struct server *s = server_start(M_REVERSE);
	struct call_arg args[64];
	struct tally t;
	kvc *c;

	(void)state;
	s->batch = 8;
	tally_init(&t);
	c = open_client(s, 5000, 64);
	for (int i = 0; i < 64; i++) {
		args[i].t = &t;
		snprintf(args[i].key, sizeof(args[i].key), "k%d", i);
		assert_int_equal(kvc_get_async(c, NULL, args[i].key, strlen(args[i].key), tally_cb,
		                               &args[i]),
		                 0);
	}
	tally_wait(&t, 64);
	/* every callback ran once, each with its own reply */
	assert_int_equal(t.ok, 64);
	assert_int_equal(t.wrong, 0);
	kvc_close(c);
	server_stop(s);
}

/* A blocking call whose reply does not come in time: DEADLINE_EXCEEDED;
 * the reply that comes later is never taken for the next call's (which
 * goes out on a new connection). */
static void test_blocking_deadline(void **state)
{
	struct server *s = server_start(M_LATE);
	struct kvc_status st;
	kvc *c;

	(void)state;
	s->late_ms = 300;
	c = open_client(s, 100, 4);
	assert_int_equal(kvc_health(c, &(struct kvc_call){.status = &st}, NULL),
	                 -KVC_DEADLINE_EXCEEDED);
	assert_string_equal(st.message, "no reply within 100 ms");
	atomic_store(&s->mode, M_ANSWER);
	assert_int_equal(kvc_health(c, &(struct kvc_call){.status = &st, .timeout_ms = 5000}, NULL),
	                 0);
	assert_true(atomic_load(&s->accepted) >= 2); /* the late one's was closed */
	/* the pooled connection a 5 s call used: a 100 ms call on it still
	 * ends at 100 ms, not when the late reply comes */
	atomic_store(&s->mode, M_LATE);
	{
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		assert_int_equal(
		        kvc_health(c, &(struct kvc_call){.status = &st, .timeout_ms = 100}, NULL),
		        -KVC_DEADLINE_EXCEEDED);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		assert_true((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000 <
		            250);
	}
	kvc_close(c);
	server_stop(s);
}

/* Async calls the server never answers fail with DEADLINE_EXCEEDED, from
 * the library's thread, each once. */
static void test_async_deadline(void **state)
{
	struct server *s = server_start(M_SILENT);
	struct call_arg args[10];
	struct tally t;
	kvc *c;

	(void)state;
	tally_init(&t);
	c = open_client(s, 150, 16);
	for (int i = 0; i < 10; i++) {
		args[i].t = &t;
		snprintf(args[i].key, sizeof(args[i].key), "k");
		assert_int_equal(kvc_get_async(c, NULL, "k", 1, tally_cb, &args[i]), 0);
	}
	tally_wait(&t, 10);
	assert_int_equal(t.deadline, 10);
	kvc_drain(c);
	kvc_close(c);
	server_stop(s);
}

/* The server hangs up with requests in flight: each fails UNAVAILABLE, and
 * the next call connects again. */
static void test_lost_connection(void **state)
{
	struct server *s = server_start(M_HANGUP);
	struct call_arg args[5];
	struct kvc_status st;
	struct tally t;
	kvc *c;

	(void)state;
	s->batch = 5;
	tally_init(&t);
	c = open_client(s, 5000, 16);
	for (int i = 0; i < 5; i++) {
		args[i].t = &t;
		snprintf(args[i].key, sizeof(args[i].key), "k");
		assert_int_equal(kvc_get_async(c, NULL, "k", 1, tally_cb, &args[i]), 0);
	}
	tally_wait(&t, 5);
	assert_int_equal(t.unavailable, 5);
	atomic_store(&s->mode, M_ANSWER);
	assert_int_equal(kvc_health(c, &(struct kvc_call){.status = &st}, NULL), 0);
	kvc_close(c);
	server_stop(s);
}

/* A pooled connection the server closed while it sat idle (a restart) is
 * not used again: the call goes out on a new connection and succeeds. */
static void test_stale_pooled_connection(void **state)
{
	struct server *s = server_start(M_ANSWER);
	struct kvc_status st;
	char path[108];
	kvc *c;

	(void)state;
	c = open_client(s, 5000, 4);
	assert_int_equal(kvc_health(c, &(struct kvc_call){.status = &st}, NULL), 0);
	snprintf(path, sizeof(path), "%s", s->path);
	server_stop(s); /* hangs up the pooled connection */
	s = server_start_at(M_ANSWER, path);
	/* the library looks at a pooled connection idle for 100 ms or more
	 * before it reuses it: this one has been */
	poll(NULL, 0, 150);
	assert_int_equal(kvc_health(c, &(struct kvc_call){.status = &st}, NULL), 0);
	assert_int_equal(atomic_load(&s->accepted), 1);
	kvc_close(c);
	server_stop(s);
}

/* A frame of length 0 from the server: the call fails (INTERNAL), and the
 * connection is not used again. */
static void test_bad_frame(void **state)
{
	struct server *s = server_start(M_BAD_FRAME);
	struct call_arg arg;
	struct kvc_status st;
	struct tally t;
	kvc *c;

	(void)state;
	tally_init(&t);
	c = open_client(s, 2000, 4);
	assert_int_equal(kvc_health(c, &(struct kvc_call){.status = &st}, NULL), -KVC_INTERNAL);
	assert_non_null(strstr(st.message, "empty frame"));
	arg.t = &t;
	snprintf(arg.key, sizeof(arg.key), "k");
	assert_int_equal(kvc_get_async(c, NULL, "k", 1, tally_cb, &arg), 0);
	tally_wait(&t, 1);
	assert_int_equal(t.internal, 1);
	kvc_close(c);
	server_stop(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_out_of_order),
	        cmocka_unit_test(test_blocking_deadline),
	        cmocka_unit_test(test_async_deadline),
	        cmocka_unit_test(test_lost_connection),
	        cmocka_unit_test(test_stale_pooled_connection),
	        cmocka_unit_test(test_bad_frame),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
