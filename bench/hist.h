/*
 * bench/hist.h — the latency histogram of kvbench's rpc, ycsb, versions,
 * durable, coldstart and merge benchmarks.
 *
 * Log-linear, as HdrHistogram: values below 2^H_SUB_BITS ns have a bucket
 * each; above, every power of two is split into 2^(H_SUB_BITS-1) equal
 * buckets, so a bucket is at most 1/128 of its values wide. A percentile is
 * its bucket's upper bound: at most 1/128 above the true value, never above
 * the largest sample.
 *
 * Threads: a struct hist belongs to one thread; merge them after joining.
 * It is about 59 KiB: allocate it, do not put it on a small stack.
 */
#ifndef KV_BENCH_HIST_H
#define KV_BENCH_HIST_H

#include <stdint.h>

#define H_SUB_BITS 8
#define H_HALF     (1u << (H_SUB_BITS - 1))
#define H_BUCKETS  ((64 - H_SUB_BITS + 1) * H_HALF + H_HALF)

struct hist {
	uint64_t n, max, sum;
	uint64_t c[H_BUCKETS];
};

static inline unsigned hist_index(uint64_t v)
{
	unsigned msb, shift;

	if (v < (1u << H_SUB_BITS))
		return (unsigned)v;
	msb = 63u - (unsigned)__builtin_clzll(v);
	shift = msb - H_SUB_BITS + 1;
	return shift * H_HALF + (unsigned)(v >> shift);
}

/* The largest value of bucket i. */
static inline uint64_t hist_upper(unsigned i)
{
	unsigned shift;

	if (i < (1u << H_SUB_BITS))
		return i;
	shift = i / H_HALF - 1;
	return (((uint64_t)(i - shift * H_HALF)) << shift) + (1ull << shift) - 1;
}

static inline void hist_add(struct hist *h, uint64_t ns)
{
	h->c[hist_index(ns)]++;
	h->n++;
	h->sum += ns;
	if (ns > h->max)
		h->max = ns;
}

static inline void hist_merge(struct hist *dst, const struct hist *src)
{
	for (unsigned i = 0; i < H_BUCKETS; i++)
		dst->c[i] += src->c[i];
	dst->n += src->n;
	dst->sum += src->sum;
	if (src->max > dst->max)
		dst->max = src->max;
}

/* The value at or below which a fraction p of the samples lie (bucket's
 * upper bound, never above the largest sample). */
static inline uint64_t hist_pct(const struct hist *h, double p)
{
	uint64_t want, seen = 0;

	if (h->n == 0)
		return 0;
	want = (uint64_t)(p * (double)h->n + 0.999999);
	if (want == 0)
		want = 1;
	for (unsigned i = 0; i < H_BUCKETS; i++) {
		seen += h->c[i];
		if (seen >= want) {
			uint64_t u = hist_upper(i);
			return u < h->max ? u : h->max;
		}
	}
	return h->max;
}

/* The mean in ns, 0 without samples. */
static inline uint64_t hist_mean(const struct hist *h)
{
	return h->n ? h->sum / h->n : 0;
}

#endif
