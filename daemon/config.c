/* config.c — defaults, INI file and checks of kvd's settings. */
#include "config.h"

#include "log.h"

#include <errno.h>
#include <ini.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void config_defaults(struct kvd_config *c)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->data_dir, sizeof(c->data_dir), "%s", KVD_DEFAULT_DATA);
	c->log_level = LOG_INFO;
	c->idle_timeout_s = 300;
	c->max_message_size = 64ull << 20;
	c->max_value_size = 16u << 20;
	c->contexts = 256;
	c->max_connections = 1024;
	c->client_timeout_s = 0;
	c->frame_timeout_s = 30;
	c->input_budget = 256ull << 20;
	c->output_budget = 256ull << 20;
	c->ipc_mode = 0660;
	c->segment_size = 64ull << 20;
	c->max_queue = 65536;
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
	char *err;
	size_t errlen;
	bool listen_seen;
};

static int copy_str(char *dst, size_t cap, const char *v)
{
	if (strlen(v) >= cap)
		return -EINVAL;
	strcpy(dst, v);
	return 0;
}

static int set_key(struct load *l, const char *section, const char *k, const char *v)
{
	struct kvd_config *c = l->c;
	uint64_t u;

	if (section[0] == '\0' || strcmp(section, "kvd") == 0) {
		if (!strcmp(k, "data_dir"))
			return copy_str(c->data_dir, sizeof(c->data_dir), v);
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
		if (!strcmp(k, "input_budget"))
			return parse_size(v, &c->input_budget);
		if (!strcmp(k, "output_budget"))
			return parse_size(v, &c->output_budget);
		if (!strcmp(k, "auto_create"))
			return parse_bool(v, &c->auto_create);
		if (!strcmp(k, "token"))
			return copy_str(c->token, sizeof(c->token), v);
		if (!strcmp(k, "tls_cert"))
			return copy_str(c->tls_cert, sizeof(c->tls_cert), v);
		if (!strcmp(k, "tls_key"))
			return copy_str(c->tls_key, sizeof(c->tls_key), v);
		if (!strcmp(k, "ipc_mode")) {
			char *end;
			unsigned long m = strtoul(v, &end, 8);
			if (end == v || *end != '\0' || m > 0777)
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
	}
	(void)u;
	return -ENOENT;
}

static int ini_cb(void *user, const char *section, const char *k, const char *v)
{
	struct load *l = user;
	int rv = set_key(l, section, k, v);

	if (rv == 0)
		return 1;
	if (l->err[0] == '\0') {
		if (rv == -ENOENT)
			snprintf(l->err, l->errlen, "unknown setting '%s%s%s'", section,
			         section[0] ? "." : "", k);
		else
			snprintf(l->err, l->errlen, "bad value '%s' for '%s'", v, k);
	}
	return 0;
}

int config_load(struct kvd_config *c, const char *path, char *err, size_t errlen)
{
	struct load l = {c, err, errlen, false};
	FILE *f;
	int rv;

	err[0] = '\0';
	if ((f = fopen(path, "r")) == NULL) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -errno;
	}
	rv = ini_parse_file(f, ini_cb, &l);
	fclose(f);
	if (rv != 0) {
		char msg[512];
		snprintf(msg, sizeof(msg), "%s line %d: %s", path, rv > 0 ? rv : 0,
		         err[0] ? err : "syntax error");
		snprintf(err, errlen, "%s", msg);
		return -EINVAL;
	}
	return 0;
}

int config_check(const struct kvd_config *c, char *err, size_t errlen)
{
	if (c->nlisten == 0) {
		snprintf(err, errlen, "no listen address (--listen URL)");
		return -EINVAL;
	}
	for (int i = 0; i < c->nlisten; i++) {
		const char *u = c->listen[i];
		if (strncmp(u, "ipc://", 6) && strncmp(u, "tcp://", 6) && strncmp(u, "tls+tcp://", 10) &&
		    strncmp(u, "kv+ipc://", 9) && strncmp(u, "kv+tcp://", 9)) {
			snprintf(err, errlen,
			         "listen address '%s': use kv+ipc://, kv+tcp://, ipc://, tcp:// or "
			         "tls+tcp://",
			         u);
			return -EINVAL;
		}
		if (!strncmp(u, "tls+tcp://", 10) && (!c->tls_cert[0] || !c->tls_key[0])) {
			snprintf(err, errlen, "listen address '%s' needs tls_cert and tls_key", u);
			return -EINVAL;
		}
	}
	if (c->data_dir[0] == '\0') {
		snprintf(err, errlen, "no data directory (--data-dir DIR)");
		return -EINVAL;
	}
	if (c->max_value_size == 0 || c->max_value_size > KV_VALUE_SIZE_MAX) {
		snprintf(err, errlen, "max_value_size must be 1..%u", KV_VALUE_SIZE_MAX);
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
	if (c->defaults.history_versions == 0 ||
	    (c->defaults.sync == KV_SYNC_INTERVAL && c->defaults.sync_interval_ms == 0)) {
		snprintf(err, errlen, "tenant-defaults: history and sync_interval_ms must be > 0");
		return -EINVAL;
	}
	return 0;
}
