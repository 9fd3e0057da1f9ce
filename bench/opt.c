/*
 * bench/opt.c — a subcommand's option table made into its usage text and
 * its getopt_long table; the numbers and lists kvbench's options take,
 * checked against their ranges, with one message for a bad value (opt.h).
 */
#include "opt.h"

#include <assert.h>
#include <errno.h>
#include <getopt.h>
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

int bench_parse_names(const char *cmd, const char *name, const char *s, const char *const *names,
                      size_t n, bool *on)
{
	char buf[512], all[512] = "", *save = NULL;
	bool given[64] = {false}, any = false;

	assert(n <= sizeof given / sizeof given[0]);
	for (size_t i = 0; i < n; i++)
		snprintf(all + strlen(all), sizeof all - strlen(all), "%s%s", i ? ", " : "",
		         names[i]);
	if (strlen(s) >= sizeof buf) {
		fprintf(stderr, "kvbench %s: %s is too long\n", cmd, name);
		return -EINVAL;
	}
	snprintf(buf, sizeof buf, "%s", s);
	for (char *t = strtok_r(buf, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
		size_t i;
		for (i = 0; i < n && strcmp(t, names[i]) != 0; i++)
			;
		if (i == n) {
			fprintf(stderr, "kvbench %s: %s: unknown '%s' (%s)\n", cmd, name, t, all);
			return -EINVAL;
		}
		given[i] = any = true;
	}
	if (!any) {
		fprintf(stderr, "kvbench %s: %s is empty\n", cmd, name);
		return -EINVAL;
	}
	memcpy(on, given, n * sizeof(bool));
	return 0;
}

#define BENCH_OPTS_MAX 64 /* options of one subcommand */

/* Option o's value as its default in the usage. */
static void print_default(FILE *f, const struct bench_opt *o)
{
	switch (o->type) {
	case BENCH_OPT_U64:
		fprintf(f, "%" PRIu64, *(const uint64_t *)o->val);
		break;
	case BENCH_OPT_UINT:
		fprintf(f, "%u", *(const unsigned *)o->val);
		break;
	case BENCH_OPT_DOUBLE:
		fprintf(f, "%g", *(const double *)o->val);
		break;
	case BENCH_OPT_STRING:
		fprintf(f, "%s",
		        *(const char *const *)o->val ? *(const char *const *)o->val : "none");
		break;
	case BENCH_OPT_FLAG:
	case BENCH_OPT_UNSET:
	case BENCH_OPT_FUNC:
		break;
	}
}

/* "--NAME ARG" of option o, or of --help when o is NULL. */
static int opt_label(char *buf, size_t len, const struct bench_opt *o)
{
	if (o == NULL)
		return snprintf(buf, len, "--help");
	return snprintf(buf, len, "--%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
}

void bench_opts_usage(FILE *f, const struct bench_cmd *c)
{
	char label[128];
	int width = 19; /* the labels' column, at least this wide */

	for (size_t i = 0; i < c->nopts; i++) {
		int n = opt_label(label, sizeof label, &c->opts[i]);
		if (n > width)
			width = n;
	}
	fprintf(f, "usage: kvbench %s [options]\n%s", c->name, c->intro);
	for (size_t i = 0; i <= c->nopts; i++) {
		const struct bench_opt *o = i < c->nopts ? &c->opts[i] : NULL;
		const char *h = o ? o->help : "print this text";
		(void)opt_label(label, sizeof label, o);
		fprintf(f, "  %-*s ", width, label);
		for (; *h != '\0'; h++) {
			if (h[0] == '%' && h[1] == 'D') {
				print_default(f, o);
				h++;
			} else if (*h == '\n') {
				fprintf(f, "\n  %-*s ", width, "");
			} else {
				fputc(*h, f);
			}
		}
		fputc('\n', f);
	}
	if (c->outro != NULL)
		fputs(c->outro, f);
}

/* Option o's argument into its value. 0 or -EINVAL (said). */
static int opt_take(const struct bench_cmd *c, const struct bench_opt *o, const char *arg)
{
	/* hi as an integer: a double of UINT64_MAX or more is out of uint64_t's range */
	uint64_t lo = (uint64_t)o->lo,
	         hi = o->hi >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)o->hi;
	char name[80];
	uint64_t v;

	snprintf(name, sizeof name, "--%s", o->name);
	switch (o->type) {
	case BENCH_OPT_FLAG:
		*(bool *)o->val = true;
		break;
	case BENCH_OPT_UNSET:
		*(bool *)o->val = false;
		break;
	case BENCH_OPT_U64:
		return bench_parse_u64(c->name, name, arg, lo, hi, (uint64_t *)o->val);
	case BENCH_OPT_UINT:
		if (bench_parse_u64(c->name, name, arg, lo, hi, &v) != 0)
			return -EINVAL;
		*(unsigned *)o->val = (unsigned)v;
		break;
	case BENCH_OPT_DOUBLE:
		return bench_parse_double(c->name, name, arg, o->lo, o->hi, (double *)o->val);
	case BENCH_OPT_STRING:
		*(const char **)o->val = arg;
		break;
	case BENCH_OPT_FUNC:
		return o->parse(c->name, name, arg, o->val);
	}
	return 0;
}

int bench_opts_parse(const struct bench_cmd *c, int argc, char **argv)
{
	struct option lo[BENCH_OPTS_MAX + 2];
	char *usage = NULL;
	size_t usage_len = 0;
	FILE *u;
	int ch, rv = 0;

	assert(c->nopts <= BENCH_OPTS_MAX);
	/* the usage with the defaults as they are before any option is taken */
	if ((u = open_memstream(&usage, &usage_len)) == NULL) {
		fprintf(stderr, "kvbench %s: out of memory\n", c->name);
		return -EINVAL;
	}
	bench_opts_usage(u, c);
	fclose(u);
	for (size_t i = 0; i < c->nopts; i++)
		lo[i] = (struct option){c->opts[i].name,
		                        c->opts[i].type == BENCH_OPT_FLAG ||
		                                        c->opts[i].type == BENCH_OPT_UNSET
		                                ? no_argument
		                                : required_argument,
		                        NULL, (int)(256 + i)};
	lo[c->nopts] = (struct option){"help", no_argument, NULL, 'h'};
	lo[c->nopts + 1] = (struct option){NULL, 0, NULL, 0};
	optind = 1;
	opterr = 1;
	while (rv == 0 && (ch = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		const struct bench_opt *o;
		if (ch == 'h') {
			fputs(usage, stdout);
			rv = 1;
			break;
		}
		if (ch < 256 || ch >= 256 + (int)c->nopts) {
			fputs(usage, stderr);
			rv = -EINVAL;
			break;
		}
		o = &c->opts[ch - 256];
		if ((rv = opt_take(c, o, optarg)) == 0 && o->set != NULL)
			*o->set = true;
	}
	if (rv == 0 && optind < argc) {
		fprintf(stderr, "kvbench %s: unexpected argument '%s'\n", c->name, argv[optind]);
		rv = -EINVAL;
	}
	free(usage);
	return rv;
}
