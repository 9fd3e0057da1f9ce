/*
 * bench/report.h — a benchmark's report: the --json document (a jansson
 * object) and the header, a list of label and value lines that is printed
 * as text, as a markdown list, or put into the document as an array of
 * {"label", "value"} objects.
 *
 * Building a report never fails loudly: a value jansson cannot make (out of
 * memory) leaves its key out, and report_json says when the document itself
 * is missing. Single-threaded: call it from the benchmark's main thread.
 */
#ifndef KV_BENCH_REPORT_H
#define KV_BENCH_REPORT_H

#include <jansson.h>

#include <stdint.h>
#include <stdio.h>

struct report {
	json_t *doc;   /* the --json document, an object */
	json_t *lines; /* the header: an array of {"label", "value"} objects */
};

/* An empty document and header. 0, or -ENOMEM. */
int report_init(struct report *r);
/* Drops both; accepts a report that report_init failed on or never saw
 * (zeroed). */
void report_fini(struct report *r);

/* A line of the header. Lines in a row with one label belong together: the
 * text names the label once, markdown nests them. */
void report_line(struct report *r, const char *label, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
/* The header as "LABEL VALUE" lines, labels padded to width. */
void report_lines_text(const struct report *r, FILE *f, int width);
/* The header as a markdown list. */
void report_lines_markdown(const struct report *r, FILE *f);

/* A string value: s as it is, also when it is not UTF-8. */
json_t *report_str(const char *s);
/* A number rounded to decimals places (printed as printf's "%.*f" would,
 * without its trailing zeros); null when v is not finite. */
json_t *report_real(double v, int decimals);
/* An unsigned number: exact up to INT64_MAX, a real above it. */
json_t *report_u64(uint64_t v);
/* Sets obj's key to v (taking v's reference). */
void report_set(json_t *obj, const char *key, json_t *v);

/* The document on one line, and a newline. 0, or -1 (said on stderr). */
int report_json(const struct report *r, FILE *f);

/* A document packed by json_pack's fmt, printed as report_json prints one:
 * for a report that is one flat object. 0, or -1 (said on stderr). */
int report_print_packed(FILE *f, const char *fmt, ...);

#endif
