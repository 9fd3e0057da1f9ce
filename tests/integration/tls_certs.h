/*
 * tls_certs.h — certificates for the kv+tls:// tests, made at run time with
 * the openssl command (none are kept in the tree, where their dates would
 * run out): a CA the server and the clients trust, a server certificate
 * for localhost and 127.0.0.1, client certificates signed by that CA
 * ("reader", "writer", "stranger": trusted, mapped or not by the test's
 * tokens file), one signed by another CA ("untrusted"), and one signed by
 * the trusted CA but valid only for two days of January 2020 ("expired",
 * made with `openssl ca -startdate -enddate`, since the x509 command of
 * OpenSSL 3.0 cannot set a start date).
 */
#ifndef KV_TEST_TLS_CERTS_H
#define KV_TEST_TLS_CERTS_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "testutil.h"

#define TC_PATH 600

struct tls_certs {
	char *dir;
	char ca[TC_PATH];       /* the trusted CA */
	char other_ca[TC_PATH]; /* a CA nobody trusts */
	char server_cert[TC_PATH], server_key[TC_PATH];
	char reader_cert[TC_PATH], reader_key[TC_PATH];
	char writer_cert[TC_PATH], writer_key[TC_PATH];
	char stranger_cert[TC_PATH], stranger_key[TC_PATH];
	char untrusted_cert[TC_PATH], untrusted_key[TC_PATH];
	char expired_cert[TC_PATH], expired_key[TC_PATH];
	/* "XX:XX:…" as `openssl x509 -fingerprint -sha256` prints it */
	char reader_fp[128], writer_fp[128];
};

/* Runs cmd in dir (its output to dir/openssl.log): the exit status. */
static inline int tc_sh(const char *dir, const char *cmd)
{
	char full[4096];
	int st;

	snprintf(full, sizeof(full), "cd '%s' && (%s) >>openssl.log 2>&1", dir, cmd);
	st = system(full);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The fingerprint of dir/name.pem into out; false when it cannot be read. */
static inline bool tc_fingerprint(const char *dir, const char *name, char *out, size_t len)
{
	char cmd[512], path[TC_PATH], line[256], *eq;
	FILE *f;

	snprintf(cmd, sizeof(cmd),
	         "openssl x509 -in %s.pem -noout -fingerprint -sha256 | cut -d= -f2 >%s.fp", name,
	         name);
	if (tc_sh(dir, cmd) != 0)
		return false;
	snprintf(path, sizeof(path), "%s/%s.fp", dir, name);
	if ((f = fopen(path, "r")) == NULL)
		return false;
	if (fgets(line, sizeof(line), f) == NULL) {
		fclose(f);
		return false;
	}
	fclose(f);
	line[strcspn(line, "\r\n")] = '\0';
	if ((eq = strchr(line, '=')) != NULL)
		memmove(line, eq + 1, strlen(eq));
	if (strlen(line) != 95 || len < 96) /* 32 pairs and 31 colons */
		return false;
	memcpy(out, line, 96);
	return true;
}

/* Makes every certificate in a new directory. false: openssl failed (see
 * DIR/openssl.log); the caller skips or fails as it sees fit. */
static inline bool tls_certs_make(struct tls_certs *t)
{
	static const char *const steps[] = {
	        /* the CAs */
	        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
	        "-keyout ca.key -out ca.pem -days 2 -subj /CN=kvd-test-ca",
	        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
	        "-keyout other-ca.key -out other-ca.pem -days 2 -subj /CN=kvd-other-ca",
	        /* the server: localhost and 127.0.0.1 */
	        "printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\nbasicConstraints=CA:FALSE\\n"
	        "extendedKeyUsage=serverAuth\\n' >server.ext",
	        "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
	        "-keyout server.key -out server.csr -subj /CN=localhost",
	        "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
	        "-out server.pem -days 2 -extfile server.ext",
	        /* clients of the trusted CA */
	        "printf 'basicConstraints=CA:FALSE\\nextendedKeyUsage=clientAuth\\n' >client.ext",
	        "for n in reader writer stranger expired; do openssl req -newkey ec -pkeyopt "
	        "ec_paramgen_curve:prime256v1 -nodes -keyout $n.key -out $n.csr -subj /CN=$n "
	        "|| exit 1; done",
	        "for n in reader writer stranger; do openssl x509 -req -in $n.csr -CA ca.pem "
	        "-CAkey ca.key -CAcreateserial -out $n.pem -days 2 -extfile client.ext || exit 1; "
	        "done",
	        /* one of another CA */
	        "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
	        "-keyout untrusted.key -out untrusted.csr -subj /CN=untrusted",
	        "openssl x509 -req -in untrusted.csr -CA other-ca.pem -CAkey other-ca.key "
	        "-CAcreateserial -out untrusted.pem -days 2 -extfile client.ext",
	        /* an expired one of the trusted CA: openssl ca sets both dates */
	        "mkdir -p cadb && : >cadb/index && echo 01 >cadb/serial && "
	        "printf '[ca]\\ndefault_ca=d\\n[d]\\ndatabase=cadb/index\\nnew_certs_dir=cadb\\n"
	        "serial=cadb/serial\\ndefault_md=sha256\\npolicy=p\\nunique_subject=no\\n"
	        "[p]\\ncommonName=supplied\\n' >ca.cnf",
	        "openssl ca -batch -config ca.cnf -cert ca.pem -keyfile ca.key -in expired.csr "
	        "-out expired.pem -notext -startdate 20200101000000Z -enddate 20200102000000Z",
	};

	memset(t, 0, sizeof(*t));
	t->dir = tu_mkdtemp("tls");
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++)
		if (tc_sh(t->dir, steps[i]) != 0)
			return false;
#define TC_SET(field, name) snprintf(t->field, sizeof(t->field), "%s/%s", t->dir, name)
	TC_SET(ca, "ca.pem");
	TC_SET(other_ca, "other-ca.pem");
	TC_SET(server_cert, "server.pem");
	TC_SET(server_key, "server.key");
	TC_SET(reader_cert, "reader.pem");
	TC_SET(reader_key, "reader.key");
	TC_SET(writer_cert, "writer.pem");
	TC_SET(writer_key, "writer.key");
	TC_SET(stranger_cert, "stranger.pem");
	TC_SET(stranger_key, "stranger.key");
	TC_SET(untrusted_cert, "untrusted.pem");
	TC_SET(untrusted_key, "untrusted.key");
	TC_SET(expired_cert, "expired.pem");
	TC_SET(expired_key, "expired.key");
#undef TC_SET
	return tc_fingerprint(t->dir, "reader", t->reader_fp, sizeof(t->reader_fp)) &&
	       tc_fingerprint(t->dir, "writer", t->writer_fp, sizeof(t->writer_fp));
}

static inline void tls_certs_free(struct tls_certs *t)
{
	if (t->dir == NULL)
		return;
	tu_rmtree(t->dir);
	free(t->dir);
	t->dir = NULL;
}

#endif
