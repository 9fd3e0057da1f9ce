/*
 * bench/opt.h — the options of a kvbench subcommand (bench/opt.c): a table
 * with each option's type, where its value goes and its help, from which
 * the usage text and the getopt_long table are made; and the numbers and
 * lists the options take.
 *
 * Each parse function prints "kvbench CMD: NAME takes ..." (or another
 * one-line reason) to stderr and returns -EINVAL for a bad value; the value
 * is untouched then.
 */
#ifndef KV_BENCH_OPT_H
#define KV_BENCH_OPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* A number in lo..hi: decimal, or hexadecimal after 0x; no sign. */
int bench_parse_u64(const char *cmd, const char *name, const char *s, uint64_t lo, uint64_t hi,
                    uint64_t *ret);
/* A number in lo..hi, as strtod reads it. */
int bench_parse_double(const char *cmd, const char *name, const char *s, double lo, double hi,
                       double *ret);
/* A comma-separated list of distinct numbers in lo..hi, at most max. */
int bench_parse_u64_list(const char *cmd, const char *name, const char *s, uint64_t lo, uint64_t hi,
                         uint64_t *vals, size_t max, size_t *ret_n);
/* A comma-separated list of names, each one of names[0..n): on[i] is set for
 * each name given, cleared for the others. */
int bench_parse_names(const char *cmd, const char *name, const char *s, const char *const *names,
                      size_t n, bool *on);

enum bench_opt_type {
	BENCH_OPT_FLAG,   /* no argument; val is a bool, set to true */
	BENCH_OPT_UNSET,  /* no argument; val is a bool, set to false */
	BENCH_OPT_U64,    /* val is a uint64_t in lo..hi */
	BENCH_OPT_UINT,   /* val is an unsigned in lo..hi */
	BENCH_OPT_DOUBLE, /* val is a double in lo..hi */
	BENCH_OPT_STRING, /* val is a const char *: the argument as given */
	BENCH_OPT_FUNC,   /* parse(cmd, "--NAME", argument, val) takes it */
};

/* One option of a subcommand. In help, "%D" stands for the value val holds
 * before the options are parsed: the default. */
struct bench_opt {
	const char *name; /* without the leading "--" */
	enum bench_opt_type type;
	void *val;
	const char *arg;  /* the argument's name in the usage ("N", "LIST"); NULL for a flag */
	const char *help; /* one line, or several separated by '\n' */
	double lo, hi;    /* the numbers' range */
	bool *set;        /* when not NULL: set to true once the option is given */
	int (*parse)(const char *cmd, const char *name, const char *arg, void *val);
};

/* The fields every entry of a table names: {BENCH_OPT(...), .lo = …, .hi = …,
 * .set = …, .parse = …}. */
#define BENCH_OPT(name_, type_, val_, arg_, help_)                                                 \
	.name = (name_), .type = (type_), .val = (val_), .arg = (arg_), .help = (help_)

/* The two report options every subcommand has: --markdown and --json, which
 * set the bools md and js. */
#define BENCH_OPTS_REPORT(md, js)                                                                  \
	{BENCH_OPT("markdown", BENCH_OPT_FLAG, (md), NULL,                                         \
	           "print the header and a markdown table at the end")},                           \
	{BENCH_OPT("json", BENCH_OPT_FLAG, (js), NULL, "print one JSON object at the end")}

/* A subcommand: its name, its options and the text around them. */
struct bench_cmd {
	const char *name;  /* "ycsb" */
	const char *intro; /* the lines after "usage: kvbench NAME [options]" */
	const char *outro; /* the lines after the options, or NULL */
	const struct bench_opt *opts;
	size_t nopts;
};

/* The usage text: every option of the table with its help, and --help. */
void bench_opts_usage(FILE *f, const struct bench_cmd *c);
/* Parses argv[1..] by the table (getopt_long; --help and -h print the usage
 * to stdout). 0; 1 after --help; -EINVAL for a bad option, a bad value or
 * an argument left over (said on stderr, an unknown option with the usage). */
int bench_opts_parse(const struct bench_cmd *c, int argc, char **argv);

#endif
