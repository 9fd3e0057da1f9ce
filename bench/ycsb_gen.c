/*
 * bench/ycsb_gen.c — YCSB's key, operation and scan-length generators
 * (see ycsb_gen.h for what is reproduced and what is not).
 *
 * The Zipfian draw is Gray et al.'s ("Quickly Generating Billion-Record
 * Synthetic Databases", SIGMOD 1994) as ZipfianGenerator.nextLong codes it:
 * items 0 and 1 get exactly their Zipf probability, the rest come from a
 * closed-form approximation of the inverse CDF. Nothing here corrects that:
 * YCSB's distribution is the reference, not the ideal Zipf law.
 */
#include "ycsb_gen.h"
#include "rng.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- random numbers ------------------------------------------------------ */

void yg_rng_seed(struct yg_rng *r, uint64_t seed)
{
	for (int i = 0; i < 4; i++)
		r->s[i] = bench_rng(&seed);
}

static inline uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

uint64_t yg_rng_next(struct yg_rng *r)
{
	uint64_t *s = r->s;
	uint64_t out = rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return out;
}

double yg_rng_double(struct yg_rng *r)
{
	return (double)(yg_rng_next(r) >> 11) * 0x1.0p-53;
}

uint64_t yg_rng_below(struct yg_rng *r, uint64_t n)
{
	/* Lemire's multiply-shift with rejection of the biased low range */
	unsigned __int128 m = (unsigned __int128)yg_rng_next(r) * n;
	uint64_t low = (uint64_t)m;

	if (low < n) {
		uint64_t floor = -n % n;
		while (low < floor) {
			m = (unsigned __int128)yg_rng_next(r) * n;
			low = (uint64_t)m;
		}
	}
	return (uint64_t)(m >> 64);
}

/* ---- hashing and key names ------------------------------------------------ */

#define FNV_OFFSET_BASIS_64 0xCBF29CE484222325ull
#define FNV_PRIME_64        1099511628211ull

int64_t yg_fnvhash64(int64_t val)
{
	uint64_t h = FNV_OFFSET_BASIS_64;
	int64_t v = val;

	for (int i = 0; i < 8; i++) {
		uint64_t octet = (uint64_t)v & 0xff;
		v >>= 8; /* Java's >>: arithmetic (gcc's >> on a negative int64_t is too) */
		h ^= octet;
		h *= FNV_PRIME_64;
	}
	/* Math.abs(long): Long.MIN_VALUE has no positive counterpart and stays */
	if (h == (1ull << 63))
		return INT64_MIN;
	return (int64_t)h < 0 ? -(int64_t)h : (int64_t)h;
}

size_t yg_key_name(char buf[YG_KEY_MAX], int64_t keynum, unsigned zeropadding, bool ordered)
{
	char digits[24];
	size_t nd = 0, n = 0;
	int64_t v = ordered ? keynum : yg_fnvhash64(keynum);
	bool neg = v < 0;
	uint64_t u = neg ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;

	do {
		digits[nd++] = (char)('0' + u % 10);
		u /= 10;
	} while (u != 0);
	if (neg)
		digits[nd++] = '-';
	memcpy(buf, "user", 4);
	n = 4;
	if (zeropadding > YG_ZEROPADDING_MAX)
		zeropadding = YG_ZEROPADDING_MAX;
	/* as buildKeyName: the fill counts the sign as a digit */
	for (size_t fill = nd; fill < zeropadding; fill++)
		buf[n++] = '0';
	while (nd > 0)
		buf[n++] = digits[--nd];
	buf[n] = '\0';
	return n;
}

/* ---- ZipfianGenerator ---------------------------------------------------- */

double yg_zeta(uint64_t st, uint64_t n, double theta, double initialsum)
{
	double sum = initialsum;

	for (uint64_t i = st; i < n; i++)
		sum += 1 / pow((double)(i + 1), theta);
	return sum;
}

void yg_zipfian_init_zetan(struct yg_zipfian *z, int64_t min, int64_t max, double theta,
                           double zetan)
{
	z->items = (uint64_t)(max - min + 1);
	z->base = min;
	z->theta = theta;
	z->zeta2theta = yg_zeta(0, 2, theta, 0);
	z->alpha = 1.0 / (1.0 - theta);
	z->zetan = zetan;
	z->countforzeta = z->items;
	z->eta = (1 - pow(2.0 / (double)z->items, 1 - theta)) / (1 - z->zeta2theta / z->zetan);
}

void yg_zipfian_init(struct yg_zipfian *z, int64_t min, int64_t max, double theta)
{
	yg_zipfian_init_zetan(z, min, max, theta, yg_zeta(0, (uint64_t)(max - min + 1), theta, 0));
}

int64_t yg_zipfian_next_n(struct yg_zipfian *z, struct yg_rng *r, uint64_t itemcount)
{
	double u, uz;

	if (itemcount > z->countforzeta) {
		z->zetan = yg_zeta(z->countforzeta, itemcount, z->theta, z->zetan);
		z->countforzeta = itemcount;
		/* YCSB recomputes eta with `items`, the constructed count, not
		 * itemcount; kept so the distribution is YCSB's */
		z->eta = (1 - pow(2.0 / (double)z->items, 1 - z->theta)) /
		         (1 - z->zeta2theta / z->zetan);
	}
	u = yg_rng_double(r);
	uz = u * z->zetan;
	if (uz < 1.0)
		return z->base;
	if (uz < 1.0 + pow(0.5, z->theta))
		return z->base + 1;
	return z->base + (int64_t)((double)itemcount * pow(z->eta * u - z->eta + 1, z->alpha));
}

int64_t yg_zipfian_next(struct yg_zipfian *z, struct yg_rng *r)
{
	return yg_zipfian_next_n(z, r, z->items);
}

/* ---- ScrambledZipfianGenerator ------------------------------------------- */

void yg_scrambled_init(struct yg_scrambled *s, int64_t min, int64_t max)
{
	s->min = min;
	s->itemcount = (uint64_t)(max - min + 1);
	/* new ZipfianGenerator(0, ITEM_COUNT, 0.99, ZETAN): ITEM_COUNT + 1 items */
	yg_zipfian_init_zetan(&s->gen, 0, YG_SCRAMBLED_ITEM_COUNT, YG_ZIPFIAN_CONSTANT,
	                      YG_SCRAMBLED_ZETAN);
}

int64_t yg_scrambled_next(struct yg_scrambled *s, struct yg_rng *r)
{
	int64_t ret = yg_zipfian_next(&s->gen, r);

	/* Java's % truncates toward zero, as C's does */
	return s->min + yg_fnvhash64(ret) % (int64_t)s->itemcount;
}

/* ---- UniformLongGenerator ------------------------------------------------- */

void yg_uniform_init(struct yg_uniform *u, int64_t lb, int64_t ub)
{
	u->lb = lb;
	u->ub = ub;
}

int64_t yg_uniform_next(const struct yg_uniform *u, struct yg_rng *r)
{
	/* YCSB: Math.abs(nextLong()) % interval + lb, whose bias (below 2^-40
	 * for our intervals) is left out */
	return u->lb + (int64_t)yg_rng_below(r, (uint64_t)(u->ub - u->lb + 1));
}

/* ---- counters ----------------------------------------------------------------- */

void yg_counter_init(struct yg_counter *c, int64_t start)
{
	atomic_init(&c->next, start);
}

int64_t yg_counter_next(struct yg_counter *c)
{
	return atomic_fetch_add(&c->next, 1);
}

int yg_acked_init(struct yg_acked *a, int64_t start)
{
	a->window = calloc(YG_ACK_WINDOW, sizeof(*a->window));
	if (a->window == NULL)
		return -ENOMEM;
	atomic_init(&a->next, start);
	atomic_init(&a->limit, start - 1);
	pthread_mutex_init(&a->lock, NULL);
	return 0;
}

void yg_acked_fini(struct yg_acked *a)
{
	if (a == NULL || a->window == NULL)
		return;
	pthread_mutex_destroy(&a->lock);
	free((void *)a->window);
	a->window = NULL;
}

int64_t yg_acked_next(struct yg_acked *a)
{
	return atomic_fetch_add(&a->next, 1);
}

int64_t yg_acked_last(struct yg_acked *a)
{
	return atomic_load(&a->limit);
}

int yg_acked_ack(struct yg_acked *a, int64_t value)
{
	const uint64_t mask = YG_ACK_WINDOW - 1;
	unsigned char was = 0;

	if (!atomic_compare_exchange_strong(&a->window[(uint64_t)value & mask], &was, 1))
		return -EOVERFLOW;
	for (;;) {
		int64_t limit, index;
		uint64_t steps = 0;

		if (pthread_mutex_trylock(&a->lock) != 0)
			return 0; /* the holder moves limit past this value, or looks again */
		limit = atomic_load(&a->limit);
		for (index = limit + 1; steps < YG_ACK_WINDOW; index++, steps++) {
			uint64_t slot = (uint64_t)index & mask;
			if (!atomic_load(&a->window[slot]))
				break;
			atomic_store(&a->window[slot], 0);
		}
		atomic_store(&a->limit, index - 1);
		pthread_mutex_unlock(&a->lock);
		/* a value acknowledged while the lock was held, whose trylock failed */
		if (!atomic_load(&a->window[(uint64_t)index & mask]))
			return 0;
	}
}

/* ---- SkewedLatestGenerator ------------------------------------------------------ */

void yg_latest_init(struct yg_latest *l, struct yg_acked *basis)
{
	l->basis = basis;
	/* new ZipfianGenerator(basis.lastValue()): items 0 .. last - 1 */
	yg_zipfian_init(&l->zipfian, 0, yg_acked_last(basis) - 1, YG_ZIPFIAN_CONSTANT);
}

int64_t yg_latest_next(struct yg_latest *l, struct yg_rng *r)
{
	int64_t max = yg_acked_last(l->basis);

	return max - yg_zipfian_next_n(&l->zipfian, r, (uint64_t)max);
}

/* ---- the key chooser ------------------------------------------------------------ */

void yg_keychooser_init(struct yg_keychooser *k, enum yg_dist dist, int64_t insertstart,
                        int64_t insertcount, int64_t expectednewkeys, struct yg_acked *inserts)
{
	memset(k, 0, sizeof(*k));
	k->dist = dist;
	k->inserts = inserts;
	switch (dist) {
	case YG_DIST_UNIFORM:
		yg_uniform_init(&k->uniform, insertstart, insertstart + insertcount - 1);
		break;
	case YG_DIST_ZIPFIAN:
		yg_scrambled_init(&k->zipfian, insertstart,
		                  insertstart + insertcount + expectednewkeys);
		break;
	case YG_DIST_LATEST:
		yg_latest_init(&k->latest, inserts);
		break;
	}
}

static int64_t java_int(int64_t v)
{
	/* Long.intValue(): the low 32 bits, signed */
	return (int64_t)(int32_t)(uint32_t)(uint64_t)v;
}

int64_t yg_keychooser_next(struct yg_keychooser *k, struct yg_rng *r)
{
	int64_t keynum;

	do {
		switch (k->dist) {
		case YG_DIST_UNIFORM:
			keynum = yg_uniform_next(&k->uniform, r);
			break;
		case YG_DIST_ZIPFIAN:
			keynum = yg_scrambled_next(&k->zipfian, r);
			break;
		case YG_DIST_LATEST:
		default:
			keynum = yg_latest_next(&k->latest, r);
			break;
		}
		keynum = java_int(keynum);
	} while (keynum > yg_acked_last(k->inserts));
	return keynum;
}

/* ---- DiscreteGenerator ----------------------------------------------------------- */

void yg_discrete_init(struct yg_discrete *d)
{
	memset(d, 0, sizeof(*d));
}

int yg_discrete_add(struct yg_discrete *d, double weight, int value)
{
	if (d->n == YG_DISCRETE_MAX)
		return -ENOSPC;
	d->weight[d->n] = weight;
	d->value[d->n] = value;
	d->n++;
	return 0;
}

int yg_discrete_next(const struct yg_discrete *d, struct yg_rng *r)
{
	double sum = 0, val;

	for (size_t i = 0; i < d->n; i++)
		sum += d->weight[i];
	val = yg_rng_double(r);
	for (size_t i = 0; i < d->n; i++) {
		double pw = d->weight[i] / sum;
		if (val < pw)
			return d->value[i];
		val -= pw;
	}
	/* YCSB throws here; rounding can bring val to the last weight's edge */
	return d->value[d->n - 1];
}
