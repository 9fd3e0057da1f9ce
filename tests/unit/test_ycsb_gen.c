/* test_ycsb_gen: kvbench ycsb's generators draw what YCSB's Java generators draw. */
/*
 * Checks bench/ycsb_gen.c against YCSB's reference behaviour:
 *   - key names: fnvhash64 byte order and Math.abs, so that record 0 is
 *     "user6284781860667377211" as in every YCSB load; zero padding;
 *   - ZipfianGenerator over n = 1000 items: the frequencies of the 10 most
 *     popular items, from 2,000,000 draws, each within 5 standard deviations
 *     and 2 % of the probability YCSB's algorithm gives them (computed here
 *     in closed form from Gray et al.'s formula, the way ZipfianGenerator
 *     applies it); items 0 and 1 also against the exact Zipf law;
 *   - ScrambledZipfianGenerator: the hottest keys are fnvhash64(0) mod n and
 *     fnvhash64(1) mod n, at the rate the precomputed ZETAN gives;
 *   - SkewedLatestGenerator: the newest insert is the most popular and
 *     moves with new acknowledged inserts; zeta is extended incrementally;
 *   - the key chooser never returns a key above the last acknowledged insert;
 *   - scan lengths uniform in [1, 100]; the operation chooser's proportions;
 *   - AcknowledgedCounterGenerator: in-order visibility, the window limit,
 *     and many threads.
 * Seeds are fixed: every run draws the same numbers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four above first */
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ycsb_gen.h"

#define DRAWS   2000000 /* draws of the distribution tests */
#define N_ITEMS 1000    /* items of the Zipfian tests */
#define TOP     10      /* items whose frequencies are checked */

/* |observed - p| within 5 standard deviations of a binomial count and 2 %. */
static void assert_freq(const char *what, long item, uint64_t count, uint64_t draws, double p)
{
	double f = (double)count / (double)draws;
	double sd = sqrt(p * (1 - p) / (double)draws);

	if (fabs(f - p) > 5 * sd || fabs(f - p) > 0.02 * p)
		fail_msg("%s item %ld: frequency %.6f, YCSB's probability %.6f (sd %.6f)", what,
		         item, f, p, sd);
}

/* ---- key names ------------------------------------------------------------ */

static void test_key_names(void **state)
{
	char k[YG_KEY_MAX];
	size_t n;

	(void)state;
	/* the first keys of every YCSB load (insertorder=hashed, zeropadding=1) */
	n = yg_key_name(k, 0, 1, false);
	assert_string_equal(k, "user6284781860667377211");
	assert_int_equal(n, strlen(k));
	yg_key_name(k, 1, 1, false);
	assert_string_equal(k, "user8517097267634966620");
	yg_key_name(k, 2, 1, false);
	assert_string_equal(k, "user1820151046732198393");
	yg_key_name(k, 1000, 1, false);
	assert_string_equal(k, "user5952875239596136740");
	/* CoreWorkload's own examples of zeropadding */
	yg_key_name(k, 5, 1, true);
	assert_string_equal(k, "user5");
	yg_key_name(k, 5, 8, true);
	assert_string_equal(k, "user00000005");
	/* Math.abs of the FNV value (its top bit set for key 0) */
	assert_true(yg_fnvhash64(0) == 6284781860667377211ll);
	assert_true(yg_fnvhash64(3) == 4052466453699787802ll);
	/* padding is bounded by the buffer */
	n = yg_key_name(k, 7, 1000, true);
	assert_int_equal(n, 4 + YG_ZEROPADDING_MAX);
}

/* ---- ZipfianGenerator -------------------------------------------------------- */

/* P(nextLong(n) = k) for YCSB's algorithm, from its formula: u in [0, 1)
 * maps to base when u*zetan < 1, to base + 1 below (1 + 0.5^theta)/zetan,
 * else to floor(n * (eta*u - eta + 1)^alpha), increasing in u. */
static double ycsb_zipf_p(const struct yg_zipfian *z, uint64_t n, uint64_t k)
{
	double u0 = (1.0 + pow(0.5, z->theta)) / z->zetan, lo, hi, p = 0;
	/* the u at which the formula reaches v */
	double g_k = (pow((double)k / (double)n, 1.0 / z->alpha) - 1) / z->eta + 1;
	double g_k1 = (pow((double)(k + 1) / (double)n, 1.0 / z->alpha) - 1) / z->eta + 1;

	if (k == 0)
		p += 1.0 / z->zetan;
	if (k == 1)
		p += pow(0.5, z->theta) / z->zetan;
	lo = g_k > u0 ? g_k : u0;
	hi = g_k1 < 1 ? g_k1 : 1;
	if (hi > lo)
		p += hi - lo;
	return p;
}

static void test_zipfian_top_items(void **state)
{
	struct yg_zipfian z;
	struct yg_rng r;
	uint64_t *count = calloc(N_ITEMS, sizeof(*count));
	double sum = 0, zeta = yg_zeta(0, N_ITEMS, 0.99, 0);

	(void)state;
	assert_non_null(count);
	yg_zipfian_init(&z, 0, N_ITEMS - 1, YG_ZIPFIAN_CONSTANT);
	assert_true(fabs(z.zetan - zeta) < 1e-12);
	/* the reference distribution is a distribution */
	for (uint64_t k = 0; k < N_ITEMS; k++)
		sum += ycsb_zipf_p(&z, N_ITEMS, k);
	assert_true(fabs(sum - 1) < 1e-9);
	/* items 0 and 1 follow the Zipf law exactly */
	assert_true(fabs(ycsb_zipf_p(&z, N_ITEMS, 0) - 1 / zeta) < 1e-12);
	assert_true(fabs(ycsb_zipf_p(&z, N_ITEMS, 1) - pow(2, -0.99) / zeta) < 1e-3);

	yg_rng_seed(&r, 42);
	for (int i = 0; i < DRAWS; i++) {
		int64_t v = yg_zipfian_next(&z, &r);
		assert_true(v >= 0 && v < N_ITEMS);
		count[v]++;
	}
	for (uint64_t k = 0; k < TOP; k++)
		assert_freq("zipfian", (long)k, count[k], DRAWS, ycsb_zipf_p(&z, N_ITEMS, k));
	/* the head is ordered: each of the top items more popular than the next */
	for (uint64_t k = 0; k + 1 < TOP; k++)
		assert_true(count[k] > count[k + 1]);
	/* against the exact Zipf law for items 0 and 1 */
	assert_freq("zipf law", 0, count[0], DRAWS, 1 / zeta);
	assert_freq("zipf law", 1, count[1], DRAWS, pow(2, -0.99) / zeta);
	free(count);
}

static void test_zipfian_base_and_growth(void **state)
{
	struct yg_zipfian z;
	struct yg_rng r;

	(void)state;
	yg_rng_seed(&r, 7);
	yg_zipfian_init(&z, 100, 199, YG_ZIPFIAN_CONSTANT);
	for (int i = 0; i < 100000; i++) {
		int64_t v = yg_zipfian_next(&z, &r);
		assert_true(v >= 100 && v <= 199);
	}
	/* a larger itemcount extends zeta incrementally, as from scratch */
	for (int i = 0; i < 1000; i++) {
		int64_t v = yg_zipfian_next_n(&z, &r, 150);
		assert_true(v >= 100 && v < 100 + 150);
	}
	assert_int_equal(z.countforzeta, 150);
	assert_true(fabs(z.zetan - yg_zeta(0, 150, 0.99, 0)) < 1e-9);
	/* a smaller one does not shrink it (allowitemcountdecrease is false) */
	(void)yg_zipfian_next_n(&z, &r, 120);
	assert_int_equal(z.countforzeta, 150);
}

/* ---- ScrambledZipfianGenerator ------------------------------------------------ */

static void test_scrambled_zipfian(void **state)
{
	struct yg_scrambled s;
	struct yg_rng r;
	uint64_t *count = calloc(N_ITEMS, sizeof(*count));
	int64_t hot0 = yg_fnvhash64(0) % N_ITEMS, hot1 = yg_fnvhash64(1) % N_ITEMS;
	uint64_t first = 0, second = 0;
	int64_t arg1 = -1, arg2 = -1;
	double f0, f1;

	(void)state;
	assert_non_null(count);
	assert_int_equal(hot0, 211);
	assert_int_equal(hot1, 620);
	yg_scrambled_init(&s, 0, N_ITEMS - 1);
	assert_int_equal(s.gen.items, YG_SCRAMBLED_ITEM_COUNT + 1);
	yg_rng_seed(&r, 43);
	for (int i = 0; i < DRAWS; i++) {
		int64_t v = yg_scrambled_next(&s, &r);
		assert_true(v >= 0 && v < N_ITEMS);
		count[v]++;
	}
	for (int64_t k = 0; k < N_ITEMS; k++) {
		if (count[k] > first) {
			second = first;
			arg2 = arg1;
			first = count[k];
			arg1 = k;
		} else if (count[k] > second) {
			second = count[k];
			arg2 = k;
		}
	}
	assert_int_equal(arg1, hot0);
	assert_int_equal(arg2, hot1);
	/* item 0 of the underlying generator is drawn with 1/ZETAN, item 1 with
	 * 0.5^0.99/ZETAN; the other 10^10 items land on every key about evenly */
	f0 = (double)count[hot0] / DRAWS;
	f1 = (double)count[hot1] / DRAWS;
	{
		double p0 = 1 / YG_SCRAMBLED_ZETAN, p1 = pow(0.5, 0.99) / YG_SCRAMBLED_ZETAN;
		double rest = (1 - p0 - p1) / N_ITEMS;
		assert_true(fabs(f0 - (p0 + rest)) < 0.1 * p0);
		assert_true(fabs(f1 - (p1 + rest)) < 0.1 * p1);
	}
	/* with a base */
	yg_scrambled_init(&s, 5000, 5999);
	for (int i = 0; i < 10000; i++) {
		int64_t v = yg_scrambled_next(&s, &r);
		assert_true(v >= 5000 && v <= 5999);
	}
	free(count);
}

/* ---- SkewedLatestGenerator ------------------------------------------------------ */

static void test_latest_favours_newest(void **state)
{
	struct yg_acked a;
	struct yg_latest l;
	struct yg_rng r;
	uint64_t *count = calloc(2000, sizeof(*count));
	uint64_t newest = 0, recent = 0;
	int64_t arg = -1;
	uint64_t best = 0;

	(void)state;
	assert_non_null(count);
	assert_int_equal(yg_acked_init(&a, 1000), 0); /* 1000 records loaded */
	assert_int_equal(yg_acked_last(&a), 999);
	yg_latest_init(&l, &a);
	yg_rng_seed(&r, 44);
	for (int i = 0; i < 500000; i++) {
		int64_t v = yg_latest_next(&l, &r);
		assert_true(v >= 0 && v <= 999);
		count[v]++;
	}
	for (int64_t k = 0; k < 1000; k++)
		if (count[k] > best) {
			best = count[k];
			arg = k;
		}
	assert_int_equal(arg, 999);
	/* the newest with the Zipf head's probability 1/zeta(999) */
	assert_freq("latest", 999, count[999], 500000, 1 / yg_zeta(0, 999, 0.99, 0));
	assert_true(count[999] > count[998] && count[998] > count[997]);

	/* 100 inserts acknowledged: the newest of them is now the hottest */
	for (int i = 0; i < 100; i++)
		assert_int_equal(yg_acked_ack(&a, yg_acked_next(&a)), 0);
	assert_int_equal(yg_acked_last(&a), 1099);
	memset(count, 0, 2000 * sizeof(*count));
	for (int i = 0; i < 500000; i++) {
		int64_t v = yg_latest_next(&l, &r);
		assert_true(v >= 0 && v <= 1099);
		count[v]++;
		if (v == 1099)
			newest++;
		if (v >= 1000)
			recent++;
	}
	best = 0;
	for (int64_t k = 0; k < 1100; k++)
		if (count[k] > best) {
			best = count[k];
			arg = k;
		}
	assert_int_equal(arg, 1099);
	/* zeta extended from 999 to 1099 items, equal to computing it anew */
	assert_int_equal(l.zipfian.countforzeta, 1099);
	assert_true(fabs(l.zipfian.zetan - yg_zeta(0, 1099, 0.99, 0)) < 1e-9);
	/* the 100 newest of 1100 take about zeta(100)/zeta(1099) of the draws */
	{
		double p = yg_zeta(0, 100, 0.99, 0) / yg_zeta(0, 1099, 0.99, 0);
		double f = (double)recent / 500000;
		assert_true(fabs(f - p) < 0.02);
		assert_true(f > 0.6);
	}
	(void)newest;
	yg_acked_fini(&a);
	free(count);
}

/* ---- the key chooser ----------------------------------------------------------- */

static void test_keychooser_bounds(void **state)
{
	struct yg_acked a;
	struct yg_keychooser k;
	struct yg_rng r;
	int above = 0;

	(void)state;
	yg_rng_seed(&r, 45);
	assert_int_equal(yg_acked_init(&a, 1000), 0);
	/* workload E: zipfian over records + expected new keys */
	yg_keychooser_init(&k, YG_DIST_ZIPFIAN, 0, 1000, 100, &a);
	assert_int_equal(k.zipfian.itemcount, 1101);
	for (int i = 0; i < 100000; i++) {
		int64_t v = yg_keychooser_next(&k, &r);
		assert_true(v >= 0 && v <= 999);
	}
	for (int i = 0; i < 50; i++)
		assert_int_equal(yg_acked_ack(&a, yg_acked_next(&a)), 0);
	for (int i = 0; i < 100000; i++) {
		int64_t v = yg_keychooser_next(&k, &r);
		assert_true(v >= 0 && v <= 1049);
		above += v > 999;
	}
	assert_true(above > 0);
	/* uniform */
	yg_keychooser_init(&k, YG_DIST_UNIFORM, 0, 1000, 0, &a);
	for (int i = 0; i < 100000; i++) {
		int64_t v = yg_keychooser_next(&k, &r);
		assert_true(v >= 0 && v <= 999);
	}
	yg_acked_fini(&a);
}

/* ---- scan lengths and the operation chooser -------------------------------------- */

static void test_scan_length_uniform(void **state)
{
	struct yg_uniform u;
	struct yg_rng r;
	uint64_t count[101] = {0};
	const int n = 1000000;

	(void)state;
	yg_rng_seed(&r, 46);
	yg_uniform_init(&u, 1, 100); /* workload E: minscanlength 1, maxscanlength 100 */
	for (int i = 0; i < n; i++) {
		int64_t v = yg_uniform_next(&u, &r);
		assert_true(v >= 1 && v <= 100);
		count[v]++;
	}
	for (int v = 1; v <= 100; v++)
		assert_true(fabs((double)count[v] - n / 100.0) < 0.05 * n / 100.0);
}

static void test_operation_chooser(void **state)
{
	struct yg_discrete d;
	struct yg_rng r;
	uint64_t count[3] = {0};
	const int n = 1000000;

	(void)state;
	yg_rng_seed(&r, 47);
	yg_discrete_init(&d);
	assert_int_equal(yg_discrete_add(&d, 0.95, 0), 0); /* workload B */
	assert_int_equal(yg_discrete_add(&d, 0.05, 1), 0);
	for (int i = 0; i < n; i++)
		count[yg_discrete_next(&d, &r)]++;
	assert_freq("discrete", 0, count[0], n, 0.95);
	assert_freq("discrete", 1, count[1], n, 0.05);
	for (int i = 2; i < YG_DISCRETE_MAX; i++)
		assert_int_equal(yg_discrete_add(&d, 1, i), 0);
	assert_int_equal(yg_discrete_add(&d, 1, 99), -ENOSPC);
}

/* ---- AcknowledgedCounterGenerator ------------------------------------------------ */

static void test_acked_order(void **state)
{
	struct yg_acked a;

	(void)state;
	assert_int_equal(yg_acked_init(&a, 10), 0);
	for (int i = 10; i < 15; i++)
		assert_int_equal(yg_acked_next(&a), i);
	assert_int_equal(yg_acked_ack(&a, 11), 0);
	assert_int_equal(yg_acked_ack(&a, 12), 0);
	assert_int_equal(yg_acked_last(&a), 9); /* 10 still outstanding */
	assert_int_equal(yg_acked_ack(&a, 10), 0);
	assert_int_equal(yg_acked_last(&a), 12);
	assert_int_equal(yg_acked_ack(&a, 14), 0);
	assert_int_equal(yg_acked_last(&a), 12);
	assert_int_equal(yg_acked_ack(&a, 13), 0);
	assert_int_equal(yg_acked_last(&a), 14);
	/* with 15 outstanding, a value a window ahead of 16 takes 16's slot:
	 * acknowledging 16 then finds it taken */
	assert_int_equal(yg_acked_ack(&a, 16 + YG_ACK_WINDOW), 0);
	assert_int_equal(yg_acked_last(&a), 14);
	assert_int_equal(yg_acked_ack(&a, 16), -EOVERFLOW);
	yg_acked_fini(&a);
	yg_acked_fini(NULL);
}

#define ACK_THREADS 4
#define ACK_EACH    200000

static void *ack_main(void *arg)
{
	struct yg_acked *a = arg;

	for (int i = 0; i < ACK_EACH; i++)
		if (yg_acked_ack(a, yg_acked_next(a)) != 0)
			return (void *)1;
	return NULL;
}

static void test_acked_threads(void **state)
{
	struct yg_acked a;
	pthread_t t[ACK_THREADS];
	void *rv;

	(void)state;
	assert_int_equal(yg_acked_init(&a, 1000), 0);
	for (int i = 0; i < ACK_THREADS; i++)
		assert_int_equal(pthread_create(&t[i], NULL, ack_main, &a), 0);
	for (int i = 0; i < ACK_THREADS; i++) {
		assert_int_equal(pthread_join(t[i], &rv), 0);
		assert_null(rv);
	}
	/* every value acknowledged: none left waiting below the limit */
	assert_int_equal(yg_acked_last(&a), 1000 + ACK_THREADS * ACK_EACH - 1);
	yg_acked_fini(&a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_key_names),
	        cmocka_unit_test(test_zipfian_top_items),
	        cmocka_unit_test(test_zipfian_base_and_growth),
	        cmocka_unit_test(test_scrambled_zipfian),
	        cmocka_unit_test(test_latest_favours_newest),
	        cmocka_unit_test(test_keychooser_bounds),
	        cmocka_unit_test(test_scan_length_uniform),
	        cmocka_unit_test(test_operation_chooser),
	        cmocka_unit_test(test_acked_order),
	        cmocka_unit_test(test_acked_threads),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
