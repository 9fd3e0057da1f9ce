/*
 * tenant_file.c — a tenant's TENANT file: its settings as INI text, ended by
 * a checksum line (byte layout in docs/FORMAT.md).
 *
 * Owns: the text of TENANT, how it is written and how it is read back.
 * Invariants:
 *   1. Every TENANT this code writes ends with "crc32c = xxxxxxxx\n", the
 *      CRC32C of every byte before that line.
 *   2. A TENANT without a checksum line (written before there was one) is
 *      read as it always was; one whose checksum line is wrong, is not the
 *      last line, or that holds anything this code does not write (an
 *      unknown section or setting, a value out of range, a line that is not
 *      INI) is damage: it is refused, never read as defaults.
 *   3. Reading never changes a file.
 * No state; callable from any thread.
 */
#include "tenant_file.h"

#include "crc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char crc_key[] = "crc32c";
#define CRC_KEY_LEN (sizeof(crc_key) - 1)

/* The settings of a tenant created without any (kvengine.h). */
void kv_tenant_config_init(struct kv_tenant_config *c)
{
	memset(c, 0, sizeof(*c));
	c->sync = KV_SYNC_ALWAYS;
	c->sync_interval_ms = KV_SYNC_INTERVAL_MS_DEFAULT;
	c->history_versions = 1;
}

static const char *sync_name(enum kv_sync s)
{
	return s == KV_SYNC_ALWAYS ? "always" : s == KV_SYNC_INTERVAL ? "interval" : "none";
}

int tenant_file_format(const struct kv_tenant_config *c, char *buf, size_t cap)
{
	char codec[KV_CODEC_NAME_MAX];
	const char *evict = kv_evict_name(c->evict);
	int n, m;

	if (kv_codec_format(c->compression, c->compression_level, codec, sizeof(codec)) != 0 ||
	    evict == NULL)
		return -EINVAL;
	n = snprintf(buf, cap,
	             "# kvd tenant configuration\n[tenant]\nsync = %s\nsync_interval_ms = %u\n"
	             "history = %u\nttl_ms = %" PRIu64 "\nmax_keys = %" PRIu64 "\n"
	             "compression = %s\nmax_bytes = %" PRIu64 "\nevict = %s\n",
	             sync_name(c->sync), c->sync_interval_ms, c->history_versions,
	             c->default_ttl_ms, c->max_keys, codec, c->max_bytes, evict);
	if (n < 0 || (size_t)n >= cap)
		return -ENOBUFS;
	m = snprintf(buf + n, cap - (size_t)n, "%s = %08" PRIx32 "\n", crc_key,
	             crc32c(buf, (size_t)n));
	if (m < 0 || (size_t)m >= cap - (size_t)n)
		return -ENOBUFS;
	return 0;
}

/* ---- reading ------------------------------------------------------------ */

static int why_set(char *why, size_t size, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int why_set(char *why, size_t size, const char *fmt, ...)
{
	va_list ap;

	if (size > 0) {
		va_start(ap, fmt);
		vsnprintf(why, size, fmt, ap);
		va_end(ap);
	}
	return KV_EREFUSED;
}

/* The n bytes at s, printable, at most 40 of them ("te\xffant"). */
static void quote(char *out, size_t cap, const char *s, size_t n)
{
	size_t o = 0, i;

	for (i = 0; i < n && o + 5 < cap; i++) {
		unsigned char c = (unsigned char)s[i];
		if (i == 40) {
			o += (size_t)snprintf(out + o, cap - o, "...");
			break;
		}
		if (c >= 0x20 && c < 0x7f && c != '\\')
			out[o++] = (char)c;
		else
			o += (size_t)snprintf(out + o, cap - o, "\\x%02x", c);
	}
	out[o < cap ? o : cap - 1] = '\0';
}

static bool blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

/* Trims blanks off both ends of [*s, *s + *n). */
static void trim(const char **s, size_t *n)
{
	while (*n > 0 && blank(**s))
		(*s)++, (*n)--;
	while (*n > 0 && blank((*s)[*n - 1]))
		(*n)--;
}

static bool is(const char *s, size_t n, const char *word)
{
	return strlen(word) == n && memcmp(s, word, n) == 0;
}

/* Digits only, to at most max; 0 or -ERANGE / -EINVAL. */
static int number(const char *s, size_t n, uint64_t max, uint64_t *ret)
{
	uint64_t v = 0;
	size_t i;

	if (n == 0)
		return -EINVAL;
	for (i = 0; i < n; i++) {
		unsigned d;
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		d = (unsigned)(s[i] - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -ERANGE;
		v = v * 10 + d;
	}
	if (v > max)
		return -ERANGE;
	*ret = v;
	return 0;
}

struct setting {
	const char *name;
	uint64_t min, max;
};

static const struct setting settings[] = {
	{"sync_interval_ms", 0, UINT32_MAX},
	{"history", 1, UINT32_MAX},
	{"ttl_ms", 0, UINT64_MAX},
	{"max_keys", 0, UINT64_MAX},
	{"max_bytes", 0, UINT64_MAX},
};

/* One "key = value" line of [tenant] into *c. */
static int line_setting(const char *k, size_t kn, const char *v, size_t vn, unsigned line,
                        struct kv_tenant_config *c, char *why, size_t size)
{
	char qk[200], qv[200];
	uint64_t x = 0;
	size_t i;
	int rv;

	quote(qk, sizeof(qk), k, kn);
	quote(qv, sizeof(qv), v, vn);
	if (is(k, kn, "sync")) {
		if (is(v, vn, "always"))
			c->sync = KV_SYNC_ALWAYS;
		else if (is(v, vn, "interval"))
			c->sync = KV_SYNC_INTERVAL;
		else if (is(v, vn, "none"))
			c->sync = KV_SYNC_NONE;
		else
			return why_set(why, size,
			               "line %u: bad value '%s' for 'sync' (always, interval or none)",
			               line, qv);
		return 0;
	}
	if (is(k, kn, "compression")) {
		if (kv_codec_parse(v, vn, &c->compression, &c->compression_level) != 0)
			return why_set(why, size,
			               "line %u: bad value '%s' for 'compression' "
			               "(none, lz4, zstd or zstd:1..22)",
			               line, qv);
		return 0;
	}
	if (is(k, kn, "evict")) {
		if (kv_evict_parse(v, vn, &c->evict) != 0)
			return why_set(why, size,
			               "line %u: bad value '%s' for 'evict' (refuse or oldest)", line,
			               qv);
		return 0;
	}
	for (i = 0; i < sizeof(settings) / sizeof(settings[0]); i++)
		if (is(k, kn, settings[i].name))
			break;
	if (i == sizeof(settings) / sizeof(settings[0]))
		return why_set(why, size, "line %u: unknown setting '%s'", line, qk);
	rv = number(v, vn, settings[i].max, &x);
	if (rv == -EINVAL)
		return why_set(why, size, "line %u: bad value '%s' for '%s' (a decimal number)",
		               line, qv, qk);
	if (rv != 0 || x < settings[i].min)
		return why_set(why, size,
		               "line %u: '%s' = %s is out of range (%" PRIu64 "..%" PRIu64 ")",
		               line, qk, qv, settings[i].min, settings[i].max);
	switch (i) {
	case 0: c->sync_interval_ms = (uint32_t)x; break;
	case 1: c->history_versions = (uint32_t)x; break;
	case 2: c->default_ttl_ms = x; break;
	case 3: c->max_keys = x; break;
	default: c->max_bytes = x; break;
	}
	return 0;
}

/* Where the checksum line starts, or len when there is none; KV_EREFUSED
 * when there is one and it is wrong or not last. */
static int find_checksum(const char *text, size_t len, size_t *ret_start, char *why,
                         size_t size)
{
	size_t start = 0, end, line = 1;

	for (; start < len; start = end + 1, line++) {
		const char *s = text + start;
		size_t n;
		end = start;
		while (end < len && text[end] != '\n')
			end++;
		n = end - start;
		trim(&s, &n);
		/* "?rc32c" too: one flipped bit makes "crc32c" a "#rc32c" comment,
		 * which would otherwise pass for a file without a checksum */
		if (n >= CRC_KEY_LEN && memcmp(s + 1, &crc_key[1], CRC_KEY_LEN - 1) == 0) {
			const char *v = s + CRC_KEY_LEN;
			size_t vn = n - CRC_KEY_LEN;
			uint32_t want = 0, got;
			size_t i;
			trim(&v, &vn);
			if (s[0] != crc_key[0] || vn == 0 || v[0] != '=')
				return why_set(why, size, "line %zu: damaged checksum line", line);
			v++, vn--;
			trim(&v, &vn);
			if (vn != 8)
				return why_set(why, size, "line %zu: damaged checksum line", line);
			for (i = 0; i < 8; i++) {
				char ch = v[i];
				/* lower case only, as written: a flipped case bit is damage */
				unsigned d = ch >= '0' && ch <= '9'   ? (unsigned)(ch - '0')
				             : ch >= 'a' && ch <= 'f' ? (unsigned)(ch - 'a' + 10)
				                                      : 16;
				if (d == 16)
					return why_set(why, size, "line %zu: damaged checksum line", line);
				want = want << 4 | d;
			}
			if (end + 1 < len)
				return why_set(why, size,
				               "line %zu: the checksum line is not the last line "
				               "(something was added after it)",
				               line);
			got = crc32c(text, start);
			if (got != want)
				return why_set(why, size,
				               "checksum mismatch: line %zu says %08" PRIx32
				               ", lines 1-%zu give %08" PRIx32,
				               line, want, line - 1, got);
			*ret_start = start;
			return 0;
		}
	}
	*ret_start = len;
	return 0;
}

int tenant_file_parse(const char *text, size_t len, char *why, size_t size,
                      struct kv_tenant_config *ret)
{
	struct kv_tenant_config c = *ret;
	size_t body = len, start, end;
	unsigned line = 1;
	bool in_tenant = false, seen_tenant = false;
	int rv;

	if (len == 0)
		return why_set(why, size, "empty");
	if (memchr(text, '\0', len) != NULL) {
		const char *z = memchr(text, '\0', len);
		for (start = 0; start < (size_t)(z - text); start++)
			line += text[start] == '\n';
		return why_set(why, size, "line %u: a NUL byte", line);
	}
	if ((rv = find_checksum(text, len, &body, why, size)) != 0)
		return rv;
	for (start = 0; start < body; start = end + 1, line++) {
		const char *s = text + start, *eq;
		size_t n;
		char q[200];
		end = start;
		while (end < body && text[end] != '\n')
			end++;
		n = end - start;
		trim(&s, &n);
		if (n == 0 || s[0] == '#' || s[0] == ';')
			continue;
		quote(q, sizeof(q), s, n);
		if (s[0] == '[') {
			const char *name = s + 1;
			size_t nn = n - 1;
			if (n < 2 || s[n - 1] != ']')
				return why_set(why, size, "line %u: not INI: '%s'", line, q);
			nn--;
			trim(&name, &nn);
			if (!is(name, nn, "tenant"))
				return why_set(why, size, "line %u: unknown section '%s'", line, q);
			in_tenant = seen_tenant = true;
			continue;
		}
		if ((eq = memchr(s, '=', n)) == NULL)
			return why_set(why, size, "line %u: not INI: '%s'", line, q);
		if (!in_tenant)
			return why_set(why, size, "line %u: '%s' before [tenant]", line, q);
		{
			const char *k = s, *v = eq + 1;
			size_t kn = (size_t)(eq - s), vn = n - kn - 1;
			trim(&k, &kn);
			trim(&v, &vn);
			if ((rv = line_setting(k, kn, v, vn, line, &c, why, size)) != 0)
				return rv;
		}
	}
	if (!seen_tenant)
		return why_set(why, size, "no [tenant] section");
	if (c.sync == KV_SYNC_INTERVAL && c.sync_interval_ms == 0)
		return why_set(why, size, "sync = interval with sync_interval_ms = 0");
	*ret = c;
	return 0;
}

/* Whether the tenant directory holds anything of a database (anything but
 * what a creation cut short leaves: nothing, TENANT.tmp, STATS). */
static int holds_database(int dirfd, char *first, size_t cap)
{
	int fd = dup(dirfd);
	struct dirent *de;
	DIR *d;

	if (fd < 0)
		return -errno;
	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		return -errno;
	}
	while ((de = readdir(d)) != NULL) {
		const char *n = de->d_name;
		if (!strcmp(n, ".") || !strcmp(n, "..") || !strcmp(n, "TENANT.tmp") ||
		    !strcmp(n, "STATS") || !strcmp(n, "STATS.tmp"))
			continue;
		snprintf(first, cap, "%s", n);
		closedir(d);
		return 1;
	}
	closedir(d);
	return 0;
}

/* A shortage of this process, not a fault of the file: the caller fails
 * rather than refuse the tenant for good. */
static bool out_of_resources(int err)
{
	return err == -EMFILE || err == -ENFILE || err == -ENOMEM;
}

int kv_tenant_file_read(const char *dir, const struct kv_tenant_config *defaults, char *why,
                        size_t why_size, struct kv_tenant_config *ret_config)
{
	struct kv_tenant_config c;
	char text[TENANT_FILE_MAX + 1], first[256], q[300];
	struct stat st;
	ssize_t got;
	size_t len = 0;
	int dirfd, fd, rv;

	if (why_size > 0)
		why[0] = '\0';
	if (defaults)
		c = *defaults;
	else
		kv_tenant_config_init(&c);
	if ((dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return errno == ENOTDIR ? -ENOENT : -errno;
	/* O_NONBLOCK: a FIFO in its place must not hang the start */
	fd = openat(dirfd, "TENANT", O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0) {
		rv = -errno;
		if (rv == -ENOENT) {
			int h = holds_database(dirfd, first, sizeof(first));
			if (out_of_resources(h))
				rv = h;
			else if (h < 0)
				rv = why_set(why, why_size, "cannot read the directory: %s", strerror(-h));
			else if (h > 0) {
				quote(q, sizeof(q), first, strlen(first));
				rv = why_set(why, why_size,
				             "no TENANT file, but the directory holds a database ('%s')", q);
			}
		} else if (!out_of_resources(rv)) {
			rv = why_set(why, why_size, "cannot open: %s", strerror(-rv));
		}
		close(dirfd);
		return rv;
	}
	close(dirfd);
	if (fstat(fd, &st) != 0) {
		rv = why_set(why, why_size, "cannot stat: %s", strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		rv = why_set(why, why_size, "not a regular file (%s)",
		             S_ISDIR(st.st_mode) ? "a directory" : "a special file");
		goto out;
	}
	while (len < sizeof(text) && (got = pread(fd, text + len, sizeof(text) - len,
	                                          (off_t)len)) != 0) {
		if (got < 0) {
			if (errno == EINTR)
				continue;
			rv = why_set(why, why_size, "cannot read: %s", strerror(errno));
			goto out;
		}
		len += (size_t)got;
	}
	if (len > TENANT_FILE_MAX) {
		rv = why_set(why, why_size, "larger than %d bytes", TENANT_FILE_MAX);
		goto out;
	}
	if ((rv = tenant_file_parse(text, len, why, why_size, &c)) == 0)
		*ret_config = c;
out:
	close(fd);
	return rv;
}
