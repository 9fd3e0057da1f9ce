/*
 * export.c — kvctl export: a tenant as a stream of JSON lines that any JSON
 * reader can use without kvd (docs/EXPORT.md has the format, its
 * guarantees and its limits; import.c reads it back).
 *
 * Export reads one snapshot: a keys-only Scan fixes the version R it reads
 * at, and every later call reads at or below R (Versions with before R+1,
 * Get of an exact version), so writes that go on meanwhile are not seen.
 * Without history, a page's keys are read with pipelined async Gets of the
 * newest value (read again by exact version when changed since R); with
 * history, by EXPORT_JOBS threads sharing the handle (it is thread-safe).
 * The page's lines are then written in key order by the main thread, which
 * alone touches the output and its SHA-256.
 *
 * A blob never sits in memory whole: a worker writes its record line (size
 * and XXH64 from BlobInfo of the exact version) and leaves a marker in the
 * key's buffer; the main thread, writing the buffer out, streams the
 * blob's bytes there with BlobRead of that version, EXPORT_BLOB_PART bytes
 * per part line, and checks their XXH64 against the record's. A blob
 * version that expires or is compacted away between its listing and its
 * streaming fails the export (its record line is out already).
 */
#include "exportfmt.h"
#include "kvctl.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#define EXPORT_PAGE          1000 /* keys per scan page, read in parallel */
#define EXPORT_JOBS          8    /* threads reading one page's keys (history) */
#define EXPORT_IN_FLIGHT     256  /* requests in flight (the handle's contexts) */
#define EXPORT_VERSIONS_PAGE 1000 /* the protocol's Versions maximum */

enum { OPT_HISTORY = KVCTL_OPT_OWN, OPT_AS_OF, OPT_FILE };

/* A blob whose part lines go at offset at of its key's buffer. */
struct eblob {
	size_t at;
	uint64_t version, size, xxh64;
};

/* One key of a page: read by a worker, written out by the main thread. */
struct ekey {
	char *key;
	size_t len;
	uint64_t version;  /* the scan's */
	struct ef_buf out; /* its lines */
	uint64_t records;  /* lines in out */
	uint64_t deletes;  /* of them, deletes */
	uint64_t gone;     /* versions listed but expired or dropped before read */
	uint64_t value_bytes;
	struct eblob *blobs; /* markers in out, in order */
	size_t nblobs, blobs_cap;
	uint64_t blob_bytes;
	int rv; /* 0 or the failed call's return */
	struct kvc_status st;
	/* the newest value, read by kvc_get_async (without history) */
	struct kvc_value newest;
	int newest_rv;
};

struct epage {
	kvc *c;
	const char *tenant;
	bool history;
	uint64_t as_of;
	struct ekey *keys;
	size_t n;
	atomic_size_t next; /* the next key a worker takes */
};

/* One record line. value NULL: a delete. */
static int record_line(struct ef_buf *b, const void *key, size_t klen, const void *value,
                       size_t vlen, uint64_t version, uint64_t ts, uint64_t expiry)
{
	int rv = ef_buf_add(b, "{\"key\":", 7);

	rv = rv != 0 ? rv : ef_buf_b64(b, key, klen);
	rv = rv != 0 ? rv : ef_buf_add(b, ",\"value\":", 9);
	if (value != NULL)
		rv = rv != 0 ? rv : ef_buf_b64(b, value, vlen);
	else
		rv = rv != 0 ? rv : ef_buf_add(b, "null", 4);
	/* JSON readers often hold integers as int64: a larger expiry (never,
	 * in practice) is written as INT64_MAX */
	if (expiry > (uint64_t)INT64_MAX)
		expiry = (uint64_t)INT64_MAX;
	rv = rv != 0 ? rv : ef_buf_u64(b, "version", version);
	rv = rv != 0 ? rv : ef_buf_u64(b, "timestamp_ms", ts);
	rv = rv != 0 ? rv : ef_buf_u64(b, "expiry_ms", expiry);
	rv = rv != 0 ? rv : ef_buf_add(b, "}\n", 2);
	return rv;
}

/* A blob's record line, and its marker: the part lines follow it. */
static int blob_line(struct ekey *e, const struct kvc_blob_info *bi)
{
	struct ef_buf *b = &e->out;
	uint64_t expiry = bi->expiry_ms > (uint64_t)INT64_MAX ? (uint64_t)INT64_MAX : bi->expiry_ms;
	char tmp[96];
	int rv = ef_buf_add(b, "{\"key\":", 7);

	rv = rv != 0 ? rv : ef_buf_b64(b, e->key, e->len);
	snprintf(tmp, sizeof(tmp), ",\"blob\":{\"size\":%" PRIu64 ",\"xxh64\":\"%016" PRIx64 "\"}",
	         bi->size, bi->xxh64);
	rv = rv != 0 ? rv : ef_buf_add(b, tmp, strlen(tmp));
	rv = rv != 0 ? rv : ef_buf_u64(b, "version", bi->version);
	rv = rv != 0 ? rv : ef_buf_u64(b, "timestamp_ms", bi->timestamp_ms);
	rv = rv != 0 ? rv : ef_buf_u64(b, "expiry_ms", expiry);
	rv = rv != 0 ? rv : ef_buf_add(b, "}\n", 2);
	if (rv == 0 && e->nblobs == e->blobs_cap) {
		size_t cap = e->blobs_cap != 0 ? e->blobs_cap * 2 : 2;
		struct eblob *grown = realloc(e->blobs, cap * sizeof(*grown));

		if (grown == NULL)
			return -ENOMEM;
		e->blobs = grown;
		e->blobs_cap = cap;
	}
	if (rv != 0)
		return rv;
	e->blobs[e->nblobs++] = (struct eblob){
	        .at = b->n, .version = bi->version, .size = bi->size, .xxh64 = bi->xxh64};
	e->records++;
	e->blob_bytes += bi->size;
	return 0;
}

/* A blob version of e's key: its record line and marker (BlobInfo of
 * exactly that version). */
static int export_blob(struct epage *pg, struct ekey *e, uint64_t version, bool *ret_written)
{
	struct kvc_call call = {.tenant = pg->tenant, .status = &e->st};
	struct kvc_blob_info bi;
	int rv = kvc_blob_info(pg->c, &call, e->key, e->len, version, &bi);

	if (rv == -KVC_NOT_FOUND) {
		e->gone++;
		return 0;
	}
	if (rv != 0)
		return rv;
	if ((rv = blob_line(e, &bi)) != 0)
		return -KVC_RESOURCE_EXHAUSTED;
	*ret_written = true;
	return 0;
}

/* A put version of e's key: Get of exactly that version gives its value,
 * time and expiry (or says it is a blob: export_blob). One that expired
 * (or was compacted away) since it was listed is counted in e->gone and
 * not written. */
static int export_put(struct epage *pg, struct ekey *e, uint64_t version, bool *ret_written)
{
	struct kvc_call call = {.tenant = pg->tenant, .status = &e->st};
	struct kvc_value v;
	bool blob = false;
	int rv;

	*ret_written = false;
	rv = kvc_get_ex(pg->c, &call, e->key, e->len, version, 0, &v, &blob, NULL);
	if (rv == -KVC_NOT_FOUND) {
		e->gone++;
		return 0;
	}
	if (rv != 0)
		return rv;
	if (blob) {
		kvc_value_free(&v);
		return export_blob(pg, e, version, ret_written);
	}
	rv = record_line(&e->out, e->key, e->len, v.data, v.len, v.version, v.timestamp_ms,
	                 v.expiry_ms);
	if (rv == 0) {
		e->records++;
		e->value_bytes += v.len;
		*ret_written = true;
	}
	kvc_value_free(&v);
	return rv == -ENOMEM ? -KVC_RESOURCE_EXHAUSTED : rv;
}

/* Every version of e's key at or below the snapshot, oldest first. */
static int export_history(struct epage *pg, struct ekey *e)
{
	struct kvc_call call = {.tenant = pg->tenant, .status = &e->st};
	struct kvc_version *all = NULL, *list, *grown;
	size_t n = 0, count, i;
	uint64_t before = pg->as_of + 1;
	bool truncated, written, newest = true;
	int rv = 0;

	for (;;) {
		rv = kvc_versions(pg->c, &call, e->key, e->len, EXPORT_VERSIONS_PAGE, before, false,
		                  &list, &count, &truncated);
		if (rv != 0)
			goto out;
		if (count > 0 && (grown = realloc(all, (n + count) * sizeof(*all))) == NULL) {
			kvc_versions_free(list, count);
			rv = -KVC_RESOURCE_EXHAUSTED;
			goto out;
		}
		if (count > 0) {
			all = grown;
			memcpy(all + n, list, count * sizeof(*all));
			n += count;
			before = list[count - 1].version;
		}
		free(list); /* the entries' data are NULL: values were not asked for */
		if (count < EXPORT_VERSIONS_PAGE)
			break;
	}
	/* The newest version is the one the scan saw (writes after the
	 * snapshot are below "before"). If it is gone, so is the key. */
	if (n == 0 || all[0].deleted) {
		e->gone++;
		goto out;
	}
	for (i = n; i-- > 0;) {
		if (all[i].deleted) {
			rv = record_line(&e->out, e->key, e->len, NULL, 0, all[i].version,
			                 all[i].timestamp_ms, 0);
			if (rv != 0) {
				rv = -KVC_RESOURCE_EXHAUSTED;
				goto out;
			}
			e->records++;
			e->deletes++;
			continue;
		}
		newest = i == 0;
		if ((rv = export_put(pg, e, all[i].version, &written)) != 0)
			goto out;
		if (newest && !written) {
			/* the key expired while it was read: none of it */
			e->out.n = 0;
			e->records = e->deletes = e->value_bytes = e->blob_bytes = 0;
			e->nblobs = 0;
		}
	}
out:
	free(all);
	return rv;
}

static void *export_worker(void *arg)
{
	struct epage *pg = arg;
	size_t i;
	bool written;

	while ((i = atomic_fetch_add(&pg->next, 1)) < pg->n) {
		struct ekey *e = &pg->keys[i];

		if (pg->history)
			e->rv = export_history(pg, e);
		else
			e->rv = export_put(pg, e, e->version, &written);
		if (e->rv != 0) /* the others stop at their next key */
			atomic_store(&pg->next, pg->n);
	}
	return NULL;
}

/* A reply to kvc_get_async: the key's newest value, on a library thread. */
static void newest_done(void *arg, const struct kvc_async_result *res)
{
	struct ekey *e = arg;

	e->newest_rv = res->rv;
	if (res->rv != 0) {
		if (res->status != NULL)
			e->st = *res->status;
		return;
	}
	if ((e->newest.data = malloc(res->value_len + 1)) == NULL) {
		e->newest_rv = -KVC_RESOURCE_EXHAUSTED;
		return;
	}
	memcpy(e->newest.data, res->value, res->value_len);
	e->newest.len = res->value_len;
	e->newest.version = res->version;
	e->newest.timestamp_ms = res->timestamp_ms;
	e->newest.expiry_ms = res->expiry_ms;
}

/*
 * Without history, the page's keys are read with kvc_get_async, pipelined
 * on one connection, which is several times faster than a Get each. An
 * async Get reads the newest version, not the snapshot's: when it is the
 * version the scan saw, that is the snapshot's value; otherwise (written or
 * deleted since the snapshot) the key is read again by its exact version.
 */
static int export_page_newest(struct epage *pg)
{
	struct kvc_call call = {.tenant = pg->tenant};
	size_t sent, i;
	bool written;
	int rv = 0;

	for (sent = 0; sent < pg->n; sent++) {
		struct ekey *e = &pg->keys[sent];

		call.status = &e->st;
		e->newest_rv = 1; /* no reply yet */
		if ((rv = kvc_get_async(pg->c, &call, e->key, e->len, newest_done, e)) != 0) {
			e->rv = rv;
			break;
		}
	}
	kvc_drain(pg->c);
	for (i = 0; i < sent; i++) {
		struct ekey *e = &pg->keys[i];
		struct kvc_value *v = &e->newest;

		if (e->newest_rv == 0 && v->version == e->version) {
			if (record_line(&e->out, e->key, e->len, v->data, v->len, v->version,
			                v->timestamp_ms, v->expiry_ms) != 0) {
				e->rv = -KVC_RESOURCE_EXHAUSTED;
				break;
			}
			e->records = 1;
			e->value_bytes = v->len;
		} else if (e->newest_rv == 0 || e->newest_rv == -KVC_NOT_FOUND ||
		           e->newest_rv == -KVC_FAILED_PRECONDITION) {
			/* changed since the snapshot, gone, or a blob */
			if ((e->rv = export_put(pg, e, e->version, &written)) != 0)
				break;
		} else {
			e->rv = e->newest_rv;
			break;
		}
	}
	for (i = 0; i < sent; i++)
		kvc_value_free(&pg->keys[i].newest);
	return rv;
}

/* Runs the page's keys through EXPORT_JOBS threads. */
static int export_page(struct epage *pg)
{
	pthread_t th[EXPORT_JOBS];
	size_t started = 0, i;
	int rv = 0;

	atomic_store(&pg->next, 0);
	for (i = 0; i < EXPORT_JOBS && i * 4 < pg->n; i++) {
		if (pthread_create(&th[i], NULL, export_worker, pg) != 0)
			break;
		started++;
	}
	if (started == 0)
		export_worker(pg);
	for (i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	return rv;
}

struct export_out {
	FILE *f;
	EVP_MD_CTX *sha;
	uint64_t bytes;
	char *part;         /* EXPORT_BLOB_PART bytes of a blob, read */
	struct ef_buf line; /* a part line */
	XXH64_state_t *xxh;
};

static int out_write(struct export_out *o, const void *p, size_t n, bool hashed)
{
	if (n != 0 && fwrite(p, 1, n, o->f) != n)
		return -EIO;
	if (hashed && EVP_DigestUpdate(o->sha, p, n) != 1)
		return -EIO;
	o->bytes += n;
	return 0;
}

static int out_json_line(struct export_out *o, json_t *doc, bool hashed)
{
	char *s = doc != NULL ? json_dumps(doc, JSON_COMPACT) : NULL;
	int rv = s == NULL ? -ENOMEM : 0;

	json_decref(doc);
	rv = rv != 0 ? rv : out_write(o, s, strlen(s), hashed);
	rv = rv != 0 ? rv : out_write(o, "\n", 1, hashed);
	free(s);
	return rv;
}

struct export_counts {
	uint64_t keys, records, deletes, gone, value_bytes, blobs, blob_bytes;
};

/* Streams blob b of e's key as part lines: BlobRead of its version,
 * EXPORT_BLOB_PART bytes at a time, checked against its size and XXH64.
 * 0, or an exit code with the error reported. */
static int stream_blob(struct kvctl *k, struct export_out *o, const struct ekey *e,
                       const struct eblob *b, struct ef_progress *pr,
                       const struct export_counts *cnt)
{
	struct kvc_status st = {0};
	struct kvc_call call = {.tenant = k->opts.tenant, .status = &st};
	uint64_t off = 0, got;
	size_t want, n;
	int rv;

	if (XXH64_reset(o->xxh, 0) != XXH_OK)
		return kvctl_error(k, "cannot set up XXH64");
	while (off < b->size) {
		want = b->size - off < EXPORT_BLOB_PART ? (size_t)(b->size - off)
		                                        : EXPORT_BLOB_PART;
		rv = kvc_blob_read(k->c, &call, e->key, e->len, b->version, off, o->part, want, &n);
		if (rv != 0) {
			kvctl_what(k, "export", e->key, e->len);
			if (rv == -KVC_NOT_FOUND)
				return kvctl_error(k,
				                   "the blob at version %" PRIu64
				                   " expired or was compacted away while it was "
				                   "exported; run the export again",
				                   b->version);
			return kvctl_fail(k, rv, &st);
		}
		if (n != want) {
			kvctl_what(k, "export", e->key, e->len);
			return kvctl_error(k,
			                   "the blob at version %" PRIu64 " ends at %" PRIu64
			                   " bytes, its BlobInfo said %" PRIu64,
			                   b->version, off + n, b->size);
		}
		XXH64_update(o->xxh, o->part, n);
		o->line.n = 0;
		if (ef_buf_add(&o->line, "{\"blob_part\":", 13) != 0 ||
		    ef_buf_b64(&o->line, o->part, n) != 0 || ef_buf_add(&o->line, "}\n", 2) != 0)
			return kvctl_error(k, "out of memory");
		if (out_write(o, o->line.p, o->line.n, true) != 0)
			return kvctl_error(k, "cannot write the export: %s",
			                   strerror(errno != 0 ? errno : EIO));
		off += n;
		ef_progress_show(pr, cnt->keys, cnt->records, o->bytes);
	}
	if ((got = XXH64_digest(o->xxh)) != b->xxh64) {
		kvctl_what(k, "export", e->key, e->len);
		return kvctl_error(k,
		                   "the blob at version %" PRIu64
		                   " read back with XXH64 %016" PRIx64
		                   ", its BlobInfo says %016" PRIx64,
		                   b->version, got, b->xxh64);
	}
	return 0;
}

/* e's lines, with its blobs' part lines streamed in at their markers. 0,
 * or an exit code with the error reported. */
static int write_key(struct kvctl *k, struct export_out *o, const struct ekey *e,
                     struct ef_progress *pr, const struct export_counts *cnt)
{
	size_t at = 0;
	int rv;

	for (size_t i = 0; i < e->nblobs; i++) {
		if (out_write(o, e->out.p + at, e->blobs[i].at - at, true) != 0)
			goto write_failed;
		at = e->blobs[i].at;
		if ((rv = stream_blob(k, o, e, &e->blobs[i], pr, cnt)) != 0)
			return rv;
	}
	if (out_write(o, e->out.p + at, e->out.n - at, true) != 0)
		goto write_failed;
	return 0;
write_failed:
	return kvctl_error(k, "cannot write the export: %s", strerror(errno != 0 ? errno : EIO));
}

static void ekeys_reset(struct ekey *keys, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(keys[i].key);
		free(keys[i].out.p);
		free(keys[i].blobs);
		memset(&keys[i], 0, sizeof(keys[i]));
	}
}

/* The stream: header, the pages' records, trailer. */
static int export_run(struct kvctl *k, struct export_out *o, bool history, uint64_t as_of,
                      struct export_counts *cnt, uint64_t *ret_as_of)
{
	struct kvc_status st = {0};
	struct kvc_call call = {.status = &st};
	struct kvc_scan_opts so = {.keys_only = true, .page_size = EXPORT_PAGE, .as_of = as_of};
	struct ekey *keys = calloc(EXPORT_PAGE, sizeof(*keys));
	struct epage pg = {.c = k->c, .tenant = k->opts.tenant, .history = history, .keys = keys};
	struct kvc_tenant_info ti;
	struct ef_progress pr;
	kvc_iter *it = NULL;
	struct kvc_item item;
	bool header = false, end = false;
	char hex[65], when[32];
	int rv;

	if (keys == NULL)
		return kvctl_error(k, "out of memory");
	/* the key count, for the progress line only */
	ef_progress_init(&pr, "export", 0);
	if (kvc_stats(k->c, &call, &ti) == 0 && !history)
		pr.total = ti.keys;
	if ((rv = kvc_scan_open(k->c, &call, &so, &it)) != 0) {
		rv = kvctl_fail(k, rv, &st);
		goto out;
	}
	while (!end) {
		pg.n = 0;
		while (pg.n < EXPORT_PAGE) {
			if ((rv = kvc_scan_next(it, &item)) < 0) {
				rv = kvctl_fail(k, rv, &st);
				goto out;
			}
			if (rv == 1) {
				end = true;
				break;
			}
			keys[pg.n].key = malloc(item.key_len);
			if (keys[pg.n].key == NULL) {
				rv = kvctl_error(k, "out of memory");
				goto out;
			}
			memcpy(keys[pg.n].key, item.key, item.key_len);
			keys[pg.n].len = item.key_len;
			keys[pg.n].version = item.version;
			pg.n++;
		}
		if (!header) {
			pg.as_of = kvc_scan_revision(it);
			kvctl_format_time(ef_now_ms(), when);
			rv = out_json_line(
			        o,
			        json_pack("{s:s,s:i,s:s,s:o,s:b,s:o,s:s}", "format", EXPORT_FORMAT,
			                  "format_version", EXPORT_FORMAT_VERSION, "tenant",
			                  k->opts.tenant, "as_of", kvctl_json_u64(pg.as_of),
			                  "history", history, "created_ms",
			                  kvctl_json_u64(ef_now_ms()), "created", when),
			        true);
			if (rv != 0)
				goto write_failed;
			header = true;
		}
		if (history)
			export_page(&pg);
		else
			export_page_newest(&pg);
		for (size_t i = 0; i < pg.n; i++) {
			struct ekey *e = &keys[i];

			if (e->rv != 0) {
				kvctl_what(k, "export", e->key, e->len);
				rv = kvctl_fail(k, e->rv, &e->st);
				goto out;
			}
			if ((rv = write_key(k, o, e, &pr, cnt)) != 0)
				goto out;
			cnt->keys += e->records > 0;
			cnt->records += e->records;
			cnt->deletes += e->deletes;
			cnt->gone += e->gone;
			cnt->value_bytes += e->value_bytes;
			cnt->blobs += e->nblobs;
			cnt->blob_bytes += e->blob_bytes;
		}
		ekeys_reset(keys, pg.n);
		ef_progress_show(&pr, cnt->keys, cnt->records, o->bytes);
	}
	ef_progress_end(&pr);
	ef_sha_hex(o->sha, hex);
	rv = out_json_line(
	        o,
	        json_pack("{s:s,s:o,s:o,s:o,s:o,s:o,s:o,s:s}", "end", EXPORT_FORMAT, "keys",
	                  kvctl_json_u64(cnt->keys), "records", kvctl_json_u64(cnt->records),
	                  "deletes", kvctl_json_u64(cnt->deletes), "value_bytes",
	                  kvctl_json_u64(cnt->value_bytes), "blobs", kvctl_json_u64(cnt->blobs),
	                  "blob_bytes", kvctl_json_u64(cnt->blob_bytes), "sha256", hex),
	        false);
	if (rv != 0 || fflush(o->f) != 0)
		goto write_failed;
	*ret_as_of = pg.as_of;
	rv = 0;
	goto out;
write_failed:
	rv = kvctl_error(k, "cannot write the export: %s", strerror(errno != 0 ? errno : EIO));
out:
	ef_progress_end(&pr);
	kvc_scan_close(it);
	ekeys_reset(keys, pg.n);
	free(keys);
	return rv;
}

int cmd_export(struct kvctl *k, int argc, char **argv)
{
	static const struct option own[] = {
	        {"history", no_argument, NULL, OPT_HISTORY},
	        {"as-of", required_argument, NULL, OPT_AS_OF},
	        {"file", required_argument, NULL, OPT_FILE},
	        {NULL, 0, NULL, 0},
	};
	struct export_out o = {0};
	struct export_counts cnt = {0};
	struct kvctl_opts oi;
	const char *file = NULL;
	uint64_t as_of = 0, at = 0, t0;
	bool history = false;
	double s;
	int opt, rv = 0;

	kvctl_opts_begin(k, &oi, "export", own);
	while (rv == 0 && (opt = kvctl_opts_next(k, &oi, argc, argv)) != -1) {
		if (opt == OPT_HISTORY)
			history = true;
		else if (opt == OPT_AS_OF)
			rv = kvctl_parse_u64(k, "--as-of", optarg, KVC_ANY_VERSION - 2, &as_of);
		else if (opt == OPT_FILE)
			file = optarg;
		else
			return KVCTL_EXIT_USAGE;
	}
	if (rv != 0)
		return rv;
	if (argc - optind != 0)
		return kvctl_usage(k, "usage: kvctl export [--history] [--as-of V] [--file F]");
	if (file != NULL && file[0] == '\0')
		return kvctl_usage(k, "--file wants a file name");
	if (file == NULL && k->json)
		return kvctl_usage(k, "-o json needs --file: the export itself goes to stdout");
	if (file == NULL && isatty(STDOUT_FILENO))
		return kvctl_usage(k, "will not write an export to a terminal: use --file F or "
		                      "redirect stdout");
	/* room for a page of pipelined Gets */
	k->opts.contexts = EXPORT_IN_FLIGHT;
	if ((rv = kvctl_connect(k)) != 0)
		return rv;
	if (file != NULL && (o.f = fopen(file, "we")) == NULL)
		return kvctl_error(k, "cannot create %s: %s", file, strerror(errno));
	if (file == NULL)
		o.f = stdout;
	if ((o.sha = EVP_MD_CTX_new()) == NULL ||
	    EVP_DigestInit_ex(o.sha, EVP_sha256(), NULL) != 1) {
		rv = kvctl_error(k, "cannot set up SHA-256");
		goto out;
	}
	if ((o.part = malloc(EXPORT_BLOB_PART)) == NULL || (o.xxh = XXH64_createState()) == NULL) {
		rv = kvctl_error(k, "out of memory");
		goto out;
	}
	t0 = ef_mono_ms();
	rv = export_run(k, &o, history, as_of, &cnt, &at);
	if (file != NULL && fclose(o.f) != 0 && rv == 0)
		rv = kvctl_error(k, "cannot write %s: %s", file, strerror(errno));
	o.f = NULL;
	if (rv != 0) {
		/* a partial file would be refused by import anyway; leave none */
		if (file != NULL)
			unlink(file);
		goto out;
	}
	s = (double)(ef_mono_ms() - t0) / 1000;
	s = s > 0 ? s : 0.001;
	if (k->json) {
		rv = kvctl_emit_json(
		        k,
		        json_pack("{s:s,s:o,s:b,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "file", file,
		                  "as_of", kvctl_json_u64(at), "history", history, "keys",
		                  kvctl_json_u64(cnt.keys), "records", kvctl_json_u64(cnt.records),
		                  "deletes", kvctl_json_u64(cnt.deletes), "expired",
		                  kvctl_json_u64(cnt.gone), "value_bytes",
		                  kvctl_json_u64(cnt.value_bytes), "blobs",
		                  kvctl_json_u64(cnt.blobs), "blob_bytes",
		                  kvctl_json_u64(cnt.blob_bytes), "bytes", kvctl_json_u64(o.bytes),
		                  "elapsed_ms", kvctl_json_u64((uint64_t)(s * 1000))));
		goto out;
	}
	/* the summary: on stdout when the stream went to a file */
	fprintf(file != NULL ? stdout : stderr,
	        "exported %" PRIu64 " keys, %" PRIu64 " records (%" PRIu64 " deletes, %" PRIu64
	        " blobs of %" PRIu64 " bytes, %" PRIu64 " expired while read) at version %" PRIu64
	        ": %" PRIu64 " bytes in %.2f s (%.0f keys/s, %.1f MB/s)\n",
	        cnt.keys, cnt.records, cnt.deletes, cnt.blobs, cnt.blob_bytes, cnt.gone, at,
	        o.bytes, s, (double)cnt.keys / s, (double)o.bytes / 1e6 / s);
	rv = kvctl_finish(k);
out:
	if (o.f != NULL && o.f != stdout)
		fclose(o.f);
	EVP_MD_CTX_free(o.sha);
	XXH64_freeState(o.xxh);
	free(o.part);
	free(o.line.p);
	return rv;
}
