/* flips.h — the tenant both corruption tests (test_corruption.c on files,
 * test_corruption_device.c on a device) write and read back: N_KEYS keys
 * whose values follow from their index, a seeded random stream, and the
 * read of every key over the wire. Include after cmocka.h and kvclient.h. */
#ifndef KVD_TEST_FLIPS_H
#define KVD_TEST_FLIPS_H

#define N_KEYS    1500
#define VALUE_MAX 1500
#define TENANT    "flips"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void key_of(int i, char *buf, size_t cap)
{
	snprintf(buf, cap, "key/%05d", i);
}

/* The value of key i: its length and bytes follow from i. */
static size_t value_of(int i, uint8_t *buf)
{
	uint64_t z = (uint64_t)i * 0x2545f4914f6cdd1dull + 7;
	size_t len = (size_t)(z % VALUE_MAX);

	for (size_t j = 0; j < len; j++) {
		z ^= z << 13;
		z ^= z >> 7;
		z ^= z << 17;
		buf[j] = (uint8_t)z;
	}
	return len;
}

/* Every key over the wire: its exact value, or DATA_LOSS. Returns the count
 * of the latter; fails on anything else. */
static int read_all_wire(kvc *c)
{
	struct kvc_status st;
	struct kvc_call call = {.status = &st};
	uint8_t want[VALUE_MAX];
	int lost = 0;

	for (int i = 0; i < N_KEYS; i++) {
		char key[32];
		struct kvc_value v;
		size_t len = value_of(i, want);
		int rv;

		key_of(i, key, sizeof(key));
		rv = kvc_get(c, &call, key, strlen(key), 0, 0, &v);
		if (rv == -KVC_DATA_LOSS) {
			lost++;
			continue;
		}
		if (rv != 0)
			fail_msg("%s over kvd: %s '%s'", key, kvc_code_name(rv), st.message);
		if (v.len != len || (len > 0 && memcmp(v.data, want, len) != 0))
			fail_msg("%s over kvd: bytes that are not its value", key);
		kvc_value_free(&v);
	}
	return lost;
}

#endif
