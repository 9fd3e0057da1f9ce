/*
 * stream.c — kvd's own framing on stream sockets: kv+ipc://PATH (a Unix
 * socket), kv+tcp://HOST:PORT and kv+tls://HOST:PORT (TLS over TCP, the
 * OpenSSL calls in stream_tls.c). The same msgpack requests and replies as
 * over nng (rpc/PROTOCOL.md), each in a frame of a 4-byte big-endian length
 * and the body; many requests in flight on one connection, replies matched
 * by their id and sent as soon as each is ready (not in request order).
 *
 * Who does what:
 *   - the acceptor thread accepts on every kv+ listener, sends the server's
 *     hello (on kv+tls://: queues it behind the TLS handshake, which the
 *     reading worker drives) and hands the connection to a worker, round
 *     robin;
 *   - that worker reads it from its own loop (stream_event): frames are
 *     decoded and dispatched at once (request_dispatch runs the worker's own
 *     tenants' requests on the spot, queues the others on their owners);
 *     a connection whose requests keep going to one other worker's tenants
 *     moves to that worker (sconn_migrate_locked);
 *   - whichever thread answers a request writes the reply itself
 *     (sconn_job_reply): straight to the socket when nothing is queued
 *     before it, else behind the queued bytes, which the reading worker
 *     sends when the socket takes more (EPOLLOUT).
 *
 * Invariants:
 *   1. Only the reading worker (c->worker) reads a connection, registers or
 *      removes it in an epoll set, hands it to another worker, and closes
 *      its descriptor (under c->mu, setting c->dead). Everyone else only
 *      writes replies and changes the events asked for in c->worker's set,
 *      under c->mu, and never once c->dead is set.
 *   2. c->refs = 1 (the reader's, until it closed the connection) + requests
 *      in flight; the connection is freed by whoever drops the last one.
 *   3. A connection is not read while it has STREAM_IN_FLIGHT_MAX requests
 *      in flight or STREAM_OUT_MAX bytes of replies queued, so a client that
 *      does not read its replies costs kvd bounded memory. Replies to
 *      requests already taken still queue up; past sconn_out_hard() bytes
 *      (a client pipelining many reads of large values and not reading)
 *      the connection is ended, as Redis does past its client output
 *      buffer limit.
 *   4. c->events is what the epoll registration asks for; it changes only
 *      under c->mu (sconn_update_events).
 *   5. A frame the server cannot take (length 0 or over max_message_size, a
 *      bad hello) is answered with an error of id 0, and nothing more is
 *      taken from the connection: the rest of the stream cannot be trusted
 *      to be framed. Once that reply is out the server shuts its side down
 *      and reads and drops what the client still sends (at most
 *      STREAM_DISCARD_MAX bytes), so that a client still writing its
 *      request is not cut off with a reset before it read the answer. A
 *      job with end_conn set (too many unknown tokens, auth.c) ends its
 *      connection the same way after its reply.
 *   6. Memory a client can make kvd hold is bounded for all connections
 *      together, not only per connection: a frame larger than
 *      STREAM_SMALL_MAX is read only once input_budget granted its declared
 *      size (the "input budget" section below), and a connection with
 *      replies of its own queued is not read, and one holding over
 *      STREAM_OUT_SOFT is ended, while the reply queues of all connections
 *      pass output_budget (s->out_bytes).
 *   7. Time a client can hold a connection is bounded: a hello or frame
 *      must be whole within frame_timeout of its first byte (while kvd
 *      reads it), and with client_timeout set a connection with nothing
 *      received, in flight or queued for that long is ended (stream_sweep).
 *      Each listener has its own max_connections. On kv+tls:// the TLS
 *      handshake counts as part of the hello: it too must be done within
 *      frame_timeout of the connection's start.
 *   8. kv+tls://: c->ssl is used (SSL_do_handshake, SSL_read, SSL_write,
 *      SSL_shutdown) only with c->mu held, so no two threads ever use it at
 *      once (the reader reads under c->mu; a replying thread writes under
 *      it). A TLS call may need the other direction's socket event (a
 *      write that wants to read, a read that wants to write): it says so in
 *      c->tls_wr_want_read / c->tls_rd_want_write, sconn_update_events asks
 *      epoll for that event too, and stream_event retries the call when it
 *      comes. Decrypted bytes OpenSSL holds (c->tls_pending) wake the reader
 *      through EPOLLOUT as c->backlog does, since the socket will not say
 *      so. A plain connection (c->ssl NULL) takes none of these paths.
 *
 * Threads: the acceptor (which also sweeps deadlines); the workers (reading, writing queued
 * replies, answering); the maintenance thread (answering Compact); the main thread (stream_start,
 * stream_stop_accepting, stream_stop once the workers have stopped).
 */
#include "kvd.h"

#include "hostport.h"
#include "log.h"
#include "stream_sock.h"
#include "stream_tls.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#define STREAM_IN_MIN          (16u << 10)   /* a connection's input buffer, at least */
#define STREAM_IN_KEEP         STREAM_IN_MIN /* larger buffers are given back when empty */
#define STREAM_SMALL_MAX       (16u << 10)   /* larger frames are read under the input budget */
#define STREAM_BIG_FIRST       (64u << 10)   /* a large frame's first buffer (then doubled) */
#define STREAM_OUT_KEEP        (64u << 10)   /* larger reply queues are given back when empty */
#define STREAM_SWEEP_MS        1000          /* the acceptor checks deadlines this often */
#define STREAM_READ_BUDGET     (1u << 20)    /* bytes read from one connection per turn */
#define STREAM_IN_FLIGHT_MAX   1024u         /* requests in flight before reading pauses */
#define STREAM_OUT_MAX         (8u << 20)    /* queued reply bytes before reading pauses */
#define STREAM_OUT_SOFT        (1u << 20)    /* … that end it while output_budget is passed */
#define STREAM_OUT_HARD        (256u << 20)  /* queued reply bytes that end the connection */
#define STREAM_FLUSH_MS        2000         /* stream_stop's wait for queued replies */
#define STREAM_MIGRATE_AFTER   16           /* requests in a row for another worker's tenants */
#define STREAM_ACCEPT_PAUSE_MS 100          /* after EMFILE and the like */
#define STREAM_DISCARD_MAX     (128u << 20) /* bytes read and dropped after a framing error */

/* "kvd\0" and the framing version (rpc/wire.h). */
static const uint8_t stream_hello[WIRE_HELLO_LEN] = WIRE_HELLO_INIT;

struct sconn {
	struct watch watch; /* first: the worker's epoll events (stream_event) */
	struct stream *s;
	uint32_t worker; /* the worker whose loop reads it */
	/* the reading worker's alone */
	uint8_t *in;
	size_t in_len, in_cap;
	bool hello_read;
	uint8_t *big;   /* a large frame's body: big[0, big_got) of big_len */
	size_t big_len; /* 0: none pending */
	size_t big_got, big_cap;
	int foreign_owner; /* the worker owning the last requests' tenants, */
	uint32_t foreign;  /* when not this one: how many in a row */
	/* c->mu guards everything below */
	pthread_mutex_t mu;
	int fd;
	uint8_t *out; /* queued reply bytes: out[out_off, out_len) */
	size_t out_off, out_len, out_cap;
	uint32_t in_flight;
	uint32_t refs;
	uint32_t events;
	bool backlog;   /* the reader stopped parsing at a pause, frames may wait */
	bool eof;       /* the client will send no more: close once answered */
	bool fatal;     /* bad framing (or auth's end_conn): answer, shut down, drop the rest */
	bool wr_shut;   /* fatal: our side is shut down */
	size_t discard; /* fatal: bytes dropped so far */
	bool broken;    /* a write failed: the reader closes it */
	bool dead;      /* closed by the reader */
	/* under s->mu and c->mu both (either suffices to read) */
	bool in_wait; /* a large frame waits for the input budget (not read) */
	/* s->mu guards these */
	bool granted;              /* big_len is counted in s->in_granted */
	struct sconn *wnext;       /* s->wait_head's queue */
	struct sconn *prev, *next; /* s->conns */
	int li;                    /* the listener that accepted it */
	char peer[96];             /* who is at the other end, for the log (set at accept) */
	/* written by the reader, read by the acceptor's sweep (timeouts) */
	_Atomic uint64_t active_ms; /* the last bytes read from the client */
	_Atomic uint64_t frame_ms;  /* since when a hello or frame is incomplete; 0: none */
	/* kv+tls:// (last, so that a plain connection's fields lie as they
	 * did before TLS); c->mu guards them (invariant 8) */
	SSL *ssl;               /* the TLS connection; NULL: plain */
	bool tls_ready;         /* the handshake is done (the hello is queued) */
	bool tls_wr_want_read;  /* a TLS write waits for the socket to be readable */
	bool tls_rd_want_write; /* a TLS read (or the handshake) waits for it to be writable */
	bool tls_pending;       /* OpenSSL holds decrypted bytes not read yet */
	bool has_cert;          /* the client sent a certificate that verified: */
	uint8_t cert_fp[STLS_FP_LEN]; /* its SHA-256 (auth.c's cert-sha256: lines); written
	                                 once, before the first request is read */
};

/* A stream request: the job, and the input budget its body holds. */
struct sjob {
	struct job j; /* first */
	size_t granted;
};

struct stream {
	struct kvd *d;
	int lfd[KVD_LISTEN_MAX];
	char *path[KVD_LISTEN_MAX];      /* kv+ipc: the socket file, removed at the end */
	const char *url[KVD_LISTEN_MAX]; /* as configured (d->cfg.listen) */
	int nl;
	int epfd, stopfd;
	pthread_t acceptor;
	bool acceptor_running;
	pthread_mutex_t mu;
	struct sconn *conns;
	uint32_t nconns;
	uint32_t nconns_l[KVD_LISTEN_MAX]; /* per listener (max_connections each) */
	uint32_t next_worker;
	struct klog_limit refused_log[KVD_LISTEN_MAX];
	struct klog_limit timeout_log, accept_log, out_log, tls_log;
	SSL_CTX *tls;                /* kv+tls:// listeners' context; NULL: none */
	bool is_tls[KVD_LISTEN_MAX]; /* listener k is kv+tls:// */
	/* the input budget: bytes of large frames granted (counted at their
	 * declared size), and the connections waiting for some, oldest first */
	uint64_t in_budget, in_granted;
	struct sconn *wait_head, *wait_tail;
	/* the output budget: bytes of reply queues of every connection */
	_Atomic uint64_t out_bytes;
	/* connections the sweep closed (tests read them in the log) */
	uint64_t frame_timeouts, idle_timeouts;
};

bool stream_url(const char *url)
{
	return strncmp(url, "kv+ipc://", 9) == 0 || strncmp(url, "kv+tcp://", 9) == 0 ||
	       strncmp(url, "kv+tls://", 9) == 0;
}

/* ---- connections ---------------------------------------------------------- */

static void sconn_update_events(struct sconn *c);

/* ---- the input budget ------------------------------------------------------
 *
 * A frame of up to STREAM_SMALL_MAX bytes is read into the connection's own
 * buffer (at most about twice that). A larger one needs its declared size
 * from the input budget before its body is read: granted at once when
 * nobody waits and it fits, else the connection waits in s->wait_head's
 * queue without being read, and is granted in turn (oldest first) as
 * frames complete and their requests are answered. A granted body grows as
 * its bytes arrive (so memory follows what clients sent, not what they
 * declared), goes to its request as it is, and gives its grant back when
 * the request is answered. Since every grant is at most max_message_size
 * and the budget at least that, the queue always moves: large frames wait,
 * small ones never do, and memory held by partial frames stays within
 * input_budget plus STREAM_IN_MIN-ish per connection. */

/* With s->mu held: grants waiting connections their frames, oldest first,
 * while the budget has room. */
static void budget_grant_waiting_locked(struct stream *s)
{
	struct sconn *c;

	while ((c = s->wait_head) != NULL && s->in_granted + c->big_len <= s->in_budget) {
		s->wait_head = c->wnext;
		if (s->wait_head == NULL)
			s->wait_tail = NULL;
		c->wnext = NULL;
		s->in_granted += c->big_len;
		c->granted = true;
		pthread_mutex_lock(&c->mu);
		c->in_wait = false;
		c->backlog = true; /* its reader takes what already arrived */
		/* the frame's deadline runs from the grant */
		atomic_store(&c->frame_ms, now_ms());
		sconn_update_events(c);
		pthread_mutex_unlock(&c->mu);
	}
}

static void budget_release(struct stream *s, size_t n)
{
	if (n == 0)
		return;
	pthread_mutex_lock(&s->mu);
	assert(s->in_granted >= n);
	s->in_granted -= n;
	budget_grant_waiting_locked(s);
	pthread_mutex_unlock(&s->mu);
}

/* The reader, with c->big_len set: takes the frame's bytes from the budget,
 * or queues the connection (which is then not read until granted). */
static bool budget_take(struct sconn *c)
{
	struct stream *s = c->s;
	bool ok;

	pthread_mutex_lock(&s->mu);
	ok = s->wait_head == NULL && s->in_granted + c->big_len <= s->in_budget;
	if (ok) {
		s->in_granted += c->big_len;
		c->granted = true;
	} else {
		c->wnext = NULL;
		if (s->wait_tail != NULL)
			s->wait_tail->wnext = c;
		else
			s->wait_head = c;
		s->wait_tail = c;
	}
	pthread_mutex_lock(&c->mu);
	c->in_wait = !ok;
	sconn_update_events(c);
	pthread_mutex_unlock(&c->mu);
	pthread_mutex_unlock(&s->mu);
	return ok;
}

/* The reader's (or, once it is gone, the last owner's): gives back what the
 * connection holds of the input budget, granted or waited for. */
static void sconn_in_drop(struct sconn *c)
{
	struct stream *s = c->s;

	pthread_mutex_lock(&s->mu);
	if (c->granted) {
		s->in_granted -= c->big_len;
		c->granted = false;
		budget_grant_waiting_locked(s);
	} else if (c->in_wait) {
		struct sconn **pp = &s->wait_head, *prev = NULL;
		while (*pp != NULL && *pp != c) {
			prev = *pp;
			pp = &(*pp)->wnext;
		}
		if (*pp == c) {
			*pp = c->wnext;
			if (s->wait_tail == c)
				s->wait_tail = prev;
		}
		c->wnext = NULL;
		/* the queue's head may fit now */
		budget_grant_waiting_locked(s);
	}
	pthread_mutex_lock(&c->mu);
	c->in_wait = false;
	pthread_mutex_unlock(&c->mu);
	pthread_mutex_unlock(&s->mu);
	free(c->big);
	c->big = NULL;
	c->big_len = c->big_got = c->big_cap = 0;
}

/* The bytes of reply queues: kept in s->out_bytes (the output budget). */
static void sconn_out_account(struct sconn *c, size_t old_cap, size_t new_cap)
{
	if (new_cap > old_cap)
		atomic_fetch_add(&c->s->out_bytes, new_cap - old_cap);
	else
		atomic_fetch_sub(&c->s->out_bytes, old_cap - new_cap);
}

static void sconn_free(struct sconn *c)
{
	struct stream *s = c->s;

	sconn_in_drop(c);
	pthread_mutex_lock(&s->mu);
	if (c->prev != NULL)
		c->prev->next = c->next;
	else
		s->conns = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	s->nconns--;
	s->nconns_l[c->li]--;
	pthread_mutex_unlock(&s->mu);
	if (c->fd >= 0)
		close(c->fd);
	stls_free(c->ssl);
	sconn_out_account(c, c->out_cap, 0);
	pthread_mutex_destroy(&c->mu);
	free(c->in);
	free(c->out);
	free(c);
}

/* With c->mu held: drops a reference; true when it was the last. */
static bool sconn_unref_locked(struct sconn *c)
{
	assert(c->refs > 0);
	return --c->refs == 0;
}

/* With c->mu held: whether requests may be taken from the buffer
 * (invariant 3), and whether more may be read from the socket. */
static bool sconn_can_parse_locked(const struct sconn *c)
{
	size_t queued = c->out_len - c->out_off;

	return !c->fatal && !c->broken && c->in_flight < STREAM_IN_FLIGHT_MAX &&
	       queued < STREAM_OUT_MAX &&
	       (queued == 0 || atomic_load(&c->s->out_bytes) <= c->s->d->cfg.output_budget);
}

static bool sconn_can_read_locked(const struct sconn *c)
{
	if (c->broken || c->eof)
		return false;
	return c->fatal ? c->discard < STREAM_DISCARD_MAX
	                : sconn_can_parse_locked(c) && !c->in_wait;
}

/* With c->mu held: whether the connection is done for: broken, finished
 * after EOF with nothing left to send, or after a framing error once the
 * client stopped sending (or sent too much). */
static bool sconn_finished_locked(const struct sconn *c)
{
	if (c->broken)
		return true;
	if (c->out_len > c->out_off)
		return false;
	if (c->fatal)
		return c->eof || c->discard >= STREAM_DISCARD_MAX;
	return c->eof && c->in_flight == 0 && !c->backlog;
}

/* With c->mu held: the epoll registration that matches the state. EPOLLOUT
 * also wakes the reader for waiting frames and for closing (a writable
 * socket reports it at once; the reader then leaves that state). */
static void sconn_update_events(struct sconn *c)
{
	struct kvd *d = c->s->d;
	bool queued = c->out_len > c->out_off;
	uint32_t ev = sconn_can_read_locked(c) ? EPOLLIN | EPOLLRDHUP : 0;

	if (queued || (c->backlog && sconn_can_parse_locked(c) && !c->in_wait) ||
	    sconn_finished_locked(c))
		ev |= EPOLLOUT;
	if (c->ssl != NULL) {
		/* invariant 8: the other direction's event, and bytes OpenSSL holds */
		if (c->tls_wr_want_read && queued)
			ev |= EPOLLIN | EPOLLRDHUP;
		if (c->tls_rd_want_write || (c->tls_pending && sconn_can_read_locked(c)))
			ev |= EPOLLOUT;
	}
	if (c->dead)
		return;
	if (c->fatal && !queued && !c->wr_shut) {
		if (c->ssl != NULL)
			stls_close_notify(c->ssl);
		shutdown(c->fd, SHUT_WR); /* invariant 5 */
		c->wr_shut = true;
	}
	if (ev == c->events)
		return;
	if (worker_watch(d, c->worker, EPOLL_CTL_MOD, c->fd, ev, c) != 0)
		klog(LOG_ERR, "stream connection: epoll_ctl: %m");
	c->events = ev;
}

/* With c->mu held: writes queued bytes while the socket takes them. */
static void sconn_flush_locked(struct sconn *c)
{
	if (c->ssl != NULL && !c->tls_ready)
		return; /* the handshake first: the hello waits in the queue */
	while (!c->broken && c->out_len > c->out_off) {
		ssize_t n;
		if (c->ssl != NULL) {
			enum stls_want want;
			n = stls_write(c->ssl, c->out + c->out_off, c->out_len - c->out_off, &want);
			c->tls_wr_want_read = n < 0 && want == STLS_WANT_READ;
		} else {
			n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
			         MSG_NOSIGNAL | MSG_DONTWAIT);
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				c->broken = true;
			break;
		}
		c->out_off += (size_t)n;
	}
	if (c->out_off == c->out_len) {
		c->out_off = c->out_len = 0;
		if (c->out_cap > STREAM_OUT_KEEP) {
			/* a large queue is given back once it drained */
			sconn_out_account(c, c->out_cap, 0);
			free(c->out);
			c->out = NULL;
			c->out_cap = 0;
		}
	}
}

/* With c->mu held: appends bytes to the queue (false: out of memory). */
static bool sconn_queue_locked(struct sconn *c, const void *p, size_t len)
{
	if (c->out_off > 0 && c->out_len + len > c->out_cap) {
		memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
		c->out_len -= c->out_off;
		c->out_off = 0;
	}
	if (c->out_len + len > c->out_cap) {
		size_t cap = c->out_cap ? c->out_cap : 4096;
		uint8_t *n;
		while (cap < c->out_len + len)
			cap *= 2;
		if ((n = realloc(c->out, cap)) == NULL)
			return false;
		sconn_out_account(c, c->out_cap, cap);
		c->out = n;
		c->out_cap = cap;
	}
	memcpy(c->out + c->out_len, p, len);
	c->out_len += len;
	return true;
}

/* Queued reply bytes that end a connection (invariant 3): STREAM_OUT_HARD,
 * or four of the largest messages. */
static size_t sconn_out_hard(const struct sconn *c)
{
	uint64_t four = 4 * c->s->d->cfg.max_message_size;

	return four > STREAM_OUT_HARD ? (size_t)four : STREAM_OUT_HARD;
}

/* With c->mu held: one frame out, straight to the socket when nothing is
 * queued before it, the rest queued. */
static void sconn_send_frame_locked(struct sconn *c, const void *body, size_t len)
{
	uint8_t hdr[WIRE_FRAME_HDR];
	size_t done = 0;

	wire_frame_hdr_put(hdr, (uint32_t)len);
	if (c->dead || c->broken)
		return;
	/* TLS: the frame goes through the queue, so that header and body are
	 * one write and, mostly, one record (flushed below) */
	if (c->out_len == c->out_off && c->ssl == NULL) {
		struct iovec iov[2] = {{hdr, sizeof(hdr)}, {(void *)body, len}};
		struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 2};
		ssize_t n;
		do
			n = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		while (n < 0 && errno == EINTR);
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
			c->broken = true;
			return;
		}
		done = n > 0 ? (size_t)n : 0;
	}
	if (c->out_len - c->out_off + sizeof(hdr) + len - done > sconn_out_hard(c)) {
		klog(LOG_WARNING,
		     "stream connection: %zu bytes of replies not read by the client; "
		     "closing it",
		     c->out_len - c->out_off);
		c->broken = true;
		return;
	}
	/* while the queues of all connections pass output_budget, one that
	 * would hold more than STREAM_OUT_SOFT is ended (as Redis's limits) */
	if (c->out_len - c->out_off + sizeof(hdr) + len - done > STREAM_OUT_SOFT &&
	    atomic_load(&c->s->out_bytes) > c->s->d->cfg.output_budget) {
		klog_limited(&c->s->out_log, 10000, LOG_NOTICE,
		             "stream connection: %zu bytes of replies not read by the client "
		             "while replies waiting for all clients pass output_budget; "
		             "closing it",
		             c->out_len - c->out_off);
		c->broken = true;
		return;
	}
	if (done < sizeof(hdr) && !sconn_queue_locked(c, hdr + done, sizeof(hdr) - done))
		goto nomem;
	done = done > sizeof(hdr) ? done - sizeof(hdr) : 0;
	if (done < len && !sconn_queue_locked(c, (const uint8_t *)body + done, len - done))
		goto nomem;
	if (c->ssl != NULL)
		sconn_flush_locked(c);
	return;
nomem:
	/* half a frame is on the wire or queued: the stream is lost */
	klog(LOG_ERR, "stream connection: out of memory for a reply of %zu bytes", len);
	c->broken = true;
}

/* The reader's end of a connection (its worker's thread). */
static void sconn_close(struct sconn *c)
{
	struct kvd *d = c->s->d;
	bool last;

	sconn_in_drop(c);
	pthread_mutex_lock(&c->mu);
	if (worker_watch(d, c->worker, EPOLL_CTL_DEL, c->fd, 0, NULL) != 0)
		klog(LOG_ERR, "stream connection: epoll_ctl: %m");
	c->dead = true;
	close(c->fd);
	c->fd = -1;
	last = sconn_unref_locked(c);
	pthread_mutex_unlock(&c->mu);
	if (last)
		sconn_free(c);
}

/* job->reply of a stream job: any thread. */
static void sconn_job_reply(struct job *j, struct rpc_reply *rp)
{
	struct sconn *c = j->sink;
	struct stream *s = c->s;
	struct kvd *d = j->d;
	size_t granted = ((struct sjob *)j)->granted;
	bool last, end = j->end_conn;

	job_release(j);
	free(j);
	pthread_mutex_lock(&c->mu);
	sconn_send_frame_locked(c, rp->buf.data, rp->buf.size);
	c->in_flight--;
	if (end)
		c->fatal = true; /* answered, then shut down as after bad framing (5) */
	if (c->broken && !c->dead)
		shutdown(c->fd, SHUT_RDWR); /* its reader sees EPOLLHUP and closes it */
	sconn_update_events(c);
	last = sconn_unref_locked(c);
	pthread_mutex_unlock(&c->mu);
	rpc_reply_release(rp);
	atomic_fetch_sub(&d->in_flight, 1);
	if (last)
		sconn_free(c);
	budget_release(s, granted); /* the request's body is gone */
}

/* A frame the server cannot take: answered (id 0) where it can be, then the
 * connection ends (invariant 5). */
static void sconn_fatal(struct sconn *c, int status, const char *msg)
{
	struct rpc_reply rp;

	klog(LOG_DEBUG, "stream connection: %s", msg);
	rpc_reply_init(&rp);
	rpc_reply_error(&rp, 0, status, msg);
	pthread_mutex_lock(&c->mu);
	sconn_send_frame_locked(c, rp.buf.data, rp.buf.size);
	c->fatal = true;
	sconn_update_events(c);
	pthread_mutex_unlock(&c->mu);
	rpc_reply_release(&rp);
}

/* job->conn_of of a stream job: the connection's address, and its peer. */
static uint64_t sconn_job_conn(const struct job *j, char *peer, size_t len)
{
	snprintf(peer, len, "stream connection of %s", ((const struct sconn *)j->sink)->peer);
	return (uint64_t)(uintptr_t)j->sink;
}

/* One whole frame's body (malloc'd; the request takes it, with the input
 * budget it holds): a job, dispatched. false: out of memory (the body is
 * freed; the caller gives the budget back and ends the connection). */
static bool sconn_request(struct worker *w, struct sconn *c, uint8_t *body, size_t len,
                          size_t granted)
{
	struct kvd *d = c->s->d;
	struct sjob *sj = calloc(1, sizeof(*sj));
	struct job *j;
	int owner;

	if (sj == NULL) {
		free(body);
		return false;
	}
	sj->granted = granted;
	j = &sj->j;
	j->d = d;
	j->reply = sconn_job_reply;
	j->conn_of = sconn_job_conn;
	j->sink = c;
	j->peer_cert = c->has_cert ? c->cert_fp : NULL; /* set before the first request */
	j->body = body;
	pthread_mutex_lock(&c->mu);
	c->in_flight++;
	c->refs++;
	pthread_mutex_unlock(&c->mu);
	owner = request_dispatch(d, j, body, len, w);
	if (owner >= 0 && (uint32_t)owner != c->worker) {
		c->foreign = owner == c->foreign_owner ? c->foreign + 1 : 1;
		c->foreign_owner = owner;
	} else if (owner >= 0) {
		c->foreign = 0;
	}
	return true;
}

static void sconn_nomem(struct sconn *c, size_t len)
{
	klog(LOG_ERR, "stream connection: out of memory for a request of %zu bytes", len);
	pthread_mutex_lock(&c->mu);
	c->broken = true;
	pthread_mutex_unlock(&c->mu);
	c->in_len = 0;
}

/* Room for `need` more bytes of the large frame's body (grown as its bytes
 * arrive: doubled, from STREAM_BIG_FIRST up to its length). */
static bool sconn_big_reserve(struct sconn *c, size_t need)
{
	size_t cap = c->big_cap ? c->big_cap : STREAM_BIG_FIRST;
	uint8_t *n;

	if (c->big_cap - c->big_got >= need)
		return true;
	while (cap - c->big_got < need)
		cap *= 2;
	if (cap > c->big_len)
		cap = c->big_len;
	if ((n = realloc(c->big, cap)) == NULL)
		return false;
	c->big = n;
	c->big_cap = cap;
	return true;
}

/* With the reader's buffer: takes the hello and every whole frame; a large
 * frame's body goes to c->big once the input budget granted it. */
static void sconn_parse(struct worker *w, struct sconn *c)
{
	struct kvd *d = c->s->d;
	size_t pos = 0;
	bool paused = false, progress = false;
	char msg[128];

	if (!c->hello_read) {
		if (c->in_len < WIRE_HELLO_LEN)
			goto out;
		if (memcmp(c->in, stream_hello, WIRE_HELLO_LEN) != 0) {
			/* not a kvd stream client (an nng/SP peer starts with "\0SP\0") */
			sconn_fatal(c, RPC_INVALID_ARGUMENT,
			            "not a kvd stream client: the connection must start with "
			            "the hello \"kvd\\0\" 00 00 00 01");
			c->in_len = 0;
			return;
		}
		c->hello_read = true;
		pos = WIRE_HELLO_LEN;
		progress = true;
	}
	for (;;) {
		const uint8_t *h = c->in + pos;
		size_t len, take;

		if (c->big_len > 0) {
			bool waiting;
			pthread_mutex_lock(&c->mu);
			waiting = c->in_wait;
			pthread_mutex_unlock(&c->mu);
			if (waiting)
				break; /* the rest waits in the buffer */
			take = c->in_len - pos < c->big_len - c->big_got ? c->in_len - pos
			                                                 : c->big_len - c->big_got;
			if (take > 0 && !sconn_big_reserve(c, take)) {
				sconn_nomem(c, c->big_len);
				return;
			}
			if (take > 0)
				memcpy(c->big + c->big_got, c->in + pos, take);
			c->big_got += take;
			pos += take;
			if (c->big_got < c->big_len)
				break;
			/* whole: the request takes the body and its grant */
			len = c->big_len;
			pthread_mutex_lock(&c->s->mu);
			c->granted = false;
			pthread_mutex_unlock(&c->s->mu);
			if (!sconn_request(w, c, c->big, len, len)) {
				c->big = NULL;
				c->big_len = c->big_got = c->big_cap = 0;
				budget_release(c->s, len);
				sconn_nomem(c, len);
				return;
			}
			c->big = NULL;
			c->big_len = c->big_got = c->big_cap = 0;
			progress = true;
		} else {
			uint8_t *body;
			if (c->in_len - pos < WIRE_FRAME_HDR)
				break;
			len = wire_frame_hdr_get(h);
			if (len == 0 || len > d->cfg.max_message_size) {
				snprintf(msg, sizeof(msg),
				         "frame of %zu bytes: a request is 1 to %llu bytes", len,
				         (unsigned long long)d->cfg.max_message_size);
				sconn_fatal(
				        c, len == 0 ? RPC_INVALID_ARGUMENT : RPC_RESOURCE_EXHAUSTED,
				        msg);
				c->in_len = 0;
				return;
			}
			if (len > STREAM_SMALL_MAX) {
				/* a large frame: its body waits for the input budget */
				pos += WIRE_FRAME_HDR;
				c->big_len = len;
				c->big_got = 0;
				progress = true;
				budget_take(c);
				continue;
			}
			if (c->in_len - pos - WIRE_FRAME_HDR < len)
				break;
			if ((body = malloc(len)) == NULL) {
				sconn_nomem(c, len);
				return;
			}
			memcpy(body, h + WIRE_FRAME_HDR, len);
			if (!sconn_request(w, c, body, len, 0)) {
				sconn_nomem(c, len);
				return;
			}
			pos += WIRE_FRAME_HDR + len;
			progress = true;
		}
		pthread_mutex_lock(&c->mu);
		paused = !sconn_can_parse_locked(c);
		pthread_mutex_unlock(&c->mu);
		if (paused)
			break; /* the rest waits in the buffer (invariant 3) */
	}
	pthread_mutex_lock(&c->mu);
	c->backlog = (paused || c->in_wait) && c->in_len > pos;
	pthread_mutex_unlock(&c->mu);
	if (pos > 0) {
		memmove(c->in, c->in + pos, c->in_len - pos);
		c->in_len -= pos;
	}
out:
	/* the frame deadline: from the first byte of a hello or frame that is
	 * not whole yet */
	if (c->in_len == 0 && c->big_len == 0 && c->hello_read)
		atomic_store(&c->frame_ms, 0);
	else if (progress || atomic_load(&c->frame_ms) == 0)
		atomic_store(&c->frame_ms, now_ms());
}

/* Room for at least `need` more bytes in the input buffer. */
static bool sconn_in_reserve(struct sconn *c, size_t need)
{
	size_t cap = c->in_cap ? c->in_cap : STREAM_IN_MIN;
	uint8_t *n;

	if (c->in_cap - c->in_len >= need)
		return true;
	while (cap - c->in_len < need)
		cap *= 2;
	if ((n = realloc(c->in, cap)) == NULL)
		return false;
	c->in = n;
	c->in_cap = cap;
	return true;
}

/* The bytes the partial small frame at the start of the buffer still needs
 * (at least a read's worth; a large frame's body goes to c->big). */
static size_t sconn_in_need(const struct sconn *c)
{
	size_t off = c->hello_read ? 0 : WIRE_HELLO_LEN;
	const uint8_t *h = c->in + off;
	size_t len, want;

	if (c->in_len < off + WIRE_FRAME_HDR)
		return 4096;
	len = wire_frame_hdr_get(h);
	if (len > STREAM_SMALL_MAX)
		return 4096;
	want = off + WIRE_FRAME_HDR + len;
	return want > c->in_len + 4096 ? want - c->in_len : 4096;
}

static void sconn_read(struct worker *w, struct sconn *c)
{
	size_t budget = STREAM_READ_BUDGET;

	for (;;) {
		uint8_t *at;
		size_t room;
		ssize_t n;
		bool paused, big;

		/* a granted large frame whose earlier bytes were all taken from
		 * the buffer reads straight into its body */
		big = c->big_len > 0 && c->in_len == 0;
		if (big) {
			size_t want = c->big_len - c->big_got;
			if (!sconn_big_reserve(c,
			                       want < STREAM_BIG_FIRST ? want : STREAM_BIG_FIRST)) {
				sconn_nomem(c, c->big_len);
				return;
			}
			at = c->big + c->big_got;
			room = (c->big_cap < c->big_len ? c->big_cap : c->big_len) - c->big_got;
		} else {
			if (!sconn_in_reserve(c, sconn_in_need(c))) {
				klog(LOG_ERR, "stream connection: out of memory for its input");
				pthread_mutex_lock(&c->mu);
				c->broken = true;
				pthread_mutex_unlock(&c->mu);
				return;
			}
			at = c->in + c->in_len;
			room = c->in_cap - c->in_len;
		}
		if (c->ssl != NULL) {
			enum stls_want want;
			pthread_mutex_lock(&c->mu);
			n = stls_read(c->ssl, at, room, &want);
			c->tls_rd_want_write = n < 0 && want == STLS_WANT_WRITE;
			if (n < 0 && errno == EPROTO) {
				char why[300];
				stls_why(c->ssl, why, sizeof(why));
				klog(LOG_DEBUG, "stream connection of %s: TLS: %s", c->peer, why);
			}
			pthread_mutex_unlock(&c->mu);
		} else {
			n = read(c->fd, at, room);
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n <= 0) {
			pthread_mutex_lock(&c->mu);
			if (n == 0)
				c->eof = true;
			else
				c->broken = true;
			pthread_mutex_unlock(&c->mu);
			break;
		}
		atomic_store(&c->active_ms, now_ms());
		pthread_mutex_lock(&c->mu);
		if (c->fatal) {
			/* invariant 5: dropped */
			c->discard += (size_t)n;
			paused = c->discard >= STREAM_DISCARD_MAX;
			pthread_mutex_unlock(&c->mu);
			if (paused || budget <= (size_t)n)
				break;
			budget -= (size_t)n;
			continue;
		}
		pthread_mutex_unlock(&c->mu);
		if (big)
			c->big_got += (size_t)n;
		else
			c->in_len += (size_t)n;
		sconn_parse(w, c);
		pthread_mutex_lock(&c->mu);
		paused = !sconn_can_read_locked(c);
		pthread_mutex_unlock(&c->mu);
		/* a short read drained the socket; epoll says when more comes
		 * (TLS: a short read is one record; read on until OpenSSL wants
		 * more from the socket) */
		if (paused || ((size_t)n < room && c->ssl == NULL) || budget <= (size_t)n)
			break;
		budget -= (size_t)n;
	}
	if (c->ssl != NULL) {
		pthread_mutex_lock(&c->mu);
		c->tls_pending = !c->dead && stls_pending(c->ssl);
		pthread_mutex_unlock(&c->mu);
	}
	if (c->in_len == 0 && c->in_cap > STREAM_IN_KEEP) {
		free(c->in);
		c->in = NULL;
		c->in_cap = 0;
	}
}

/* With c->mu held, on the reading worker, as the last thing it does with
 * the connection: hands its reading to the worker that owns the tenants its
 * requests go to, so that they run where they are read instead of crossing
 * to that worker's queue one by one. */
static void sconn_migrate_locked(struct sconn *c)
{
	struct kvd *d = c->s->d;
	uint32_t to = (uint32_t)c->foreign_owner;

	c->foreign = 0;
	if (worker_watch(d, c->worker, EPOLL_CTL_DEL, c->fd, 0, NULL) != 0) {
		klog(LOG_ERR, "stream connection: epoll_ctl: %m");
		return;
	}
	if (worker_watch(d, to, EPOLL_CTL_ADD, c->fd, c->events, c) != 0) {
		klog(LOG_ERR, "stream connection: epoll_ctl: %m");
		if (worker_watch(d, c->worker, EPOLL_CTL_ADD, c->fd, c->events, c) != 0)
			c->broken = true; /* unreachable; its replies go nowhere */
		return;
	}
	c->worker = to;
}

/* With c->mu held, on the reader: drives a kv+tls:// connection's
 * handshake; once done, takes the client's certificate (when it sent one
 * that verified) and sends the hello queued at accept. */
static void sconn_tls_handshake_locked(struct sconn *c)
{
	struct stream *s = c->s;
	enum stls_want want;
	char why[300], cn[128];
	int rv = stls_handshake(c->ssl, &want);

	c->tls_rd_want_write = rv == 0 && want == STLS_WANT_WRITE;
	if (rv < 0) {
		stls_why(c->ssl, why, sizeof(why));
		klog_limited(&s->tls_log, 10000, LOG_NOTICE, "%s: TLS handshake with %s failed: %s",
		             s->url[c->li], c->peer, why);
		c->broken = true;
		return;
	}
	if (rv == 0)
		return;
	c->tls_ready = true;
	c->tls_pending = stls_pending(c->ssl);
	c->has_cert = stls_peer(c->ssl, c->cert_fp, cn, sizeof(cn));
	if (c->has_cert)
		klog(LOG_DEBUG, "%s: %s presented the client certificate CN=%s", s->url[c->li],
		     c->peer, cn);
	sconn_flush_locked(c);
}

/* A worker's epoll reported events on one of the connections it reads. */
static void stream_event(struct worker *w, struct watch *self, uint32_t events)
{
	struct sconn *c = (struct sconn *)self;
	bool parse, read, done;

	pthread_mutex_lock(&c->mu);
	if (c->ssl != NULL && !c->tls_ready && !c->broken) {
		/* invariant 8; nothing else happens before the handshake is done */
		if (events & (EPOLLERR | EPOLLHUP))
			c->broken = true;
		else
			sconn_tls_handshake_locked(c);
		if (!c->tls_ready) {
			done = c->broken;
			if (!done)
				sconn_update_events(c);
			pthread_mutex_unlock(&c->mu);
			if (done)
				sconn_close(c);
			return;
		}
	}
	/* Gone both ways: what is queued cannot be delivered. But after a
	 * framing error both sides shut down is the orderly end (invariant 5):
	 * what the client sent before its FIN is still to be read and dropped,
	 * or closing with it unread would send a reset. */
	if ((events & EPOLLERR) || ((events & EPOLLHUP) && !(c->fatal && c->wr_shut)))
		c->broken = true;
	if ((events & EPOLLOUT) || (c->tls_wr_want_read && (events & EPOLLIN)))
		sconn_flush_locked(c);
	parse = c->backlog && sconn_can_parse_locked(c) && !c->in_wait;
	read = ((events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP)) || c->tls_pending ||
	        (c->tls_rd_want_write && (events & EPOLLOUT))) &&
	       sconn_can_read_locked(c);
	pthread_mutex_unlock(&c->mu);
	if (parse)
		sconn_parse(w, c);
	if (read)
		sconn_read(w, c);
	pthread_mutex_lock(&c->mu);
	done = sconn_finished_locked(c);
	if (!done)
		sconn_update_events(c);
	if (!done && c->foreign >= STREAM_MIGRATE_AFTER)
		sconn_migrate_locked(c);
	pthread_mutex_unlock(&c->mu);
	if (done)
		sconn_close(c);
}

/* ---- listeners ------------------------------------------------------------ */

/* The name of listener k for log lines: its URL. */
static const char *listener_name(struct stream *s, int k)
{
	return s->url[k];
}

/* A new connection on listener k: the server's hello, then a worker to
 * read it. Each listener has its own max_connections, so that clients of
 * one (remote kv+tcp://) cannot lock out those of another (the local
 * kv+ipc:// socket operators use). */
static void stream_adopt(struct stream *s, int fd, int k, bool tcp)
{
	struct kvd *d = s->d;
	struct sconn *c;
	int one = 1;
	uint32_t open_now;

	pthread_mutex_lock(&s->mu);
	open_now = s->nconns_l[k];
	pthread_mutex_unlock(&s->mu);
	if (open_now >= d->cfg.max_connections) {
		klog_limited(&s->refused_log[k], 10000, LOG_WARNING,
		             "%s: %u connections open (max_connections): refusing more",
		             listener_name(s, k), open_now);
		close(fd);
		return;
	}
	if (tcp)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if ((c = calloc(1, sizeof(*c))) == NULL) {
		close(fd);
		return;
	}
	c->s = s;
	if (s->is_tls[k]) {
		/* the hello goes out once the handshake is done (invariant 8) */
		if ((c->ssl = stls_new(s->tls, fd)) == NULL ||
		    !sconn_queue_locked(c, stream_hello, sizeof(stream_hello))) {
			stls_free(c->ssl);
			free(c->out);
			sconn_out_account(c, c->out_cap, 0);
			free(c);
			close(fd);
			return;
		}
	} else if (send(fd, stream_hello, sizeof(stream_hello), MSG_NOSIGNAL | MSG_DONTWAIT) !=
	           (ssize_t)sizeof(stream_hello)) {
		/* a new socket's send buffer takes the 8 bytes at once */
		free(c);
		close(fd);
		return;
	}
	c->watch.on_event = stream_event;
	c->fd = fd;
	c->li = k;
	stream_peer_name(fd, tcp, c->peer, sizeof(c->peer));
	c->refs = 1;
	c->events = EPOLLIN | EPOLLRDHUP;
	c->foreign_owner = -1;
	atomic_store(&c->active_ms, now_ms());
	atomic_store(&c->frame_ms, now_ms()); /* the hello's deadline */
	pthread_mutex_init(&c->mu, NULL);
	pthread_mutex_lock(&s->mu);
	c->worker = s->next_worker++ % d->nworkers;
	c->next = s->conns;
	if (s->conns != NULL)
		s->conns->prev = c;
	s->conns = c;
	s->nconns++;
	s->nconns_l[k]++;
	pthread_mutex_unlock(&s->mu);
	/* from here on the worker may read and close it */
	if (worker_watch(d, c->worker, EPOLL_CTL_ADD, fd, c->events, c) != 0) {
		klog(LOG_ERR, "stream connection: epoll_ctl: %m");
		sconn_free(c);
	}
}

/* The acceptor, every STREAM_SWEEP_MS: ends connections past a deadline —
 * a hello or frame started and not whole after frame_timeout (slowloris),
 * or nothing received, nothing in flight and nothing to send for
 * client_timeout. Only the reader closes (invariant 1): the sweep marks the
 * connection broken and shuts its socket down, and the reader, woken by
 * EPOLLHUP, closes it. A connection kvd is not reading (paused, or waiting
 * for the input budget) is not late: its frame's clock restarts. */
static void stream_sweep(struct stream *s)
{
	struct kvd *d = s->d;
	uint64_t now = now_ms(), frame_ms = (uint64_t)d->cfg.frame_timeout_s * 1000,
	         idle_ms = (uint64_t)d->cfg.client_timeout_s * 1000;
	uint32_t late = 0, idle = 0;
	int k_late = 0, k_idle = 0;

	if (frame_ms == 0 && idle_ms == 0)
		return;
	pthread_mutex_lock(&s->mu);
	for (struct sconn *c = s->conns; c != NULL; c = c->next) {
		uint64_t since, active;
		bool end = false, reading;

		pthread_mutex_lock(&c->mu);
		if (c->dead || c->broken) {
			pthread_mutex_unlock(&c->mu);
			continue;
		}
		since = atomic_load(&c->frame_ms);
		active = atomic_load(&c->active_ms);
		reading = sconn_can_read_locked(c) && !c->backlog;
		if (since != 0 && !reading) {
			atomic_store(&c->frame_ms, now);
		} else if (frame_ms && since != 0 && now > since && now - since >= frame_ms) {
			end = true;
			late++;
			k_late = c->li;
		} else if (idle_ms && since == 0 && c->in_flight == 0 && c->out_len == c->out_off &&
		           now > active && now - active >= idle_ms) {
			end = true;
			idle++;
			k_idle = c->li;
		}
		if (end) {
			c->broken = true;
			shutdown(c->fd, SHUT_RDWR); /* its reader sees EPOLLHUP and closes it */
			sconn_update_events(c);
		}
		pthread_mutex_unlock(&c->mu);
	}
	s->frame_timeouts += late;
	s->idle_timeouts += idle;
	pthread_mutex_unlock(&s->mu);
	if (late > 0)
		klog_limited(&s->timeout_log, 10000, LOG_NOTICE,
		             "%s: closed %u connection(s) that did not finish a hello or frame "
		             "within frame_timeout (%u s)",
		             listener_name(s, k_late), late, d->cfg.frame_timeout_s);
	if (idle > 0)
		klog(LOG_INFO, "%s: closed %u connection(s) idle for client_timeout (%u s)",
		     listener_name(s, k_idle), idle, d->cfg.client_timeout_s);
}

static void *acceptor_main(void *arg)
{
	struct stream *s = arg;
	struct epoll_event evs[KVD_LISTEN_MAX + 1];

	uint64_t swept = now_ms();

	for (;;) {
		int n = epoll_wait(s->epfd, evs, KVD_LISTEN_MAX + 1, STREAM_SWEEP_MS);

		if (now_ms() - swept >= STREAM_SWEEP_MS) {
			stream_sweep(s);
			swept = now_ms();
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			klog(LOG_ERR, "stream listeners: epoll_wait: %m");
			return NULL;
		}
		for (int i = 0; i < n; i++) {
			int k = (int)evs[i].data.u32, fd;
			struct sockaddr_storage sa;
			socklen_t sl = sizeof(sa);

			if (k == KVD_LISTEN_MAX)
				return NULL; /* stopfd */
			fd = accept4(s->lfd[k], (struct sockaddr *)&sa, &sl,
			             SOCK_NONBLOCK | SOCK_CLOEXEC);
			if (fd >= 0) {
				stream_adopt(s, fd, k, sa.ss_family != AF_UNIX);
				continue;
			}
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM) {
				struct pollfd p = {s->stopfd, POLLIN, 0};
				klog_limited(
				        &s->accept_log, 10000, LOG_WARNING,
				        "%s: accept: %s; pausing %d ms each time (too few file "
				        "descriptors? see the open file limit, open_files and "
				        "max_connections)",
				        listener_name(s, k), strerror(errno),
				        STREAM_ACCEPT_PAUSE_MS);
				if (poll(&p, 1, STREAM_ACCEPT_PAUSE_MS) > 0)
					return NULL;
			}
			/* EAGAIN, ECONNABORTED, EINTR…: the next event */
		}
	}
}

int stream_start(struct kvd *d, char *err, size_t errlen)
{
	struct stream *s;
	struct epoll_event ev;
	int rv;

	if ((s = calloc(1, sizeof(*s))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	s->d = d;
	s->epfd = s->stopfd = -1;
	/* one frame of max_message_size always fits */
	s->in_budget = d->cfg.input_budget > d->cfg.max_message_size ? d->cfg.input_budget
	                                                             : d->cfg.max_message_size;
	pthread_mutex_init(&s->mu, NULL);
	d->stream = s;
	for (int i = 0; i < d->cfg.nlisten; i++) {
		const char *u = d->cfg.listen[i];
		int fd;

		if (!stream_url(u))
			continue;
		if (strncmp(u, "kv+ipc://", 9) == 0) {
			rv = stream_listen_unix(u + 9, d->cfg.ipc_mode, &fd, err, errlen);
			if (rv == 0 && (s->path[s->nl] = strdup(u + 9)) == NULL) {
				close(fd);
				snprintf(err, errlen, "out of memory");
				return -ENOMEM;
			}
		} else {
			s->is_tls[s->nl] = strncmp(u, "kv+tls://", 9) == 0;
			if (s->is_tls[s->nl] && s->tls == NULL &&
			    (rv = stls_ctx_new(&d->cfg, &s->tls, err, errlen)) != 0)
				return rv;
			rv = stream_listen_tcp(u, &fd, err, errlen);
		}
		if (rv != 0)
			return rv;
		s->url[s->nl] = u;
		s->lfd[s->nl++] = fd;
		klog(LOG_INFO, "listening on %s", u);
	}
	if (s->nl == 0)
		return 0;
	if ((s->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0 ||
	    (s->stopfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
		snprintf(err, errlen, "stream listeners: %s", strerror(errno));
		return -errno;
	}
	for (int k = 0; k <= s->nl; k++) {
		memset(&ev, 0, sizeof(ev));
		ev.events = EPOLLIN;
		ev.data.u32 = k < s->nl ? (uint32_t)k : KVD_LISTEN_MAX;
		if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, k < s->nl ? s->lfd[k] : s->stopfd, &ev) !=
		    0) {
			snprintf(err, errlen, "stream listeners: epoll_ctl: %s", strerror(errno));
			return -errno;
		}
	}
	if (pthread_create(&s->acceptor, NULL, acceptor_main, s) != 0) {
		snprintf(err, errlen, "cannot start the stream acceptor thread");
		return -EAGAIN;
	}
	s->acceptor_running = true;
	return 0;
}

void stream_stop_accepting(struct kvd *d)
{
	struct stream *s = d->stream;
	uint64_t one = 1;
	int nl;

	if (s == NULL)
		return;
	if (s->acceptor_running) {
		if (write(s->stopfd, &one, sizeof(one)) != sizeof(one))
			klog(LOG_ERR, "stream listeners: cannot stop the acceptor: %m");
		pthread_join(s->acceptor, NULL);
		s->acceptor_running = false;
	}
	/* stream_connections (Stats, /metrics: any thread) lists none from here on */
	pthread_mutex_lock(&s->mu);
	nl = s->nl;
	s->nl = 0;
	pthread_mutex_unlock(&s->mu);
	for (int k = 0; k < nl; k++) {
		close(s->lfd[k]);
		if (s->path[k] != NULL) {
			unlink(s->path[k]);
			free(s->path[k]);
			s->path[k] = NULL;
		}
	}
}

void stream_stop(struct kvd *d)
{
	struct stream *s = d->stream;
	uint64_t t0 = now_ms();

	if (s == NULL)
		return;
	stream_stop_accepting(d);
	/* The workers have stopped: nobody else touches the connections. What
	 * is still queued gets STREAM_FLUSH_MS in all to go out. Nobody waits
	 * for the input budget any more (a grant would touch a worker's epoll). */
	pthread_mutex_lock(&s->mu);
	while (s->wait_head != NULL) {
		struct sconn *w = s->wait_head;
		s->wait_head = w->wnext;
		w->wnext = NULL;
	}
	s->wait_tail = NULL;
	pthread_mutex_unlock(&s->mu);
	while (s->conns != NULL) {
		struct sconn *c = s->conns;
		bool last;

		pthread_mutex_lock(&c->mu);
		while (!c->dead && !c->broken && c->out_len > c->out_off &&
		       now_ms() - t0 < STREAM_FLUSH_MS) {
			struct pollfd p = {c->fd, POLLOUT, 0};
			if (poll(&p, 1, (int)(STREAM_FLUSH_MS - (now_ms() - t0))) <= 0)
				break;
			sconn_flush_locked(c);
		}
		if (!c->dead) {
			c->dead = true;
			close(c->fd);
			c->fd = -1;
			last = sconn_unref_locked(c);
		} else {
			last = false;
		}
		pthread_mutex_unlock(&c->mu);
		if (last) {
			sconn_free(c);
		} else {
			/* still referenced by a request nobody will answer now */
			pthread_mutex_lock(&s->mu);
			s->conns = c->next;
			if (c->next != NULL)
				c->next->prev = NULL;
			c->prev = c->next = NULL;
			s->nconns--;
			pthread_mutex_unlock(&s->mu);
		}
	}
	if (s->epfd >= 0)
		close(s->epfd);
	if (s->stopfd >= 0)
		close(s->stopfd);
	stls_ctx_free(s->tls);
	pthread_mutex_destroy(&s->mu);
	free(s);
	d->stream = NULL;
}

int stream_connections(struct kvd *d, const char **ret_url, uint32_t *ret_open, int max)
{
	struct stream *s = d->stream;
	int n;

	if (s == NULL)
		return 0;
	pthread_mutex_lock(&s->mu);
	for (n = 0; n < s->nl && n < max; n++) {
		ret_url[n] = s->url[n];
		ret_open[n] = s->nconns_l[n];
	}
	pthread_mutex_unlock(&s->mu);
	return n;
}
