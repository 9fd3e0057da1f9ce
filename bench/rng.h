/*
 * bench/rng.h — kvbench's one random stream: splitmix64 (Steele, Lea and
 * Flood), whose state is one uint64_t a thread keeps for itself, and a
 * uniform draw below n. The YCSB generators (ycsb_gen.h) seed their
 * xoshiro256** state from it. Header only, so that ycsb_gen.c still builds
 * alone for its unit test.
 */
#ifndef KV_BENCH_RNG_H
#define KV_BENCH_RNG_H

#include <stddef.h>
#include <stdint.h>

/* The next value of the stream whose state is *s. */
static inline uint64_t bench_rng(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform in [0, n) by Lemire's multiply-shift (bias at most n / 2^64). */
static inline uint64_t bench_rng_below(uint64_t *s, uint64_t n)
{
	return (uint64_t)(((unsigned __int128)bench_rng(s) * n) >> 64);
}

/* n random bytes into buf, from the stream seeded with seed. */
static inline void bench_rng_bytes(char *buf, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i++)
		buf[i] = (char)(bench_rng(&seed) & 0xff);
}

#endif
