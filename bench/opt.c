/*
 * bench/opt.c — the numbers and lists kvbench's options take, checked
 * against their ranges, with one message for a bad value (opt.h).
 */
#include "opt.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int bench_parse_u64(const char *cmd, const char *name, const char *s, uint64_t lo, uint64_t hi,
                    uint64_t *ret)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, s[0] == '0' && (s[1] == 'x' || s[1] == 'X') ? 16 : 10);
	if (errno != 0 || end == s || *end != '\0' || s[0] < '0' || s[0] > '9' || v < lo ||
	    v > hi) {
		fprintf(stderr,
		        "kvbench %s: %s takes a number in %" PRIu64 "..%" PRIu64 ", not '%s'\n",
		        cmd, name, lo, hi, s);
		return -EINVAL;
	}
	*ret = v;
	return 0;
}

int bench_parse_double(const char *cmd, const char *name, const char *s, double lo, double hi,
                       double *ret)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno != 0 || end == s || *end != '\0' || !(v >= lo) || v > hi) {
		fprintf(stderr, "kvbench %s: %s takes a number in %g..%g, not '%s'\n", cmd, name,
		        lo, hi, s);
		return -EINVAL;
	}
	*ret = v;
	return 0;
}

int bench_parse_u64_list(const char *cmd, const char *name, const char *s, uint64_t lo, uint64_t hi,
                         uint64_t *vals, size_t max, size_t *ret_n)
{
	char buf[512], *save = NULL;
	size_t n = 0;

	if (strlen(s) >= sizeof buf) {
		fprintf(stderr, "kvbench %s: %s is too long\n", cmd, name);
		return -EINVAL;
	}
	snprintf(buf, sizeof buf, "%s", s);
	for (char *t = strtok_r(buf, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
		uint64_t v;
		if (n == max) {
			fprintf(stderr, "kvbench %s: %s takes at most %zu numbers\n", cmd, name,
			        max);
			return -EINVAL;
		}
		if (bench_parse_u64(cmd, name, t, lo, hi, &v) != 0)
			return -EINVAL;
		for (size_t i = 0; i < n; i++)
			if (vals[i] == v) {
				fprintf(stderr, "kvbench %s: %s lists %" PRIu64 " twice\n", cmd,
				        name, v);
				return -EINVAL;
			}
		vals[n++] = v;
	}
	if (n == 0) {
		fprintf(stderr, "kvbench %s: %s is empty\n", cmd, name);
		return -EINVAL;
	}
	*ret_n = n;
	return 0;
}
