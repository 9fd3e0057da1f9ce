/*
 * import.c — kvctl import: loads a stream of kvctl export (docs/EXPORT.md)
 * into a tenant.
 *
 * Import refuses a stream before writing anything unless it is whole: the
 * header is known, every record parses, the keys are in order, and the
 * trailer's counts and SHA-256 match. It then writes the keys' records in
 * file order with Batch, all the versions of one key in one Batch (unless
 * they are more than one Batch holds), and skips a key whose value in the
 * target already equals the newest value the file has for it: that makes a
 * second run after an interruption, or after success, write nothing twice.
 *
 * A blob (format_version 2) is a record line followed by its part lines.
 * The check decodes the parts and compares their XXH64 with the record's;
 * the writing pass skips them, remembering where they start, and streams
 * them from the file into a blob writer when the key is written (never a
 * whole blob in memory). A key with a blob cannot go in one Batch: its
 * records are written in order, Batches split at each blob's commit, and a
 * second run resumes after the records the target's history already ends
 * with (resume_point), so no version is written twice.
 */
#include "exportfmt.h"
#include "kvctl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#define IMPORT_BATCH_DEFAULT 1000  /* records per Batch */
#define IMPORT_BATCH_MAX     10000 /* the protocol's Batch maximum */

enum { OPT_FILE = KVCTL_OPT_OWN, OPT_BATCH };

/* ---- import: reading and checking the stream ------------------------------------ */

struct irec {
	char *key; /* NULL for a part line */
	size_t klen;
	char *value; /* NULL: a delete or a blob; a part line's bytes */
	size_t vlen;
	uint64_t expiry_ms;
	bool blob;                      /* a blob's record: its parts follow */
	uint64_t blob_size, blob_xxh64; /* from the record */
	off_t parts_at;                 /* where its part lines begin in the file */
};

/* A delete: neither a value nor a blob. */
static bool rec_delete(const struct irec *r)
{
	return r->value == NULL && !r->blob;
}

static void irec_free(struct irec *r)
{
	free(r->key);
	free(r->value);
	memset(r, 0, sizeof(*r));
}

struct istream {
	FILE *f;
	const char *name; /* for messages */
	char *line;
	size_t cap;
	size_t len;
	uint64_t lineno;
	char err[256];
};

/* The next line, with its '\n'. 1 at the end; -1 on a read error; -2 for a
 * last line without its '\n' (a truncated file). */
static int next_line(struct istream *in)
{
	ssize_t n;

	errno = 0;
	if ((n = getline(&in->line, &in->cap, in->f)) < 0)
		return ferror(in->f) ? -1 : 1;
	in->len = (size_t)n;
	in->lineno++;
	return in->line[n - 1] == '\n' ? 0 : -2;
}

static int json_u64_of(json_t *v, uint64_t *ret)
{
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return -1;
	*ret = (uint64_t)json_integer_value(v);
	return 0;
}

static int bytes_of(json_t *v, char **ret, size_t *ret_len)
{
	if (!json_is_string(v))
		return -EINVAL;
	return ef_b64_decode(json_string_value(v), json_string_length(v), ret, ret_len);
}

/* The line as kvctl export writes it, matched without a JSON parser:
 * {"key":"B64","value":"B64"|null,"version":N,"timestamp_ms":N,"expiry_ms":N}
 * and nothing else. 1 with r filled; 0 when the line has another shape
 * (another writer's spacing or member order) or anything in it is wrong:
 * the JSON parser then reads it, and says what is wrong. */
static const char *fast_lit(const char *p, const char *end, const char *lit)
{
	size_t n = strlen(lit);

	return (size_t)(end - p) >= n && memcmp(p, lit, n) == 0 ? p + n : NULL;
}

static const char *fast_b64(const char *p, const char *end, char **ret, size_t *ret_len)
{
	const char *q;

	if (p == NULL || p == end || *p != '"' ||
	    (q = memchr(p + 1, '"', (size_t)(end - p - 1))) == NULL)
		return NULL;
	if (ef_b64_decode(p + 1, (size_t)(q - p - 1), ret, ret_len) != 0)
		return NULL;
	return q + 1;
}

static const char *fast_u64(const char *p, const char *end, uint64_t *ret)
{
	uint64_t v = 0;
	const char *s = p;

	if (p == NULL)
		return NULL;
	for (; p < end && *p >= '0' && *p <= '9'; p++) {
		if (v > ((uint64_t)INT64_MAX - (uint64_t)(*p - '0')) / 10)
			return NULL;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	if (p == s || (p - s > 1 && *s == '0'))
		return NULL;
	*ret = v;
	return p;
}

/* {"blob_part":"B64"} as kvctl export writes it: 2 with the bytes in
 * r->value; 0 otherwise (the JSON parser then reads it). */
static int parse_fast_part(const char *line, size_t len, struct irec *r)
{
	const char *end = line + len, *p;

	memset(r, 0, sizeof(*r));
	p = fast_b64(fast_lit(line, end, "{\"blob_part\":"), end, &r->value, &r->vlen);
	if (p == NULL || end - p != 2 || p[0] != '}' || p[1] != '\n') {
		irec_free(r);
		return 0;
	}
	return 2;
}

static int parse_fast(const char *line, size_t len, struct irec *r)
{
	const char *p = line, *end = line + len;
	uint64_t version, ts;

	memset(r, 0, sizeof(*r));
	p = fast_b64(fast_lit(p, end, "{\"key\":"), end, &r->key, &r->klen);
	if (p == NULL || r->klen == 0 || r->klen > WIRE_KEY_MAX ||
	    (p = fast_lit(p, end, ",\"value\":")) == NULL)
		goto no;
	if (fast_lit(p, end, "null") != NULL)
		p += 4;
	else if ((p = fast_b64(p, end, &r->value, &r->vlen)) == NULL)
		goto no;
	p = fast_u64(fast_lit(p, end, ",\"version\":"), end, &version);
	p = p != NULL ? fast_u64(fast_lit(p, end, ",\"timestamp_ms\":"), end, &ts) : NULL;
	p = p != NULL ? fast_u64(fast_lit(p, end, ",\"expiry_ms\":"), end, &r->expiry_ms) : NULL;
	if (p == NULL || end - p != 2 || p[0] != '}' || p[1] != '\n')
		goto no;
	return 1;
no:
	irec_free(r);
	return 0;
}

/* A record, a blob's part or the trailer: 1 for a record in r, 2 for a
 * part line (its bytes in r->value), 0 for the trailer (its document in
 * *ret_doc when ret_doc is not NULL), -1 with in->err set. */
static int parse_line(struct istream *in, struct irec *r, json_t **ret_doc);

/* A record line into r; -1 with in->err set. */
static int parse_record(struct istream *in, json_t *doc, struct irec *r)
{
	json_t *value = json_object_get(doc, "value"), *blob = json_object_get(doc, "blob");
	const char *hex;
	char *end;
	uint64_t version, ts;

	memset(r, 0, sizeof(*r));
	if (bytes_of(json_object_get(doc, "key"), &r->key, &r->klen) != 0 || r->klen == 0 ||
	    r->klen > WIRE_KEY_MAX) {
		snprintf(in->err, sizeof(in->err), "\"key\" is not base64 of 1 to %u bytes",
		         WIRE_KEY_MAX);
		goto fail;
	}
	if (blob != NULL) {
		hex = json_string_value(json_object_get(blob, "xxh64"));
		if (value != NULL || !json_is_object(blob) ||
		    json_u64_of(json_object_get(blob, "size"), &r->blob_size) != 0 || hex == NULL ||
		    strlen(hex) != 16 || hex[0] == '-' || hex[0] == '+') {
			snprintf(in->err, sizeof(in->err),
			         "\"blob\" is not {\"size\": N, \"xxh64\": \"16 hex digits\"} "
			         "(or the record also has a \"value\")");
			goto fail;
		}
		errno = 0;
		r->blob_xxh64 = strtoull(hex, &end, 16);
		if (errno != 0 || *end != '\0') {
			snprintf(in->err, sizeof(in->err), "\"xxh64\" is not 16 hex digits");
			goto fail;
		}
		r->blob = true;
	} else if (value == NULL ||
	           (!json_is_null(value) && bytes_of(value, &r->value, &r->vlen) != 0)) {
		snprintf(in->err, sizeof(in->err), "\"value\" is neither base64 nor null");
		goto fail;
	}
	if (json_u64_of(json_object_get(doc, "version"), &version) != 0 ||
	    json_u64_of(json_object_get(doc, "timestamp_ms"), &ts) != 0 ||
	    json_u64_of(json_object_get(doc, "expiry_ms"), &r->expiry_ms) != 0) {
		snprintf(in->err, sizeof(in->err),
		         "\"version\", \"timestamp_ms\" or \"expiry_ms\" is not an integer >= 0");
		goto fail;
	}
	return 0;
fail:
	irec_free(r);
	return -1;
}

static int parse_part(struct istream *in, json_t *part, struct irec *r)
{
	memset(r, 0, sizeof(*r));
	if (bytes_of(part, &r->value, &r->vlen) != 0) {
		snprintf(in->err, sizeof(in->err), "\"blob_part\" is not base64");
		return -1;
	}
	return 2;
}

static int parse_line(struct istream *in, struct irec *r, json_t **ret_doc)
{
	json_error_t jerr;
	json_t *doc, *part;
	int rv;

	if (in->len > 0 && in->line[0] == '{' && parse_fast(in->line, in->len, r) == 1)
		return 1;
	if (in->len > 1 && in->line[1] == '"' && parse_fast_part(in->line, in->len, r) == 2)
		return 2;
	if ((doc = json_loadb(in->line, in->len, 0, &jerr)) == NULL || !json_is_object(doc)) {
		snprintf(in->err, sizeof(in->err), "not a JSON object (%s)",
		         doc == NULL ? jerr.text : "another JSON value");
		json_decref(doc);
		return -1;
	}
	if (json_object_get(doc, "end") != NULL) {
		if (ret_doc != NULL)
			*ret_doc = doc;
		else
			json_decref(doc);
		return 0;
	}
	if ((part = json_object_get(doc, "blob_part")) != NULL) {
		rv = parse_part(in, part, r);
		json_decref(doc);
		return rv;
	}
	rv = parse_record(in, doc, r);
	json_decref(doc);
	return rv == 0 ? 1 : -1;
}

struct ihead {
	bool history;
	uint64_t as_of;
	char tenant[80];
	uint64_t format_version;
	uint64_t keys, records, deletes, value_bytes; /* from the trailer */
	uint64_t blobs, blob_bytes;
};

/* The blob whose part lines the check is reading. */
struct iblob {
	bool open;
	uint64_t line; /* its record's */
	uint64_t size, left, xxh64;
	XXH64_state_t *xxh;
};

/* A part line for the open blob: its length must be EXPORT_BLOB_PART, or
 * what is left when that is less. -1 with in->err set. */
static int blob_part_take(struct istream *in, struct iblob *b, const struct irec *r)
{
	uint64_t want = b->left < EXPORT_BLOB_PART ? b->left : EXPORT_BLOB_PART;
	uint64_t got;

	if (!b->open) {
		snprintf(in->err, sizeof(in->err), "a blob_part line outside a blob");
		return -1;
	}
	if (r->vlen != want) {
		snprintf(in->err, sizeof(in->err),
		         "a blob_part of %zu bytes where the blob of line %" PRIu64
		         " wants %" PRIu64,
		         r->vlen, b->line, want);
		return -1;
	}
	XXH64_update(b->xxh, r->value, r->vlen);
	b->left -= want;
	if (b->left > 0)
		return 0;
	b->open = false;
	if ((got = XXH64_digest(b->xxh)) != b->xxh64) {
		snprintf(in->err, sizeof(in->err),
		         "the blob of line %" PRIu64 " has XXH64 %016" PRIx64
		         ", its record says %016" PRIx64 ": damaged",
		         b->line, got, b->xxh64);
		return -1;
	}
	return 0;
}

/* Reads the whole stream once: header, records, trailer. 0, or an exit
 * code with the error reported. */
static int import_check(struct kvctl *k, struct istream *in, struct ihead *h)
{
	EVP_MD_CTX *sha = EVP_MD_CTX_new();
	json_error_t jerr;
	json_t *doc = NULL, *v;
	struct irec r, prev = {0};
	struct iblob blob = {.xxh = XXH64_createState()};
	uint64_t keys = 0, records = 0, deletes = 0, value_bytes = 0, blobs = 0, blob_bytes = 0;
	uint64_t n, fv;
	char hex[65];
	const char *want;
	int rv;

	if (sha == NULL || EVP_DigestInit_ex(sha, EVP_sha256(), NULL) != 1 || blob.xxh == NULL) {
		rv = kvctl_error(k, "cannot set up SHA-256 and XXH64");
		goto out;
	}
	if ((rv = next_line(in)) != 0)
		goto bad_line;
	doc = json_loadb(in->line, in->len, 0, &jerr);
	if (doc == NULL || (v = json_object_get(doc, "format")) == NULL || !json_is_string(v) ||
	    strcmp(json_string_value(v), EXPORT_FORMAT) != 0) {
		rv = kvctl_error(k,
		                 "%s: not a kvd export (its first line is not a header with "
		                 "\"format\": \"%s\")",
		                 in->name, EXPORT_FORMAT);
		goto out;
	}
	if (json_u64_of(json_object_get(doc, "format_version"), &fv) != 0 ||
	    fv < EXPORT_FORMAT_VERSION_MIN || fv > EXPORT_FORMAT_VERSION) {
		rv = kvctl_error(k,
		                 "%s: format_version is not %d to %d (written by a newer kvctl?)",
		                 in->name, EXPORT_FORMAT_VERSION_MIN, EXPORT_FORMAT_VERSION);
		goto out;
	}
	h->format_version = fv;
	h->history = json_is_true(json_object_get(doc, "history"));
	if (json_u64_of(json_object_get(doc, "as_of"), &h->as_of) != 0)
		h->as_of = 0;
	v = json_object_get(doc, "tenant");
	snprintf(h->tenant, sizeof(h->tenant), "%s", json_is_string(v) ? json_string_value(v) : "");
	EVP_DigestUpdate(sha, in->line, in->len);
	json_decref(doc);
	doc = NULL;
	for (;;) {
		if ((rv = next_line(in)) != 0)
			goto bad_line;
		if ((rv = parse_line(in, &r, &doc)) < 0)
			goto bad_record;
		if (rv == 2) {
			rv = blob_part_take(in, &blob, &r);
			irec_free(&r);
			if (rv != 0)
				goto bad_record;
			EVP_DigestUpdate(sha, in->line, in->len);
			continue;
		}
		if (blob.open) {
			irec_free(&r);
			snprintf(in->err, sizeof(in->err),
			         "the blob of line %" PRIu64 " is cut short: %" PRIu64
			         " of its %" PRIu64 " bytes",
			         blob.line, blob.size - blob.left, blob.size);
			goto bad_record;
		}
		if (rv == 0)
			break; /* the trailer, in doc */
		if (r.blob && fv < 2) {
			irec_free(&r);
			snprintf(in->err, sizeof(in->err),
			         "a blob in a format_version %" PRIu64 " file", fv);
			goto bad_record;
		}
		if (r.blob) {
			blob = (struct iblob){.open = true,
			                      .line = in->lineno,
			                      .size = r.blob_size,
			                      .left = r.blob_size,
			                      .xxh64 = r.blob_xxh64,
			                      .xxh = blob.xxh};
			XXH64_reset(blob.xxh, 0);
			blobs++;
			blob_bytes += r.blob_size;
			if (r.blob_size == 0 && XXH64_digest(blob.xxh) != r.blob_xxh64) {
				irec_free(&r);
				snprintf(in->err, sizeof(in->err),
				         "an empty blob with XXH64 %016" PRIx64 ": damaged",
				         r.blob_xxh64);
				goto bad_record;
			}
			blob.open = r.blob_size > 0;
		}
		if (prev.key != NULL && ef_key_cmp(prev.key, prev.klen, r.key, r.klen) > 0) {
			irec_free(&r);
			snprintf(in->err, sizeof(in->err), "keys out of order");
			goto bad_record;
		}
		keys += prev.key == NULL || ef_key_cmp(prev.key, prev.klen, r.key, r.klen) != 0;
		records++;
		deletes += rec_delete(&r);
		value_bytes += r.vlen;
		irec_free(&prev);
		prev = r;
		EVP_DigestUpdate(sha, in->line, in->len);
	}
	/* the trailer: the last line, with the counts and the checksum */
	if ((rv = next_line(in)) != 1) {
		rv = kvctl_error(k, "%s: line %" PRIu64 ": more after the trailer line", in->name,
		                 in->lineno);
		goto out;
	}
	ef_sha_hex(sha, hex);
	want = json_string_value(json_object_get(doc, "sha256"));
	if (json_u64_of(json_object_get(doc, "keys"), &h->keys) != 0 ||
	    json_u64_of(json_object_get(doc, "records"), &h->records) != 0 ||
	    json_u64_of(json_object_get(doc, "deletes"), &n) != 0 || want == NULL) {
		rv = kvctl_error(k, "%s: the trailer lacks keys, records, deletes or sha256",
		                 in->name);
		goto out;
	}
	h->deletes = n;
	h->value_bytes = value_bytes;
	if (fv >= 2 && (json_u64_of(json_object_get(doc, "blobs"), &h->blobs) != 0 ||
	                json_u64_of(json_object_get(doc, "blob_bytes"), &h->blob_bytes) != 0)) {
		rv = kvctl_error(k, "%s: the trailer lacks blobs or blob_bytes", in->name);
		goto out;
	}
	if (strcmp(want, hex) != 0) {
		rv = kvctl_error(k,
		                 "%s: checksum mismatch (sha256 %s, the trailer says %s): the "
		                 "file was changed or damaged; refused",
		                 in->name, hex, want);
		goto out;
	}
	if (h->keys != keys || h->records != records || h->deletes != deletes ||
	    (fv >= 2 && (h->blobs != blobs || h->blob_bytes != blob_bytes))) {
		rv = kvctl_error(k,
		                 "%s: the trailer's counts (%" PRIu64 " keys, %" PRIu64
		                 " records, %" PRIu64 " blobs of %" PRIu64
		                 " bytes) differ from the file's (%" PRIu64 ", %" PRIu64
		                 ", %" PRIu64 ", %" PRIu64 ")",
		                 in->name, h->keys, h->records, h->blobs, h->blob_bytes, keys,
		                 records, blobs, blob_bytes);
		goto out;
	}
	rv = 0;
	goto out;
bad_line:
	if (rv == -1)
		rv = kvctl_error(k, "cannot read %s: %s", in->name, strerror(errno));
	else
		rv = kvctl_error(k,
		                 "%s is truncated: it ends at line %" PRIu64
		                 "%s without the trailer line (an interrupted export?); refused, "
		                 "nothing was imported",
		                 in->name, in->lineno, blob.open ? ", inside a blob," : "");
	goto out;
bad_record:
	rv = kvctl_error(k, "%s: line %" PRIu64 ": %s; refused, nothing was imported", in->name,
	                 in->lineno, in->err);
out:
	irec_free(&prev);
	json_decref(doc);
	EVP_MD_CTX_free(sha);
	XXH64_freeState(blob.xxh);
	return rv;
}

/* ---- import: writing ------------------------------------------------------------ */

/* The records of one key, oldest first. */
struct igroup {
	struct irec *r;
	size_t n, cap;
};

struct import_state {
	struct kvctl *k;
	struct istream *in;   /* the file, for the blobs' part lines */
	struct istream parts; /* reads them: its line buffer */
	XXH64_state_t *xxh;
	size_t batch; /* records per Batch */
	struct igroup *groups;
	size_t ngroups, cap;
	size_t pending; /* records in groups */
	struct kvc_op *ops;
	struct kvc_status st;
	struct ef_progress pr;
	/* counts */
	uint64_t keys, records, deletes, present, expired_keys, expired, bytes_read, value_bytes;
	uint64_t blobs, blob_bytes;
	uint64_t seen_keys, seen_records;
};

static void group_clear(struct igroup *g)
{
	for (size_t i = 0; i < g->n; i++)
		irec_free(&g->r[i]);
	g->n = 0;
}

/* The target's value of each pending key (present[i]: its newest value
 * equals the file's newest), through Scans of the pending keys' range. */
static int lookup_present(struct import_state *is, bool *present)
{
	struct kvc_call call = {.status = &is->st};
	struct igroup *first = &is->groups[0], *last = &is->groups[is->ngroups - 1];
	const struct irec *lk = &last->r[last->n - 1];
	struct kvc_scan_opts so = {.start = first->r[0].key,
	                           .start_len = first->r[0].klen,
	                           .page_size = IMPORT_BATCH_MAX};
	struct kvc_item item;
	struct kvc_blob_info bi;
	kvc_iter *it;
	char *end = NULL;
	uint64_t bsize;
	size_t g = 0;
	bool tblob;
	int rv, c;

	/* the end bound: the last key followed by a zero byte (exclusive), when
	 * that is still a key's length; else the walk stops by itself */
	if (lk->klen < WIRE_KEY_MAX && (end = malloc(lk->klen + 1)) != NULL) {
		memcpy(end, lk->key, lk->klen);
		end[lk->klen] = '\0';
		so.end = end;
		so.end_len = lk->klen + 1;
	}
	if ((rv = kvc_scan_open(is->k->c, &call, &so, &it)) != 0)
		goto out;
	while (g < is->ngroups && (rv = kvc_scan_next(it, &item)) == 0) {
		while (g < is->ngroups) {
			const struct irec *n = &is->groups[g].r[is->groups[g].n - 1];

			c = ef_key_cmp(n->key, n->klen, item.key, item.key_len);
			if (c > 0)
				break; /* the next item */
			tblob = c == 0 && kvc_scan_blob(it, &bsize);
			if (c == 0 && n->blob)
				present[g] = tblob && bsize == n->blob_size &&
				             kvc_blob_info(is->k->c, &call, item.key, item.key_len,
				                           item.version, &bi) == 0 &&
				             bi.xxh64 == n->blob_xxh64;
			else if (c == 0)
				present[g] = !tblob && n->value != NULL &&
				             n->vlen == item.value_len &&
				             (n->vlen == 0 ||
				              memcmp(n->value, item.value, n->vlen) == 0);
			else /* not in the target: present when the file's newest is a delete */
				present[g] = rec_delete(n);
			g++;
			if (c == 0)
				break;
		}
	}
	for (; g < is->ngroups; g++)
		present[g] = rec_delete(&is->groups[g].r[is->groups[g].n - 1]);
	rv = rv < 0 ? rv : 0;
	kvc_scan_close(it);
out:
	free(end);
	return rv;
}

/* Whether a value or blob record r has expired (now is the wall clock). */
static bool rec_expired(const struct irec *r, uint64_t now)
{
	return !rec_delete(r) && r->expiry_ms != 0 && r->expiry_ms <= now;
}

/* The TTL that gives r's absolute expiry at now; none stays none even
 * where the target tenant has a default TTL. */
static uint64_t ttl_of(const struct irec *r, uint64_t now)
{
	return r->expiry_ms == 0 ? KVC_TTL_NONE : r->expiry_ms - now;
}

/* An op for record r (not a blob); false when r has expired. */
static bool op_of(const struct irec *r, uint64_t now, struct kvc_op *op)
{
	memset(op, 0, sizeof(*op));
	op->key = r->key;
	op->key_len = r->klen;
	op->if_version = KVC_ANY_VERSION;
	if (r->value == NULL) {
		op->type = KVC_OP_DELETE;
		return true;
	}
	if (rec_expired(r, now))
		return false;
	op->type = KVC_OP_PUT;
	op->value = r->value;
	op->value_len = r->vlen;
	op->ttl_ms = ttl_of(r, now);
	return true;
}

static int send_ops(struct import_state *is, size_t n)
{
	struct kvc_call call = {.status = &is->st};

	return n == 0 ? 0 : kvc_batch(is->k->c, &call, is->ops, n, NULL);
}

/* Counts a key's records as written (from index from on). */
static void count_written(struct import_state *is, const struct igroup *g, size_t from,
                          uint64_t now)
{
	struct kvc_op op;

	is->keys++;
	for (size_t i = from; i < g->n; i++) {
		if (rec_expired(&g->r[i], now) || (!g->r[i].blob && !op_of(&g->r[i], now, &op))) {
			is->expired++;
			continue;
		}
		is->records++;
		is->deletes += rec_delete(&g->r[i]);
		is->value_bytes += g->r[i].vlen;
		is->blobs += g->r[i].blob;
		is->blob_bytes += g->r[i].blob ? g->r[i].blob_size : 0;
	}
}

/* A key with more records than one Batch holds: written in several, so an
 * interruption may leave part of its history. A second run then resumes
 * after the newest of its records whose value is the target's value. */
static int flush_big(struct import_state *is, struct igroup *g, bool present)
{
	struct kvc_call call = {.status = &is->st};
	struct kvc_value cur = {0};
	size_t from = 0, n = 0, i;
	uint64_t now = ef_now_ms();
	bool newest_expired, blob = false;
	int rv;

	newest_expired = g->r[g->n - 1].expiry_ms != 0 && g->r[g->n - 1].expiry_ms <= now;
	if (present || newest_expired) {
		is->present += present;
		is->expired_keys += !present;
		return 0;
	}
	rv = kvc_get_ex(is->k->c, &call, g->r[0].key, g->r[0].klen, 0, 0, &cur, &blob, NULL);
	if (rv != 0 && rv != -KVC_NOT_FOUND)
		return rv;
	for (i = g->n; rv == 0 && !blob && i-- > 0;) { /* a blob is none of these values */
		if (g->r[i].value != NULL && g->r[i].vlen == cur.len &&
		    (cur.len == 0 || memcmp(g->r[i].value, cur.data, cur.len) == 0)) {
			from = i + 1;
			break;
		}
	}
	kvc_value_free(&cur);
	count_written(is, g, from, now);
	for (i = from; i < g->n; i++) {
		if (op_of(&g->r[i], now, &is->ops[n]))
			n++;
		if (n == is->batch) {
			if ((rv = send_ops(is, n)) != 0)
				return rv;
			n = 0;
			now = ef_now_ms();
		}
	}
	return send_ops(is, n);
}

/* Blob record r: its part lines, read again from the file where they
 * begin, streamed into a blob writer and committed with r's expiry. The
 * file's position is kept. -KVC_INTERNAL with no message when the parts
 * are no longer what the check read. */
static int upload_blob(struct import_state *is, const struct irec *r)
{
	struct kvc_call call = {.status = &is->st};
	struct kvc_blob_opts o = KVC_BLOB_OPTS_INIT;
	struct istream *p = &is->parts;
	kvc_blob_writer *w = NULL;
	struct irec part;
	uint64_t left = r->blob_size, now = ef_now_ms();
	off_t pos = ftello(is->in->f);
	int rv;

	if (rec_expired(r, now))
		return 0; /* expired since it was counted: as a Put would be */
	o.ttl_ms = ttl_of(r, now);
	p->f = is->in->f;
	if (pos < 0 || fseeko(p->f, r->parts_at, SEEK_SET) != 0)
		return -KVC_INTERNAL;
	if (XXH64_reset(is->xxh, 0) != XXH_OK) {
		rv = -KVC_RESOURCE_EXHAUSTED;
		goto out;
	}
	if ((rv = kvc_blob_writer_open(is->k->c, &call, r->key, r->klen, &o, &w)) != 0)
		goto out;
	while (left > 0) {
		memset(&part, 0, sizeof(part));
		if (next_line(p) != 0 || parse_line(p, &part, NULL) != 2 ||
		    part.vlen != (left < EXPORT_BLOB_PART ? left : EXPORT_BLOB_PART)) {
			irec_free(&part);
			rv = -KVC_INTERNAL;
			goto out;
		}
		XXH64_update(is->xxh, part.value, part.vlen);
		rv = kvc_blob_write(w, part.value, part.vlen);
		left -= part.vlen;
		irec_free(&part);
		if (rv != 0)
			goto out;
		is->bytes_read += p->len;
		ef_progress_show(&is->pr, is->seen_keys, is->seen_records, is->bytes_read);
	}
	if (XXH64_digest(is->xxh) != r->blob_xxh64) {
		rv = -KVC_INTERNAL;
		goto out;
	}
	rv = kvc_blob_commit(w, NULL);
out:
	kvc_blob_writer_close(w); /* aborts one not committed */
	if (fseeko(is->in->f, pos, SEEK_SET) != 0 && rv == 0)
		rv = -KVC_INTERNAL;
	if (rv == -KVC_INTERNAL)
		is->st.message[0] = '\0';
	return rv;
}

/* Whether the target's version t (blob size tsize, or KVC_NOT_BLOB) is
 * record r. */
static bool same_record(struct import_state *is, const struct irec *r, const struct kvc_version *t,
                        uint64_t tsize)
{
	struct kvc_call call = {.status = &is->st};
	struct kvc_blob_info bi;

	if (t->deleted || rec_delete(r))
		return t->deleted && rec_delete(r);
	if (r->blob)
		return tsize == r->blob_size &&
		       kvc_blob_info(is->k->c, &call, r->key, r->klen, t->version, &bi) == 0 &&
		       bi.xxh64 == r->blob_xxh64;
	return tsize == KVC_NOT_BLOB && t->len == r->vlen &&
	       (r->vlen == 0 || memcmp(t->data, r->value, r->vlen) == 0);
}

/* The largest j such that the target's versions t (newest first, count of
 * them) end with w[0..j), w[j - 1] newest. */
static size_t ends_with(struct import_state *is, struct irec **w, size_t m,
                        const struct kvc_version *t, const uint64_t *sizes, size_t count)
{
	size_t j, i;

	for (j = count < m ? count : m; j > 0; j--) {
		for (i = 0; i < j && same_record(is, w[i], &t[j - 1 - i], sizes[j - 1 - i]); i++)
			;
		if (i == j)
			break;
	}
	return j;
}

/*
 * How many of w (the records of one key that are to be written, oldest
 * first) the target has already: the largest j such that the target's
 * history ends with w[0..j), newest last. A key written in several steps
 * (Batches and blob commits) and interrupted resumes at w[j]. Deletes
 * that lead w wrote nothing when the target had no such key: a history
 * that ends with w[lead..j) counts as w[0..j) written.
 */
static int resume_point(struct import_state *is, struct irec **w, size_t m, size_t *ret)
{
	struct kvc_call call = {.status = &is->st};
	struct kvc_version *t = NULL;
	uint64_t *sizes = NULL;
	size_t count = 0, j, i, lead;
	bool truncated;
	int rv;

	rv = kvc_versions_ex(is->k->c, &call, w[0]->key, w[0]->klen,
	                     (uint32_t)(m < IMPORT_BATCH_DEFAULT ? m : IMPORT_BATCH_DEFAULT), 0,
	                     true, &t, &count, &truncated, &sizes);
	if (rv == -KVC_NOT_FOUND) {
		*ret = 0;
		return 0;
	}
	if (rv != 0)
		return rv;
	j = ends_with(is, w, m, t, sizes, count);
	/* leading deletes of a key the target did not have wrote nothing */
	for (lead = 0; lead < m && rec_delete(w[lead]); lead++)
		;
	if (lead > 0 && lead < m && (i = ends_with(is, w + lead, m - lead, t, sizes, count)) > 0 &&
	    lead + i > j)
		j = lead + i;
	kvc_versions_free(t, count);
	free(sizes);
	*ret = j;
	return 0;
}

/* A key with a blob: its records in order, Batches of the others split at
 * each blob, after those the target has already (resume_point). */
static int flush_mixed(struct import_state *is, struct igroup *g)
{
	struct irec **w = calloc(g->n, sizeof(*w));
	size_t m = 0, from, n = 0, i;
	uint64_t now = ef_now_ms();
	int rv;

	if (w == NULL)
		return -KVC_RESOURCE_EXHAUSTED;
	for (i = 0; i < g->n; i++) {
		if (rec_expired(&g->r[i], now))
			is->expired++;
		else
			w[m++] = &g->r[i];
	}
	if (m == 0 || (rv = resume_point(is, w, m, &from)) != 0) {
		rv = m == 0 ? 0 : rv;
		goto out;
	}
	if (from == m) {
		is->present++;
		goto out;
	}
	is->keys++;
	for (i = from; i < m; i++) {
		is->records++;
		is->deletes += rec_delete(w[i]);
		is->value_bytes += w[i]->vlen;
		is->blobs += w[i]->blob;
		is->blob_bytes += w[i]->blob ? w[i]->blob_size : 0;
	}
	for (i = from; i < m; i++) {
		if (w[i]->blob) {
			if ((rv = send_ops(is, n)) != 0 || (rv = upload_blob(is, w[i])) != 0)
				goto out;
			n = 0;
			now = ef_now_ms();
			continue;
		}
		n += op_of(w[i], now, &is->ops[n]);
		if (n == is->batch) {
			if ((rv = send_ops(is, n)) != 0)
				goto out;
			n = 0;
			now = ef_now_ms();
		}
	}
	rv = send_ops(is, n);
out:
	free(w);
	return rv;
}

static bool group_has_blob(const struct igroup *g)
{
	for (size_t i = 0; i < g->n; i++)
		if (g->r[i].blob)
			return true;
	return false;
}

/* Writes the pending keys: those not present in the target, in one Batch. */
static int flush(struct import_state *is)
{
	bool *present;
	size_t n = 0, g, i;
	uint64_t now;
	int rv;

	if (is->ngroups == 0)
		return 0;
	if ((present = calloc(is->ngroups, sizeof(*present))) == NULL)
		return -KVC_RESOURCE_EXHAUSTED;
	if ((rv = lookup_present(is, present)) != 0)
		goto out;
	now = ef_now_ms();
	for (g = 0; g < is->ngroups; g++) {
		struct igroup *gr = &is->groups[g];
		const struct irec *newest = &gr->r[gr->n - 1];

		if (group_has_blob(gr) && !present[g] && !rec_expired(newest, now)) {
			if ((rv = send_ops(is, n)) != 0 || (rv = flush_mixed(is, gr)) != 0)
				goto out;
			n = 0;
			now = ef_now_ms();
			continue;
		}
		if (gr->n > is->batch) {
			if ((rv = send_ops(is, n)) != 0 ||
			    (rv = flush_big(is, gr, present[g])) != 0)
				goto out;
			n = 0;
			now = ef_now_ms();
			continue;
		}
		if (present[g]) {
			is->present++;
			continue;
		}
		if (rec_expired(newest, now)) {
			/* the key has expired: none of its history either */
			is->expired_keys++;
			continue;
		}
		count_written(is, gr, 0, now);
		for (i = 0; i < gr->n; i++)
			n += op_of(&gr->r[i], now, &is->ops[n]);
	}
	rv = send_ops(is, n);
out:
	for (g = 0; g < is->ngroups; g++)
		group_clear(&is->groups[g]);
	is->ngroups = 0;
	is->pending = 0;
	free(present);
	return rv;
}

/* A new group at the end of the pending ones. */
static struct igroup *group_new(struct import_state *is)
{
	struct igroup *grown;

	if (is->ngroups == is->cap) {
		size_t cap = is->cap != 0 ? is->cap * 2 : 64;

		if ((grown = realloc(is->groups, cap * sizeof(*grown))) == NULL)
			return NULL;
		memset(grown + is->cap, 0, (cap - is->cap) * sizeof(*grown));
		is->groups = grown;
		is->cap = cap;
	}
	return &is->groups[is->ngroups++];
}

static int group_add(struct igroup *g, struct irec *r)
{
	struct irec *grown;

	if (g->n == g->cap) {
		size_t cap = g->cap != 0 ? g->cap * 2 : 4;

		if ((grown = realloc(g->r, cap * sizeof(*grown))) == NULL)
			return -KVC_RESOURCE_EXHAUSTED;
		g->r = grown;
		g->cap = cap;
	}
	g->r[g->n++] = *r;
	return 0;
}

/* The last pending key has all its records. When the pending records are
 * now more than a Batch holds, the keys before it are written first, so
 * that one key's records stay in one Batch; a key that alone holds more is
 * written by flush_big. */
static int close_group(struct import_state *is)
{
	struct igroup keep, *g;
	int rv;

	if (is->pending > is->batch && is->ngroups > 1) {
		keep = is->groups[is->ngroups - 1];
		memset(&is->groups[is->ngroups - 1], 0, sizeof(keep));
		is->ngroups--;
		is->pending -= keep.n;
		rv = flush(is);
		g = &is->groups[is->ngroups++]; /* flush left none: slot 0 */
		group_clear(g);
		free(g->r);
		*g = keep;
		is->pending = keep.n;
		if (rv != 0)
			return rv;
	}
	return is->pending >= is->batch ? flush(is) : 0;
}

/* The records, after the check, grouped by key into Batches. */
static int import_apply(struct import_state *is, struct istream *in, uint64_t total)
{
	struct igroup *cur = NULL;
	struct irec r;
	int rv;

	ef_progress_init(&is->pr, "import", total);
	if (next_line(in) != 0) /* the header, checked */
		return -KVC_INTERNAL;
	for (;;) {
		if (next_line(in) != 0)
			return -KVC_INTERNAL; /* it was whole a moment ago */
		if (in->len > 13 && memcmp(in->line, "{\"blob_part\":", 13) == 0)
			continue; /* a blob's part: read again by upload_blob, which counts it */
		if ((rv = parse_line(in, &r, NULL)) < 0)
			return -KVC_INTERNAL;
		if (rv == 2) {
			irec_free(&r);
			continue;
		}
		is->bytes_read += in->len;
		if (rv == 0)
			break; /* the trailer */
		if (r.blob && (r.parts_at = ftello(in->f)) < 0) {
			irec_free(&r);
			return -KVC_INTERNAL;
		}
		is->seen_records++;
		if (cur == NULL || ef_key_cmp(cur->r[0].key, cur->r[0].klen, r.key, r.klen) != 0) {
			is->seen_keys++;
			if (cur != NULL && (rv = close_group(is)) != 0) {
				irec_free(&r);
				return rv;
			}
			if ((cur = group_new(is)) == NULL) {
				irec_free(&r);
				return -KVC_RESOURCE_EXHAUSTED;
			}
		}
		if ((rv = group_add(cur, &r)) != 0) {
			irec_free(&r);
			return rv;
		}
		is->pending++;
		ef_progress_show(&is->pr, is->seen_keys, is->seen_records, is->bytes_read);
	}
	if (cur != NULL && (rv = close_group(is)) != 0)
		return rv;
	rv = flush(is);
	ef_progress_end(&is->pr);
	return rv;
}

/* A pipe is copied to a temporary file first: import reads it twice. */
static int open_input(struct kvctl *k, const char *file, FILE **ret)
{
	char buf[1 << 16];
	struct stat st;
	size_t n;
	FILE *f, *tmp;

	if (file != NULL && strcmp(file, "-") != 0) {
		if ((f = fopen(file, "re")) == NULL)
			return kvctl_error(k, "cannot open %s: %s", file, strerror(errno));
		*ret = f;
		return 0;
	}
	if (fstat(STDIN_FILENO, &st) == 0 && S_ISREG(st.st_mode)) {
		*ret = stdin;
		return 0;
	}
	if ((tmp = tmpfile()) == NULL)
		return kvctl_error(k, "cannot create a temporary file for stdin: %s",
		                   strerror(errno));
	while ((n = fread(buf, 1, sizeof(buf), stdin)) > 0) {
		if (fwrite(buf, 1, n, tmp) != n) {
			fclose(tmp);
			return kvctl_error(k, "cannot copy stdin to a temporary file: %s",
			                   strerror(errno));
		}
	}
	if (ferror(stdin) || fflush(tmp) != 0) {
		fclose(tmp);
		return kvctl_error(k, "cannot read stdin: %s", strerror(errno));
	}
	rewind(tmp);
	*ret = tmp;
	return 0;
}

int cmd_import(struct kvctl *k, int argc, char **argv)
{
	static const struct option own[] = {
	        {"file", required_argument, NULL, OPT_FILE},
	        {"batch", required_argument, NULL, OPT_BATCH},
	        {NULL, 0, NULL, 0},
	};
	struct import_state is = {.k = k, .batch = IMPORT_BATCH_DEFAULT};
	struct istream in = {0};
	struct ihead h = {0};
	struct kvctl_opts oi;
	const char *file = NULL;
	uint64_t batch, t0;
	double s;
	int opt, rv = 0;

	kvctl_opts_begin(k, &oi, "import", own);
	while (rv == 0 && (opt = kvctl_opts_next(k, &oi, argc, argv)) != -1) {
		if (opt == OPT_FILE) {
			file = optarg;
		} else if (opt == OPT_BATCH) {
			if ((rv = kvctl_parse_u64(k, "--batch", optarg, IMPORT_BATCH_MAX,
			                          &batch)) == 0 &&
			    batch == 0)
				rv = kvctl_usage(k, "--batch wants 1 to %d records",
				                 IMPORT_BATCH_MAX);
			is.batch = (size_t)batch;
		} else {
			return KVCTL_EXIT_USAGE;
		}
	}
	if (rv != 0)
		return rv;
	if (argc - optind != 0)
		return kvctl_usage(k, "usage: kvctl import [--file F] [--batch N]");
	if (file != NULL && file[0] == '\0')
		return kvctl_usage(k, "--file wants a file name");
	ef_b64_init();
	if ((is.ops = calloc(is.batch, sizeof(*is.ops))) == NULL ||
	    (is.xxh = XXH64_createState()) == NULL) {
		free(is.ops);
		return kvctl_error(k, "out of memory");
	}
	is.in = &in;
	is.parts.name = "the blob parts";
	if ((rv = open_input(k, file, &in.f)) != 0)
		goto out;
	in.name = file != NULL && strcmp(file, "-") != 0 ? file : "stdin";
	t0 = ef_mono_ms();
	if ((rv = import_check(k, &in, &h)) != 0)
		goto out;
	if ((rv = kvctl_connect(k)) != 0)
		goto out;
	rewind(in.f);
	in.lineno = 0;
	if ((rv = import_apply(&is, &in, h.records)) != 0) {
		ef_progress_end(&is.pr);
		if (rv == -KVC_INTERNAL && is.st.message[0] == '\0')
			rv = kvctl_error(k, "%s changed while it was read", in.name);
		else
			rv = kvctl_fail(k, rv, &is.st);
		goto out;
	}
	s = (double)(ef_mono_ms() - t0) / 1000;
	s = s > 0 ? s : 0.001;
	if (k->json) {
		rv = kvctl_emit_json(
		        k,
		        json_pack("{s:s,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "tenant",
		                  k->opts.tenant, "keys", kvctl_json_u64(is.keys), "records",
		                  kvctl_json_u64(is.records), "deletes", kvctl_json_u64(is.deletes),
		                  "present", kvctl_json_u64(is.present), "expired_keys",
		                  kvctl_json_u64(is.expired_keys), "expired",
		                  kvctl_json_u64(is.expired), "value_bytes",
		                  kvctl_json_u64(is.value_bytes), "blobs", kvctl_json_u64(is.blobs),
		                  "blob_bytes", kvctl_json_u64(is.blob_bytes), "bytes",
		                  kvctl_json_u64(is.bytes_read), "elapsed_ms",
		                  kvctl_json_u64((uint64_t)(s * 1000))));
		goto out;
	}
	printf("imported %" PRIu64 " keys, %" PRIu64 " records (%" PRIu64 " deletes, %" PRIu64
	       " blobs of %" PRIu64 " bytes); %" PRIu64 " keys already present, %" PRIu64
	       " keys and %" PRIu64 " older versions expired: %" PRIu64
	       " bytes in %.2f s (%.0f keys/s, %.1f MB/s)\n",
	       is.keys, is.records, is.deletes, is.blobs, is.blob_bytes, is.present,
	       is.expired_keys, is.expired, is.bytes_read, s, (double)h.keys / s,
	       (double)is.bytes_read / 1e6 / s);
	rv = kvctl_finish(k);
out:
	for (size_t g = 0; g < is.cap; g++) {
		group_clear(&is.groups[g]);
		free(is.groups[g].r);
	}
	free(is.groups);
	free(is.ops);
	free(is.parts.line);
	XXH64_freeState(is.xxh);
	free(in.line);
	if (in.f != NULL && in.f != stdin)
		fclose(in.f);
	return rv;
}
