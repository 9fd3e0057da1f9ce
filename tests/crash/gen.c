/*
 * gen.c — what the crash loop writes, derived from the seed so that it can
 * be derived again when checking: key names, and each value from (key,
 * nonce) alone, so the model keeps 8 bytes per write instead of the value.
 *
 * Sizes. Values are 0 … 65536 bytes, log-uniform: an exponent e of 0 … 16
 * first, then a length of 0 … 2^e. Uniform lengths would make nearly every
 * value tens of KiB, and a run of a thousand kills with history kept in full
 * would write tens of GiB; this way every size class up to 64 KiB is hit
 * equally often (small records sharing a page, records spanning pages,
 * exactly 64 KiB) at an average near 4 KiB. Keys are 7 … 4103 bytes, also
 * log-uniform, and key 0 is 65536 bytes, the largest kvd takes.
 */
#include "crash.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t cl_mix(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

uint64_t cl_rand(uint64_t *state)
{
	*state += 0x9e3779b97f4a7c15ULL;
	return cl_mix(*state);
}

uint64_t cl_below(uint64_t *state, uint64_t n)
{
	return n == 0 ? 0 : cl_rand(state) % n;
}

char *cl_key_name(uint64_t seed, uint32_t i, size_t *ret_len)
{
	static const char alnum[] = "abcdefghijklmnopqrstuvwxyz0123456789";
	uint64_t st = cl_mix(seed ^ 0x6b6579ULL) ^ cl_mix((uint64_t)i + 1);
	size_t len, j;
	char *p;
	int n;

	if (i == 0)
		len = CL_KEY_MAX;
	else
		len = 7 + (size_t)cl_below(&st, ((uint64_t)1 << cl_below(&st, 13)) + 1);
	if ((p = malloc(len + 1)) == NULL)
		return NULL;
	n = snprintf(p, len + 1, "k%05u-", i);
	for (j = (size_t)n; j < len; j++)
		p[j] = alnum[cl_below(&st, sizeof(alnum) - 1)];
	p[len] = '\0';
	*ret_len = len;
	return p;
}

static uint64_t value_state(uint64_t seed, uint32_t key, uint64_t nonce)
{
	return cl_mix(seed ^ 0x76616cULL) ^ cl_mix(((uint64_t)key << 1) + 1) ^
	       cl_mix(nonce * 0xd6e8feb86659fd93ULL);
}

uint32_t cl_value_max_log2 = 16;

uint32_t cl_value_len(uint64_t seed, uint32_t key, uint64_t nonce)
{
	uint64_t st = value_state(seed, key, nonce);
	uint32_t e = (uint32_t)cl_below(&st, cl_value_max_log2 + 1);

	return (uint32_t)cl_below(&st, ((uint64_t)1 << e) + 1);
}

void cl_value_fill(uint64_t seed, uint32_t key, uint64_t nonce, uint8_t *buf, uint32_t len)
{
	uint64_t st = value_state(seed, key, nonce) ^ 0x5555555555555555ULL;
	uint32_t i = 0;

	while (i < len) {
		uint64_t r = cl_rand(&st);
		uint32_t n = len - i < 8 ? len - i : 8;
		memcpy(buf + i, &r, n);
		i += n;
	}
}

bool cl_value_equal(uint64_t seed, uint32_t key, uint64_t nonce, const void *data, size_t len,
                    uint8_t *scratch, size_t *ret_diff)
{
	uint32_t want = cl_value_len(seed, key, nonce);
	size_t n = len < want ? len : want, i;

	cl_value_fill(seed, key, nonce, scratch, want);
	if (len == want && memcmp(data, scratch, len) == 0)
		return true;
	for (i = 0; i < n && ((const uint8_t *)data)[i] == scratch[i]; i++)
		;
	if (ret_diff)
		*ret_diff = i;
	return false;
}

void cl_key_text(const char *name, size_t len, char *buf, size_t cap)
{
	if (len <= 48)
		snprintf(buf, cap, "\"%.*s\"", (int)len, name);
	else
		snprintf(buf, cap, "\"%.48s\"…(%zu bytes)", name, len);
}
