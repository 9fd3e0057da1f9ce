/*
 * output.c — kvctl's output: JSON documents, error reports (the one line
 * on stderr and its JSON document), base64, times, raw bytes (and
 * a value's newline on a terminal).
 *
 * JSON is built with libjansson, not printed by hand: it is a small,
 * well-kept Debian library (libjansson-dev) that gets string escaping and
 * UTF-8 validation right, which hand-written printf escaping tends not to.
 * jansson refuses a string that is not valid UTF-8, which is the test for
 * whether a key or value also appears as a plain string.
 */
#include "kvctl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int kvctl_emit_json(struct kvctl *k, json_t *doc)
{
	int rv = json_dumpf(doc, stdout, JSON_COMPACT);

	json_decref(doc);
	if (rv != 0 || fputc('\n', stdout) == EOF) {
		k->json = false; /* no second document for this failure */
		return kvctl_error(k, "cannot write the JSON output");
	}
	return KVCTL_EXIT_OK;
}

int kvctl_finish(struct kvctl *k)
{
	if (fflush(stdout) != 0 || ferror(stdout)) {
		k->json = false;
		return kvctl_error(k, "cannot write the output");
	}
	return KVCTL_EXIT_OK;
}

/* ---- errors: one line on stderr, and a JSON document with -o json ---- */

int kvctl_report(struct kvctl *k, int code, int exit_code, const char *msg)
{
	if (k->what[0] != '\0')
		fprintf(stderr, "kvctl: %s: %s\n", k->what, msg);
	else
		fprintf(stderr, "kvctl: %s\n", msg);
	if (k->json) {
		json_t *doc = json_pack("{s:{s:i,s:s,s:s,s:i}}", "error", "code", code, "name",
		                        kvc_code_name(code), "message", msg, "exit", exit_code);

		if (doc != NULL)
			kvctl_emit_json(k, doc);
	}
	return exit_code;
}

static int exit_code_of(int rv)
{
	switch (-rv) {
	case KVC_NOT_FOUND:
		return KVCTL_EXIT_NOT_FOUND;
	case KVC_FAILED_PRECONDITION:
		return KVCTL_EXIT_PRECONDITION;
	case KVC_UNAVAILABLE:
	case KVC_DEADLINE_EXCEEDED: /* nothing answered in time */
		return KVCTL_EXIT_UNAVAILABLE;
	default:
		return KVCTL_EXIT_ERROR;
	}
}

int kvctl_fail(struct kvctl *k, int rv, const struct kvc_status *st)
{
	const char *msg = st != NULL && st->message[0] != '\0' ? st->message : kvc_code_name(rv);

	return kvctl_report(k, -rv, exit_code_of(rv), msg);
}

static int vreport(struct kvctl *k, int code, int exit_code, const char *fmt, va_list ap)
{
	char msg[512];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	return kvctl_report(k, code, exit_code, msg);
}

int kvctl_usage(struct kvctl *k, const char *fmt, ...)
{
	va_list ap;
	int rv;

	va_start(ap, fmt);
	rv = vreport(k, KVC_INVALID_ARGUMENT, KVCTL_EXIT_USAGE, fmt, ap);
	va_end(ap);
	if (!k->json && k->cmd != NULL)
		fprintf(stderr, "Try 'kvctl %s --help'.\n", k->cmd->name);
	else if (!k->json)
		fputs("Try 'kvctl --help'.\n", stderr);
	return rv;
}

int kvctl_error(struct kvctl *k, const char *fmt, ...)
{
	va_list ap;
	int rv;

	va_start(ap, fmt);
	rv = vreport(k, KVC_INTERNAL, KVCTL_EXIT_ERROR, fmt, ap);
	va_end(ap);
	return rv;
}

/* jansson integers are signed 64-bit; a larger count is given as a string
 * of digits rather than wrapped. */
json_t *kvctl_json_u64(uint64_t v)
{
	char buf[24];

	if (v <= (uint64_t)INT64_MAX)
		return json_integer((json_int_t)v);
	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
	return json_string(buf);
}

static json_t *base64(const void *p, size_t n)
{
	static const char alphabet[] =
	        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const unsigned char *s = p;
	size_t i, o = 0, cap = (n + 2) / 3 * 4;
	char *buf = malloc(cap + 1);
	json_t *j;

	if (buf == NULL)
		return NULL;
	for (i = 0; i + 2 < n; i += 3) {
		uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];

		buf[o++] = alphabet[v >> 18 & 63];
		buf[o++] = alphabet[v >> 12 & 63];
		buf[o++] = alphabet[v >> 6 & 63];
		buf[o++] = alphabet[v & 63];
	}
	if (i < n) {
		uint32_t v = (uint32_t)s[i] << 16 | (i + 1 < n ? (uint32_t)s[i + 1] << 8 : 0);

		buf[o++] = alphabet[v >> 18 & 63];
		buf[o++] = alphabet[v >> 12 & 63];
		buf[o++] = i + 1 < n ? alphabet[v >> 6 & 63] : '=';
		buf[o++] = '=';
	}
	j = json_stringn(buf, o);
	free(buf);
	return j;
}

void kvctl_json_bytes(json_t *obj, const char *name, const void *p, size_t n)
{
	char b64name[64];

	/* json_stringn is NULL for bytes that are not UTF-8 */
	if (n == 0 || memchr(p, '\0', n) == NULL)
		json_object_set_new(obj, name, json_stringn(n != 0 ? p : "", n));
	snprintf(b64name, sizeof(b64name), "%s_b64", name);
	json_object_set_new(obj, b64name, base64(p, n));
}

void kvctl_format_time(uint64_t ms, char buf[32])
{
	time_t s = (time_t)(ms / 1000);
	struct tm tm;
	size_t n;

	if (gmtime_r(&s, &tm) == NULL || (n = strftime(buf, 32, "%Y-%m-%dT%H:%M:%S", &tm)) == 0) {
		snprintf(buf, 32, "@%llu", (unsigned long long)ms);
		return;
	}
	snprintf(buf + n, 32 - n, ".%03uZ", (unsigned)(ms % 1000));
}

void kvctl_write(const void *p, size_t n)
{
	if (n != 0)
		fwrite(p, 1, n, stdout);
}

void kvctl_write_value(const void *p, size_t n)
{
	kvctl_write(p, n);
	if (isatty(STDOUT_FILENO) && (n == 0 || ((const char *)p)[n - 1] != '\n'))
		putchar('\n');
}
