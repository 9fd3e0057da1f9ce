/* config.c — defaults, the INI settings file and checks of kvd's settings. */
#include "config.h"
#include "auth.h"

#include "hostport.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

void config_defaults(struct kvd_config *c)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->data_dir, sizeof(c->data_dir), "%s", KVD_DEFAULT_DATA);
	c->log_level = LOG_INFO;
	c->idle_timeout_s = 300;
	c->max_message_size = 64ull << 20;
	c->max_value_size = KV_VALUE_SIZE_DEFAULT;
	c->contexts = 256;
	c->max_connections = 1024;
	c->client_timeout_s = 0;
	c->frame_timeout_s = 30;
	c->auth_guesses = AUTH_SRC_FAILS_MAX;
	c->input_budget = 256ull << 20;
	c->output_budget = 256ull << 20;
	c->ipc_mode = 0660;
	c->segment_size = KV_SEGMENT_SIZE_DEFAULT;
	c->max_queue = 65536;
	c->upload_idle_ms = 60000;
	c->lease_ttl_s = KVD_LEASE_TTL_DEFAULT;
	c->device_node = 1;
	kv_tenant_config_init(&c->defaults);
}

void config_release(struct kvd_config *c)
{
	for (int i = 0; i < c->nlisten; i++)
		free(c->listen[i]);
	c->nlisten = 0;
}

int config_set_listen(struct kvd_config *c, char *const *urls, int n)
{
	if (n > KVD_LISTEN_MAX)
		return -E2BIG;
	config_release(c);
	for (int i = 0; i < n; i++) {
		if ((c->listen[i] = strdup(urls[i])) == NULL)
			return -ENOMEM;
		c->nlisten++;
	}
	return 0;
}

int parse_size(const char *s, uint64_t *ret)
{
	char *end;
	unsigned long long v;
	uint64_t mul = 1;

	/* strtoull would also take white space and a sign, and negate "-1" */
	if (s[0] < '0' || s[0] > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	if (*end != '\0') {
		switch (*end) {
		case 'k': case 'K': mul = 1ull << 10; break;
		case 'm': case 'M': mul = 1ull << 20; break;
		case 'g': case 'G': mul = 1ull << 30; break;
		case 't': case 'T': mul = 1ull << 40; break;
		default: return -EINVAL;
		}
		end++;
		if (*end == 'i' || *end == 'I')
			end++;
		if (*end == 'b' || *end == 'B')
			end++;
		if (*end != '\0')
			return -EINVAL;
	}
	if (v > UINT64_MAX / mul)
		return -EINVAL;
	*ret = v * mul;
	return 0;
}

/* A plain count or duration: digits only (no size suffix). */
static int parse_u64(const char *s, uint64_t *ret)
{
	char *end;
	unsigned long long v;

	if (s[0] < '0' || s[0] > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *end != '\0')
		return -EINVAL;
	*ret = v;
	return 0;
}

static int parse_u32(const char *s, uint32_t *ret)
{
	uint64_t v;

	if (parse_u64(s, &v) != 0 || v > UINT32_MAX)
		return -EINVAL;
	*ret = (uint32_t)v;
	return 0;
}

/* A size in bytes that fits 32 bits ("16M"). */
static int parse_size32(const char *s, uint32_t *ret)
{
	uint64_t v;

	if (parse_size(s, &v) != 0 || v > UINT32_MAX)
		return -EINVAL;
	*ret = (uint32_t)v;
	return 0;
}

static int parse_bool(const char *s, bool *ret)
{
	if (!strcasecmp(s, "yes") || !strcasecmp(s, "true") || !strcmp(s, "1") ||
	    !strcasecmp(s, "on"))
		*ret = true;
	else if (!strcasecmp(s, "no") || !strcasecmp(s, "false") || !strcmp(s, "0") ||
	         !strcasecmp(s, "off"))
		*ret = false;
	else
		return -EINVAL;
	return 0;
}

struct load {
	struct kvd_config *c;
	bool listen_seen;
};

static int copy_str(char *dst, size_t cap, const char *v)
{
	if (strlen(v) >= cap)
		return -ENAMETOOLONG;
	strcpy(dst, v);
	return 0;
}

/* Returns 0, -ENOENT for a setting the section does not have, or why the
 * value is refused: -EINVAL (not one), -E2BIG (a listen line too many),
 * -ENAMETOOLONG (a string too long). */
static int set_key(struct load *l, const char *section, const char *k, const char *v)
{
	struct kvd_config *c = l->c;

	if (section[0] == '\0' || strcmp(section, "kvd") == 0) {
		if (!strcmp(k, "data_dir"))
			return copy_str(c->data_dir, sizeof(c->data_dir), v);
		if (!strcmp(k, "device"))
			return copy_str(c->device, sizeof(c->device), v);
		if (!strcmp(k, "device_cache"))
			return parse_size(v, &c->device_cache);
		if (!strcmp(k, "device_node"))
			return parse_u32(v, &c->device_node);
		if (!strcmp(k, "listen")) {
			if (!l->listen_seen) {
				config_release(c); /* the file's list replaces the default */
				l->listen_seen = true;
			}
			if (c->nlisten == KVD_LISTEN_MAX)
				return -E2BIG;
			return (c->listen[c->nlisten++] = strdup(v)) ? 0 : -ENOMEM;
		}
		if (!strcmp(k, "workers"))
			return parse_u32(v, &c->workers);
		if (!strcmp(k, "log_level"))
			return (c->log_level = log_level_parse(v)) < 0 ? -EINVAL : 0;
		if (!strcmp(k, "idle_timeout"))
			return parse_u32(v, &c->idle_timeout_s);
		if (!strcmp(k, "memory_budget"))
			return parse_size(v, &c->memory_budget);
		if (!strcmp(k, "max_message_size"))
			return parse_size(v, &c->max_message_size);
		if (!strcmp(k, "max_value_size"))
			return parse_size32(v, &c->max_value_size);
		if (!strcmp(k, "contexts"))
			return parse_u32(v, &c->contexts);
		if (!strcmp(k, "max_connections"))
			return parse_u32(v, &c->max_connections);
		if (!strcmp(k, "client_timeout"))
			return parse_u32(v, &c->client_timeout_s);
		if (!strcmp(k, "frame_timeout"))
			return parse_u32(v, &c->frame_timeout_s);
		if (!strcmp(k, "auth_guesses"))
			return parse_u32(v, &c->auth_guesses);
		if (!strcmp(k, "input_budget"))
			return parse_size(v, &c->input_budget);
		if (!strcmp(k, "output_budget"))
			return parse_size(v, &c->output_budget);
		if (!strcmp(k, "auto_create"))
			return parse_bool(v, &c->auto_create);
		if (!strcmp(k, "token"))
			return copy_str(c->token, sizeof(c->token), v);
		if (!strcmp(k, "tokens_file"))
			return copy_str(c->tokens_file, sizeof(c->tokens_file), v);
		if (!strcmp(k, "tls_cert"))
			return copy_str(c->tls_cert, sizeof(c->tls_cert), v);
		if (!strcmp(k, "tls_key"))
			return copy_str(c->tls_key, sizeof(c->tls_key), v);
		if (!strcmp(k, "tls_client_ca"))
			return copy_str(c->tls_client_ca, sizeof(c->tls_client_ca), v);
		if (!strcmp(k, "tls_client_auth")) {
			if (v[0] == '\0')
				c->tls_client_auth = KVD_TLS_CLIENT_DEFAULT;
			else if (!strcmp(v, "none"))
				c->tls_client_auth = KVD_TLS_CLIENT_NONE;
			else if (!strcmp(v, "optional"))
				c->tls_client_auth = KVD_TLS_CLIENT_OPTIONAL;
			else if (!strcmp(v, "require"))
				c->tls_client_auth = KVD_TLS_CLIENT_REQUIRE;
			else
				return -EINVAL;
			return 0;
		}
		if (!strcmp(k, "ipc_mode")) {
			char *end;
			unsigned long m = strtoul(v, &end, 8);
			if (v[0] < '0' || v[0] > '7' || *end != '\0' || m > 0777)
				return -EINVAL;
			c->ipc_mode = (uint32_t)m;
			return 0;
		}
		if (!strcmp(k, "segment_size"))
			return parse_size(v, &c->segment_size);
		if (!strcmp(k, "open_files"))
			return parse_u32(v, &c->open_files);
		if (!strcmp(k, "max_queue"))
			return parse_u32(v, &c->max_queue);
		if (!strcmp(k, "upload_idle_ms"))
			return parse_u32(v, &c->upload_idle_ms);
		if (!strcmp(k, "metrics_listen"))
			return copy_str(c->metrics_listen, sizeof(c->metrics_listen), v);
		if (!strcmp(k, "etcd"))
			return copy_str(c->etcd, sizeof(c->etcd), v);
		if (!strcmp(k, "cluster"))
			return copy_str(c->cluster, sizeof(c->cluster), v);
		if (!strcmp(k, "node_id"))
			return copy_str(c->node_id, sizeof(c->node_id), v);
		if (!strcmp(k, "advertise"))
			return copy_str(c->advertise, sizeof(c->advertise), v);
		if (!strcmp(k, "lease_ttl"))
			return parse_u32(v, &c->lease_ttl_s);
	} else if (strcmp(section, "tenant-defaults") == 0) {
		if (!strcmp(k, "sync")) {
			if (!strcmp(v, "always"))
				c->defaults.sync = KV_SYNC_ALWAYS;
			else if (!strcmp(v, "interval"))
				c->defaults.sync = KV_SYNC_INTERVAL;
			else if (!strcmp(v, "none"))
				c->defaults.sync = KV_SYNC_NONE;
			else
				return -EINVAL;
			return 0;
		}
		if (!strcmp(k, "sync_interval_ms"))
			return parse_u32(v, &c->defaults.sync_interval_ms);
		if (!strcmp(k, "history"))
			return parse_u32(v, &c->defaults.history_versions);
		if (!strcmp(k, "ttl_ms"))
			return parse_u64(v, &c->defaults.default_ttl_ms);
		if (!strcmp(k, "max_keys"))
			return parse_u64(v, &c->defaults.max_keys);
		if (!strcmp(k, "compression"))
			return kv_codec_parse(v, strlen(v), &c->defaults.compression,
			                      &c->defaults.compression_level);
		if (!strcmp(k, "max_bytes"))
			return parse_u64(v, &c->defaults.max_bytes);
		if (!strcmp(k, "evict"))
			return kv_evict_parse(v, strlen(v), &c->defaults.evict);
	}
	return -ENOENT;
}

static bool known_in(const char *section, const char *k)
{
	struct kvd_config scratch;
	struct load l = {&scratch, true};
	int rv;

	config_defaults(&scratch);
	rv = set_key(&l, section, k, "");
	config_release(&scratch);
	return rv != -ENOENT;
}

/* The n bytes at s, printable: "\x01\x02" rather than nothing; at most
 * about 60 of them. */
static void quote(char *out, size_t cap, const char *s, size_t n)
{
	size_t o = 0, i;

	for (i = 0; i < n && o + 5 < cap; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (i == 60) {
			o += (size_t)snprintf(out + o, cap - o, "...");
			break;
		}
		if (ch >= 0x20 && ch < 0x7f && ch != '\\')
			out[o++] = (char)ch;
		else
			o += (size_t)snprintf(out + o, cap - o, "\\x%02x", ch);
	}
	out[o < cap ? o : cap - 1] = '\0';
}

/* Says why line `line` is refused, into err. */
static void key_error(struct load *l, int rv, unsigned line, const char *section, const char *k,
                      const char *v, char *err, size_t errlen)
{
	char qk[300], qv[300];
	const char *sec = section[0] ? section : "kvd";

	quote(qk, sizeof(qk), k, strlen(k));
	quote(qv, sizeof(qv), v, strlen(v));
	if (rv == -ENOENT && strcmp(sec, "kvd") == 0 && known_in("tenant-defaults", k))
		snprintf(err, errlen,
		         "line %u: unknown setting 'kvd.%s' (it belongs under [tenant-defaults])",
		         line, qk);
	else if (rv == -ENOENT && strcmp(sec, "kvd") != 0 && known_in("kvd", k))
		snprintf(err, errlen, "line %u: unknown setting '%s.%s' (it belongs under [kvd])",
		         line, sec, qk);
	else if (rv == -ENOENT)
		snprintf(err, errlen, "line %u: unknown setting '%s.%s'", line, sec, qk);
	else if (rv == -E2BIG)
		snprintf(err, errlen, "line %u: at most %d listen addresses ('%s' is one too many)",
		         line, KVD_LISTEN_MAX, qv);
	else if (rv == -ENAMETOOLONG)
		snprintf(err, errlen, "line %u: '%s' is %zu bytes, at most %zu allowed", line, qk,
		         strlen(v),
		         (!strcmp(k, "token")            ? sizeof(l->c->token)
		          : !strcmp(k, "metrics_listen") ? sizeof(l->c->metrics_listen)
		          : !strcmp(k, "etcd")           ? sizeof(l->c->etcd)
		          : !strcmp(k, "cluster")        ? sizeof(l->c->cluster)
		          : !strcmp(k, "node_id")        ? sizeof(l->c->node_id)
		          : !strcmp(k, "advertise")      ? sizeof(l->c->advertise)
		          : !strcmp(k, "device")         ? sizeof(l->c->device)
		                                         : sizeof(l->c->data_dir)) -
		                 1);
	else if (rv == -ENOMEM)
		snprintf(err, errlen, "line %u: out of memory", line);
	else
		snprintf(err, errlen, "line %u: bad value '%s' for '%s'", line, qv, qk);
}

static bool blank(char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\f' || ch == '\v';
}

/* [s, e) without blanks at either end, NUL-terminated in place. */
static char *strip(char *s, char *e)
{
	while (s < e && blank(*s))
		s++;
	while (e > s && blank(e[-1]))
		e--;
	*e = '\0';
	return s;
}

/* Where an inline comment starts: a ';' after a blank (kvd.conf(5)). */
static char *inline_comment(char *s, char *e)
{
	for (char *p = s; p < e; p++)
		if (*p == ';' && p > s && blank(p[-1]))
			return p;
	return e;
}

#define CONFIG_FILE_MAX (1u << 20)

/*
 * The settings file, read whole and parsed here rather than by inih, whose
 * line buffer (200 bytes in Debian's build) cuts longer lines and parses
 * their remainder as a line of its own: a 255-byte token or a long path must
 * work. What it takes is what kvd.conf(5) says: [section] headers, key =
 * value (or key: value) lines, blanks around both ignored, comment lines
 * starting with '#' or ';', a ';' after a blank starting an inline comment, an
 * optional UTF-8 byte-order mark. Lines have no length limit; the file may
 * hold at most CONFIG_FILE_MAX bytes.
 */
static int parse_text(struct load *l, char *text, size_t len, char *err, size_t errlen)
{
	char section[64] = "";
	unsigned line = 1;
	char *p = text, *end = text + len;
	int rv;

	if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0)
		p += 3;
	for (; p < end; line++) {
		char *nl = memchr(p, '\n', (size_t)(end - p)), *e = nl ? nl : end, *s, *sep;
		char *next = nl ? nl + 1 : end;
		if (memchr(p, '\0', (size_t)(e - p)) != NULL) {
			snprintf(err, errlen, "line %u: a NUL byte", line);
			return -EINVAL;
		}
		s = strip(p, e);
		p = next;
		if (*s == '\0' || *s == '#' || *s == ';')
			continue;
		if (*s == '[') {
			char *close = strchr(s, ']'), *name, q[200];
			char *rest = close ? close + 1 : NULL;
			if (close == NULL ||
			    *strip(rest, inline_comment(rest, rest + strlen(rest))) != '\0') {
				quote(q, sizeof(q), s, strlen(s));
				snprintf(err, errlen, "line %u: not a [section] header: '%s'", line, q);
				return -EINVAL;
			}
			name = strip(s + 1, close);
			if (strcmp(name, "kvd") != 0 && strcmp(name, "tenant-defaults") != 0) {
				quote(q, sizeof(q), name, strlen(name));
				snprintf(err, errlen,
				         "line %u: unknown section '[%s]' (kvd.conf has [kvd] and "
				         "[tenant-defaults])",
				         line, q);
				return -EINVAL;
			}
			snprintf(section, sizeof(section), "%s", name);
			continue;
		}
		sep = strpbrk(s, "=:");
		if (sep == NULL || sep == s) {
			char q[200];
			quote(q, sizeof(q), s, strlen(s));
			snprintf(err, errlen,
			         "line %u: not 'key = value', a [section] or a comment: '%s'", line, q);
			return -EINVAL;
		}
		{
			char *k = strip(s, sep), *vend = sep + 1 + strlen(sep + 1);
			char *v = strip(sep + 1, inline_comment(sep + 1, vend));
			if ((rv = set_key(l, section, k, v)) != 0) {
				key_error(l, rv, line, section, k, v, err, errlen);
				return rv == -ENOMEM ? rv : -EINVAL;
			}
		}
	}
	return 0;
}

int config_load(struct kvd_config *c, const char *path, char *err, size_t errlen)
{
	struct load l = {c, false};
	char msg[1024], *text = NULL;
	struct stat st;
	size_t len = 0;
	int fd, rv = 0;

	err[0] = '\0';
	/* O_NONBLOCK: a FIFO in its place must not hang kvd */
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)) < 0) {
		rv = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(-rv));
		return rv;
	}
	if (fstat(fd, &st) != 0) {
		rv = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(-rv));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		rv = S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
		snprintf(err, errlen, "%s: %s, not a settings file", path,
		         S_ISDIR(st.st_mode) ? "a directory" : "a special file");
		goto out;
	}
	if ((text = malloc(CONFIG_FILE_MAX + 1)) == NULL) {
		rv = -ENOMEM;
		snprintf(err, errlen, "%s: out of memory", path);
		goto out;
	}
	for (;;) {
		ssize_t n = read(fd, text + len, CONFIG_FILE_MAX + 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rv = -errno;
			snprintf(err, errlen, "%s: %s", path, strerror(-rv));
			goto out;
		}
		if (n == 0 || (len += (size_t)n) > CONFIG_FILE_MAX)
			break;
	}
	if (len > CONFIG_FILE_MAX) {
		rv = -EFBIG;
		snprintf(err, errlen, "%s: larger than %u bytes, not a settings file", path,
		         CONFIG_FILE_MAX);
		goto out;
	}
	text[len] = '\0';
	if ((rv = parse_text(&l, text, len, msg, sizeof(msg))) != 0)
		snprintf(err, errlen, "%s %s", path, msg);
out:
	free(text);
	close(fd);
	return rv;
}

int config_check(const struct kvd_config *c, char *err, size_t errlen)
{
	char host[256], port[16];

	if (c->nlisten == 0) {
		snprintf(err, errlen, "no listen address (--listen URL)");
		return -EINVAL;
	}
	for (int i = 0; i < c->nlisten; i++) {
		const char *u = c->listen[i];
		if (strncmp(u, "ipc://", 6) && strncmp(u, "tcp://", 6) && strncmp(u, "tls+tcp://", 10) &&
		    strncmp(u, "kv+ipc://", 9) && strncmp(u, "kv+tcp://", 9) &&
		    strncmp(u, "kv+tls://", 9)) {
			snprintf(err, errlen,
			         "listen address '%s': use kv+ipc://, kv+tcp://, kv+tls://, ipc://, "
			         "tcp:// or tls+tcp://",
			         u);
			return -EINVAL;
		}
		if ((!strncmp(u, "tls+tcp://", 10) || !strncmp(u, "kv+tls://", 9)) &&
		    (!c->tls_cert[0] || !c->tls_key[0])) {
			snprintf(err, errlen, "listen address '%s' needs tls_cert and tls_key", u);
			return -EINVAL;
		}
	}
	if ((c->tls_client_auth == KVD_TLS_CLIENT_OPTIONAL ||
	     c->tls_client_auth == KVD_TLS_CLIENT_REQUIRE) &&
	    c->tls_client_ca[0] == '\0') {
		snprintf(err, errlen,
		         "tls_client_auth = %s needs tls_client_ca (the CA client certificates are "
		         "verified with)",
		         c->tls_client_auth == KVD_TLS_CLIENT_REQUIRE ? "require" : "optional");
		return -EINVAL;
	}
	if (c->data_dir[0] == '\0' && c->device[0] == '\0') {
		snprintf(err, errlen,
		         "no data directory (--data-dir DIR) and no device (--device DEVICE)");
		return -EINVAL;
	}
	if (c->max_value_size == 0 || c->max_value_size > KV_VALUE_SIZE_MAX) {
		snprintf(err, errlen, "max_value_size must be 1..%u", KV_VALUE_SIZE_MAX);
		return -EINVAL;
	}
	if (c->max_message_size > KVD_MESSAGE_SIZE_MAX) {
		snprintf(err, errlen, "max_message_size must be at most 4G (a frame's length is 32 "
		                      "bits)");
		return -EINVAL;
	}
	if (c->max_message_size < (uint64_t)c->max_value_size + KV_KEY_SIZE_MAX + 1024) {
		snprintf(err, errlen, "max_message_size must leave room for a key and a value "
		                      "of max_value_size");
		return -EINVAL;
	}
	if (c->workers > 1024) {
		snprintf(err, errlen, "workers must be 0 (one per CPU) .. 1024");
		return -EINVAL;
	}
	if (c->upload_idle_ms == 0) {
		snprintf(err, errlen, "upload_idle_ms must be at least 1");
		return -EINVAL;
	}
	if (c->max_queue == 0) {
		snprintf(err, errlen, "max_queue must be at least 1");
		return -EINVAL;
	}
	if (c->contexts == 0 || c->contexts > 65536) {
		snprintf(err, errlen, "contexts must be 1..65536");
		return -EINVAL;
	}
	if (c->max_connections == 0 || c->max_connections > 1000000) {
		snprintf(err, errlen, "max_connections must be 1..1000000");
		return -EINVAL;
	}
	if (c->input_budget < 1024 * 1024 || c->output_budget < 1024 * 1024) {
		snprintf(err, errlen, "input_budget and output_budget must be at least 1M");
		return -EINVAL;
	}
	if (c->segment_size < 4096 || c->segment_size > KV_SEGMENT_SIZE_MAX) {
		snprintf(err, errlen, "segment_size must be 4K..2G");
		return -EINVAL;
	}
	if (c->metrics_listen[0] != '\0' &&
	    rpc_hostport_split(c->metrics_listen, host, sizeof(host), port, sizeof(port)) != 0) {
		snprintf(err, errlen, "metrics_listen '%s': expected HOST:PORT or [ADDRESS]:PORT",
		         c->metrics_listen);
		return -EINVAL;
	}
	if (c->defaults.history_versions == 0 ||
	    (c->defaults.sync == KV_SYNC_INTERVAL && c->defaults.sync_interval_ms == 0)) {
		snprintf(err, errlen, "tenant-defaults: history and sync_interval_ms must be > 0");
		return -EINVAL;
	}
	if (c->device_cache != 0 && c->device_cache < KVD_DEVICE_CACHE_MIN) {
		snprintf(err, errlen, "device_cache must be at least 1M (0: the default, 256M)");
		return -EINVAL;
	}
	if (c->device_node < 1 || c->device_node > KV_DEV_NODES_MAX) {
		snprintf(err, errlen, "device_node must be 1..%d (which node of a shared device)",
		         KV_DEV_NODES_MAX);
		return -EINVAL;
	}
	if ((c->cluster[0] != '\0' || c->node_id[0] != '\0' || c->advertise[0] != '\0') &&
	    c->etcd[0] == '\0') {
		snprintf(err, errlen, "cluster, node_id and advertise need etcd");
		return -EINVAL;
	}
	if (c->etcd[0] != '\0' && c->cluster[0] == '\0') {
		snprintf(err, errlen, "etcd needs cluster (the cluster's name)");
		return -EINVAL;
	}
	if (c->lease_ttl_s < 2 || c->lease_ttl_s > KVD_LEASE_TTL_MAX) {
		snprintf(err, errlen, "lease_ttl must be 2..%d (seconds)", KVD_LEASE_TTL_MAX);
		return -EINVAL;
	}
	/* (a device that cannot be used is a bad setting, whatever stat said) */
	if (c->device[0] != '\0' && config_device_usable("device", c->device, err, errlen) != 0)
		return -EINVAL;
	return 0;
}

int config_device_usable(const char *what, const char *path, char *err, size_t errlen)
{
	struct stat st;
	const char *kind;

	if (stat(path, &st) != 0) {
		int rv = -errno;
		if (rv == -ENOENT)
			snprintf(err, errlen, "%s %s does not exist", what, path);
		else
			snprintf(err, errlen, "%s %s: %s", what, path, strerror(-rv));
		return rv;
	}
	if (S_ISBLK(st.st_mode) || S_ISREG(st.st_mode))
		return 0;
	kind = S_ISDIR(st.st_mode)    ? "a directory"
	       : S_ISCHR(st.st_mode)  ? "a character device"
	       : S_ISFIFO(st.st_mode) ? "a FIFO"
	       : S_ISSOCK(st.st_mode) ? "a socket"
	                              : "a special file";
	snprintf(err, errlen, "%s %s is %s, not a block device or a regular file", what, path,
	         kind);
	return -ENOTBLK;
}
