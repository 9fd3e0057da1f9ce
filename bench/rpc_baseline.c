/*
 * bench/rpc_baseline.c — the baselines of kvbench rpc, each measured with the
 * same harness as kvd's cells (bench/rpc_bench.h): an nng REQ/REP echo (its
 * server in this process, or in a process of its own), a plain-socket echo,
 * fdatasync of a small append, and sockperf's ping-pong when installed.
 */
#include "rpc_bench.h"

#include "bench.h"
#include "hist.h"
#include "opt.h"
#include "report.h"
#include "rng.h"

#include "kvclient.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- baseline: nng REQ/REP echo ---------------------------------------------- */

struct echo_ctx {
	nng_ctx ctx;
	nng_aio *aio;
	bool sending;
};

struct echo_srv {
	nng_socket sock;
	struct echo_ctx c[RB_ECHO_CONTEXTS];
	unsigned n;
	char ipc_url[RB_PATH_MAX + 16];
	char tcp_url[64];
};

static void echo_cb(void *arg)
{
	struct echo_ctx *e = arg;
	int rv = nng_aio_result(e->aio);

	if (e->sending) {
		if (rv != 0)
			nng_msg_free(nng_aio_get_msg(e->aio));
		if (rv == NNG_ECLOSED || rv == NNG_ECANCELED)
			return;
		e->sending = false;
		nng_ctx_recv(e->ctx, e->aio);
		return;
	}
	if (rv != 0) {
		if (rv == NNG_ECLOSED || rv == NNG_ECANCELED)
			return;
		nng_ctx_recv(e->ctx, e->aio);
		return;
	}
	/* the request message goes back as the reply */
	nng_aio_set_msg(e->aio, nng_aio_get_msg(e->aio));
	e->sending = true;
	nng_ctx_send(e->ctx, e->aio);
}

static void echo_stop(struct echo_srv *s)
{
	for (unsigned i = 0; i < s->n; i++)
		nng_aio_stop(s->c[i].aio);
	nng_close(s->sock);
	for (unsigned i = 0; i < s->n; i++)
		nng_aio_free(s->c[i].aio);
	s->n = 0;
}

/* Listens on ipc://base/name and tcp://127.0.0.1 (a free port). */
static int echo_start(struct echo_srv *s, const char *base, const char *name, char *err,
                      size_t errlen)
{
	nng_listener l;
	int rv, port = 0;

	memset(s, 0, sizeof(*s));
	bench_fmt(s->ipc_url, sizeof s->ipc_url, "ipc://%s/%s", base, name);
	if ((rv = nng_rep0_open(&s->sock)) != 0) {
		bench_fmt(err, errlen, "nng_rep0_open: %s", nng_strerror(rv));
		return -1;
	}
	if ((rv = nng_listen(s->sock, s->ipc_url, NULL, 0)) != 0 ||
	    (rv = nng_listen(s->sock, "tcp://127.0.0.1:0", &l, 0)) != 0 ||
	    (rv = nng_listener_get_int(l, NNG_OPT_TCP_BOUND_PORT, &port)) != 0) {
		bench_fmt(err, errlen, "echo server listen: %s", nng_strerror(rv));
		nng_close(s->sock);
		return -1;
	}
	snprintf(s->tcp_url, sizeof s->tcp_url, "tcp://127.0.0.1:%d", port);
	for (s->n = 0; s->n < RB_ECHO_CONTEXTS; s->n++) {
		struct echo_ctx *e = &s->c[s->n];
		if ((rv = nng_ctx_open(&e->ctx, s->sock)) != 0 ||
		    (rv = nng_aio_alloc(&e->aio, echo_cb, e)) != 0) {
			bench_fmt(err, errlen, "echo server context: %s", nng_strerror(rv));
			echo_stop(s);
			return -1;
		}
		nng_ctx_recv(e->ctx, e->aio);
	}
	return 0;
}

static int echo_socket(const char *url, nng_socket *ret, char *err, size_t errlen)
{
	nng_socket s;
	int rv;

	if ((rv = nng_req0_open(&s)) != 0) {
		bench_fmt(err, errlen, "nng_req0_open: %s", nng_strerror(rv));
		return -1;
	}
	/* as libkvclient: no resend; connected before the clock starts */
	if ((rv = nng_socket_set_ms(s, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE)) != 0 ||
	    (rv = nng_dial(s, url, NULL, 0)) != 0) {
		bench_fmt(err, errlen, "dial %s: %s", url, nng_strerror(rv));
		nng_close(s);
		return -1;
	}
	*ret = s;
	return 0;
}

static int echo_setup(struct rb_thread *t)
{
	struct rb_run *r = t->run;
	nng_socket s = r->echo;
	int rv;

	if (!r->echo_shared) {
		if (echo_socket(r->url, &t->sock, t->err, sizeof t->err) != 0)
			return -1;
		t->sock_open = true;
		s = t->sock;
	}
	if ((rv = nng_ctx_open(&t->ctx, s)) != 0 ||
	    (rv = nng_aio_alloc(&t->aio, NULL, NULL)) != 0) {
		bench_fmt(t->err, sizeof t->err, "echo client context: %s", nng_strerror(rv));
		return -1;
	}
	t->ctx_open = true;
	nng_aio_set_timeout(t->aio, RB_CALL_TIMEOUT_MS);
	return 0;
}

static void echo_teardown(struct rb_thread *t)
{
	if (t->aio != NULL)
		nng_aio_free(t->aio);
	t->aio = NULL;
	if (t->ctx_open)
		nng_ctx_close(t->ctx);
	t->ctx_open = false;
	if (t->sock_open)
		nng_close(t->sock);
	t->sock_open = false;
}

static int echo_op(struct rb_thread *t)
{
	nng_msg *m;
	int rv;

	if ((rv = nng_msg_alloc(&m, 0)) != 0 ||
	    (rv = nng_msg_append(m, t->run->b->pool + t->vpos, RB_MSG_SIZE)) != 0)
		goto fail;
	if ((t->vpos += RB_MSG_SIZE) >= RB_POOL_BYTES)
		t->vpos -= RB_POOL_BYTES;
	nng_aio_set_msg(t->aio, m);
	nng_ctx_send(t->ctx, t->aio);
	nng_aio_wait(t->aio);
	if ((rv = nng_aio_result(t->aio)) != 0) {
		nng_msg_free(m);
		goto fail;
	}
	nng_ctx_recv(t->ctx, t->aio);
	nng_aio_wait(t->aio);
	if ((rv = nng_aio_result(t->aio)) != 0)
		goto fail;
	m = nng_aio_get_msg(t->aio);
	rv = nng_msg_len(m) == RB_MSG_SIZE ? 0 : 1;
	nng_msg_free(m);
	return rv;
fail:
	if (t->err[0] == '\0')
		bench_fmt(t->err, sizeof t->err, "echo: %s", nng_strerror(rv));
	return -1;
}

static const struct rb_kind kind_echo = {echo_setup, echo_op, echo_teardown, NULL};

/* kvbench rpc --serve-echo DIR (internal): the echo server in a process of
 * its own, as kvd is. Listens on ipc://DIR/echo-proc.sock and a free TCP
 * port, prints "tcp-port N", serves until SIGTERM, exits 0. */
int rb_serve_echo(const char *dir)
{
	struct echo_srv *s = calloc(1, sizeof(*s));
	char err[RB_ERR_MAX];
	sigset_t set;
	int sig;

	/* blocked before nng starts its threads, so sigwait gets them */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	if (s == NULL || echo_start(s, dir, "echo-proc.sock", err, sizeof err) != 0) {
		fprintf(stderr, "kvbench rpc --serve-echo: %s\n", s ? err : "out of memory");
		free(s);
		return 1;
	}
	printf("tcp-port %s\n", strrchr(s->tcp_url, ':') + 1);
	fflush(stdout);
	while (sigwait(&set, &sig) != 0)
		;
	echo_stop(s);
	free(s);
	return 0;
}

/* Starts kvbench rpc --serve-echo; fills the URLs. */
static int echo_proc_start(struct rb_bench *b, struct bench_proc *p, char *ipc_url, size_t ipc_len,
                           char *tcp_url, size_t tcp_len, char *err, size_t errlen)
{
	const char *args[] = {"rpc", "--serve-echo", b->base, NULL};
	char log[RB_PATH_MAX + 32], line[128];
	double t0 = bench_now();

	bench_fmt(log, sizeof log, "%s/echo-server.log", b->base);
	/* this very binary, even when a rebuild has replaced the file since */
	if (bench_proc_start(p, "/proc/self/exe", args, log, err, errlen) != 0)
		return -1;
	for (;;) {
		FILE *f = fopen(log, "r");
		int port = 0;
		while (f != NULL && fgets(line, sizeof line, f) != NULL)
			if (sscanf(line, "tcp-port %d", &port) == 1)
				break;
		if (f != NULL)
			fclose(f);
		if (port > 0) {
			bench_fmt(ipc_url, ipc_len, "ipc://%s/echo-proc.sock", b->base);
			bench_fmt(tcp_url, tcp_len, "tcp://127.0.0.1:%d", port);
			return 0;
		}
		if (bench_proc_reaped(p) || bench_now() - t0 > 10) {
			char e2[RB_ERR_MAX];
			bench_proc_stop(p, e2, sizeof e2);
			bench_fmt(err, errlen, "echo server process did not start: %s", e2);
			return -1;
		}
		bench_sleep(0.01);
	}
}

/* The nng echo cells: the server on this process's nng threads, or (own)
 * in a process of its own. */
void rb_echo_cells(struct rb_bench *b, bool own)
{
	const char *section = own ? "nng-proc" : "nng";
	struct echo_srv *s = own ? NULL : calloc(1, sizeof(*s));
	struct bench_proc proc;
	char err[RB_ERR_MAX], ipc_url[RB_PATH_MAX + 32], tcp_url[64];
	int rv;

	if (own)
		rv = echo_proc_start(b, &proc, ipc_url, sizeof ipc_url, tcp_url, sizeof tcp_url,
		                     err, sizeof err);
	else if ((rv = s == NULL ? -1 : echo_start(s, b->base, "echo.sock", err, sizeof err)) ==
	         0) {
		snprintf(ipc_url, sizeof ipc_url, "%s", s->ipc_url);
		snprintf(tcp_url, sizeof tcp_url, "%s", s->tcp_url);
	}
	if (rv != 0) {
		struct rb_cell *c = rb_cell_new(b, section, "", "echo", "", "blocking", 0, 1);
		if (c != NULL) {
			bench_fmt(c->err, sizeof c->err, "%s", own || s ? err : "out of memory");
			rb_row_text(b->progress, c);
		}
		free(s);
		return;
	}
	for (int tr = 0; tr < 2; tr++) {
		const char *url = tr == 0 ? ipc_url : tcp_url;
		if ((tr == 0 && !b->o.ipc && !b->o.kvipc) || (tr == 1 && !b->o.tcp && !b->o.kvtcp))
			continue;
		for (size_t i = 0; i < b->o.nthreads; i++) {
			struct rb_cell *c = rb_cell_new(b, section, tr == 0 ? "ipc" : "tcp", "echo",
			                                "", "blocking", b->o.threads[i], 1);
			struct rb_run r;
			if (c == NULL)
				break;
			memset(&r, 0, sizeof r);
			r.k = &kind_echo;
			r.url = url;
			r.nthreads = b->o.threads[i];
			r.echo_shared = !b->o.per_thread_handles;
			if (r.echo_shared &&
			    echo_socket(url, &r.echo, c->err, sizeof c->err) != 0) {
				rb_row_text(b->progress, c);
				continue;
			}
			rb_run_cell(b, &r, c);
			if (r.echo_shared)
				nng_close(r.echo);
		}
	}
	if (own && bench_proc_stop(&proc, err, sizeof err) != 0) {
		fprintf(stderr, "kvbench rpc: echo server process: %s\n", err);
		b->failed = true;
	}
	if (s != NULL)
		echo_stop(s);
	free(s);
}

/* ---- baseline: plain sockets --------------------------------------------------- */

struct raw_srv {
	int lfd, stopfd;
	pthread_t acceptor;
	pthread_mutex_t mu;
	pthread_t conns[RB_THREADS_MAX + 8];
	unsigned nconns;
	int family;
};

static int read_full(int fd, char *buf, size_t n)
{
	while (n > 0) {
		ssize_t r = read(fd, buf, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r == 0 ? -EPIPE : -errno;
		buf += r;
		n -= (size_t)r;
	}
	return 0;
}

static void *raw_conn_main(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char buf[RB_MSG_SIZE];

	while (read_full(fd, buf, sizeof buf) == 0 && bench_write_full(fd, buf, sizeof buf) == 0)
		;
	close(fd);
	return NULL;
}

static void *raw_accept_main(void *arg)
{
	struct raw_srv *s = arg;
	struct pollfd p[2] = {{.fd = s->lfd, .events = POLLIN},
	                      {.fd = s->stopfd, .events = POLLIN}};

	for (;;) {
		int fd, one = 1;
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[1].revents != 0)
			break;
		if ((fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC)) < 0)
			continue;
		if (s->family == AF_INET)
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
		pthread_mutex_lock(&s->mu);
		if (s->nconns < sizeof s->conns / sizeof s->conns[0] &&
		    pthread_create(&s->conns[s->nconns], NULL, raw_conn_main,
		                   (void *)(intptr_t)fd) == 0)
			s->nconns++;
		else
			close(fd);
		pthread_mutex_unlock(&s->mu);
	}
	return NULL;
}

static int raw_start(struct raw_srv *s, struct rb_run *r, char *err, size_t errlen)
{
	memset(s, 0, sizeof(*s));
	s->family = r->family;
	s->lfd = socket(r->family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	s->stopfd = eventfd(0, EFD_CLOEXEC);
	if (s->lfd < 0 || s->stopfd < 0) {
		bench_fmt(err, errlen, "socket: %s", strerror(errno));
		goto fail;
	}
	if (r->family == AF_INET) {
		struct sockaddr_in *a = (struct sockaddr_in *)&r->addr;
		a->sin_family = AF_INET;
		a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		a->sin_port = 0;
		r->addrlen = sizeof(*a);
	} else {
		struct sockaddr_un *a = (struct sockaddr_un *)&r->addr;
		a->sun_family = AF_UNIX;
		if (strlen(r->path) >= sizeof a->sun_path) {
			bench_fmt(err, errlen, "socket path too long: %s", r->path);
			goto fail;
		}
		strcpy(a->sun_path, r->path);
		unlink(r->path);
		r->addrlen = sizeof(*a);
	}
	if (bind(s->lfd, (struct sockaddr *)&r->addr, r->addrlen) != 0 ||
	    listen(s->lfd, 512) != 0 ||
	    getsockname(s->lfd, (struct sockaddr *)&r->addr, &r->addrlen) != 0) {
		bench_fmt(err, errlen, "bind/listen: %s", strerror(errno));
		goto fail;
	}
	pthread_mutex_init(&s->mu, NULL);
	if (pthread_create(&s->acceptor, NULL, raw_accept_main, s) != 0) {
		bench_fmt(err, errlen, "pthread_create failed");
		pthread_mutex_destroy(&s->mu);
		goto fail;
	}
	return 0;
fail:
	if (s->lfd >= 0)
		close(s->lfd);
	if (s->stopfd >= 0)
		close(s->stopfd);
	return -1;
}

/* After every client closed its connection. */
static void raw_stop(struct raw_srv *s)
{
	uint64_t one = 1;

	if (write(s->stopfd, &one, sizeof one) < 0)
		perror("kvbench rpc: eventfd");
	pthread_join(s->acceptor, NULL);
	for (unsigned i = 0; i < s->nconns; i++)
		pthread_join(s->conns[i], NULL);
	close(s->lfd);
	close(s->stopfd);
	pthread_mutex_destroy(&s->mu);
}

static int raw_setup(struct rb_thread *t)
{
	struct rb_run *r = t->run;
	int one = 1;

	if ((t->fd = socket(r->family, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
	    connect(t->fd, (struct sockaddr *)&r->addr, r->addrlen) != 0) {
		bench_fmt(t->err, sizeof t->err, "connect: %s", strerror(errno));
		return -1;
	}
	if (r->family == AF_INET)
		setsockopt(t->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	return 0;
}

static void raw_teardown(struct rb_thread *t)
{
	if (t->fd >= 0)
		close(t->fd);
	t->fd = -1;
}

static int raw_op(struct rb_thread *t)
{
	char buf[RB_MSG_SIZE];
	int rv;

	if ((rv = bench_write_full(t->fd, t->run->b->pool + t->vpos, RB_MSG_SIZE)) != 0 ||
	    (rv = read_full(t->fd, buf, sizeof buf)) != 0) {
		if (t->err[0] == '\0')
			bench_fmt(t->err, sizeof t->err, "socket echo: %s", strerror(-rv));
		return -1;
	}
	rv = memcmp(buf, t->run->b->pool + t->vpos, RB_MSG_SIZE) == 0 ? 0 : 1;
	if ((t->vpos += RB_MSG_SIZE) >= RB_POOL_BYTES)
		t->vpos -= RB_POOL_BYTES;
	return rv;
}

static const struct rb_kind kind_raw = {raw_setup, raw_op, raw_teardown, NULL};

void rb_raw_cells(struct rb_bench *b)
{
	for (int tr = 0; tr < 2; tr++) {
		struct raw_srv *s = calloc(1, sizeof(*s));
		struct rb_run proto;
		char err[RB_ERR_MAX];
		if ((tr == 0 && !b->o.ipc && !b->o.kvipc) ||
		    (tr == 1 && !b->o.tcp && !b->o.kvtcp)) {
			free(s);
			continue;
		}
		memset(&proto, 0, sizeof proto);
		proto.k = &kind_raw;
		proto.family = tr == 0 ? AF_UNIX : AF_INET;
		bench_fmt(proto.path, sizeof proto.path, "%s/raw.sock", b->base);
		if (s == NULL || raw_start(s, &proto, err, sizeof err) != 0) {
			struct rb_cell *c = rb_cell_new(b, "socket", tr == 0 ? "ipc" : "tcp",
			                                "echo", "", "blocking", 0, 1);
			if (c != NULL) {
				bench_fmt(c->err, sizeof c->err, "%s", s ? err : "out of memory");
				rb_row_text(b->progress, c);
			}
			free(s);
			continue;
		}
		for (size_t i = 0; i < b->o.nthreads; i++) {
			struct rb_cell *c = rb_cell_new(b, "socket", tr == 0 ? "ipc" : "tcp",
			                                "echo", "", "blocking", b->o.threads[i], 1);
			struct rb_run r = proto;
			if (c == NULL)
				break;
			r.nthreads = b->o.threads[i];
			rb_run_cell(b, &r, c);
		}
		raw_stop(s);
		free(s);
	}
}

/* ---- baseline: fdatasync --------------------------------------------------------- */

static int fsync_setup(struct rb_thread *t)
{
	char path[RB_PATH_MAX + 32];

	bench_fmt(path, sizeof path, "%s/fdatasync.%u", t->run->b->base, t->idx);
	if ((t->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644)) < 0) {
		bench_fmt(t->err, sizeof t->err, "%s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

static void fsync_teardown(struct rb_thread *t)
{
	char path[RB_PATH_MAX + 32];

	bench_fmt(path, sizeof path, "%s/fdatasync.%u", t->run->b->base, t->idx);
	if (t->fd >= 0)
		close(t->fd);
	t->fd = -1;
	unlink(path);
}

static int fsync_op(struct rb_thread *t)
{
	int rv;

	if ((rv = bench_write_full(t->fd, t->run->b->pool, RB_MSG_SIZE)) != 0 ||
	    (fdatasync(t->fd) != 0 && (rv = -errno) != 0)) {
		if (t->err[0] == '\0')
			bench_fmt(t->err, sizeof t->err, "append+fdatasync: %s", strerror(-rv));
		return -1;
	}
	return 0;
}

static const struct rb_kind kind_fsync = {fsync_setup, fsync_op, fsync_teardown, NULL};

void rb_fsync_cell(struct rb_bench *b)
{
	struct rb_cell *c = rb_cell_new(b, "disk", "", "fdatasync", "", "blocking", 1, 1);
	struct rb_run r;

	if (c == NULL)
		return;
	memset(&r, 0, sizeof r);
	r.k = &kind_fsync;
	r.nthreads = 1;
	bench_fmt(c->note, sizeof c->note, "150-byte append + fdatasync on %s", b->fs);
	rb_run_cell(b, &r, c);
}

/* ---- baseline: sockperf ------------------------------------------------------------- */

/* Runs argv with stdout and stderr into out (NUL-terminated); returns its
 * wait status, or -1. */
static int run_capture(const char *const *argv, char *out, size_t cap)
{
	int p[2], st = 0;
	size_t used = 0;
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) != 0)
		return -1;
	if ((pid = fork()) < 0) {
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		dup2(p[1], STDOUT_FILENO);
		dup2(p[1], STDERR_FILENO);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(p[1]);
	for (;;) {
		char tmp[4096];
		ssize_t n = read(p[0], tmp, sizeof tmp);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (used + 1 < cap) {
			size_t k = (size_t)n < cap - 1 - used ? (size_t)n : cap - 1 - used;
			memcpy(out + used, tmp, k);
			used += k;
		}
	}
	out[used] = '\0';
	close(p[0]);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return st;
}

/* Removes ANSI colour escapes in place. */
static void strip_ansi(char *s)
{
	char *w = s;

	for (char *r = s; *r;) {
		if (*r == '\x1b' && r[1] == '[') {
			r += 2;
			while (*r && !(*r >= '@' && *r <= '~'))
				r++;
			if (*r)
				r++;
			continue;
		}
		*w++ = *r++;
	}
	*w = '\0';
}

/* The number after "label" in out, or -1. */
static double sp_value(const char *out, const char *label)
{
	const char *p = strstr(out, label);

	if (p == NULL)
		return -1;
	p += strlen(label);
	p += strspn(p, " =");
	return strtod(p, NULL);
}

void rb_sockperf_cell(struct rb_bench *b)
{
	struct rb_cell *c = rb_cell_new(b, "sockperf", "tcp", "ping-pong", "", "blocking", 1, 1);
	char sp[RB_PATH_MAX], port_s[16], secs[16], *out = NULL;
	const char *srv_argv[12], *cli_argv[16];
	struct bench_proc srv;
	char err[RB_ERR_MAX], log[RB_PATH_MAX + 32];
	int port, st, n = 0;

	if (c == NULL)
		return;
	if (!bench_find_in_path("sockperf", sp, sizeof sp)) {
		c->state = CELL_SKIPPED;
		bench_fmt(c->err, sizeof c->err,
		          "sockperf not installed (apt-get install sockperf)");
		rb_row_text(b->progress, c);
		return;
	}
	if ((port = kvd_run_free_port()) < 0 || (out = malloc(RB_SOCKPERF_OUT_MAX)) == NULL) {
		bench_fmt(c->err, sizeof c->err, "no free port or out of memory");
		goto done;
	}
	snprintf(port_s, sizeof port_s, "%d", port);
	snprintf(secs, sizeof secs, "%d",
	         (int)(b->o.seconds + 0.5) < 1 ? 1 : (int)(b->o.seconds + 0.5));
	srv_argv[n++] = "server";
	srv_argv[n++] = "-i";
	srv_argv[n++] = "127.0.0.1";
	srv_argv[n++] = "-p";
	srv_argv[n++] = port_s;
	srv_argv[n++] = "--tcp";
	srv_argv[n] = NULL;
	snprintf(log, sizeof log, "%s/sockperf-server.log", b->base);
	if (bench_proc_start(&srv, sp, srv_argv, log, err, sizeof err) != 0) {
		bench_fmt(c->err, sizeof c->err, "sockperf server: %s", err);
		goto done;
	}
	/* wait until it accepts */
	for (int i = 0; i < 200; i++) {
		struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), ok;
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
		if (fd >= 0)
			close(fd);
		if (ok)
			break;
		bench_sleep(0.01);
	}
	n = 0;
	cli_argv[n++] = sp;
	cli_argv[n++] = "ping-pong";
	cli_argv[n++] = "-i";
	cli_argv[n++] = "127.0.0.1";
	cli_argv[n++] = "-p";
	cli_argv[n++] = port_s;
	cli_argv[n++] = "--tcp";
	cli_argv[n++] = "-m";
	cli_argv[n++] = "150";
	cli_argv[n++] = "-t";
	cli_argv[n++] = secs;
	cli_argv[n++] = "--full-rtt";
	cli_argv[n] = NULL;
	bench_fmt(b->sockperf_cmd, sizeof b->sockperf_cmd,
	          "sockperf server -i 127.0.0.1 -p %s --tcp & "
	          "sockperf ping-pong -i 127.0.0.1 -p %s --tcp -m 150 -t %s --full-rtt",
	          port_s, port_s, secs);
	st = run_capture(cli_argv, out, RB_SOCKPERF_OUT_MAX);
	kill(srv.pid, SIGTERM);
	waitpid(srv.pid, NULL, 0);
	strip_ansi(out);
	if (st != 0 || sp_value(out, "percentile 50.000") < 0) {
		char *last = strrchr(out, '\n');
		bench_fmt(c->err, sizeof c->err, "sockperf ping-pong failed (status 0x%x): %s", st,
		          last ? last + 1 : out);
		goto done;
	}
	c->state = CELL_OK;
	c->threads = 1;
	c->p50 = (uint64_t)(sp_value(out, "percentile 50.000") * 1e3);
	c->p99 = (uint64_t)(sp_value(out, "percentile 99.000") * 1e3);
	c->p999 = (uint64_t)(sp_value(out, "percentile 99.900") * 1e3);
	c->max = (uint64_t)(sp_value(out, "<MAX> observation") * 1e3);
	c->mean = (uint64_t)(sp_value(out, "avg-rtt") * 1e3);
	{
		/* "[Valid Duration] RunTime=1.544 sec; SentMessages=64644; ReceivedMessages=64644"
		 */
		const char *v = strstr(out, "[Valid Duration]");
		double rt = v ? sp_value(v, "RunTime") : -1,
		       rx = v ? sp_value(v, "ReceivedMessages") : -1;
		if (rt > 0 && rx > 0) {
			c->seconds = rt;
			c->ops = (uint64_t)rx;
		}
	}
	bench_fmt(b->sockperf_summary, sizeof b->sockperf_summary,
	          "avg-rtt %.3f us, p50 %.3f, p99 %.3f, p99.9 %.3f, max %.3f us (sockperf's own "
	          "percentiles, full round trip)",
	          c->mean / 1e3, c->p50 / 1e3, c->p99 / 1e3, c->p999 / 1e3, c->max / 1e3);
	bench_fmt(c->note, sizeof c->note, "sockperf's own figures, --full-rtt");
done:
	free(out);
	rb_row_text(b->progress, c);
}
