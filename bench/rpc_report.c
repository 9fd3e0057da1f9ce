/*
 * bench/rpc_report.c — what kvbench rpc prints: a progress row per cell, and
 * at the end the header and the cells as text, markdown or JSON (through
 * bench/report.h), with the step-by-step lines of what kvd adds to a call.
 */
#include "rpc_bench.h"

#include "bench.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

const char *rb_state_name(enum rb_state s)
{
	return s == CELL_OK ? "ok" : s == CELL_SKIPPED ? "skipped" : "FAILED";
}

void rb_row_head(FILE *f)
{
	fprintf(f, "%-8s %-6s %-9s %-6s %-9s %4s %4s %10s %8s %8s %8s %8s %6s\n", "section", "tr",
	        "op", "sync", "mode", "thr", "win", "ops/s", "p50 us", "p99 us", "p999 us",
	        "max us", "errors");
}

void rb_row_text(FILE *f, const struct rb_cell *c)
{
	fprintf(f, "%-8s %-6s %-9s %-6s %-9s %4u %4u ", c->section,
	        c->transport[0] ? c->transport : "-", c->op, c->sync[0] ? c->sync : "-", c->mode,
	        c->threads, c->window);
	if (c->state != CELL_OK) {
		fprintf(f, "%10s  %s\n", rb_state_name(c->state), c->err);
		fflush(f);
		return;
	}
	fprintf(f, "%10.0f %8.1f %8.1f %8.1f %8.1f %6" PRIu64, rb_cell_rate(c), c->p50 / 1e3,
	        c->p99 / 1e3, c->p999 / 1e3, c->max / 1e3, c->errors + c->wrong);
	if (c->runs > 1)
		fprintf(f, "  [%.0f-%.0f; %.1f-%.1f]", c->rate_lo, c->rate_hi, c->p50_lo / 1e3,
		        c->p50_hi / 1e3);
	fprintf(f, "%s%s%s%s\n", c->err[0] ? "  " : "", c->err, c->note[0] ? "  " : "", c->note);
	fflush(f);
}

/* ---- report -------------------------------------------------------------------- */

void rb_header(const struct rb_bench *b, struct report *rep)
{
	const struct rb_opts *o = &b->o;
	char tmp[512], threads[128] = "";

#define LINE(lab, ...) report_line(rep, lab, __VA_ARGS__)

	for (size_t i = 0; i < o->nthreads; i++)
		snprintf(threads + strlen(threads), sizeof threads - strlen(threads), "%s%u",
		         i ? "," : "", o->threads[i]);
	bench_date(tmp, sizeof tmp);
	LINE("date", "%s", tmp);
	bench_machine(tmp, sizeof tmp);
	LINE("machine", "%s; client and kvd share these CPUs", tmp);
	LINE("build", "%s", bench_build());
	if (o->run[S_KVD]) {
		LINE("kvd",
		     "binary %s (built %s), run from a copy made at the start so that every "
		     "run uses the same build",
		     b->kvd_path, b->kvd_mtime);
		LINE("kvd", "%s", b->kvd.command);
		LINE("kvd", "version %s, %" PRIu64 " workers (one per CPU unless --kvd-workers)",
		     b->kvd_version[0] ? b->kvd_version : "?", b->kvd_workers);
		LINE("config", "%s", "[tenant-defaults] sync = none (the whole config file)");
		LINE("tenants",
		     "default: sync=%s (TenantInfo) for the get/put grid; durable: sync=%s "
		     "(TenantCreate), for the sync=always put rows",
		     b->tenant_sync[0], b->tenant_sync[1]);
	}
	LINE("directory", "%s (%s, removed afterwards unless the run failed)", b->base, b->fs);
	if (o->run[S_KVD])
		LINE("data",
		     "%" PRIu64
		     " keys preloaded in each tenant (Batch of %d, %.1f s); keys %d bytes "
		     "zero-padded decimal, chosen uniformly at random; values %d random bytes",
		     o->keys, RB_PRELOAD_BATCH, b->preload_s, RB_KEY_SIZE, RB_VALUE_SIZE);
	if (o->run[S_KVD])
		LINE("client",
		     "libkvclient, %s; blocking cells: each thread one call outstanding "
		     "(kvc_get/kvc_put); "
		     "pipelined: one thread, kvc_get_async/kvc_put_async, %u in flight; Gets free "
		     "the "
		     "value (kvc_value_free)",
		     o->per_thread_handles
		             ? "one handle (socket, connection) per thread"
		             : "one handle (one nng socket, one connection) shared by the "
		               "threads of a cell, contexts = threads + 2",
		     o->window);
	LINE("timing",
	     "per cell %.1f s warm-up (not recorded), %.1f s measured; threads %s; latency of "
	     "every call (CLOCK_MONOTONIC) in a log-linear histogram, percentiles are bucket upper "
	     "bounds (<= 0.8%% high); ops/s = calls completed in the window / window",
	     o->warmup, o->seconds, threads);
	if (o->run[S_NNG])
		LINE("baselines",
		     "nng: REQ/REP echo of %d bytes, REP server in this process on nng's threads "
		     "(%d "
		     "contexts), a REQ context per client thread on %s",
		     RB_MSG_SIZE, RB_ECHO_CONTEXTS,
		     o->per_thread_handles ? "a socket per thread" : "one shared socket");
	if (o->run[S_NNG_PROC])
		LINE("baselines",
		     "nng-proc: the same echo server in a process of its own (kvbench rpc "
		     "--serve-echo), as kvd is: client and server no longer share nng's threads");
	if (o->run[S_SOCKET])
		LINE("baselines",
		     "socket: plain stream sockets (Unix for ipc, TCP loopback with TCP_NODELAY), "
		     "%d-byte write + read, a server thread per connection",
		     RB_MSG_SIZE);
	if (o->run[S_DISK])
		LINE("baselines", "disk: %d-byte O_APPEND write + fdatasync on %s (%s), one thread",
		     RB_MSG_SIZE, b->base, b->fs);
	if (b->sockperf_cmd[0])
		LINE("baselines", "sockperf: %s", b->sockperf_cmd);
#undef LINE
}

static const struct rb_cell *find_cell(const struct rb_bench *b, const char *section,
                                       const char *tr, const char *op, const char *sync,
                                       const char *mode, unsigned threads)
{
	for (size_t i = 0; i < b->nsum; i++) {
		const struct rb_cell *c = &b->sum[i];
		if (strcmp(c->section, section) == 0 && strcmp(c->transport, tr) == 0 &&
		    strcmp(c->op, op) == 0 && strcmp(c->sync, sync) == 0 &&
		    strcmp(c->mode, mode) == 0 && c->threads == threads && c->state == CELL_OK)
			return c;
	}
	return NULL;
}

/* "What kvd adds" lines: p50 at 1 thread, step by step from a plain socket
 * to a Put, and throughput at the largest thread count. */
static size_t overhead(const struct rb_bench *b, char lines[][512], size_t max)
{
	size_t n = 0;
	unsigned top = 0;

	for (size_t i = 0; i < b->o.nthreads; i++)
		if (b->o.threads[i] > top)
			top = b->o.threads[i];
	for (int tr = 0; tr < 6 && n + 1 < max; tr++) {
		/* kvd's rows over nng (ipc, tcp) and over its stream framing
		 * (kv+ipc, kv+tcp), each against the plain socket of its kind;
		 * then over TLS (tls+tcp, kv+tls) against the plain TCP socket */
		static const char *const kvd_tr[6] = {"ipc",    "tcp",     "kv+ipc",
		                                      "kv+tcp", "tls+tcp", "kv+tls"};
		const char *t = kvd_tr[tr], *base = tr % 2 == 0 && tr < 4 ? "ipc" : "tcp";
		static const struct {
			const char *section, *op, *sync, *label;
		} steps[] = {
		        {"socket", "echo", "", "socket echo"},
		        {"nng", "echo", "", "nng echo (1 process)"},
		        {"nng-proc", "echo", "", "nng echo (2 processes)"},
		        {"kvd", "health", "", "kvd Health (no worker hop)"},
		        {"kvd", "get", "none", "kvd Get"},
		        {"kvd", "put", "none", "kvd Put"},
		};
		const struct rb_cell *prev = NULL;
		char *l = lines[n];
		size_t used = 0;
		bool any = false;

		used += (size_t)snprintf(l, 512, "%s, p50 at 1 thread:", t);
		for (size_t i = 0; i < sizeof steps / sizeof steps[0] && used < 512; i++) {
			bool kvd = strcmp(steps[i].section, "kvd") == 0;
			const struct rb_cell *c;
			if (tr >= 2 && tr != 4 && strncmp(steps[i].section, "nng", 3) == 0)
				continue;
			c = find_cell(b, steps[i].section, kvd ? t : base, steps[i].op,
			              steps[i].sync, "blocking", 1);
			if (c == NULL)
				continue;
			if (strcmp(steps[i].op, "put") == 0 && prev != NULL &&
			    strcmp(prev->op, "get") == 0)
				prev = find_cell(b, "kvd", t, "health", "", "blocking", 1);
			if (prev != NULL)
				used += (size_t)snprintf(
				        l + used, 512 - used, "%s %s %.1f us (%+.1f)",
				        any ? ";" : "", steps[i].label, c->p50 / 1e3,
				        ((double)c->p50 - (double)prev->p50) / 1e3);
			else
				used += (size_t)snprintf(l + used, 512 - used, "%s %s %.1f us",
				                         any ? ";" : "", steps[i].label,
				                         c->p50 / 1e3);
			prev = c;
			any = true;
		}
		if (!any)
			continue;
		n++;
		l = lines[n];
		used = (size_t)snprintf(l, 512, "%s, ops/s at %u threads:", t, top);
		any = false;
		for (size_t i = 0; i < sizeof steps / sizeof steps[0] && used < 512; i++) {
			bool kvd = strcmp(steps[i].section, "kvd") == 0;
			const struct rb_cell *c;
			if (tr >= 2 && tr != 4 && strncmp(steps[i].section, "nng", 3) == 0)
				continue;
			c = find_cell(b, steps[i].section, kvd ? t : base, steps[i].op,
			              steps[i].sync, "blocking", top);
			if (c == NULL)
				continue;
			used += (size_t)snprintf(l + used, 512 - used, "%s %s %.0f", any ? ";" : "",
			                         steps[i].label, rb_cell_rate(c));
			any = true;
		}
		if (any)
			n++;
	}
	return n;
}

void rb_report_text(const struct rb_bench *b)
{
	char lines[12][512];
	size_t n = overhead(b, lines, 12);

	if (b->o.repeat > 1) {
		printf("\nmedian of %u runs by ops/s, [slowest-fastest ops/s; p50 range us]:\n",
		       b->o.repeat);
		rb_row_head(stdout);
		for (size_t i = 0; i < b->nsum; i++)
			rb_row_text(stdout, &b->sum[i]);
	}

	if (b->sockperf_summary[0])
		printf("\nsockperf: %s\n  %s\n", b->sockperf_cmd, b->sockperf_summary);
	if (n > 0)
		printf("\nstep by step (each step's increase over the one before in brackets; Put "
		       "is\ncompared with Health):\n");
	for (size_t i = 0; i < n; i++)
		printf("  %s\n", lines[i]);
	if (b->o.run[S_KVD])
		printf("\nkvd: %" PRIu64 " requests served by %u processes; each stopped with "
		       "SIGTERM: %s (slowest %.2f s)\n",
		       b->kvd_requests, b->kvd_stops,
		       b->kvd_stop_rv == 0 ? "exit 0" : b->kvd_stop_err, b->kvd_stop_s_max);
}

void rb_report_markdown(const struct rb_bench *b, const struct report *h)
{
	char lines[12][512];
	size_t no = overhead(b, lines, 12);

	printf("```\n%s\n```\n\n", b->command);
	report_lines_markdown(h, stdout);
	bool rep = b->o.repeat > 1;

	if (rep)
		printf("\nEvery row is the median of its %u runs (by ops/s); the ranges are the "
		       "fastest and slowest run.\n",
		       b->o.repeat);
	printf("\n| what | transport | op | sync | mode | threads | in flight | ops/s | p50 µs | "
	       "p99 µs | p99.9 µs | max µs | errors |%s\n",
	       rep ? " ops/s range | p50 range µs | p99 range µs |" : "");
	printf("|---|---|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|%s\n",
	       rep ? "--:|--:|--:|" : "");
	for (size_t i = 0; i < b->nsum; i++) {
		const struct rb_cell *c = &b->sum[i];
		char ops[32], lo[32], hi[32];
		printf("| %s | %s | %s | %s | %s | %u | %u | ", c->section,
		       c->transport[0] ? c->transport : "-", c->op, c->sync[0] ? c->sync : "-",
		       c->mode, c->threads, c->window * c->threads);
		if (c->state != CELL_OK) {
			printf("%s: %s | | | | | |%s\n", rb_state_name(c->state), c->err,
			       rep ? " | | |" : "");
			continue;
		}
		bench_grouped(ops, sizeof ops, rb_cell_rate(c));
		printf("%s | %.1f | %.1f | %.1f | %.1f | %" PRIu64 " |", c->ops ? ops : "-",
		       c->p50 / 1e3, c->p99 / 1e3, c->p999 / 1e3, c->max / 1e3,
		       c->errors + c->wrong);
		if (rep && c->runs > 1) {
			bench_grouped(lo, sizeof lo, c->rate_lo);
			bench_grouped(hi, sizeof hi, c->rate_hi);
			printf(" %s–%s | %.1f–%.1f | %.1f–%.1f |", lo, hi, c->p50_lo / 1e3,
			       c->p50_hi / 1e3, c->p99_lo / 1e3, c->p99_hi / 1e3);
		} else if (rep) {
			printf(" | | |");
		}
		putchar('\n');
	}
	if (no > 0)
		printf("\nStep by step (each step's increase over the one before in brackets; Put "
		       "is compared with Health):\n\n");
	for (size_t i = 0; i < no; i++)
		printf("- %s\n", lines[i]);
	if (b->o.run[S_KVD])
		printf("\nkvd (%u processes, one per run) served %" PRIu64
		       " requests; each stopped "
		       "on SIGTERM with %s (slowest %.2f s).\n",
		       b->kvd_stops, b->kvd_requests,
		       b->kvd_stop_rv == 0 ? "exit 0" : b->kvd_stop_err, b->kvd_stop_s_max);
}

/* Cell c's runs (the cells of each repetition that are c) as a JSON array. */
static json_t *rb_json_runs(const struct rb_bench *b, const struct rb_cell *c)
{
	json_t *runs = json_array();

	for (size_t j = 0; j < b->ncells; j++) {
		const struct rb_cell *d = &b->cells[j];
		if (!rb_same_cell(c, d))
			continue;
		json_array_append_new(runs, json_pack("{s:i,s:s,s:o,s:o,s:o,s:o,s:o}", "run",
		                                      (int)d->rep + 1, "state",
		                                      d->state == CELL_OK ? "ok" : "failed",
		                                      "ops_per_s", report_real(rb_cell_rate(d), 1),
		                                      "p50_us", report_real(d->p50 / 1e3, 2),
		                                      "p99_us", report_real(d->p99 / 1e3, 2),
		                                      "p999_us", report_real(d->p999 / 1e3, 2),
		                                      "errors", report_u64(d->errors + d->wrong)));
	}
	return runs;
}

void rb_report_json(const struct rb_bench *b, struct report *rep, bool ok)
{
	const struct rb_opts *o = &b->o;
	json_t *threads = json_array(), *cells = json_array(), *transports = json_array();
	const struct {
		bool on;
		const char *name;
	} trs[] = {{o->ipc, "ipc"},      {o->tcp, "tcp"},     {o->kvipc, "kv+ipc"},
	           {o->kvtcp, "kv+tcp"}, {o->tls, "tls+tcp"}, {o->kvtls, "kv+tls"}};

	for (size_t i = 0; i < o->nthreads; i++)
		json_array_append_new(threads, json_integer(o->threads[i]));
	for (size_t i = 0; i < sizeof trs / sizeof trs[0]; i++)
		if (trs[i].on)
			json_array_append_new(transports, json_string(trs[i].name));
	for (size_t i = 0; i < b->nsum; i++) {
		const struct rb_cell *c = &b->sum[i];
		json_t *cell = json_pack("{s:s,s:s,s:s,s:s,s:s,s:i,s:i,s:s}", "section", c->section,
		                         "transport", c->transport, "op", c->op, "sync", c->sync,
		                         "mode", c->mode, "threads", (int)c->threads, "window",
		                         (int)c->window, "state",
		                         c->state == CELL_OK        ? "ok"
		                         : c->state == CELL_SKIPPED ? "skipped"
		                                                    : "failed");
		if (c->state == CELL_OK) {
			report_set(cell, "ops", report_u64(c->ops));
			report_set(cell, "seconds", report_real(c->seconds, 4));
			report_set(cell, "ops_per_s", report_real(rb_cell_rate(c), 1));
			report_set(cell, "p50_us", report_real(c->p50 / 1e3, 2));
			report_set(cell, "p99_us", report_real(c->p99 / 1e3, 2));
			report_set(cell, "p999_us", report_real(c->p999 / 1e3, 2));
			report_set(cell, "max_us", report_real(c->max / 1e3, 2));
			report_set(cell, "mean_us", report_real(c->mean / 1e3, 2));
		}
		report_set(cell, "runs", rb_json_runs(b, c));
		report_set(cell, "errors", report_u64(c->errors));
		report_set(cell, "wrong", report_u64(c->wrong));
		report_set(cell, "error", report_str(c->err));
		report_set(cell, "note", report_str(c->note));
		json_array_append_new(cells, cell);
	}
	report_set(rep->doc, "bench", json_string("rpc"));
	report_set(rep->doc, "ok", json_boolean(ok));
	report_set(rep->doc, "command", report_str(b->command));
	report_set(rep->doc, "config",
	           json_pack("{s:o,s:o,s:o,s:i,s:i,s:i,s:i,s:s,s:o,s:o,s:o}", "seconds",
	                     report_real(o->seconds, 3), "warmup", report_real(o->warmup, 3),
	                     "keys", report_u64(o->keys), "key_size", RB_KEY_SIZE, "value_size",
	                     RB_VALUE_SIZE, "window", (int)o->window, "repeat", (int)o->repeat,
	                     "handles", o->per_thread_handles ? "thread" : "shared", "threads",
	                     threads, "transports", transports, "kvd_config",
	                     report_str(b->config_text != NULL ? b->config_text : "")));
	report_set(rep->doc, "kvd",
	           json_pack("{s:o,s:o,s:o,s:o,s:i,s:b,s:o}", "command", report_str(b->kvd.command),
	                     "version", report_str(b->kvd_version), "workers",
	                     report_u64(b->kvd_workers), "requests", report_u64(b->kvd_requests),
	                     "processes", (int)b->kvd_stops, "exit_ok", b->kvd_stop_rv == 0,
	                     "stop_s_max", report_real(b->kvd_stop_s_max, 3)));
	report_set(rep->doc, "header", json_incref(rep->lines));
	report_set(rep->doc, "cells", cells);
	report_set(rep->doc, "sockperf_command", report_str(b->sockperf_cmd));
	(void)report_json(rep, stdout);
}
