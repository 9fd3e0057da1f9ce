/*
 * stream_tls.h — TLS (OpenSSL) under the stream transport's framing:
 * kv+tls://HOST:PORT. stream.c owns the connections and their locking; this
 * file turns the settings into an SSL_CTX and an SSL object's calls into
 * read(2)/write(2)-like results.
 *
 * Errors: stls_ctx_new is 0/-errno with one line in err. The I/O calls
 * return bytes (> 0), 0 at the end of the stream, or -1 with errno EAGAIN
 * (and *ret_want saying which socket event lets the call go on) or
 * EPROTO/ECONNRESET (the connection is lost; stls_why says why).
 *
 * Threads: an SSL_CTX is shared read-only by every thread once made. An
 * SSL object must not be used by two threads at once: stream.c calls every
 * function below that takes one with the connection's c->mu held. Each
 * call clears the calling thread's OpenSSL error queue first, as
 * SSL_get_error needs.
 */
#ifndef KVD_STREAM_TLS_H
#define KVD_STREAM_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <openssl/ssl.h>

#include "config.h"

#define STLS_FP_LEN 32 /* SHA-256 of a certificate's DER */

enum stls_want {
	STLS_WANT_NONE,
	STLS_WANT_READ,  /* go on when the socket is readable */
	STLS_WANT_WRITE, /* go on when the socket is writable */
};

/* The server's context for kv+tls:// listeners: tls_cert (chain) and
 * tls_key, TLS 1.2 at least, no renegotiation and no session tickets, and
 * with tls_client_ca a client certificate asked for (tls_client_auth:
 * optional, or required, the default with a CA) and verified against it.
 * -EINVAL with the file and OpenSSL's reason in err; -ENOMEM. */
int stls_ctx_new(const struct kvd_config *cfg, SSL_CTX **ret, char *err, size_t errlen);
void stls_ctx_free(SSL_CTX *ctx);

/* A server-side TLS connection on fd (not owned). NULL: out of memory. */
SSL *stls_new(SSL_CTX *ctx, int fd);
void stls_free(SSL *ssl);

/* Drives the handshake: 1 done, 0 not yet (*ret_want says on what), -1
 * failed (stls_why names the reason: a certificate that did not verify…). */
int stls_handshake(SSL *ssl, enum stls_want *ret_want);
ssize_t stls_read(SSL *ssl, void *buf, size_t len, enum stls_want *ret_want);
ssize_t stls_write(SSL *ssl, const void *buf, size_t len, enum stls_want *ret_want);
/* Whether decrypted bytes wait inside ssl (the socket may not say so). */
bool stls_pending(SSL *ssl);
/* Sends close_notify if the socket takes it now (no wait). */
void stls_close_notify(SSL *ssl);
/* After a failed call: why, in one line (the certificate verification's
 * result when that failed, else OpenSSL's first error). */
void stls_why(SSL *ssl, char *out, size_t len);

/* The verified client certificate's SHA-256 (of its DER) and subject CN:
 * true when the client sent one and it verified. */
bool stls_peer(SSL *ssl, uint8_t fp[STLS_FP_LEN], char *cn, size_t cnlen);

#endif
