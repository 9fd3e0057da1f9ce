/*
 * exportfmt.h — the stream of kvctl export and kvctl import
 * (docs/EXPORT.md) and the helpers both commands use (exportfmt.c).
 * Functions returning int give 0 or -ENOMEM/-EINVAL; none prints, except
 * the progress line on stderr.
 */
#ifndef KVCTL_EXPORTFMT_H
#define KVCTL_EXPORTFMT_H

#include <openssl/evp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EXPORT_FORMAT             "kvd-export"
#define EXPORT_FORMAT_VERSION     2                 /* written; 2 added blobs */
#define EXPORT_FORMAT_VERSION_MIN 1                 /* the oldest import reads */
#define EXPORT_BLOB_PART          ((size_t)1 << 20) /* a blob's bytes per part line */
#define PROGRESS_MIN_RECORDS      10000             /* a smaller transfer shows no progress */
#define PROGRESS_MIN_BYTES        ((uint64_t)16 << 20)
#define PROGRESS_EVERY_MS         250

/* ---- growing buffers --------------------------------------------------------- */

struct ef_buf {
	char *p;
	size_t n, cap;
};

/* Room for more bytes. -ENOMEM */
int ef_buf_reserve(struct ef_buf *b, size_t more);
int ef_buf_add(struct ef_buf *b, const void *p, size_t n);
/* ,"name":v */
int ef_buf_u64(struct ef_buf *b, const char *name, uint64_t v);
/* Standard base64 (padded) of p, between double quotes. */
int ef_buf_b64(struct ef_buf *b, const void *p, size_t n);

/* ---- base64 decoding ------------------------------------------------------------ */

/* Fills the decoding table; once, before ef_b64_decode. */
void ef_b64_init(void);
/* Standard padded base64 into a new block (one byte longer than the bytes,
 * so that an empty value is not NULL). -EINVAL for anything else, -ENOMEM. */
int ef_b64_decode(const char *s, size_t n, char **ret, size_t *ret_len);

/* ---- keys, clocks, checksums ---------------------------------------------------- */

/* The daemon's key order: bytewise, a shorter key before its extensions. */
int ef_key_cmp(const void *a, size_t an, const void *b, size_t bn);
uint64_t ef_now_ms(void);  /* the wall clock, ms since the epoch */
uint64_t ef_mono_ms(void); /* a monotonic clock, ms */
/* Finishes sha and writes its digest as 64 lower-case hex digits. */
void ef_sha_hex(EVP_MD_CTX *sha, char hex[65]);

/* ---- progress on a terminal --------------------------------------------------------- */

struct ef_progress {
	const char *verb; /* "export", "import" */
	bool tty;         /* stderr is a terminal */
	bool shown;       /* a line was printed: end it with a newline */
	uint64_t t0, last;
	uint64_t total; /* records expected; 0: unknown */
};

void ef_progress_init(struct ef_progress *p, const char *verb, uint64_t total);
/* A line on stderr when it is a terminal and the transfer is large (by
 * records, bytes or a second of time), at most every PROGRESS_EVERY_MS. */
void ef_progress_show(struct ef_progress *p, uint64_t keys, uint64_t records, uint64_t bytes);
/* Ends a shown line with a newline. */
void ef_progress_end(struct ef_progress *p);

#endif
