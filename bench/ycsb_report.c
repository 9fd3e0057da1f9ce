/*
 * bench/ycsb_report.c — what kvbench ycsb prints: progress rows per phase,
 * and at the end the header and a row per phase as text, markdown or JSON
 * (through bench/report.h), each against the first backend of --backend.
 */
#include "ycsb_bench.h"

#include "bench.h"
#include "runenv.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* ---- progress ------------------------------------------------------------------- */

void yc_progress_head(FILE *f)
{
	fprintf(f, "%-9s %-8s %3s %-7s %-17s %10s %10s %9s %9s %9s %9s %6s %5s\n", "backend",
	        "sync", "thr", "phase", "op", "operations", "ops/s", "p50 us", "p95 us", "p99 us",
	        "p999 us", "errors", "load");
}

void yc_progress(FILE *f, const struct yc_result *r)
{
	char phase[16];

	snprintf(phase, sizeof phase, "%s-%c", r->load ? "load" : "run", r->workload);
	if (!r->ran) {
		fprintf(f, "%-9s %-8s %3u %-7s %-17s skipped: %s\n", r->be->name,
		        yb_sync_name(r->sync), r->threads, phase, "-", r->err);
		return;
	}
	fprintf(f,
	        "%-9s %-8s %3u %-7s %-17s %10" PRIu64 " %10.0f %9s %9s %9s %9s %6" PRIu64
	        " %5.1f%s%s%s\n",
	        r->be->name, yb_sync_name(r->sync), r->threads, phase, "TOTAL", r->ops, yc_rate(r),
	        "", "", "", "", r->errors, r->loadavg,
	        r->failed ? "  FAILED: " : (r->err[0] ? "  " : ""), r->err,
	        r->early ? "  (--max-seconds)" : "");
	for (int op = 0; op < OP_COUNT; op++) {
		const struct yc_opstat *s = &r->op[op];
		if (s->count == 0 && s->errors == 0)
			continue;
		fprintf(f,
		        "%-9s %-8s %3s %-7s %-17s %10" PRIu64
		        " %10.0f %9.1f %9.1f %9.1f %9.1f %6" PRIu64 "\n",
		        "", "", "", "", yc_op_names[op], s->count,
		        r->seconds > 0 ? (double)s->count / r->seconds : 0, s->p50 / 1e3,
		        s->p95 / 1e3, s->p99 / 1e3, s->p999 / 1e3, s->errors);
	}
	fflush(f);
}

/* ---- report -----------------------------------------------------------------------------------
 */

void yc_header(const struct yc_bench *b, struct report *rep)
{
	const struct yc_opts *o = &b->o;
	char tmp[512], tmp2[64], threads[128] = "", syncs[64] = "", wl[32] = "", be[256] = "";

#define LINE(lab, ...) report_line(rep, lab, __VA_ARGS__)

	for (size_t i = 0; i < o->nthreads; i++)
		snprintf(threads + strlen(threads), sizeof threads - strlen(threads), "%s%u",
		         i ? "," : "", o->threads[i]);
	for (size_t i = 0; i < o->nsyncs; i++)
		snprintf(syncs + strlen(syncs), sizeof syncs - strlen(syncs), "%s%s", i ? "," : "",
		         yb_sync_name(o->syncs[i]));
	for (const char *c = "abcfde"; *c; c++)
		if (o->workload[*c - 'a'])
			snprintf(wl + strlen(wl), sizeof wl - strlen(wl), "%s%c", wl[0] ? "," : "",
			         *c);
	for (size_t i = 0; i < o->nbackends; i++)
		snprintf(be + strlen(be), sizeof be - strlen(be), "%s%s", i ? "," : "",
		         o->backends[i]->name);
	bench_date(tmp, sizeof tmp);
	LINE("date", "%s", tmp);
	bench_machine(tmp, sizeof tmp);
	LINE("machine", "%s; clients and servers share these CPUs", tmp);
	LINE("build", "%s", bench_build());
	LINE("command", "%s", b->run.command);
	LINE("ycsb",
	     "recordcount=%" PRIu64 " operationcount=%" PRIu64
	     " threadcount=%s (load: %s) target=%s fieldcount=%d fieldlength=%d "
	     "readallfields=true insertorder=hashed zeropadding=1 zipfian constant 0.99",
	     o->records, o->operations, threads,
	     o->load_threads ? (snprintf(tmp, sizeof tmp, "%u", o->load_threads), tmp) : "the same",
	     o->target > 0 ? (snprintf(tmp2, sizeof tmp2, "%.0f ops/s", o->target), tmp2) : "none",
	     YC_FIELDS, YC_FIELD_LEN);
	LINE("sequence",
	     "workloads %s on backends %s, sync %s (interval: every %u ms); per sync, thread "
	     "count and backend: fresh database, load (workload a's file), a, b, c, f, d; fresh "
	     "database, load (e's file), e",
	     wl, be, syncs, o->sync_interval_ms);
	LINE("record",
	     "one value of %zu bytes: %d fields, each a 4-byte big-endian name length, "
	     "\"fieldN\", a 4-byte big-endian value length and %d random printable bytes (as "
	     "YCSB's RocksDB binding serializes); keys \"user\" + fnvhash64(keynum), %s",
	     b->record_size, YC_FIELDS, YC_FIELD_LEN, "e.g. user6284781860667377211");
	LINE("ops",
	     "read: the whole record; update: the whole record rewritten, not read first; "
	     "read-modify-write: read, one field changed, the whole record written (also counted "
	     "as READ and UPDATE, as YCSB does); scan: start key (the request distribution), "
	     "length uniform %d-%d, values fetched",
	     1, 100);
	LINE("timing",
	     "load: every insert measured; runs: %.2f s warm-up (not recorded, not counted), then "
	     "operationcount operations%s; latency per call (CLOCK_MONOTONIC) in a log-linear "
	     "histogram per op type, percentiles are bucket upper bounds (<= 0.8%% high); "
	     "ops/s = operations / (last thread's end - warm-up end); seed %" PRIu64,
	     o->warmup,
	     o->max_seconds > 0 ? (snprintf(tmp, sizeof tmp, " or %.1f s, whichever ends first",
	                                    o->max_seconds),
	                           tmp)
	                        : "",
	     o->seed);
	LINE("directory", "%s (%s), removed afterwards unless the run failed", b->run.base,
	     b->run.fs);
	LINE("load", "the `load` column is /proc/loadavg's 1-minute figure at a phase's end: "
	             "beyond the run's own threads and server, other work was running");
	if (b->run.env.kvd_started || b->run.env.kvd.pid != 0) {
		LINE("kvd", "%s", b->run.env.kvd.command);
		LINE("kvd",
		     "binary %s (run from a copy), version %s, %" PRIu64
		     " workers; config file: %s",
		     b->run.kvd_path, b->run.env.kvd_version, b->run.env.kvd_workers,
		     "[kvd] (nothing set; tenants get their sync by TenantCreate)");
	}
	for (size_t i = 0; i < b->ninfo; i++)
		LINE("backend", "%s, sync=%s: %s", b->info[i].be->name,
		     yb_sync_name(b->info[i].sync), b->info[i].text);
	for (size_t i = 0; i < b->nskip; i++)
		LINE("skipped", "%s: %s", b->skip[i].be->name, b->skip[i].reason);
#undef LINE
}

/* The reference row of r's table: the first backend of --backend that ran
 * the same phase with the same sync and threads. */
static const struct yc_result *yc_ref(const struct yc_bench *b, const struct yc_result *r)
{
	for (size_t k = 0; k < b->o.nbackends; k++)
		for (size_t i = 0; i < b->nres; i++) {
			const struct yc_result *q = &b->res[i];
			if (q->be == b->o.backends[k] && q->sync == r->sync &&
			    q->threads == r->threads && q->workload == r->workload &&
			    q->load == r->load && q->ran && !q->failed)
				return q;
		}
	return NULL;
}

void yc_report_text(const struct yc_bench *b)
{
	printf("\nsummary (ops/s; %s/this: the first backend's ops/s over this row's):\n",
	       b->o.nbackends ? b->o.backends[0]->name : "ref");
	printf("%-9s %-8s %3s %-7s %10s %9s  %s\n", "backend", "sync", "thr", "phase", "ops/s",
	       "ref/this", "p50 / p99 us per op");
	for (size_t i = 0; i < b->nres; i++) {
		const struct yc_result *r = &b->res[i], *ref = yc_ref(b, r);
		char phase[16], lat[512] = "";
		snprintf(phase, sizeof phase, "%s-%c", r->load ? "load" : "run", r->workload);
		if (!r->ran || r->failed) {
			printf("%-9s %-8s %3u %-7s %10s  %s\n", r->be->name, yb_sync_name(r->sync),
			       r->threads, phase, r->ran ? "FAILED" : "skipped", r->err);
			continue;
		}
		for (int op = 0; op < OP_COUNT; op++)
			if (r->op[op].count > 0)
				snprintf(lat + strlen(lat), sizeof lat - strlen(lat),
				         "%s%s %.0f/%.0f", lat[0] ? ", " : "", yc_op_names[op],
				         r->op[op].p50 / 1e3, r->op[op].p99 / 1e3);
		printf("%-9s %-8s %3u %-7s %10.0f ", r->be->name, yb_sync_name(r->sync), r->threads,
		       phase, yc_rate(r));
		if (ref == NULL || ref == r)
			printf("%9s", "-");
		else
			printf("%8.2fx", yc_rate(r) > 0 ? yc_rate(ref) / yc_rate(r) : 0);
		printf("  %s%s\n", lat, r->errors ? "  (errors)" : "");
	}
}

void yc_report_markdown(const struct yc_bench *b, const struct report *h)
{
	const char *refname = b->o.nbackends ? b->o.backends[0]->name : "ref";

	printf("```\n%s\n```\n\n", b->run.command);
	report_lines_markdown(h, stdout);
	printf("\n| sync | threads | phase | backend | ops/s | %s/this | p50 / p99 µs per op "
	       "(count) | errors | load |\n",
	       refname);
	printf("|---|--:|---|---|--:|--:|---|--:|--:|\n");
	for (size_t i = 0; i < b->nres; i++) {
		const struct yc_result *r = &b->res[i], *ref = yc_ref(b, r);
		char ops[32], lat[768] = "";
		printf("| %s | %u | %s %c | %s | ", yb_sync_name(r->sync), r->threads,
		       r->load ? "load" : "run", r->workload, r->be->name);
		if (!r->ran || r->failed) {
			printf("%s: %s | | | | |\n", r->ran ? "FAILED" : "skipped", r->err);
			continue;
		}
		for (int op = 0; op < OP_COUNT; op++)
			if (r->op[op].count > 0)
				snprintf(lat + strlen(lat), sizeof lat - strlen(lat),
				         "%s%s %.0f / %.0f (%" PRIu64 ")", lat[0] ? "; " : "",
				         yc_op_names[op], r->op[op].p50 / 1e3, r->op[op].p99 / 1e3,
				         r->op[op].count);
		bench_grouped(ops, sizeof ops, yc_rate(r));
		printf("%s | ", ops);
		if (ref == NULL || ref == r)
			printf("- | ");
		else
			printf("%.2fx | ", yc_rate(r) > 0 ? yc_rate(ref) / yc_rate(r) : 0);
		printf("%s | %" PRIu64 " | %.1f |\n", lat, r->errors, r->loadavg);
	}
}

/* Row r's figures per op type, as a JSON array. */
static json_t *yc_json_ops(const struct yc_result *r)
{
	json_t *ops = json_array();

	for (int op = 0; op < OP_COUNT; op++) {
		const struct yc_opstat *s = &r->op[op];
		json_t *o;
		if (s->count == 0 && s->errors == 0)
			continue;
		o = json_pack("{s:s,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "op",
		              yc_op_names[op], "count", report_u64(s->count), "ops_per_s",
		              report_real(r->seconds > 0 ? (double)s->count / r->seconds : 0, 1),
		              "p50_us", report_real(s->p50 / 1e3, 2), "p95_us",
		              report_real(s->p95 / 1e3, 2), "p99_us", report_real(s->p99 / 1e3, 2),
		              "p999_us", report_real(s->p999 / 1e3, 2), "max_us",
		              report_real(s->max / 1e3, 2), "mean_us",
		              report_real(s->mean / 1e3, 2), "errors", report_u64(s->errors),
		              "not_found", report_u64(s->not_found), "wrong", report_u64(s->wrong));
		if (op == OP_SCAN)
			report_set(o, "records", report_u64(s->scanned));
		json_array_append_new(ops, o);
	}
	return ops;
}

void yc_report_json(const struct yc_bench *b, struct report *rep, bool ok)
{
	const struct yc_opts *o = &b->o;
	json_t *threads = json_array(), *syncs = json_array(), *wl = json_array();
	json_t *skipped = json_array(), *results = json_array();
	char id[2] = "";

	for (size_t i = 0; i < o->nthreads; i++)
		json_array_append_new(threads, json_integer(o->threads[i]));
	for (size_t i = 0; i < o->nsyncs; i++)
		json_array_append_new(syncs, json_string(yb_sync_name(o->syncs[i])));
	for (const char *c = "abcfde"; *c; c++)
		if (o->workload[*c - 'a']) {
			id[0] = *c;
			json_array_append_new(wl, json_string(id));
		}
	for (size_t i = 0; i < b->nskip; i++)
		json_array_append_new(skipped,
		                      json_pack("{s:s,s:o}", "backend", b->skip[i].be->name,
		                                "reason", report_str(b->skip[i].reason)));
	for (size_t i = 0; i < b->nres; i++) {
		const struct yc_result *r = &b->res[i], *ref = yc_ref(b, r);
		json_t *row;
		id[0] = r->workload;
		row = json_pack("{s:s,s:s,s:i,s:s,s:s,s:s,s:o,s:o,s:o,s:o,s:o,s:b,s:o,s:o}",
		                "backend", r->be->name, "sync", yb_sync_name(r->sync), "threads",
		                (int)r->threads, "phase", r->load ? "load" : "run", "workload", id,
		                "state",
		                !r->ran     ? "skipped"
		                : r->failed ? "failed"
		                            : "ok",
		                "planned", report_u64(r->planned), "operations", report_u64(r->ops),
		                "warmup_operations", report_u64(r->warmup_ops), "seconds",
		                report_real(r->seconds, 4), "ops_per_s", report_real(yc_rate(r), 1),
		                "stopped_early", r->early, "errors", report_u64(r->errors),
		                "loadavg_1min", report_real(r->loadavg, 2));
		if (ref != NULL && ref != r && yc_rate(r) > 0) {
			report_set(row, "ref", json_string(ref->be->name));
			report_set(row, "ref_over_this", report_real(yc_rate(ref) / yc_rate(r), 4));
		}
		report_set(row, "ops", yc_json_ops(r));
		report_set(row, "error", report_str(r->err));
		json_array_append_new(results, row);
	}
	report_set(rep->doc, "bench", json_string("ycsb"));
	report_set(rep->doc, "ok", json_boolean(ok));
	report_set(rep->doc, "command", report_str(b->run.command));
	report_set(rep->doc, "config",
	           json_pack("{s:o,s:o,s:o,s:i,s:o,s:o,s:i,s:o,s:o,s:o,s:i,s:i,s:o,s:o,s:o,s:o}",
	                     "recordcount", report_u64(o->records), "operationcount",
	                     report_u64(o->operations), "threads", threads, "load_threads",
	                     (int)o->load_threads, "target", report_real(o->target, 1), "sync",
	                     syncs, "sync_interval_ms", (int)o->sync_interval_ms, "warmup_s",
	                     report_real(o->warmup, 3), "max_seconds",
	                     report_real(o->max_seconds, 3), "seed", report_u64(o->seed),
	                     "fieldcount", YC_FIELDS, "fieldlength", YC_FIELD_LEN, "record_bytes",
	                     report_u64(b->record_size), "zipfian_constant", report_real(0.99, 2),
	                     "workloads", wl, "backends",
	                     runenv_json_backends(o->backends, o->nbackends)));
	report_set(rep->doc, "header", json_incref(rep->lines));
	report_set(rep->doc, "skipped", skipped);
	report_set(rep->doc, "results", results);
	report_set(rep->doc, "kvd_exit", report_str(b->run.kvd_failed ? b->run.kvd_err : "ok"));
	(void)report_json(rep, stdout);
}
