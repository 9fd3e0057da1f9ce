/*
 * fuzz_tenant_file — a tenant's TENANT file parser (engine/tenant_file.c:
 * tenant_file_parse) against arbitrary bytes.
 *
 * Invariants: it returns 0 or KV_EREFUSED, with a one-line reason exactly
 * when it refuses, and leaves the settings alone then; what it accepts is
 * sane (a known sync mode, history ≥ 1, an interval > 0 under sync =
 * interval); an accepted file written again by tenant_file_format reads
 * back to the same settings, and that text with any one bit flipped is
 * refused (the checksum line).
 */
#include "fuzz.h"

#include "tenant_file.h"

#include <string.h>

static bool same(const struct kv_tenant_config *a, const struct kv_tenant_config *b)
{
	return a->sync == b->sync && a->sync_interval_ms == b->sync_interval_ms &&
	       a->history_versions == b->history_versions &&
	       a->default_ttl_ms == b->default_ttl_ms && a->max_keys == b->max_keys &&
	       a->compression == b->compression && a->compression_level == b->compression_level &&
	       a->max_bytes == b->max_bytes && a->evict == b->evict;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kv_tenant_config c, before, again;
	char why[256], text[512];
	size_t len;
	int rv;

	if (size > TENANT_FILE_MAX)
		return 0;
	kv_tenant_config_init(&c);
	before = c;
	memset(why, 0x5a, sizeof(why));
	rv = tenant_file_parse((const char *)data, size, why, sizeof(why), &c);
	FZ_CHECK(rv == 0 || rv == KV_EREFUSED);
	if (rv != 0) {
		FZ_CHECK(memchr(why, '\0', sizeof(why)) != NULL && why[0] != '\0');
		FZ_CHECK(strchr(why, '\n') == NULL);
		FZ_CHECK(same(&c, &before));
		return 0;
	}
	FZ_CHECK(c.sync == KV_SYNC_ALWAYS || c.sync == KV_SYNC_INTERVAL || c.sync == KV_SYNC_NONE);
	FZ_CHECK(c.history_versions >= 1);
	FZ_CHECK(c.sync != KV_SYNC_INTERVAL || c.sync_interval_ms > 0);
	FZ_CHECK(tenant_file_format(&c, text, sizeof(text)) == 0);
	len = strlen(text);
	kv_tenant_config_init(&again);
	FZ_CHECK(tenant_file_parse(text, len, why, sizeof(why), &again) == 0);
	FZ_CHECK(same(&c, &again));
	/* one bit of the written text, chosen by the input */
	{
		size_t bit = (size ? data[0] | (size > 1 ? (size_t)data[1] << 8 : 0) : 0) % (len * 8);
		text[bit / 8] = (char)(text[bit / 8] ^ (1 << (bit % 8)));
		kv_tenant_config_init(&again);
		FZ_CHECK(tenant_file_parse(text, len, why, sizeof(why), &again) == KV_EREFUSED);
	}
	return 0;
}
