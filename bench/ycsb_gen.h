/*
 * ycsb_gen.h — YCSB's generators, reproduced for kvbench ycsb.
 *
 * Each generator follows the Java class of YCSB's core named beside it
 * (brianfrankcooper/YCSB, core/src/main/java/site/ycsb/generator/ and
 * Utils.java), formula for formula, including its quirks, so that the key
 * streams have the distribution YCSB's have. What differs is the random
 * source: a per-thread xoshiro256** instead of java.util.Random, so the
 * distributions match and the exact sequences do not.
 *
 * Threads: a struct yg_rng, yg_zipfian, yg_scrambled, yg_latest and
 * yg_keychooser belong to one thread (copy a template into each thread:
 * they hold no pointers except yg_latest's and yg_keychooser's to the
 * shared counter). yg_counter and yg_acked are shared by all threads.
 */
#ifndef KV_BENCH_YCSB_GEN_H
#define KV_BENCH_YCSB_GEN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define YG_ZIPFIAN_CONSTANT     0.99              /* ZipfianGenerator.ZIPFIAN_CONSTANT */
#define YG_SCRAMBLED_ITEM_COUNT 10000000000ll     /* ScrambledZipfianGenerator.ITEM_COUNT */
#define YG_SCRAMBLED_ZETAN      26.46902820178302 /* ScrambledZipfianGenerator.ZETAN */
#define YG_ACK_WINDOW           (1u << 20)        /* AcknowledgedCounterGenerator.WINDOW_SIZE */
#define YG_KEY_MAX              64                /* bytes of a key name, with its NUL */
#define YG_ZEROPADDING_MAX      (YG_KEY_MAX - 5)  /* digits a key may be padded to */
#define YG_DISCRETE_MAX         8                 /* values of a yg_discrete */

/* ---- random numbers ------------------------------------------------------ */

/* xoshiro256**, seeded through splitmix64. */
struct yg_rng {
	uint64_t s[4];
};

void yg_rng_seed(struct yg_rng *r, uint64_t seed);
uint64_t yg_rng_next(struct yg_rng *r);
/* Uniform in [0, 1) with 53 random bits, as java.util.Random.nextDouble(). */
double yg_rng_double(struct yg_rng *r);
/* Uniform in [0, n), unbiased (n > 0). */
uint64_t yg_rng_below(struct yg_rng *r, uint64_t n);

/* ---- hashing and key names (Utils.java, CoreWorkload.buildKeyName) ------- */

/* Utils.fnvhash64: FNV-1a over the 8 bytes of val, least significant byte
 * first, then Math.abs of the signed result (so Long.MIN_VALUE stays
 * negative, as in Java). */
int64_t yg_fnvhash64(int64_t val);

/* CoreWorkload.buildKeyName: "user" + (ordered ? keynum : fnvhash64(keynum))
 * in decimal, left-padded with '0' to zeropadding digits. Writes a NUL-
 * terminated name into buf (YG_KEY_MAX bytes) and returns its length
 * without the NUL. zeropadding ≤ YG_ZEROPADDING_MAX. */
size_t yg_key_name(char buf[YG_KEY_MAX], int64_t keynum, unsigned zeropadding, bool ordered);

/* ---- ZipfianGenerator ----------------------------------------------------- */

/* ZipfianGenerator.zetastatic(st, n, theta, initialsum): initialsum plus
 * the sum of 1/(i+1)^theta for i in [st, n). */
double yg_zeta(uint64_t st, uint64_t n, double theta, double initialsum);

struct yg_zipfian {
	int64_t base;          /* smallest item */
	uint64_t items;        /* max - min + 1 as constructed */
	double theta;          /* the zipfian constant */
	double zeta2theta;     /* zeta(2, theta) */
	double alpha;          /* 1 / (1 - theta) */
	double zetan;          /* zeta(countforzeta, theta) */
	double eta;            /* Gray et al.'s eta */
	uint64_t countforzeta; /* item count zetan was computed for */
};

/* new ZipfianGenerator(min, max, theta): computes zeta(max - min + 1),
 * O(max - min). max ≥ min + 1. */
void yg_zipfian_init(struct yg_zipfian *z, int64_t min, int64_t max, double theta);
/* new ZipfianGenerator(min, max, theta, zetan): zetan given. */
void yg_zipfian_init_zetan(struct yg_zipfian *z, int64_t min, int64_t max, double theta,
                           double zetan);
/* nextLong(itemcount): a larger itemcount than the last one extends zetan
 * incrementally (and, as in YCSB, recomputes eta with the constructed item
 * count); a smaller one keeps zetan (allowitemcountdecrease is false). */
int64_t yg_zipfian_next_n(struct yg_zipfian *z, struct yg_rng *r, uint64_t itemcount);
/* nextValue(): nextLong(items). */
int64_t yg_zipfian_next(struct yg_zipfian *z, struct yg_rng *r);

/* ---- ScrambledZipfianGenerator --------------------------------------------- */

struct yg_scrambled {
	int64_t min;
	uint64_t itemcount;    /* max - min + 1 */
	struct yg_zipfian gen; /* over [0, YG_SCRAMBLED_ITEM_COUNT] with YG_SCRAMBLED_ZETAN */
};

/* new ScrambledZipfianGenerator(min, max) (constant 0.99, zetan precomputed). */
void yg_scrambled_init(struct yg_scrambled *s, int64_t min, int64_t max);
/* min + fnvhash64(gen.nextValue()) % itemcount (Java's signed remainder). */
int64_t yg_scrambled_next(struct yg_scrambled *s, struct yg_rng *r);

/* ---- UniformLongGenerator --------------------------------------------------- */

struct yg_uniform {
	int64_t lb, ub; /* inclusive */
};

void yg_uniform_init(struct yg_uniform *u, int64_t lb, int64_t ub);
int64_t yg_uniform_next(const struct yg_uniform *u, struct yg_rng *r);

/* ---- CounterGenerator and AcknowledgedCounterGenerator ---------------------- */

struct yg_counter {
	_Atomic int64_t next;
};

void yg_counter_init(struct yg_counter *c, int64_t start);
/* The next value, from any thread. */
int64_t yg_counter_next(struct yg_counter *c);

/* Values handed out by next() become visible through last() only once they
 * and every value below them were acknowledged. */
struct yg_acked {
	_Atomic int64_t next;
	_Atomic int64_t limit;         /* highest value acknowledged with all below it */
	pthread_mutex_t lock;          /* held by the thread moving limit */
	_Atomic unsigned char *window; /* YG_ACK_WINDOW slots: acknowledged, not yet under limit */
};

/* 0 or -ENOMEM. last() is start - 1 until start is acknowledged. */
int yg_acked_init(struct yg_acked *a, int64_t start);
void yg_acked_fini(struct yg_acked *a);
int64_t yg_acked_next(struct yg_acked *a);
int64_t yg_acked_last(struct yg_acked *a);
/* 0, or -EOVERFLOW when YG_ACK_WINDOW values are outstanding ("Too many
 * unacknowledged insertion keys" in YCSB). Unlike YCSB, a thread that moved
 * limit looks once more after releasing the lock, so a value acknowledged
 * meanwhile is not left waiting for the next acknowledgement. */
int yg_acked_ack(struct yg_acked *a, int64_t value);

/* ---- SkewedLatestGenerator ------------------------------------------------------ */

struct yg_latest {
	struct yg_acked *basis;
	struct yg_zipfian zipfian; /* new ZipfianGenerator(basis.lastValue()) */
};

/* basis.last() ≥ 2. */
void yg_latest_init(struct yg_latest *l, struct yg_acked *basis);
/* max - zipfian.nextLong(max), max = basis.last(): the newest values most. */
int64_t yg_latest_next(struct yg_latest *l, struct yg_rng *r);

/* ---- CoreWorkload's key chooser ------------------------------------------------- */

enum yg_dist {
	YG_DIST_UNIFORM, /* UniformLongGenerator(insertstart, insertstart + insertcount - 1) */
	YG_DIST_ZIPFIAN, /* ScrambledZipfianGenerator(insertstart, insertstart + insertcount
	                    + expectednewkeys) */
	YG_DIST_LATEST,  /* SkewedLatestGenerator(transactioninsertkeysequence) */
};

struct yg_keychooser {
	enum yg_dist dist;
	struct yg_acked *inserts; /* transactioninsertkeysequence */
	struct yg_uniform uniform;
	struct yg_scrambled zipfian;
	struct yg_latest latest;
};

/* As CoreWorkload.init(): expectednewkeys = (int)(operationcount *
 * insertproportion * 2.0). */
void yg_keychooser_init(struct yg_keychooser *k, enum yg_dist dist, int64_t insertstart,
                        int64_t insertcount, int64_t expectednewkeys, struct yg_acked *inserts);
/* CoreWorkload.nextKeynum(): draws again while the key is above the last
 * acknowledged insert; the (int) truncation is kept. */
int64_t yg_keychooser_next(struct yg_keychooser *k, struct yg_rng *r);

/* ---- DiscreteGenerator (the operation chooser) ---------------------------------- */

struct yg_discrete {
	size_t n;
	double weight[YG_DISCRETE_MAX];
	int value[YG_DISCRETE_MAX];
};

void yg_discrete_init(struct yg_discrete *d);
/* Adds value with weight (> 0); -ENOSPC past YG_DISCRETE_MAX. */
int yg_discrete_add(struct yg_discrete *d, double weight, int value);
/* A value with probability weight / sum of weights (n ≥ 1). */
int yg_discrete_next(const struct yg_discrete *d, struct yg_rng *r);

#endif
