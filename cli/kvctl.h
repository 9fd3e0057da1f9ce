/*
 * kvctl.h — what kvctl's command handlers (commands.c) share with its
 * driver (kvctl.c) and its output helpers (output.c).
 *
 * A handler parses its own options and arguments (kvctl_opts_next), opens
 * the handle (kvctl_connect), makes its calls, prints its result in text or
 * as one JSON document, and returns the process's exit code. Every failure
 * goes through kvctl_fail or kvctl_usage, which print the one line on
 * stderr (and, with -o json, the error document on stdout) and return the
 * exit code.
 */
#ifndef KVCTL_H
#define KVCTL_H

#include <getopt.h>
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvclient.h"
#include "wire.h"

enum kvctl_exit {
	KVCTL_EXIT_OK = 0,
	KVCTL_EXIT_NOT_FOUND = 1,
	KVCTL_EXIT_USAGE = 2,
	KVCTL_EXIT_PRECONDITION = 3, /* a version did not match */
	KVCTL_EXIT_UNAVAILABLE = 4,  /* daemon unreachable, unavailable, or silent */
	KVCTL_EXIT_ERROR = 5,
};

#define KVCTL_VALUE_MAX ((size_t)64 << 20) /* a value read from stdin */
#define KVCTL_TOKEN_MAX 1024               /* a token from --token-file, in bytes */

struct kvctl;

/* One row of the command table (kvctl.c), from which `kvctl --help`,
 * `kvctl CMD --help` and `kvctl help CMD` are printed. A group ("tenant")
 * has no handler; its subcommands are rows named "tenant create", ... */
struct kvctl_command {
	const char *name;    /* "get", "tenant", "tenant create" */
	const char *args;    /* the synopsis after the name; "" for none */
	const char *summary; /* one line, lower case, no full stop */
	const char *options; /* the command's own options, one "  --opt ARG  text\n"
	                        line each; NULL for none */
	int (*run)(struct kvctl *k, int argc, char **argv); /* argv[0] is the last
	                                                       word of name */
};

struct kvctl {
	struct kvc_options opts;
	kvc *c;
	bool json;
	const struct kvctl_command *cmd; /* the command running; NULL before */
	const char *token_file;          /* --token-file, read by kvctl_connect */
	const char *tls_cert;            /* --tls-cert or $KVD_TLS_CERT (kv+tls://) */
	const char *tls_key;             /* --tls-key or $KVD_TLS_KEY */
	char token[KVCTL_TOKEN_MAX + 1]; /* the token read from token_file */
	char what[192];                  /* "get user:1": what failed, for the error line */
};

/* ---- option parsing --------------------------------------------------------
 *
 * Every command accepts the global options too (-e, -t, --token,
 * --token-file, --tls-ca, --tls-cert, --tls-key, -o, --timeout, -h), before
 * or after its arguments; `--` ends the options. -h prints the help of
 * k->cmd and exits 0. */

#define KVCTL_OPTS_MAX   32
#define KVCTL_OPTS_USAGE (-2) /* a bad option; the message is out */

struct kvctl_opts {
	struct option all[KVCTL_OPTS_MAX];
	/* -o FILE: a value of -o other than text or json comes back as
	 * KVCTL_OPT_O_FILE (kvctl blob get); false: a usage error */
	bool o_file;
};

/* cmd: the command's name, for the error line; own: its long options, ended
 * by a zeroed entry, with values >= KVCTL_OPT_OWN. */
void kvctl_opts_begin(struct kvctl *k, struct kvctl_opts *oi, const char *cmd,
                      const struct option *own);
/* The next own option (optarg set), -1 when done (optind is the first
 * argument), or KVCTL_OPTS_USAGE. */
int kvctl_opts_next(struct kvctl *k, struct kvctl_opts *oi, int argc, char **argv);

enum {
	KVCTL_OPT_TOKEN = 256,
	KVCTL_OPT_TOKEN_FILE,
	KVCTL_OPT_TIMEOUT,
	KVCTL_OPT_TLS_CA,
	KVCTL_OPT_TLS_CERT,
	KVCTL_OPT_TLS_KEY,
	KVCTL_OPT_O_FILE, /* see kvctl_opts.o_file */
	KVCTL_OPT_OWN = 300,
};

/* A decimal without sign that fits in max; usage error otherwise. */
int kvctl_parse_u64(struct kvctl *k, const char *opt, const char *s, uint64_t max, uint64_t *ret);

/* ---- the handle and errors ---------------------------------------------- */

/* Sets k->what: the command and, escaped and cut, the key. */
void kvctl_what(struct kvctl *k, const char *cmd, const void *key, size_t key_len);
/* Reads --token-file when given, then opens the handle; an exit code. */
int kvctl_connect(struct kvctl *k);
/* Checks a key given on the command line. */
int kvctl_check_key(struct kvctl *k, const char *key);

/* ---- errors (output.c) ------------------------------------------------------ */

/* One line on stderr ("kvctl: WHAT: msg"), and with -o json the error
 * document on stdout; returns exit_code. */
int kvctl_report(struct kvctl *k, int code, int exit_code, const char *msg);
/* A failed call: rv its return, st its status. */
int kvctl_fail(struct kvctl *k, int rv, const struct kvc_status *st);
__attribute__((format(printf, 2, 3))) int kvctl_usage(struct kvctl *k, const char *fmt, ...);
/* An error that is neither (an output or input failure): exit 5. */
__attribute__((format(printf, 2, 3))) int kvctl_error(struct kvctl *k, const char *fmt, ...);

/* ---- output (output.c) ------------------------------------------------------ */

/* Prints doc as one JSON document, frees it; an exit code. */
int kvctl_emit_json(struct kvctl *k, json_t *doc);
/* Flushes stdout; an exit code (5 when the output could not be written). */
int kvctl_finish(struct kvctl *k);

json_t *kvctl_json_u64(uint64_t v);
/* name: the bytes as a string when they are UTF-8 without NUL, and always
 * name_b64: base64 (standard alphabet, padded). */
void kvctl_json_bytes(json_t *obj, const char *name, const void *p, size_t n);
/* ms since the epoch as ISO 8601 UTC with milliseconds. */
void kvctl_format_time(uint64_t ms, char buf[32]);
/* Writes bytes as they are. */
void kvctl_write(const void *p, size_t n);
/* Writes a value as it is and, when stdout is a terminal and the value does
 * not end with one, a newline (so that the prompt starts on a line of its
 * own); into a pipe or file, the bytes only. */
void kvctl_write_value(const void *p, size_t n);

/* ---- commands (commands.c) ------------------------------------------------ */

int cmd_put(struct kvctl *k, int argc, char **argv);
int cmd_get(struct kvctl *k, int argc, char **argv);
int cmd_del(struct kvctl *k, int argc, char **argv);
int cmd_scan(struct kvctl *k, int argc, char **argv);
int cmd_versions(struct kvctl *k, int argc, char **argv);
int cmd_tenant_create(struct kvctl *k, int argc, char **argv);
int cmd_tenant_list(struct kvctl *k, int argc, char **argv);
int cmd_tenant_info(struct kvctl *k, int argc, char **argv);
int cmd_tenant_drop(struct kvctl *k, int argc, char **argv);
int cmd_tenant_passivate(struct kvctl *k, int argc, char **argv);
int cmd_tenant_activate(struct kvctl *k, int argc, char **argv);
int cmd_tenant_release(struct kvctl *k, int argc, char **argv);
int cmd_tenant_adopt(struct kvctl *k, int argc, char **argv);
int cmd_tenant_backup(struct kvctl *k, int argc, char **argv);
int cmd_stats(struct kvctl *k, int argc, char **argv);
int cmd_compact(struct kvctl *k, int argc, char **argv);
int cmd_health(struct kvctl *k, int argc, char **argv);

/* ---- blobs (blob.c) ------------------------------------------------------------ */

int cmd_blob_put(struct kvctl *k, int argc, char **argv);
int cmd_blob_get(struct kvctl *k, int argc, char **argv);
int cmd_blob_info(struct kvctl *k, int argc, char **argv);

/* ---- export and import (export.c; docs/EXPORT.md) ---------------------------- */

int cmd_export(struct kvctl *k, int argc, char **argv);
int cmd_import(struct kvctl *k, int argc, char **argv);

/* kvctl.c: the help of one command (a group's lists its subcommands) on
 * stdout. */
void kvctl_command_help(const struct kvctl_command *cmd);

#endif
