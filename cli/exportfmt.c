/*
 * exportfmt.c — what kvctl export (export.c) and kvctl import (import.c)
 * share: growing buffers, base64 both ways, the key order, clocks, the
 * progress line, the SHA-256 in hex. docs/EXPORT.md has the format.
 */
#include "exportfmt.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- growing buffers ----------------------------------------------------- */

int ef_buf_reserve(struct ef_buf *b, size_t more)
{
	size_t cap = b->cap != 0 ? b->cap : 256;
	char *p;

	if (b->n + more <= b->cap)
		return 0;
	while (cap < b->n + more)
		cap *= 2;
	if ((p = realloc(b->p, cap)) == NULL)
		return -ENOMEM;
	b->p = p;
	b->cap = cap;
	return 0;
}

int ef_buf_add(struct ef_buf *b, const void *p, size_t n)
{
	if (ef_buf_reserve(b, n) != 0)
		return -ENOMEM;
	memcpy(b->p + b->n, p, n);
	b->n += n;
	return 0;
}

int ef_buf_u64(struct ef_buf *b, const char *name, uint64_t v)
{
	char tmp[64];
	int n = snprintf(tmp, sizeof(tmp), ",\"%s\":%" PRIu64, name, v);

	return ef_buf_add(b, tmp, (size_t)n);
}

static const char b64_alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Standard base64, padded, between double quotes. */
int ef_buf_b64(struct ef_buf *b, const void *p, size_t n)
{
	const unsigned char *s = p;
	size_t i;
	char *o;

	if (ef_buf_reserve(b, (n + 2) / 3 * 4 + 2) != 0)
		return -ENOMEM;
	o = b->p + b->n;
	*o++ = '"';
	for (i = 0; i + 2 < n; i += 3) {
		uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];

		*o++ = b64_alphabet[v >> 18 & 63];
		*o++ = b64_alphabet[v >> 12 & 63];
		*o++ = b64_alphabet[v >> 6 & 63];
		*o++ = b64_alphabet[v & 63];
	}
	if (i < n) {
		uint32_t v = (uint32_t)s[i] << 16 | (i + 1 < n ? (uint32_t)s[i + 1] << 8 : 0);

		*o++ = b64_alphabet[v >> 18 & 63];
		*o++ = b64_alphabet[v >> 12 & 63];
		*o++ = i + 1 < n ? b64_alphabet[v >> 6 & 63] : '=';
		*o++ = '=';
	}
	*o++ = '"';
	b->n = (size_t)(o - b->p);
	return 0;
}

/* The 6-bit value of each base64 character; -1 for other bytes. */
static int8_t b64_table[256];

void ef_b64_init(void)
{
	memset(b64_table, -1, sizeof(b64_table));
	for (int i = 0; i < 64; i++)
		b64_table[(unsigned char)b64_alphabet[i]] = (int8_t)i;
}

static int b64_value(unsigned char c)
{
	return b64_table[c];
}

/* Decodes standard padded base64 into a new block (one byte more, so that
 * an empty value is not NULL); -EINVAL for anything else. */
int ef_b64_decode(const char *s, size_t n, char **ret, size_t *ret_len)
{
	size_t i, o = 0, pad = 0;
	char *out;

	if (n % 4 != 0)
		return -EINVAL;
	if (n > 0 && s[n - 1] == '=')
		pad = n > 1 && s[n - 2] == '=' ? 2 : 1;
	if ((out = malloc(n / 4 * 3 + 1)) == NULL)
		return -ENOMEM;
	for (i = 0; i < n; i += 4) {
		int v[4];
		int last = i + 4 == n;

		for (int j = 0; j < 4; j++) {
			v[j] = last && j >= 4 - (int)pad ? 0 : b64_value((unsigned char)s[i + j]);
			if (v[j] < 0) {
				free(out);
				return -EINVAL;
			}
		}
		out[o++] = (char)(v[0] << 2 | v[1] >> 4);
		if (!last || pad < 2)
			out[o++] = (char)((v[1] & 15) << 4 | v[2] >> 2);
		if (!last || pad < 1)
			out[o++] = (char)((v[2] & 3) << 6 | v[3]);
	}
	*ret = out;
	*ret_len = o;
	return 0;
}

uint64_t ef_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint64_t ef_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Keys in the daemon's order: bytewise, a shorter key before its
 * extensions. */
int ef_key_cmp(const void *a, size_t an, const void *b, size_t bn)
{
	int c = memcmp(a, b, an < bn ? an : bn);

	return c != 0 ? c : an < bn ? -1 : an > bn ? 1 : 0;
}

/* ---- progress on a terminal --------------------------------------------------- */

void ef_progress_init(struct ef_progress *p, const char *verb, uint64_t total)
{
	memset(p, 0, sizeof(*p));
	p->verb = verb;
	p->tty = isatty(STDERR_FILENO);
	p->t0 = p->last = ef_mono_ms();
	p->total = total;
}

/* Shown once the transfer is large (by records, bytes or a second of
 * time), at most every PROGRESS_EVERY_MS. */
void ef_progress_show(struct ef_progress *p, uint64_t keys, uint64_t records, uint64_t bytes)
{
	uint64_t t = ef_mono_ms(), el = t - p->t0;
	double s = el > 0 ? (double)el / 1000 : 0.001;

	if (!p->tty || t - p->last < PROGRESS_EVERY_MS)
		return;
	if (records < PROGRESS_MIN_RECORDS && bytes < PROGRESS_MIN_BYTES && el < 1000)
		return;
	p->last = t;
	p->shown = true;
	if (p->total != 0)
		fprintf(stderr,
		        "\r%s: %" PRIu64 "/%" PRIu64 " records (%.0f%%), %" PRIu64
		        " keys, %.1f MB, %.0f keys/s ",
		        p->verb, records, p->total, 100.0 * (double)records / (double)p->total,
		        keys, (double)bytes / 1e6, (double)keys / s);
	else
		fprintf(stderr,
		        "\r%s: %" PRIu64 " keys, %" PRIu64 " records, %.1f MB, %.0f keys/s ",
		        p->verb, keys, records, (double)bytes / 1e6, (double)keys / s);
}

void ef_progress_end(struct ef_progress *p)
{
	if (p->shown)
		fputc('\n', stderr);
	p->shown = false;
}

void ef_sha_hex(EVP_MD_CTX *sha, char hex[65])
{
	unsigned char md[32];
	unsigned int n = 0;

	EVP_DigestFinal_ex(sha, md, &n);
	for (unsigned i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
}
