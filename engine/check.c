/*
 * check.c — kv_check: read every file of a database without changing
 * anything, and list what is damaged.
 *
 * For each segment: its header, every record's bounds and crc (a scan of the
 * whole file), and a torn end. For each hint file: its checksums and bounds,
 * and that every entry names a record the segment really has at that place.
 * The merge commit files and META: their checksums. The database must not be
 * open (its LOCK is taken, shared, for the duration).
 */
#include "kvengine.h"

#include "crc.h"
#include "endian_util.h"
#include "hint.h"
#include "io.h"
#include "reloc.h"
#include "segment.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

struct ck {
	kv_check_fn fn;
	void *arg;
	struct kv_check_summary sum;
	const char *file;
};

static void report(struct ck *c, const char *file, uint64_t off, uint64_t len, const char *what)
{
	struct kv_check_item it;

	memset(&it, 0, sizeof(it));
	snprintf(it.file, sizeof(it.file), "%s", file);
	it.off = off;
	it.len = len;
	it.what = what;
	c->sum.damaged++;
	c->sum.damaged_bytes += len;
	if (c->fn)
		c->fn(c->arg, &it);
}

/* records of the segment, by offset, to check the hint against */
struct recs {
	struct {
		uint64_t off, size, version;
	} *v;
	size_t n, cap;
};

static int rec_seen(void *arg, const struct seg_scan_rec *r)
{
	struct recs *rs = arg;

	if (rs->n == rs->cap) {
		size_t cap = rs->cap ? rs->cap * 2 : 1024;
		void *nv = realloc(rs->v, cap * sizeof(*rs->v));
		if (nv == NULL)
			return -ENOMEM;
		rs->v = nv;
		rs->cap = cap;
	}
	rs->v[rs->n].off = r->off;
	rs->v[rs->n].size = r->size;
	rs->v[rs->n].version = r->h.version;
	rs->n++;
	return 0;
}

struct damage_ctx {
	struct ck *c;
	struct recs *rs;
};

static int rec_damaged(void *arg, uint64_t off, uint64_t len, const struct seg_scan_rec *r)
{
	struct damage_ctx *d = arg;

	report(d->c, d->c->file, off, len,
	       r ? "record fails its checksum (reads of its key report data loss)"
	         : "damaged bytes, no record can be read there");
	return r ? rec_seen(d->rs, r) : 0;
}

static int scan_rec_cb(void *arg, const struct seg_scan_rec *r)
{
	struct damage_ctx *d = arg;
	return rec_seen(d->rs, r);
}

struct hint_ck {
	struct ck *c;
	const struct recs *rs;
	const char *name;
	uint64_t bad;
};

static int hint_entry(void *arg, const struct hint_ent *e)
{
	struct hint_ck *h = arg;
	size_t lo = 0, hi = h->rs->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (h->rs->v[mid].off < e->off)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == h->rs->n || h->rs->v[lo].off != e->off || h->rs->v[lo].size != e->size ||
	    h->rs->v[lo].version != e->version)
		h->bad++;
	return 0;
}

static int check_segment(struct ck *c, int dirfd, uint32_t id, bool newest)
{
	char name[SEG_NAME_MAX], hname[SEG_NAME_MAX];
	struct recs rs = {0};
	struct damage_ctx dc = {c, &rs};
	struct seg_scan_result res;
	struct seg *s;
	bool damaged_header = false;
	int rv, fd;

	seg_name(name, id, ".seg");
	seg_name(hname, id, ".hint");
	c->file = name;
	rv = seg_open(dirfd, id, NULL, &s);
	if (rv == KV_ECORRUPT || rv == KV_EFORMAT) {
		if ((rv = seg_open_raw(dirfd, id, &s)) != 0)
			return rv;
		damaged_header = true;
		if (s->size < SEG_HEADER_SIZE) {
			report(c, name, 0, s->size, "shorter than a segment header (left by a crash "
			                            "while it was created; removed at next open)");
			seg_unref(s);
			return 0;
		}
		report(c, name, 0, SEG_HEADER_SIZE, "segment header damaged");
	} else if (rv != 0) {
		return rv;
	}
	c->sum.segments++;
	fd = s->fd;
	rv = seg_scan(NULL, fd, s->size, KV_KEY_SIZE_MAX, KV_VALUE_SIZE_MAX, false, scan_rec_cb,
	              rec_damaged, &dc, &res);
	if (rv != 0)
		goto out;
	c->sum.records += res.records;
	if (res.valid_end < s->size) {
		if (newest && !damaged_header && !(s->flags & SEG_F_MERGED))
			report(c, name, res.valid_end, s->size - res.valid_end,
			       "torn end of the newest segment (a write cut by a crash; cut off "
			       "at next open)");
		else
			report(c, name, res.valid_end, s->size - res.valid_end,
			       "damaged bytes at the end");
	}
	/* its hint file, if any */
	{
		struct hint_ck hc = {c, &rs, hname, 0};
		rv = hint_load(dirfd, id, s->size, KV_KEY_SIZE_MAX, NULL, hint_entry, &hc);
		if (rv == 0) {
			c->sum.hints++;
			if (hc.bad > 0)
				report(c, hname, 0, 0, "hint entries that do not match the segment");
		} else if (rv == KV_ECORRUPT || rv == KV_EFORMAT) {
			report(c, hname, 0, 0, "hint file damaged (the segment is scanned instead)");
		} else if (rv != -ENOENT) {
			goto out;
		}
		rv = 0;
	}
out:
	free(rs.v);
	seg_unref(s);
	return rv;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

int kv_check(const char *path, kv_check_fn fn, void *arg, struct kv_check_summary *ret)
{
	struct ck c = {.fn = fn, .arg = arg};
	uint32_t *ids = NULL;
	size_t n = 0, cap = 0, i;
	struct dirent *de;
	DIR *d = NULL;
	int dirfd, lockfd, rv = 0;

	if ((dirfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return -errno;
	lockfd = openat(dirfd, "LOCK", O_RDONLY | O_CLOEXEC);
	if (lockfd >= 0 && flock(lockfd, LOCK_SH | LOCK_NB) != 0) {
		rv = errno == EWOULDBLOCK ? KV_ELOCKED : -errno;
		goto out;
	}
	if ((d = fdopendir(dup(dirfd))) == NULL) {
		rv = -errno;
		goto out;
	}
	while ((de = readdir(d)) != NULL) {
		const char *nm = de->d_name;
		size_t len = strlen(nm);
		if (len == 12 && strcmp(nm + 8, ".seg") == 0) {
			char *end;
			unsigned long id = strtoul(nm, &end, 16);
			if (end != nm + 8 || id == 0)
				continue;
			if (n == cap) {
				cap = cap ? cap * 2 : 64;
				uint32_t *nv = realloc(ids, cap * sizeof(*nv));
				if (nv == NULL) {
					rv = -ENOMEM;
					goto out;
				}
				ids = nv;
			}
			ids[n++] = (uint32_t)id;
		} else if (strncmp(nm, "merge-", 6) == 0 && len > 13 &&
		           strcmp(nm + len - 7, ".commit") == 0) {
			struct merge_commit mc;
			int r = commit_load(dirfd, nm, NULL, &mc);
			if (r == 0)
				commit_release(&mc);
			else if (r == KV_ECORRUPT || r == KV_EFORMAT)
				report(&c, nm, 0, 0, "merge commit damaged (its retired segments are kept)");
		} else if (strcmp(nm, "META") == 0) {
			uint8_t buf[28];
			int fd = openat(dirfd, nm, O_RDONLY | O_CLOEXEC);
			ssize_t got = fd >= 0 ? pread(fd, buf, sizeof(buf), 0) : -1;
			if (fd >= 0)
				close(fd);
			if (got != (ssize_t)sizeof(buf) || memcmp(buf, "KVDMETA\1", 8) != 0 ||
			    crc32c(buf, 24) != get_le32(buf + 24))
				report(&c, nm, 0, 0, "META damaged (the compact revision is lost)");
		}
	}
	if (n > 1)
		qsort(ids, n, sizeof(*ids), cmp_u32);
	for (i = 0; i < n && rv == 0; i++)
		rv = check_segment(&c, dirfd, ids[i], i + 1 == n);
out:
	if (d)
		closedir(d);
	free(ids);
	if (lockfd >= 0)
		close(lockfd);
	close(dirfd);
	if (rv == 0 && ret)
		*ret = c.sum;
	return rv;
}
