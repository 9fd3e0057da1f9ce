/*
 * client_stream.c — libkvclient's transport for kvd's own framing
 * (rpc/PROTOCOL.md, "Stream framing"): kv+ipc://PATH, kv+tcp://HOST:PORT,
 * and kv+tls://HOST:PORT, the same over TLS (OpenSSL): a connection is
 * dialled, then its handshake is done within the call's deadline (the
 * server's certificate verified against tls_ca_file or the system's CAs,
 * its name against tls_server_name or the endpoint's host), then it is used
 * as a plain one.
 *
 * Two ways a request travels:
 *
 *   Blocking calls (client_op_run) take a connection of their own from a
 *   pool for the round trip: write the frame, read the one reply, give the
 *   connection back. No other thread is involved, so a call costs one
 *   write and (usually) one read. The pool grows to the number of calls
 *   made at once, at most `contexts`; a pooled connection that turned
 *   readable while idle (the server closed it, say after a restart) is
 *   dropped and a new one dialled. A call whose deadline passes, or whose
 *   connection fails, closes that connection: a late reply can never be
 *   read by the next call.
 *
 *   Asynchronous calls share one pipelined connection: frames are written
 *   under s->wmu, and the reader thread (started with the first async call)
 *   reads the replies, pairs each with its request by id, and runs the
 *   completion. Requests whose deadline passes are failed by the reader;
 *   their late replies find no request and are dropped. When the
 *   connection fails, every request on it fails, and the next async call
 *   dials again.
 *
 * Invariants (s->mu guards the fields below it in struct cstream):
 *  1. in_flight counts blocking calls between taking and giving back their
 *     slot, and async requests from send until their completion returned;
 *     it is at most max. kvc_drain and kvc_close wait for it to be 0.
 *  2. A pending async request is in exactly one bucket; whoever removes it
 *     (the reader on a reply, a deadline or a lost connection; the sender
 *     when its write failed) completes it, once.
 *  3. s->ac is replaced (closed and freed) only by the reader thread, with
 *     s->wmu and then s->mu held, so a writer holding s->wmu that found it
 *     still current may use it. Lock order: wmu, then mu.
 *  4. A TLS connection's SSL object is used only with its cc->tmu held
 *     (the async connection's writer and reader are two threads); tmu is
 *     taken last and held over no wait. A blocking call's connection is
 *     its alone, and takes tmu all the same.
 *
 * Threads: any thread may call; async completions run on the reader
 * thread, which therefore must not be blocked by them (kvclient.h).
 */
#include "kvclient.h"

#include "client_op.h"
#include "hostport.h"
#include "wire.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#define CS_READ_SMALL 4096        /* a blocking call's first read */
#define CS_READ_CHUNK (64u << 10) /* the reader thread's reads */
#define CS_STALE_MS   100         /* pooled connections idle longer are checked first */

static const uint8_t cs_hello[WIRE_HELLO_LEN] = WIRE_HELLO_INIT;

struct cconn {
	int fd;
	SSL *ssl;            /* kv+tls://; NULL: plain */
	pthread_mutex_t tmu; /* ssl's (invariant 4) */
	bool hello_sent;
	bool hello_read;
	bool got_bytes;        /* anything read from it yet */
	int64_t idle_since_ms; /* given back to the pool then */
	struct cconn *next;    /* the idle pool */
};

struct apend {
	uint64_t id;
	struct client_op *op;
	struct apend *next;
};

struct cstream {
	kvc *c;
	const char *endpoint; /* the handle's */
	bool unix_socket;
	struct sockaddr_un sun;
	char host[256];
	char port[8];
	SSL_CTX *tls;         /* kv+tls://; NULL: plain */
	const char *tls_name; /* the name the server's certificate must have */
	bool tls_name_ip;     /* … an IP address */
	short rd_wait;        /* the reader's: the event its last TLS read waits for */
	uint32_t max;
	size_t max_message_size;
	pthread_t reader;
	bool reader_started;
	int wakefd;
	pthread_mutex_t wmu; /* writes on ac (invariant 3) */
	/* the reader thread's alone */
	uint8_t *rbuf;
	size_t rlen, rcap;

	pthread_mutex_t mu;
	pthread_cond_t cv;      /* in_flight went down, or closing */
	pthread_cond_t idle_cv; /* in_flight reached 0 */
	uint32_t in_flight;
	bool closing;
	bool reader_quit;
	struct cconn *idle;
	struct cconn *ac;      /* the async connection; NULL: none */
	struct apend **bucket; /* pending async requests by id */
	uint32_t nbucket;      /* a power of two */
	uint32_t npend;
	int64_t reader_deadline;       /* the reader's next wake-up; INT64_MAX: none */
	char refused[KVC_MESSAGE_MAX]; /* an id-0 error the server sent on ac */
};

static bool cstream_accepts(const char *endpoint)
{
	return strncmp(endpoint, "kv+ipc://", 9) == 0 || strncmp(endpoint, "kv+tcp://", 9) == 0 ||
	       strncmp(endpoint, "kv+tls://", 9) == 0;
}

/* ---- connections ------------------------------------------------------------ */

static void cc_close(struct cconn *cc)
{
	if (cc == NULL)
		return;
	if (cc->ssl != NULL) {
		SSL_free(cc->ssl);
		pthread_mutex_destroy(&cc->tmu);
	}
	if (cc->fd >= 0)
		close(cc->fd);
	free(cc);
}

static int wait_fd(int fd, short events, const struct client_op *op);
static int wait_fd_until(int fd, short events, int64_t deadline_ms);

/* ---- TLS ----------------------------------------------------------------------
 *
 * cc_tls_read and cc_tls_write behave as read(2) and write(2) on a
 * non-blocking socket: bytes, 0 at the end, or -1 with errno (EAGAIN with
 * *ret_wait the poll event to wait for, EPROTO when TLS failed: tls_why
 * says why, on the same thread, before any other OpenSSL call). */

/* What OpenSSL said of the last failure on this thread, in one line. */
static void tls_why(SSL *ssl, char *out, size_t len)
{
	unsigned long e = ERR_peek_error();
	long v = ssl != NULL ? SSL_get_verify_result(ssl) : X509_V_OK;
	const char *r = e != 0 ? ERR_reason_error_string(e) : NULL;

	if (v != X509_V_OK)
		snprintf(out, len, "certificate verify failed: %s",
		         X509_verify_cert_error_string(v));
	else
		snprintf(out, len, "%s", r != NULL ? r : "the connection was closed");
	ERR_clear_error();
}

static ssize_t tls_result(SSL *ssl, int rv, short *ret_wait)
{
	switch (SSL_get_error(ssl, rv)) {
	case SSL_ERROR_WANT_READ:
		*ret_wait = POLLIN;
		errno = EAGAIN;
		return -1;
	case SSL_ERROR_WANT_WRITE:
		*ret_wait = POLLOUT;
		errno = EAGAIN;
		return -1;
	case SSL_ERROR_ZERO_RETURN:
		return 0;
	case SSL_ERROR_SYSCALL:
		if (ERR_peek_error() != 0) {
			errno = EPROTO;
			return -1;
		}
		if (errno == 0 || errno == EAGAIN)
			errno = ECONNRESET;
		return -1;
	default:
		errno = EPROTO;
		return -1;
	}
}

static ssize_t cc_tls_read(struct cconn *cc, void *buf, size_t len, short *ret_wait)
{
	size_t n = 0;
	ssize_t rv;
	int r;

	pthread_mutex_lock(&cc->tmu);
	ERR_clear_error();
	errno = 0;
	r = SSL_read_ex(cc->ssl, buf, len, &n);
	rv = r == 1 ? (ssize_t)n : tls_result(cc->ssl, r, ret_wait);
	pthread_mutex_unlock(&cc->tmu);
	return rv;
}

static ssize_t cc_tls_write(struct cconn *cc, const void *buf, size_t len, short *ret_wait)
{
	size_t n = 0;
	ssize_t rv;
	int r;

	pthread_mutex_lock(&cc->tmu);
	ERR_clear_error();
	errno = 0;
	r = SSL_write_ex(cc->ssl, buf, len, &n);
	rv = r == 1 ? (ssize_t)n : tls_result(cc->ssl, r, ret_wait);
	pthread_mutex_unlock(&cc->tmu);
	if (rv == 0)
		errno = EPIPE, rv = -1;
	return rv;
}

/* Whether OpenSSL holds bytes of cc not read yet (poll would not say). */
static bool cc_tls_pending(struct cconn *cc)
{
	bool p;

	pthread_mutex_lock(&cc->tmu);
	p = SSL_has_pending(cc->ssl) != 0;
	pthread_mutex_unlock(&cc->tmu);
	return p;
}

/* OpenSSL's socket BIO writes with write(2): a peer that closed would get
 * the program SIGPIPE, which a library must not (the plain path sends with
 * MSG_NOSIGNAL). This BIO is the socket BIO with send(MSG_NOSIGNAL) for its
 * writes; made once (pthread_once), kept for the process's life. */
static BIO_METHOD *nosig_method;
static pthread_once_t nosig_once = PTHREAD_ONCE_INIT;

static int nosig_write(BIO *b, const char *buf, int len)
{
	int fd = -1;
	ssize_t n;

	BIO_get_fd(b, &fd);
	BIO_clear_retry_flags(b);
	do
		n = send(fd, buf, (size_t)len, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		BIO_set_retry_write(b);
	return (int)n;
}

static void nosig_init(void)
{
	const BIO_METHOD *sock = BIO_s_socket();
	BIO_METHOD *m = BIO_meth_new(BIO_TYPE_SOCKET, "kvclient socket");

	if (m == NULL)
		return;
	if (BIO_meth_set_write(m, nosig_write) != 1 ||
	    BIO_meth_set_read(m, BIO_meth_get_read(sock)) != 1 ||
	    BIO_meth_set_puts(m, BIO_meth_get_puts(sock)) != 1 ||
	    BIO_meth_set_ctrl(m, BIO_meth_get_ctrl(sock)) != 1 ||
	    BIO_meth_set_create(m, BIO_meth_get_create(sock)) != 1 ||
	    BIO_meth_set_destroy(m, BIO_meth_get_destroy(sock)) != 1) {
		BIO_meth_free(m);
		return;
	}
	nosig_method = m;
}

/* ssl's BIO on fd (not owned): false without memory. */
static bool tls_set_socket(SSL *ssl, int fd)
{
	BIO *b;

	pthread_once(&nosig_once, nosig_init);
	if (nosig_method == NULL || (b = BIO_new(nosig_method)) == NULL)
		return false;
	BIO_set_fd(b, fd, BIO_NOCLOSE);
	SSL_set_bio(ssl, b, b);
	return true;
}

/* The client context of a kv+tls:// handle: TLS 1.2 at least, the server
 * verified (tls_ca_file, else the system's CAs), the client certificate of
 * kvc_open_tls. -KVC_INVALID_ARGUMENT when a file cannot be used. */
static int tls_ctx_new(struct cstream *s, const struct kvc_options *o)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	kvc *c = s->c;

	if (ctx == NULL)
		return -KVC_RESOURCE_EXHAUSTED;
	s->tls = ctx;
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_IGNORE_UNEXPECTED_EOF);
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	if ((o->tls_ca_file != NULL ? SSL_CTX_load_verify_locations(ctx, o->tls_ca_file, NULL)
	                            : SSL_CTX_set_default_verify_paths(ctx)) != 1)
		goto bad;
	if (c->tls_cert != NULL &&
	    (SSL_CTX_use_certificate_chain_file(ctx, c->tls_cert) != 1 ||
	     SSL_CTX_use_PrivateKey_file(ctx, c->tls_key, SSL_FILETYPE_PEM) != 1 ||
	     SSL_CTX_check_private_key(ctx) != 1))
		goto bad;
	s->tls_name = o->tls_server_name != NULL && o->tls_server_name[0] != '\0'
	                      ? o->tls_server_name
	                      : s->host;
	{
		unsigned char ip[16];
		s->tls_name_ip = inet_pton(AF_INET, s->tls_name, ip) == 1 ||
		                 inet_pton(AF_INET6, s->tls_name, ip) == 1;
	}
	ERR_clear_error();
	return 0;
bad:
	ERR_clear_error();
	return -KVC_INVALID_ARGUMENT;
}

/* The handshake on a connected cc, within the op's deadline. */
static int cc_tls_connect(struct cstream *s, struct cconn *cc, struct client_op *op)
{
	X509_VERIFY_PARAM *vp;
	char why[200];

	if ((cc->ssl = SSL_new(s->tls)) == NULL || !tls_set_socket(cc->ssl, cc->fd)) {
		SSL_free(cc->ssl);
		cc->ssl = NULL;
		ERR_clear_error();
		return client_op_fail(op, KVC_RESOURCE_EXHAUSTED, "out of memory");
	}
	pthread_mutex_init(&cc->tmu, NULL);
	vp = SSL_get0_param(cc->ssl);
	if (s->tls_name_ip ? X509_VERIFY_PARAM_set1_ip_asc(vp, s->tls_name) != 1
	                   : (SSL_set_tlsext_host_name(cc->ssl, s->tls_name) != 1 ||
	                      X509_VERIFY_PARAM_set1_host(vp, s->tls_name, 0) != 1)) {
		ERR_clear_error();
		return client_op_fail(op, KVC_INVALID_ARGUMENT, "TLS: bad server name '%s'",
		                      s->tls_name);
	}
	SSL_set_connect_state(cc->ssl);
	for (;;) {
		short ev = 0;
		int r;

		ERR_clear_error();
		errno = 0;
		if ((r = SSL_do_handshake(cc->ssl)) == 1)
			return 0;
		if (tls_result(cc->ssl, r, &ev) < 0 && errno == EAGAIN) {
			if (wait_fd(cc->fd, ev, op) == -ETIMEDOUT)
				return client_op_fail(op, KVC_DEADLINE_EXCEEDED,
				                      "TLS handshake with %s not done within %u ms",
				                      s->endpoint, op->timeout_ms);
			continue;
		}
		tls_why(cc->ssl, why, sizeof(why));
		return client_op_fail(op, KVC_UNAVAILABLE, "TLS handshake with %s failed: %s",
		                      s->endpoint, why);
	}
}

static int remaining_ms(const struct client_op *op)
{
	int64_t left = op->deadline_ms - client_now_ms();

	return left < 0 ? 0 : left > INT32_MAX ? INT32_MAX : (int)left;
}

/* Waits for events on fd within the op's deadline: 0, or -ETIMEDOUT. */
static int wait_fd(int fd, short events, const struct client_op *op)
{
	for (;;) {
		struct pollfd p = {fd, events, 0};
		int n = poll(&p, 1, remaining_ms(op));

		if (n > 0)
			return 0;
		if (n == 0)
			return -ETIMEDOUT;
		if (errno != EINTR)
			return -errno;
	}
}

static const char *dial_text(int err)
{
	switch (err) {
	case ECONNREFUSED:
		return "connection refused";
	case ENOENT:
		return "no such socket (is kvd listening there?)";
	case EACCES:
	case EPERM:
		return "permission denied";
	case ENETUNREACH:
	case EHOSTUNREACH:
		return "unreachable";
	default:
		return strerror(err);
	}
}

/* Connects fd to addr within the op's deadline: 0 or -errno. */
static int connect_within(int fd, const struct sockaddr *addr, socklen_t len,
                          const struct client_op *op)
{
	int err = 0, rv;
	socklen_t el = sizeof(err);

	if (connect(fd, addr, len) == 0)
		return 0;
	if (errno != EINPROGRESS && errno != EAGAIN)
		return -errno;
	if ((rv = wait_fd(fd, POLLOUT, op)) != 0)
		return rv;
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0)
		return -errno;
	return err ? -err : 0;
}

static int cc_dial(struct cstream *s, struct client_op *op, struct cconn **ret)
{
	struct cconn *cc = calloc(1, sizeof(*cc));
	int fd = -1, rv = -ECONNREFUSED, one = 1;

	if (cc == NULL)
		return client_op_fail(op, KVC_RESOURCE_EXHAUSTED, "out of memory");
	if (s->unix_socket) {
		/* A Unix connect is immediate unless the backlog is full; then a
		 * non-blocking one only says EAGAIN, so block, bounded by the
		 * send timeout, which connect honours on Unix sockets. */
		int ms = remaining_ms(op);
		struct timeval tv = {ms / 1000, (ms % 1000) * 1000}, none = {0, 0};

		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			rv = -errno;
		else if (ms == 0)
			rv = -ETIMEDOUT;
		else if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0 ||
		         (connect(fd, (struct sockaddr *)&s->sun, sizeof(s->sun)) != 0 &&
		          errno != EISCONN))
			rv = errno == EAGAIN || errno == EINPROGRESS ? -ETIMEDOUT : -errno;
		else if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &none, sizeof(none)) != 0 ||
		         fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0)
			rv = -errno;
		else
			rv = 0;
	} else {
		struct addrinfo hints = {.ai_family = AF_UNSPEC,
		                         .ai_socktype = SOCK_STREAM,
		                         .ai_flags = AI_NUMERICSERV},
		                *res = NULL, *a;
		int g = getaddrinfo(s->host, s->port, &hints, &res);

		if (g != 0) {
			free(cc);
			return client_op_fail(op, KVC_UNAVAILABLE, "cannot reach %s: %s",
			                      s->endpoint, gai_strerror(g));
		}
		for (a = res; a != NULL; a = a->ai_next) {
			fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
			            a->ai_protocol);
			if (fd < 0) {
				rv = -errno;
				continue;
			}
			if ((rv = connect_within(fd, a->ai_addr, a->ai_addrlen, op)) == 0)
				break;
			close(fd);
			fd = -1;
			if (rv == -ETIMEDOUT)
				break;
		}
		freeaddrinfo(res);
		if (fd >= 0)
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	}
	if (rv != 0) {
		if (fd >= 0)
			close(fd);
		free(cc);
		if (rv == -ETIMEDOUT)
			return client_op_fail(op, KVC_DEADLINE_EXCEEDED,
			                      "cannot reach %s: not connected within %u ms",
			                      s->endpoint, op->timeout_ms);
		return client_op_fail(op, KVC_UNAVAILABLE, "cannot reach %s: %s", s->endpoint,
		                      dial_text(-rv));
	}
	cc->fd = fd;
	if (s->tls != NULL && (rv = cc_tls_connect(s, cc, op)) != 0) {
		cc_close(cc);
		return rv;
	}
	*ret = cc;
	return 0;
}

/* A pooled connection that turned readable while nobody waited for a reply
 * was closed by the server (or is out of step): not to be used. Checked
 * (one poll) only for a connection idle for CS_STALE_MS or more: one used a
 * moment ago is taken as is (if the server went away in between, the call
 * fails with UNAVAILABLE; it was not received). */
static bool cc_stale(const struct cconn *cc, int64_t now)
{
	struct pollfd p = {cc->fd, POLLIN, 0};

	if (now - cc->idle_since_ms < CS_STALE_MS)
		return false;
	return poll(&p, 1, 0) != 0;
}

/* The status of a failed send (rv from cc_send_msg), said in op. */
static int send_failed(struct cstream *s, struct client_op *op, int rv)
{
	if (rv == 0)
		return 0;
	if (rv == -ETIMEDOUT)
		return client_op_fail(op, KVC_DEADLINE_EXCEEDED, "request not sent within %u ms",
		                      op->timeout_ms);
	return client_op_fail(op, KVC_UNAVAILABLE, "lost connection to %s", s->endpoint);
}

/* Waits for events on fd until the monotonic deadline: 0, or -ETIMEDOUT. */
static int wait_fd_until(int fd, short events, int64_t deadline_ms)
{
	for (;;) {
		int64_t left = deadline_ms - client_now_ms();
		struct pollfd p = {fd, events, 0};
		int n = poll(&p, 1, left < 0 ? 0 : left > INT32_MAX ? INT32_MAX : (int)left);

		if (n > 0)
			return 0;
		if (n == 0)
			return -ETIMEDOUT;
		if (errno != EINTR)
			return -errno;
	}
}

/* cc_send_msg on TLS: [hello] header body in one buffer, so that they go
 * out as one record where they fit in one (a record per part would cost
 * a record's overhead and, often, a packet each). */
static int cc_tls_send_msg(struct cconn *cc, const uint8_t *hdr, const struct client_buf *m,
                           int64_t deadline_ms)
{
	size_t pre = (cc->hello_sent ? 0 : WIRE_HELLO_LEN) + WIRE_FRAME_HDR, total = pre + m->len,
	       off = 0;
	uint8_t small[4096], *buf = total <= sizeof(small) ? small : malloc(total);

	if (buf == NULL)
		return -ENOMEM;
	if (!cc->hello_sent)
		memcpy(buf, cs_hello, WIRE_HELLO_LEN);
	memcpy(buf + pre - WIRE_FRAME_HDR, hdr, WIRE_FRAME_HDR);
	memcpy(buf + pre, m->data, m->len);
	while (off < total) {
		short ev = 0;
		ssize_t w = cc_tls_write(cc, buf + off, total - off, &ev);
		if (w > 0) {
			off += (size_t)w;
			continue;
		}
		if (w < 0 && errno == EAGAIN && wait_fd_until(cc->fd, ev, deadline_ms) == 0)
			continue;
		if (buf != small)
			free(buf);
		return w < 0 && errno == EAGAIN ? -ETIMEDOUT : -EPIPE;
	}
	if (buf != small)
		free(buf);
	cc->hello_sent = true;
	return 0;
}

/* Sends [hello] header body, all of it, by the deadline: 0, -ETIMEDOUT,
 * or -EPIPE (the connection is gone). Touches nothing but cc and m, so an
 * async request's op may be completed by the reader meanwhile. */
static int cc_send_msg(struct cconn *cc, const struct client_buf *m, int64_t deadline_ms)
{
	size_t len = m->len, off = 0, total;
	uint8_t hdr[WIRE_FRAME_HDR];
	struct iovec all[3];
	int n = 0;

	wire_frame_hdr_put(hdr, (uint32_t)len);
	if (cc->ssl != NULL)
		return cc_tls_send_msg(cc, hdr, m, deadline_ms);

	if (!cc->hello_sent)
		all[n++] = (struct iovec){(void *)cs_hello, WIRE_HELLO_LEN};
	all[n++] = (struct iovec){hdr, sizeof(hdr)};
	all[n++] = (struct iovec){m->data, len};
	total = (cc->hello_sent ? 0 : WIRE_HELLO_LEN) + sizeof(hdr) + len;
	while (off < total) {
		struct iovec iov[3];
		struct msghdr mh = {.msg_iov = iov};
		size_t skip = off;
		ssize_t w;
		int k;

		for (k = 0; k < n; k++) {
			if (skip >= all[k].iov_len) {
				skip -= all[k].iov_len;
				continue;
			}
			iov[mh.msg_iovlen++] = (struct iovec){(uint8_t *)all[k].iov_base + skip,
			                                      all[k].iov_len - skip};
			skip = 0;
		}
		w = sendmsg(cc->fd, &mh, MSG_NOSIGNAL);
		if (w > 0) {
			off += (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			if (wait_fd_until(cc->fd, POLLOUT, deadline_ms) == -ETIMEDOUT)
				return -ETIMEDOUT;
			continue;
		}
		return -EPIPE;
	}
	cc->hello_sent = true;
	return 0;
}

/* cc_send_msg of op's request, its failure said in op. */
static int cc_send(struct cstream *s, struct cconn *cc, struct client_op *op,
                   const struct client_buf *m)
{
	return send_failed(s, op, cc_send_msg(cc, m, op->deadline_ms));
}

/* Reads up to cap bytes (at least one) within the op's deadline; wait
 * first: poll before the first read (a reply just asked for is not there
 * yet, so a read would only say EAGAIN). */
static int cc_read_some(struct cstream *s, struct cconn *cc, struct client_op *op, void *buf,
                        size_t cap, size_t *ret, bool wait_first)
{
	bool wait = wait_first && (cc->ssl == NULL || !cc_tls_pending(cc));
	short ev = POLLIN;
	char why[200];

	for (;;) {
		ssize_t n;

		if (wait && wait_fd(cc->fd, ev, op) == -ETIMEDOUT)
			return client_op_fail(op, KVC_DEADLINE_EXCEEDED, "no reply within %u ms",
			                      op->timeout_ms);
		ev = POLLIN;
		n = cc->ssl != NULL ? cc_tls_read(cc, buf, cap, &ev) : read(cc->fd, buf, cap);
		if (n > 0) {
			cc->got_bytes = true;
			*ret = (size_t)n;
			return 0;
		}
		/* EINTR: read again at once; EAGAIN: wait for the reply first */
		wait = n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
		if (wait || (n < 0 && errno == EINTR))
			continue;
		if (n < 0 && errno == EPROTO) {
			/* the server's alert says why (a certificate it refused…) */
			tls_why(cc->ssl, why, sizeof(why));
			return client_op_fail(op, KVC_UNAVAILABLE, "lost connection to %s: TLS: %s",
			                      s->endpoint, why);
		}
		if (!cc->hello_read && !cc->got_bytes)
			return client_op_fail(op, KVC_UNAVAILABLE,
			                      "%s closed the connection before its hello (its "
			                      "max_connections reached?)",
			                      s->endpoint);
		return client_op_fail(op, KVC_UNAVAILABLE, "lost connection to %s", s->endpoint);
	}
}

static int not_a_stream_server(struct cstream *s, struct client_op *op, const uint8_t *got)
{
	if (got[0] == 0 && got[1] == 'S' && got[2] == 'P' && got[3] == 0)
		return client_op_fail(op, KVC_UNAVAILABLE,
		                      "%s is an nng REQ/REP listener, not a kv+ stream one "
		                      "(use ipc:// or tcp:// for it)",
		                      s->endpoint);
	return client_op_fail(op, KVC_UNAVAILABLE, "%s is not a kvd stream listener (bad hello)",
	                      s->endpoint);
}

/* Reads the one reply (after the server's hello on a new connection) into
 * op->reply. */
static int cc_recv(struct cstream *s, struct cconn *cc, struct client_op *op)
{
	uint8_t small[CS_READ_SMALL];
	size_t have = 0, need = cc->hello_read ? 0 : WIRE_HELLO_LEN, len, got, off;
	uint8_t *m;
	int rv;

	/* the hello and the header, and what came with them */
	while (have < need + WIRE_FRAME_HDR) {
		if ((rv = cc_read_some(s, cc, op, small + have, sizeof(small) - have, &got,
		                       have == 0)) != 0)
			return rv;
		have += got;
		if (!cc->hello_read && have >= WIRE_HELLO_LEN) {
			if (memcmp(small, cs_hello, WIRE_HELLO_LEN) != 0)
				return not_a_stream_server(s, op, small);
			cc->hello_read = true;
		}
	}
	off = need;
	len = wire_frame_hdr_get(small + off);
	off += WIRE_FRAME_HDR;
	if (len == 0)
		return client_op_fail(op, KVC_INTERNAL, "malformed reply to %s: an empty frame",
		                      op->method);
	if (len > s->max_message_size)
		return client_op_fail(op, KVC_RESOURCE_EXHAUSTED,
		                      "reply of %zu bytes exceeds max_message_size %zu", len,
		                      s->max_message_size);
	if (have - off > len)
		return client_op_fail(op, KVC_INTERNAL,
		                      "malformed reply to %s: bytes after the reply", op->method);
	if ((m = malloc(len)) == NULL)
		return client_op_fail(op, KVC_RESOURCE_EXHAUSTED,
		                      "out of memory for a reply of %zu bytes", len);
	memcpy(m, small + off, have - off);
	got = have - off;
	while (got < len) {
		size_t n;
		if ((rv = cc_read_some(s, cc, op, m + got, len - got, &n, false)) != 0) {
			free(m);
			return rv;
		}
		got += n;
	}
	op->reply = (struct client_buf){.data = m, .len = len, .cap = len};
	return 0;
}

/* ---- slots ------------------------------------------------------------------- */

/* Waits for room (invariant 1) within the op's deadline. */
static int slot_take_locked(struct cstream *s, struct client_op *op)
{
	int rv = 0;

	while (!s->closing && s->in_flight >= s->max && rv != ETIMEDOUT)
		rv = client_cond_wait_until(&s->cv, &s->mu, op->deadline_ms);
	if (s->closing)
		return client_op_fail(op, KVC_CANCELLED, "the handle is being closed");
	if (s->in_flight >= s->max)
		return client_op_fail(op, KVC_DEADLINE_EXCEEDED,
		                      "no free context within %u ms (%u requests in flight)",
		                      op->timeout_ms, s->in_flight);
	s->in_flight++;
	return 0;
}

static void slot_give_locked(struct cstream *s)
{
	s->in_flight--;
	pthread_cond_signal(&s->cv);
	if (s->in_flight == 0)
		pthread_cond_broadcast(&s->idle_cv);
}

/* ---- blocking calls ---------------------------------------------------------- */

static int cstream_run(void *t, struct client_op *op)
{
	struct cstream *s = t;
	struct cconn *cc, *stale = NULL;
	int64_t now;
	int rv;

	pthread_mutex_lock(&s->mu);
	if ((rv = slot_take_locked(s, op)) != 0) {
		pthread_mutex_unlock(&s->mu);
		return rv;
	}
	now = client_now_ms();
	while ((cc = s->idle) != NULL) {
		s->idle = cc->next;
		if (!cc_stale(cc, now))
			break;
		cc->next = stale;
		stale = cc;
	}
	pthread_mutex_unlock(&s->mu);
	while (stale != NULL) {
		struct cconn *next = stale->next;
		cc_close(stale);
		stale = next;
	}
	if (cc == NULL && (rv = cc_dial(s, op, &cc)) != 0) {
		op->unsent = true; /* no connection: nothing was sent */
		goto out;
	}
	rv = cc_send(s, cc, op, &op->req);
	/* a server that refused the request may have answered before it
	 * closed: that answer says more than the broken pipe */
	if ((rv == 0 || rv == -KVC_UNAVAILABLE) && cc_recv(s, cc, op) == 0)
		rv = 0;
	else if (rv == 0)
		rv = -op->st.code;
	if (rv != 0) {
		cc_close(cc);
		goto out;
	}
	cc->idle_since_ms = client_now_ms();
	pthread_mutex_lock(&s->mu);
	cc->next = s->idle;
	s->idle = cc;
	pthread_mutex_unlock(&s->mu);
	rv = op->raw ? 0 : client_op_decode_reply(op);
out:
	pthread_mutex_lock(&s->mu);
	slot_give_locked(s);
	pthread_mutex_unlock(&s->mu);
	return rv;
}

/* ---- asynchronous calls ------------------------------------------------------ */

static struct apend **pend_slot(struct cstream *s, uint64_t id)
{
	return &s->bucket[(id * 0x9e3779b97f4a7c15ull >> 32) & (s->nbucket - 1)];
}

/* With s->mu held: removes and returns the pending request id, or NULL. */
static struct client_op *pend_take_locked(struct cstream *s, uint64_t id)
{
	struct apend **pp, *p;
	struct client_op *op;

	for (pp = pend_slot(s, id); (p = *pp) != NULL; pp = &p->next) {
		if (p->id == id) {
			*pp = p->next;
			op = p->op;
			free(p);
			s->npend--;
			return op;
		}
	}
	return NULL;
}

/* Runs an async request's completion (no lock held) and gives its slot
 * back. */
static void async_complete(struct cstream *s, struct client_op *op, int rv)
{
	op->rv = rv;
	if (rv == 0)
		client_status_set(&op->st, KVC_OK, "", 0);
	op->complete(op);
	client_op_free(op);
	pthread_mutex_lock(&s->mu);
	slot_give_locked(s);
	pthread_mutex_unlock(&s->mu);
}

/* Reader: the async connection failed; every request on it fails. */
static void async_lost(struct cstream *s, int code, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

static void async_lost(struct cstream *s, int code, const char *fmt, ...)
{
	struct client_op *failed = NULL, *op;
	char why[KVC_MESSAGE_MAX];
	struct cconn *cc;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&s->wmu);
	pthread_mutex_lock(&s->mu);
	cc = s->ac;
	s->ac = NULL;
	if (s->refused[0] != '\0') {
		snprintf(why, sizeof(why),
		         "connection closed after the server refused a request: %.200s",
		         s->refused);
		s->refused[0] = '\0';
	}
	for (uint32_t b = 0; b < s->nbucket; b++) {
		struct apend *p;
		while ((p = s->bucket[b]) != NULL) {
			s->bucket[b] = p->next;
			p->op->complete_next = failed;
			failed = p->op;
			free(p);
			s->npend--;
		}
	}
	pthread_mutex_unlock(&s->mu);
	pthread_mutex_unlock(&s->wmu);
	cc_close(cc);
	s->rlen = 0;
	while ((op = failed) != NULL) {
		failed = op->complete_next;
		async_complete(s, op, client_op_fail(op, code, "%s", why));
	}
}

/* Reader: one reply frame. false: the connection cannot go on. */
static bool async_reply(struct cstream *s, const uint8_t *p, size_t len)
{
	msgpack_zone zone;
	msgpack_object root;
	struct crep_envelope env;
	struct client_op *op;
	uint8_t *m;
	int rv;

	if ((m = malloc(len)) == NULL) {
		async_lost(s, KVC_RESOURCE_EXHAUSTED, "out of memory for a reply of %zu bytes",
		           len);
		return false;
	}
	memcpy(m, p, len);
	if ((rv = client_reply_parse(m, len, &zone, &root, &env)) != 0) {
		free(m);
		async_lost(s, rv == -KVC_RESOURCE_EXHAUSTED ? KVC_RESOURCE_EXHAUSTED : KVC_INTERNAL,
		           rv == -KVC_RESOURCE_EXHAUSTED ? "out of memory for a reply"
		                                         : "malformed reply from %s",
		           s->endpoint);
		return false;
	}
	pthread_mutex_lock(&s->mu);
	op = env.id != 0 ? pend_take_locked(s, env.id) : NULL;
	if (op == NULL && env.id == 0 && env.status != 0) {
		/* a request the server could not read: it closes the connection
		 * next, and that failure carries this message */
		size_t n = env.message_len < sizeof(s->refused) - 1 ? env.message_len
		                                                    : sizeof(s->refused) - 1;
		memcpy(s->refused, env.message != NULL ? env.message : "", n);
		s->refused[n] = '\0';
	}
	pthread_mutex_unlock(&s->mu);
	if (op == NULL) {
		/* a request that already failed (deadline): dropped */
		msgpack_zone_destroy(&zone);
		free(m);
		return true;
	}
	op->reply = (struct client_buf){.data = m, .len = len, .cap = len};
	op->zone = zone; /* the zone's chunks move with it */
	op->zone_ready = true;
	op->root = root;
	op->env = env;
	async_complete(s, op, op->raw ? 0 : client_op_check_reply(op));
	return true;
}

/* Reader: takes the hello and every whole frame in rbuf. */
static bool async_parse(struct cstream *s, struct cconn *cc)
{
	size_t pos = 0;

	if (!cc->hello_read) {
		if (s->rlen < WIRE_HELLO_LEN)
			return true;
		if (memcmp(s->rbuf, cs_hello, WIRE_HELLO_LEN) != 0) {
			bool nng = s->rbuf[0] == 0 && s->rbuf[1] == 'S' && s->rbuf[2] == 'P';
			async_lost(
			        s, KVC_UNAVAILABLE, "%s is %s", s->endpoint,
			        nng ? "an nng REQ/REP listener, not a kv+ stream one (use ipc:// "
			              "or tcp:// for it)"
			            : "not a kvd stream listener (bad hello)");
			return false;
		}
		cc->hello_read = true;
		pos = WIRE_HELLO_LEN;
	}
	while (s->rlen - pos >= WIRE_FRAME_HDR) {
		const uint8_t *h = s->rbuf + pos;
		size_t len = wire_frame_hdr_get(h);

		if (len == 0 || len > s->max_message_size) {
			async_lost(s, len == 0 ? KVC_INTERNAL : KVC_RESOURCE_EXHAUSTED,
			           len == 0 ? "malformed reply from %s: an empty frame"
			                    : "reply from %s exceeds max_message_size",
			           s->endpoint);
			return false;
		}
		if (s->rlen - pos - WIRE_FRAME_HDR < len)
			break;
		if (!async_reply(s, h + WIRE_FRAME_HDR, len))
			return false;
		pos += WIRE_FRAME_HDR + len;
	}
	memmove(s->rbuf, s->rbuf + pos, s->rlen - pos);
	s->rlen -= pos;
	return true;
}

/* Reader: room for the frame being read (its header may say how big). */
static bool rbuf_reserve(struct cstream *s, const struct cconn *cc)
{
	size_t want = s->rlen + CS_READ_CHUNK, off = cc->hello_read ? 0 : WIRE_HELLO_LEN;
	uint8_t *n;

	if (s->rlen >= off + WIRE_FRAME_HDR) {
		const uint8_t *h = s->rbuf + off;
		size_t len = wire_frame_hdr_get(h);
		if (len <= s->max_message_size && off + WIRE_FRAME_HDR + len > want)
			want = off + WIRE_FRAME_HDR + len;
	}
	if (want <= s->rcap)
		return true;
	if ((n = realloc(s->rbuf, want)) == NULL)
		return false;
	s->rbuf = n;
	s->rcap = want;
	return true;
}

/* Reader: fails the requests whose deadline passed; returns the next
 * deadline (INT64_MAX: none). */
static int64_t async_expire(struct cstream *s)
{
	struct client_op *expired = NULL, *op;
	int64_t now = client_now_ms(), next = INT64_MAX;

	pthread_mutex_lock(&s->mu);
	for (uint32_t b = 0; b < s->nbucket; b++) {
		struct apend **pp = &s->bucket[b], *p;
		while ((p = *pp) != NULL) {
			if (p->op->deadline_ms <= now) {
				*pp = p->next;
				p->op->complete_next = expired;
				expired = p->op;
				free(p);
				s->npend--;
				continue;
			}
			if (p->op->deadline_ms < next)
				next = p->op->deadline_ms;
			pp = &p->next;
		}
	}
	s->reader_deadline = next;
	pthread_mutex_unlock(&s->mu);
	while ((op = expired) != NULL) {
		expired = op->complete_next;
		async_complete(s, op,
		               client_op_fail(op, KVC_DEADLINE_EXCEEDED, "no reply within %u ms",
		                              op->timeout_ms));
	}
	return next;
}

static void *reader_main(void *arg)
{
	struct cstream *s = arg;

	for (;;) {
		struct pollfd p[2] = {{s->wakefd, POLLIN, 0}, {-1, s->rd_wait, 0}};
		int64_t next = async_expire(s), now;
		struct cconn *cc;
		int timeout, n;
		bool quit;

		pthread_mutex_lock(&s->mu);
		quit = s->reader_quit;
		cc = s->ac;
		p[1].fd = cc != NULL ? cc->fd : -1;
		pthread_mutex_unlock(&s->mu);
		if (quit)
			break;
		now = client_now_ms();
		timeout = next == INT64_MAX    ? -1
		          : next <= now        ? 0
		          : next - now > 60000 ? 60000
		                               : (int)(next - now);
		n = poll(p, 2, timeout);
		if (n < 0 && errno != EINTR)
			break;
		if (n <= 0)
			continue;
		if (p[0].revents & POLLIN) {
			uint64_t v;
			if (read(s->wakefd, &v, sizeof(v)) < 0 && errno != EAGAIN)
				break;
		}
		if (cc == NULL || !(p[1].revents & (POLLIN | POLLOUT | POLLHUP | POLLERR)))
			continue;
		/* cc stays current: only this thread replaces it */
		if (!rbuf_reserve(s, cc)) {
			async_lost(s, KVC_RESOURCE_EXHAUSTED, "out of memory for a reply");
			continue;
		}
		for (;;) {
			short ev = POLLIN;
			ssize_t r =
			        cc->ssl != NULL
			                ? cc_tls_read(cc, s->rbuf + s->rlen, s->rcap - s->rlen, &ev)
			                : read(cc->fd, s->rbuf + s->rlen, s->rcap - s->rlen);
			s->rd_wait = ev;
			if (r > 0) {
				s->rlen += (size_t)r;
				if (!async_parse(s, cc))
					break;
				/* TLS: a read is one record; read on until OpenSSL wants
				 * the socket (poll does not see what it holds) */
				if (cc->ssl != NULL && rbuf_reserve(s, cc))
					continue;
				break;
			}
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
				break;
			if (r < 0 && errno == EPROTO) {
				char why[200];
				tls_why(cc->ssl, why, sizeof(why));
				async_lost(s, KVC_UNAVAILABLE, "lost connection to %s: TLS: %s",
				           s->endpoint, why);
				break;
			}
			async_lost(s, KVC_UNAVAILABLE, "lost connection to %s", s->endpoint);
			break;
		}
	}
	return NULL;
}

static void reader_wake(struct cstream *s)
{
	uint64_t one = 1;

	if (write(s->wakefd, &one, sizeof(one)) < 0) {
		/* the counter is full: the reader has a wake-up pending anyway */
	}
}

static int cstream_send_async(void *t, struct client_op *op)
{
	struct cstream *s = t;
	struct cconn *cc;
	struct apend *p;
	int64_t deadline;
	uint64_t id;
	struct client_buf m;
	bool wake;
	int rv;

	if ((p = malloc(sizeof(*p))) == NULL)
		return client_op_fail(op, KVC_RESOURCE_EXHAUSTED, "out of memory");
	pthread_mutex_lock(&s->mu);
	if (s->reader_started && pthread_equal(pthread_self(), s->reader) &&
	    s->in_flight >= s->max) {
		/* a completion waiting for a slot would wait for itself */
		pthread_mutex_unlock(&s->mu);
		free(p);
		return client_op_fail(op, KVC_RESOURCE_EXHAUSTED,
		                      "all %u contexts busy (called from a completion)", s->max);
	}
	if ((rv = slot_take_locked(s, op)) != 0)
		goto fail;
	if (s->ac == NULL && (rv = cc_dial(s, op, &s->ac)) != 0) {
		slot_give_locked(s);
		goto fail;
	}
	if (!s->reader_started) {
		if (pthread_create(&s->reader, NULL, reader_main, s) != 0) {
			slot_give_locked(s);
			rv = client_op_fail(op, KVC_RESOURCE_EXHAUSTED, "cannot start a thread");
			goto fail;
		}
		s->reader_started = true;
	}
	/* From the moment op is pending the reader may complete and free it
	 * (its reply, its deadline, a lost connection): what the send needs is
	 * taken out first, and op is touched again only if the send fails and
	 * op is still pending (then it is the caller's again). */
	id = op->id;
	deadline = op->deadline_ms;
	m = client_op_take_request(op);
	p->id = id;
	p->op = op;
	p->next = *pend_slot(s, id);
	*pend_slot(s, id) = p;
	s->npend++;
	wake = deadline < s->reader_deadline || s->npend == 1;
	if (wake)
		s->reader_deadline = deadline;
	cc = s->ac;
	pthread_mutex_unlock(&s->mu);
	if (wake)
		reader_wake(s); /* it polls the new connection, or the new deadline */

	pthread_mutex_lock(&s->wmu);
	pthread_mutex_lock(&s->mu);
	if (s->ac != cc) {
		/* lost (and op failed) before it could be written */
		pthread_mutex_unlock(&s->mu);
		pthread_mutex_unlock(&s->wmu);
		client_buf_free(&m);
		return 0;
	}
	pthread_mutex_unlock(&s->mu);
	rv = cc_send_msg(cc, &m, deadline);
	if (rv != 0)
		shutdown(cc->fd, SHUT_RDWR); /* a frame may be half out: the reader ends it */
	pthread_mutex_unlock(&s->wmu);
	client_buf_free(&m);
	if (rv == 0)
		return 0;
	pthread_mutex_lock(&s->mu);
	if (pend_take_locked(s, id) != op) {
		/* the reader failed it already, and ran its completion */
		pthread_mutex_unlock(&s->mu);
		return 0;
	}
	slot_give_locked(s);
	pthread_mutex_unlock(&s->mu);
	return send_failed(s, op, rv);
fail:
	pthread_mutex_unlock(&s->mu);
	free(p);
	return rv;
}

/* ---- open and close ---------------------------------------------------------- */

static int cstream_open(kvc *c, const struct kvc_options *o, void **ret)
{
	const char *endpoint = c->endpoint;
	uint32_t max_in_flight = c->contexts;
	size_t max_message_size = c->max_message_size;
	struct cstream *s = calloc(1, sizeof(*s));
	int rv;

	const char *rest = endpoint + 9;

	if (s == NULL)
		return -KVC_RESOURCE_EXHAUSTED;
	s->c = c;
	s->endpoint = endpoint;
	s->max = max_in_flight;
	s->max_message_size = max_message_size;
	s->reader_deadline = INT64_MAX;
	s->wakefd = -1;
	s->rd_wait = POLLIN;
	if (strncmp(endpoint, "kv+ipc://", 9) == 0) {
		size_t n = strlen(rest);
		s->unix_socket = true;
		s->sun.sun_family = AF_UNIX;
		if (n == 0 || n >= sizeof(s->sun.sun_path))
			goto bad;
		memcpy(s->sun.sun_path, rest, n + 1);
	} else {
		if (rpc_hostport_split(rest, s->host, sizeof(s->host), s->port, sizeof(s->port)) !=
		            0 ||
		    s->host[0] == '\0')
			goto bad;
		if (strncmp(endpoint, "kv+tls://", 9) == 0 && (rv = tls_ctx_new(s, o)) != 0) {
			SSL_CTX_free(s->tls);
			free(s);
			return rv;
		}
	}
	for (s->nbucket = 1; s->nbucket < max_in_flight; s->nbucket *= 2)
		;
	if ((s->bucket = calloc(s->nbucket, sizeof(*s->bucket))) == NULL ||
	    (s->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0)
		goto nomem;
	pthread_mutex_init(&s->mu, NULL);
	pthread_mutex_init(&s->wmu, NULL);
	if (client_cond_init_monotonic(&s->cv) != 0 || client_cond_init_monotonic(&s->idle_cv) != 0)
		goto nomem; /* (cannot fail on Linux) */
	*ret = s;
	return 0;
bad:
	free(s);
	return -KVC_INVALID_ARGUMENT;
nomem:
	if (s->wakefd >= 0)
		close(s->wakefd);
	SSL_CTX_free(s->tls);
	free(s->bucket);
	free(s);
	return -KVC_RESOURCE_EXHAUSTED;
}

static void cstream_drain(void *t)
{
	struct cstream *s = t;

	pthread_mutex_lock(&s->mu);
	while (s->in_flight > 0)
		pthread_cond_wait(&s->idle_cv, &s->mu);
	pthread_mutex_unlock(&s->mu);
}

static void cstream_close(void *t)
{
	struct cstream *s = t;

	if (s == NULL)
		return;
	pthread_mutex_lock(&s->mu);
	s->closing = true;
	pthread_cond_broadcast(&s->cv);
	while (s->in_flight > 0)
		pthread_cond_wait(&s->idle_cv, &s->mu);
	s->reader_quit = true;
	pthread_mutex_unlock(&s->mu);
	if (s->reader_started) {
		reader_wake(s);
		pthread_join(s->reader, NULL);
	}
	while (s->idle != NULL) {
		struct cconn *cc = s->idle;
		s->idle = cc->next;
		cc_close(cc);
	}
	cc_close(s->ac);
	close(s->wakefd);
	SSL_CTX_free(s->tls);
	pthread_cond_destroy(&s->cv);
	pthread_cond_destroy(&s->idle_cv);
	pthread_mutex_destroy(&s->mu);
	pthread_mutex_destroy(&s->wmu);
	free(s->bucket);
	free(s->rbuf);
	free(s);
}

const struct client_transport client_stream_transport = {
        .name = "stream",
        .accepts = cstream_accepts,
        .open = cstream_open,
        .run = cstream_run,
        .send_async = cstream_send_async,
        .drain = cstream_drain,
        .close = cstream_close,
};
