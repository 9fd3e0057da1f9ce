/*
 * bench/report.c — a benchmark's report: header lines and the --json
 * document (report.h).
 */
#include "report.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Significant digits of a printed real: enough for report_real's values
 * (at most 6 decimals of numbers below 1e9) to print without noise. */
#define REPORT_REAL_DIGITS 15

int report_init(struct report *r)
{
	r->doc = json_object();
	r->lines = json_array();
	if (r->doc == NULL || r->lines == NULL) {
		report_fini(r);
		return -ENOMEM;
	}
	return 0;
}

void report_fini(struct report *r)
{
	json_decref(r->doc);
	json_decref(r->lines);
	r->doc = NULL;
	r->lines = NULL;
}

json_t *report_str(const char *s)
{
	json_t *v = json_string(s);

	return v != NULL ? v : json_stringn_nocheck(s, strlen(s));
}

json_t *report_real(double v, int decimals)
{
	double scale = pow(10, decimals);

	if (!isfinite(v))
		return json_null();
	return json_real(round(v * scale) / scale);
}

json_t *report_u64(uint64_t v)
{
	return v <= INT64_MAX ? json_integer((json_int_t)v) : json_real((double)v);
}

void report_set(json_t *obj, const char *key, json_t *v)
{
	(void)json_object_set_new(obj, key, v);
}

void report_line(struct report *r, const char *label, const char *fmt, ...)
{
	va_list ap;
	char *value = NULL;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&value, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	(void)json_array_append_new(r->lines, json_pack("{s:o,s:o}", "label", report_str(label),
	                                                "value", report_str(value)));
	free(value);
}

/* Line i's label, or "" for a line that is not there. */
static const char *line_label(const struct report *r, size_t i)
{
	const char *s = json_string_value(json_object_get(json_array_get(r->lines, i), "label"));

	return s != NULL ? s : "";
}

static const char *line_value(const struct report *r, size_t i)
{
	const char *s = json_string_value(json_object_get(json_array_get(r->lines, i), "value"));

	return s != NULL ? s : "";
}

/* Whether line i has the label of line j (both there). */
static bool same_label(const struct report *r, size_t i, size_t j)
{
	size_t n = json_array_size(r->lines);

	return i < n && j < n && strcmp(line_label(r, i), line_label(r, j)) == 0;
}

void report_lines_text(const struct report *r, FILE *f, int width)
{
	for (size_t i = 0; i < json_array_size(r->lines); i++)
		fprintf(f, "%-*s %s\n", width,
		        i > 0 && same_label(r, i, i - 1) ? "" : line_label(r, i), line_value(r, i));
}

void report_lines_markdown(const struct report *r, FILE *f)
{
	for (size_t i = 0; i < json_array_size(r->lines); i++) {
		if (i > 0 && same_label(r, i, i - 1))
			fprintf(f, "  - %s\n", line_value(r, i));
		else if (same_label(r, i, i + 1))
			fprintf(f, "- **%s**:\n  - %s\n", line_label(r, i), line_value(r, i));
		else
			fprintf(f, "- **%s**: %s\n", line_label(r, i), line_value(r, i));
	}
}

int report_json(const struct report *r, FILE *f)
{
	if (r->doc == NULL ||
	    json_dumpf(r->doc, f, JSON_COMPACT | JSON_REAL_PRECISION(REPORT_REAL_DIGITS)) != 0) {
		fprintf(stderr, "kvbench: the JSON report could not be written\n");
		return -1;
	}
	fputc('\n', f);
	return 0;
}

int report_print_packed(FILE *f, const char *fmt, ...)
{
	struct report r = {0};
	va_list ap;
	int rv;

	va_start(ap, fmt);
	r.doc = json_vpack_ex(NULL, 0, fmt, ap);
	va_end(ap);
	rv = report_json(&r, f);
	json_decref(r.doc);
	return rv;
}
