/*
 * stream_tls.c — OpenSSL for kv+tls:// (stream_tls.h says what each call
 * does and under which lock).
 *
 * Choices, and why:
 *   - TLS 1.2 at least; no renegotiation (SSL_OP_NO_RENEGOTIATION), so that
 *     after the handshake a read never needs a write and a write never a
 *     read in TLS 1.2; TLS 1.3's key updates are answered by SSL_read.
 *   - No session tickets: a TLS 1.3 server sends them after the handshake,
 *     and a client's idle pooled connection that turned readable is taken
 *     for one the server closed (rpc/client_stream.c, cc_stale). Each
 *     connection is long-lived; a full handshake per connection is cheap
 *     next to its life.
 *   - SSL_MODE_ENABLE_PARTIAL_WRITE and ACCEPT_MOVING_WRITE_BUFFER: the
 *     reply queue is written as the socket takes it and may move
 *     (realloc, memmove) between a write that wanted more and its retry.
 *   - SSL_MODE_RELEASE_BUFFERS: an idle connection gives its record buffers
 *     back, so that max_connections idle TLS clients cost little memory
 *     (invariant 6 of stream.c).
 *   - OpenSSL's socket BIO writes with write(2), which raises SIGPIPE on a
 *     connection the client closed: kvd ignores SIGPIPE (main.c), so the
 *     plain BIO serves (libkvclient, which cannot assume that, has a BIO
 *     of its own).
 *   - SSL_OP_IGNORE_UNEXPECTED_EOF: a client that closes without
 *     close_notify ends its stream as a plain EOF; frames carry their own
 *     lengths, so truncation cannot pass for a shorter message.
 */
#include "stream_tls.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <string.h>

/* The first error of this thread's OpenSSL queue, or fallback. */
static void ossl_reason(char *out, size_t len, const char *fallback)
{
	unsigned long e = ERR_peek_error();

	if (e == 0) {
		snprintf(out, len, "%s", fallback);
		return;
	}
	ERR_error_string_n(e, out, len);
}

int stls_ctx_new(const struct kvd_config *cfg, SSL_CTX **ret, char *err, size_t errlen)
{
	SSL_CTX *ctx;
	char why[256];
	int mode, auth = cfg->tls_client_auth;

	ERR_clear_error();
	if ((ctx = SSL_CTX_new(TLS_server_method())) == NULL) {
		snprintf(err, errlen, "kv+tls: out of memory");
		return -ENOMEM;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_IGNORE_UNEXPECTED_EOF |
	                                 SSL_OP_CIPHER_SERVER_PREFERENCE);
	SSL_CTX_set_num_tickets(ctx, 0);
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
	                              SSL_MODE_RELEASE_BUFFERS);
	if (SSL_CTX_use_certificate_chain_file(ctx, cfg->tls_cert) != 1) {
		ossl_reason(why, sizeof(why), "cannot read it");
		snprintf(err, errlen, "tls_cert %s: %s", cfg->tls_cert, why);
		goto fail;
	}
	if (SSL_CTX_use_PrivateKey_file(ctx, cfg->tls_key, SSL_FILETYPE_PEM) != 1) {
		ossl_reason(why, sizeof(why), "cannot read it");
		snprintf(err, errlen, "tls_key %s: %s", cfg->tls_key, why);
		goto fail;
	}
	if (SSL_CTX_check_private_key(ctx) != 1) {
		snprintf(err, errlen, "tls_key %s does not belong to tls_cert %s", cfg->tls_key,
		         cfg->tls_cert);
		goto fail;
	}
	if (auth == KVD_TLS_CLIENT_DEFAULT)
		auth = cfg->tls_client_ca[0] != '\0' ? KVD_TLS_CLIENT_REQUIRE : KVD_TLS_CLIENT_NONE;
	if (auth != KVD_TLS_CLIENT_NONE) {
		struct stack_st_X509_NAME *names; /* STACK_OF(X509_NAME) */
		if (SSL_CTX_load_verify_locations(ctx, cfg->tls_client_ca, NULL) != 1 ||
		    (names = SSL_load_client_CA_file(cfg->tls_client_ca)) == NULL) {
			ossl_reason(why, sizeof(why), "no certificate in it");
			snprintf(err, errlen, "tls_client_ca %s: %s", cfg->tls_client_ca, why);
			goto fail;
		}
		SSL_CTX_set_client_CA_list(ctx, names);
		mode = SSL_VERIFY_PEER | SSL_VERIFY_CLIENT_ONCE;
		if (auth == KVD_TLS_CLIENT_REQUIRE)
			mode |= SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
		SSL_CTX_set_verify(ctx, mode, NULL);
	}
	ERR_clear_error();
	*ret = ctx;
	return 0;
fail:
	ERR_clear_error();
	SSL_CTX_free(ctx);
	return -EINVAL;
}

void stls_ctx_free(SSL_CTX *ctx)
{
	SSL_CTX_free(ctx);
}

SSL *stls_new(SSL_CTX *ctx, int fd)
{
	SSL *ssl = SSL_new(ctx);

	if (ssl == NULL)
		return NULL;
	if (SSL_set_fd(ssl, fd) != 1) {
		SSL_free(ssl);
		ERR_clear_error();
		return NULL;
	}
	SSL_set_accept_state(ssl);
	return ssl;
}

void stls_free(SSL *ssl)
{
	SSL_free(ssl);
}

/* What a call that returned rv means: its want, or -1 with errno. */
static int stls_result(SSL *ssl, int rv, enum stls_want *ret_want)
{
	int e = SSL_get_error(ssl, rv);

	*ret_want = STLS_WANT_NONE;
	switch (e) {
	case SSL_ERROR_WANT_READ:
		*ret_want = STLS_WANT_READ;
		errno = EAGAIN;
		return -1;
	case SSL_ERROR_WANT_WRITE:
		*ret_want = STLS_WANT_WRITE;
		errno = EAGAIN;
		return -1;
	case SSL_ERROR_ZERO_RETURN:
		return 0;
	case SSL_ERROR_SYSCALL:
		if (errno == 0 || errno == EAGAIN)
			errno = ECONNRESET;
		return -1;
	default:
		errno = EPROTO;
		return -1;
	}
}

int stls_handshake(SSL *ssl, enum stls_want *ret_want)
{
	int rv;

	ERR_clear_error();
	errno = 0;
	if ((rv = SSL_do_handshake(ssl)) == 1) {
		*ret_want = STLS_WANT_NONE;
		return 1;
	}
	(void)stls_result(ssl, rv, ret_want);
	return *ret_want != STLS_WANT_NONE ? 0 : -1;
}

ssize_t stls_read(SSL *ssl, void *buf, size_t len, enum stls_want *ret_want)
{
	size_t n = 0;
	int rv;

	ERR_clear_error();
	errno = 0;
	if ((rv = SSL_read_ex(ssl, buf, len, &n)) == 1) {
		*ret_want = STLS_WANT_NONE;
		return (ssize_t)n;
	}
	return stls_result(ssl, rv, ret_want);
}

ssize_t stls_write(SSL *ssl, const void *buf, size_t len, enum stls_want *ret_want)
{
	size_t n = 0;
	int rv;

	ERR_clear_error();
	errno = 0;
	if ((rv = SSL_write_ex(ssl, buf, len, &n)) == 1) {
		*ret_want = STLS_WANT_NONE;
		return (ssize_t)n;
	}
	rv = stls_result(ssl, rv, ret_want);
	if (rv == 0) { /* the peer's close_notify: nothing more can go out */
		errno = EPIPE;
		return -1;
	}
	return rv;
}

bool stls_pending(SSL *ssl)
{
	return SSL_pending(ssl) > 0;
}

void stls_close_notify(SSL *ssl)
{
	ERR_clear_error();
	if (SSL_is_init_finished(ssl))
		(void)SSL_shutdown(ssl);
	ERR_clear_error();
}

void stls_why(SSL *ssl, char *out, size_t len)
{
	long v = SSL_get_verify_result(ssl);
	char reason[200];

	ossl_reason(reason, sizeof(reason), "the peer closed the connection");
	if (v != X509_V_OK)
		snprintf(out, len, "certificate verify failed: %s (%s)",
		         X509_verify_cert_error_string(v), reason);
	else
		snprintf(out, len, "%s", reason);
	ERR_clear_error();
}

bool stls_peer(SSL *ssl, uint8_t fp[STLS_FP_LEN], char *cn, size_t cnlen)
{
	X509 *x = SSL_get0_peer_certificate(ssl);
	unsigned int n = STLS_FP_LEN;

	cn[0] = '\0';
	if (x == NULL || SSL_get_verify_result(ssl) != X509_V_OK)
		return false;
	if (X509_digest(x, EVP_sha256(), fp, &n) != 1 || n != STLS_FP_LEN) {
		ERR_clear_error();
		return false;
	}
	if (X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_commonName, cn, (int)cnlen) < 0)
		snprintf(cn, cnlen, "(no CN)");
	ERR_clear_error();
	return true;
}
