/*
 * bench/opt.h — option values of every kvbench subcommand (bench/opt.c).
 * Each function prints "kvbench CMD: NAME takes ..." to stderr and returns
 * -EINVAL for a bad value; ret is untouched then.
 */
#ifndef KV_BENCH_OPT_H
#define KV_BENCH_OPT_H

#include <stddef.h>
#include <stdint.h>

/* A number in lo..hi: decimal, or hexadecimal after 0x; no sign. */
int bench_parse_u64(const char *cmd, const char *name, const char *s, uint64_t lo, uint64_t hi,
                    uint64_t *ret);
/* A number in lo..hi, as strtod reads it. */
int bench_parse_double(const char *cmd, const char *name, const char *s, double lo, double hi,
                       double *ret);
/* A comma-separated list of distinct numbers in lo..hi, at most max. */
int bench_parse_u64_list(const char *cmd, const char *name, const char *s, uint64_t lo, uint64_t hi,
                         uint64_t *vals, size_t max, size_t *ret_n);

#endif
