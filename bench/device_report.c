/* device_report.c — kvbench device's figures: a cell's rates and ratio,
 * its progress line, the targets met or missed, and the report in
 * text, markdown or JSON (device.c runs the cells). */
#include "device_bench.h"

#include "kvengine.h"

#include <inttypes.h>
#include <jansson.h>
#include <string.h>

double dv_rate(const struct dv_cell *c)
{
	return c->seconds > 0 ? (double)c->ops / c->seconds : 0;
}

double dv_mbs(const struct dv_cell *c)
{
	return dv_rate(c) * (double)c->size / 1e6;
}

/* kvd's figure over fio's: throughput for a put cell, fio's p50 over kvd's for
 * the get cell; 0 when either is missing. */
double dv_ratio(const struct dv_cell *c)
{
	if (c->state != DV_OK || c->fio.state != DV_OK)
		return 0;
	if (c->get)
		return c->p50 > 0 ? c->fio.clat_p50 / (c->p50 / 1e3) : 0;
	return c->fio.bw_bytes > 0 ? dv_mbs(c) * 1e6 / c->fio.bw_bytes : 0;
}

void dv_cell_name(const struct dv_cell *c, char *buf, size_t len)
{
	char sz[16];

	if (c->size >= (1u << 20) && c->size % (1u << 20) == 0)
		bench_fmt(sz, sizeof sz, "%" PRIu64 "MiB", c->size >> 20);
	else if (c->size >= 1024 && c->size % 1024 == 0)
		bench_fmt(sz, sizeof sz, "%" PRIu64 "KiB", c->size >> 10);
	else
		bench_fmt(sz, sizeof sz, "%" PRIu64 "B", c->size);
	if (c->get)
		bench_fmt(buf, len, "get %s x%u", sz, c->threads);
	else
		bench_fmt(buf, len, "put %s %s x%u", sz, dv_sync_names[c->sync], c->threads);
}

void dv_progress_head(FILE *f)
{
	fprintf(f, "%-22s %9s %9s %9s %9s %7s | %9s %9s %9s %9s | %6s\n", "cell", "MB/s", "ops/s",
	        "p50 us", "p99 us", "w/sync", "fio MB/s", "fio iops", "fio p50", "fio p99",
	        "ratio");
}

void dv_progress(FILE *f, const struct dv_cell *c)
{
	char name[64], ws[16] = "-";

	dv_cell_name(c, name, sizeof name);
	if (c->state != DV_OK) {
		fprintf(f, "%-22s %s: %s\n", name, dv_state_name(c->state), c->err);
		return;
	}
	if (!c->get && c->sync != DV_SYNC_NONE && c->syncs > 0)
		bench_fmt(ws, sizeof ws, "%.1f", (double)c->writes / (double)c->syncs);
	fprintf(f, "%-22s %9.1f %9.0f %9.1f %9.1f %7s | ", name, dv_mbs(c), dv_rate(c),
	        c->p50 / 1e3, c->p99 / 1e3, ws);
	if (c->fio.state == DV_OK)
		fprintf(f, "%9.1f %9.0f %9.1f %9.1f | %5.2fx", c->fio.bw_bytes / 1e6, c->fio.iops,
		        c->fio.clat_p50, c->fio.clat_p99, dv_ratio(c));
	else
		fprintf(f, "fio %s: %s", dv_state_name(c->fio.state), c->fio.err);
	if (c->full)
		fprintf(f, "  (device full)");
	else if (c->budget_hit)
		fprintf(f, "  (budget written in %.2f s)", c->seconds);
	fputc('\n', f);
	fflush(f);
}

/* ---- targets ---------------------------------------------------------------------- */

static const struct dv_cell *dv_find(const struct dv_bench *b, bool get, uint64_t size,
                                     enum dv_sync sync, unsigned threads)
{
	for (size_t i = 0; i < b->ncells; i++) {
		const struct dv_cell *c = &b->cells[i];
		if (c->get == get && c->size == size && (get || c->sync == sync) &&
		    c->threads == threads)
			return c;
	}
	return NULL;
}

static bool dv_measured(const struct dv_cell *c, struct dv_target *t, const char *what)
{
	if (c == NULL) {
		bench_fmt(t->why, sizeof t->why, "not measured: the %s cell was not in the run",
		          what);
		return false;
	}
	if (c->state != DV_OK || c->fio.state != DV_OK) {
		bench_fmt(t->why, sizeof t->why, "not measured: %s cell %s, fio %s", what,
		          dv_state_name(c->state), dv_state_name(c->fio.state));
		return false;
	}
	return true;
}

/* The targets, each measured or not. At most max; the count. */
size_t dv_targets(const struct dv_bench *b, struct dv_target *out, size_t max)
{
	static const uint64_t sizes[] = {65536, 1048576};
	size_t n = 0;

	for (size_t si = 0; si < 2; si++)
		for (size_t wi = 0; wi < b->o.nwriters && n < max; wi++) {
			struct dv_target *t = &out[n++];
			const struct dv_cell *c = dv_find(b, false, sizes[si], DV_SYNC_NONE,
			                                  (unsigned)b->o.writers[wi]);
			memset(t, 0, sizeof(*t));
			bench_fmt(t->name, sizeof t->name,
			          "put %s sync=none x%" PRIu64
			          ": MB/s >= 0.9x fio's (same bs, QD %" PRIu64 ")",
			          si ? "1MiB" : "64KiB", b->o.writers[wi], b->o.writers[wi]);
			t->want = 0.9;
			t->unit = "MB/s";
			if (!dv_measured(c, t, "put"))
				continue;
			t->state = DV_OK;
			t->kvd = dv_mbs(c);
			t->fio = c->fio.bw_bytes / 1e6;
			t->ratio = t->kvd / t->fio;
		}
	if (n < max) {
		struct dv_target *t = &out[n++];
		const struct dv_cell *k = dv_find(b, false, 4096, DV_SYNC_ALWAYS, 16),
		                     *f = dv_find(b, false, 4096, DV_SYNC_ALWAYS, 1);
		memset(t, 0, sizeof(*t));
		bench_fmt(t->name, sizeof t->name,
		          "put 4KiB sync=always x16: ops/s >= 3x fio's QD1 O_DSYNC 4 KiB writes/s "
		          "(group commit)");
		t->want = 3;
		t->unit = "ops/s";
		if (dv_measured(k, t, "put 4KiB always x16") &&
		    dv_measured(f, t, "put 4KiB always x1 (its fio run is the QD1 reference)")) {
			t->state = DV_OK;
			t->kvd = dv_rate(k);
			t->fio = f->fio.iops;
			t->ratio = t->kvd / t->fio;
		}
	}
	for (int p = 0; p < 2 && n < max; p++) {
		struct dv_target *t = &out[n++];
		const struct dv_cell *c = dv_find(b, true, DV_GET_VALUE, DV_SYNC_NONE, 1);
		memset(t, 0, sizeof(*t));
		bench_fmt(t->name, sizeof t->name,
		          "get 4KiB x1 %s: latency <= 1.2x fio's QD1 4 KiB random read",
		          p ? "p99" : "p50");
		t->want = 1 / 1.2;
		t->unit = "us";
		if (!dv_measured(c, t, "get"))
			continue;
		t->state = DV_OK;
		t->kvd = (p ? c->p99 : c->p50) / 1e3;
		t->fio = p ? c->fio.clat_p99 : c->fio.clat_p50;
		t->ratio = t->kvd > 0 ? t->fio / t->kvd : 0;
	}
	return n;
}

static const char *dv_verdict(const struct dv_target *t)
{
	if (t->state != DV_OK)
		return "not measured";
	return t->ratio >= t->want ? "met" : "missed";
}

/* ---- report ----------------------------------------------------------------------- */

void dv_header(const struct dv_bench *b, struct report *h)
{
	const struct dv_opts *o = &b->o;
	char sizes[128] = "", writers[128] = "", syncs[64] = "";
	uint64_t ext = o->extent_size ? o->extent_size : KV_DEV_EXTENT_SIZE_DEFAULT;

	for (size_t i = 0; i < o->nsizes; i++)
		snprintf(sizes + strlen(sizes), sizeof sizes - strlen(sizes), "%s%" PRIu64,
		         i ? "," : "", o->sizes[i]);
	for (size_t i = 0; i < o->nwriters; i++)
		snprintf(writers + strlen(writers), sizeof writers - strlen(writers), "%s%" PRIu64,
		         i ? "," : "", o->writers[i]);
	for (int i = 0; i < DV_SYNC_MODES; i++)
		if (o->sync[i])
			snprintf(syncs + strlen(syncs), sizeof syncs - strlen(syncs), "%s%s",
			         syncs[0] ? "," : "", dv_sync_names[i]);
	runenv_lines_common(h, &b->run);
	report_line(h, "device", "%s", b->dev_info);
	report_line(h, "device",
	            "formatted before every cell (kv_dev_format, extents of %" PRIu64
	            " MiB; the first format %s, the later ones forced over this run's own data)",
	            ext >> 20, o->force ? "forced (--force)" : "refusing a known signature");
	report_line(h, "puts",
	            "value sizes %s B, sync %s, writers %s; per cell a fresh store on the "
	            "device, one tenant, that many threads doing kv_put of distinct keys; %.2f s "
	            "warm-up (not recorded), then %.2f s recorded or until %" PRIu64
	            " MiB (half the device) are written",
	            sizes, syncs, writers, o->warmup, o->seconds, b->budget >> 20);
	report_line(h, "puts",
	            "sync always and flush: the tenant's sync=always, a synced append one "
	            "RWF_DSYNC write (always) or the write linked to an fdatasync (flush)");
	report_line(h, "puts",
	            "puts/sync (always and flush cells): the tenant's kv_stats batched_writes / syncs "
	            "over the whole cell, warm-up included; the store's read cache during puts: "
	            "the default, %llu MiB (KV_DEV_CACHE_DEFAULT)",
	            (unsigned long long)(KV_DEV_CACHE_DEFAULT >> 20));
	report_line(h, "gets",
	            "%" PRIu64 " keys of 4 KiB values filled by %u threads (sync=none), the store "
	            "closed and opened again with a read cache of %" PRIu64
	            " KiB (device_cache_bytes; %.1f%% of the values), then one reader doing "
	            "random gets, every value checked",
	            o->get_keys, DV_FILL_THREADS, o->read_cache >> 10,
	            100.0 * (double)o->read_cache / ((double)o->get_keys * DV_GET_VALUE));
	report_line(h, "timing",
	            "every operation started in the recorded window, timed with CLOCK_MONOTONIC "
	            "into a log-linear histogram (percentiles are bucket upper bounds, <= 0.8%% "
	            "high); ops/s = recorded ops / (last op's end - warm-up end); MB = 10^6 bytes");
	if (b->fio_skip[0] != '\0')
		report_line(h, "fio", "not run: %s", b->fio_skip);
	else
		report_line(h, "fio",
		            "%s (%s), after kvd's cell on the same device: --ioengine=io_uring "
		            "--direct=1, --rw=write --bs=SIZE --iodepth=WRITERS --numjobs=1 over "
		            "the same %" PRIu64 " MiB, --sync=dsync (O_DSYNC) for sync=always; "
		            "gets: --rw=randread --bs=4k --iodepth=1 over where the fill wrote; "
		            "same warm-up (--ramp_time) and seconds; figures: bw_bytes, iops, "
		            "clat_ns p50/p99",
		            b->fio_path, b->fio_version[0] ? b->fio_version : "version unknown",
		            b->budget >> 20);
	report_line(h, "ratios",
	            "puts: kvd MB/s / fio MB/s; gets: fio p50 / kvd p50; above 1 kvd is ahead");
}

void dv_report_text(const struct dv_bench *b, struct report *h, const struct dv_target *t,
                           size_t nt)
{
	putchar('\n');
	report_lines_text(h, stdout, 10);
	printf("\nsummary:\n");
	dv_progress_head(stdout);
	for (size_t i = 0; i < b->ncells; i++)
		dv_progress(stdout, &b->cells[i]);
	printf("\ntargets:\n");
	for (size_t i = 0; i < nt; i++) {
		if (t[i].state == DV_OK)
			printf("  %-6s %s: kvd %.1f %s, fio %.1f %s (%.2fx)\n", dv_verdict(&t[i]),
			       t[i].name, t[i].kvd, t[i].unit, t[i].fio, t[i].unit, t[i].ratio);
		else
			printf("  %-6s %s: %s\n", "-", t[i].name, t[i].why);
	}
}

void dv_report_markdown(const struct dv_bench *b, struct report *h,
                               const struct dv_target *t, size_t nt)
{
	printf("```\n%s\n```\n\n", b->run.command);
	report_lines_markdown(h, stdout);
	printf("\n| cell | kvd MB/s | kvd ops/s | p50 µs | p99 µs | puts/sync | fio MB/s | "
	       "fio IOPS | fio p50 µs | fio p99 µs | kvd/fio |\n");
	printf("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
	for (size_t i = 0; i < b->ncells; i++) {
		const struct dv_cell *c = &b->cells[i];
		char name[64];
		dv_cell_name(c, name, sizeof name);
		if (c->state != DV_OK) {
			printf("| %s | %s: %s | | | | | | | | | |\n", name, dv_state_name(c->state),
			       c->err);
			continue;
		}
		printf("| %s | %.1f | %.0f | %.1f | %.1f | ", name, dv_mbs(c), dv_rate(c),
		       c->p50 / 1e3, c->p99 / 1e3);
		if (!c->get && c->sync != DV_SYNC_NONE && c->syncs > 0)
			printf("%.1f | ", (double)c->writes / (double)c->syncs);
		else
			printf("- | ");
		if (c->fio.state == DV_OK)
			printf("%.1f | %.0f | %.1f | %.1f | %.2fx |\n", c->fio.bw_bytes / 1e6,
			       c->fio.iops, c->fio.clat_p50, c->fio.clat_p99, dv_ratio(c));
		else
			printf("fio %s | | | | |\n", dv_state_name(c->fio.state));
	}
	printf("\n| target | kvd | fio | ratio | |\n|---|--:|--:|--:|---|\n");
	for (size_t i = 0; i < nt; i++) {
		if (t[i].state == DV_OK)
			printf("| %s | %.1f %s | %.1f %s | %.2fx | **%s** |\n", t[i].name, t[i].kvd,
			       t[i].unit, t[i].fio, t[i].unit, t[i].ratio, dv_verdict(&t[i]));
		else
			printf("| %s | | | | %s |\n", t[i].name, t[i].why);
	}
}

static json_t *dv_fio_json(const struct dv_fio *f)
{
	json_t *o = json_pack("{s:s}", "state", dv_state_name(f->state));

	if (f->command[0] != '\0')
		report_set(o, "command", report_str(f->command));
	if (f->state == DV_OK) {
		report_set(o, "bw_bytes", report_real(f->bw_bytes, 0));
		report_set(o, "iops", report_real(f->iops, 1));
		report_set(o, "seconds", report_real(f->seconds, 3));
		report_set(o, "clat_p50_us", report_real(f->clat_p50, 2));
		report_set(o, "clat_p99_us", report_real(f->clat_p99, 2));
		report_set(o, "clat_mean_us", report_real(f->clat_mean, 2));
		report_set(o, "lat_mean_us", report_real(f->lat_mean, 2));
	} else {
		report_set(o, "error", report_str(f->err));
	}
	return o;
}

void dv_report_json(const struct dv_bench *b, struct report *rep, bool ok,
                           const struct dv_target *t, size_t nt)
{
	const struct dv_opts *o = &b->o;
	json_t *cells = json_array(), *targets = json_array(), *sizes = json_array(),
	       *writers = json_array(), *syncs = json_array();

	for (size_t i = 0; i < o->nsizes; i++)
		json_array_append_new(sizes, report_u64(o->sizes[i]));
	for (size_t i = 0; i < o->nwriters; i++)
		json_array_append_new(writers, report_u64(o->writers[i]));
	for (int i = 0; i < DV_SYNC_MODES; i++)
		if (o->sync[i])
			json_array_append_new(syncs, json_string(dv_sync_names[i]));
	for (size_t i = 0; i < b->ncells; i++) {
		const struct dv_cell *c = &b->cells[i];
		json_t *row = json_pack(
		        "{s:s,s:o,s:o,s:s,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:b,s:o}",
		        "op", c->get ? "get" : "put", "value_size", report_u64(c->size), "threads",
		        report_u64(c->threads), "state", dv_state_name(c->state), "ops",
		        report_u64(c->ops), "seconds", report_real(c->seconds, 4), "ops_per_s",
		        report_real(dv_rate(c), 1), "mb_per_s", report_real(dv_mbs(c), 2), "p50_us",
		        report_real(c->p50 / 1e3, 2), "p99_us", report_real(c->p99 / 1e3, 2),
		        "p999_us", report_real(c->p999 / 1e3, 2), "max_us",
		        report_real(c->max / 1e3, 2), "errors", report_u64(c->errors), "wrong",
		        report_u64(c->wrong), "loadavg_1min", report_real(c->loadavg, 2),
		        "device_full", c->full, "fio", dv_fio_json(&c->fio));
		if (!c->get) {
			report_set(row, "sync", json_string(dv_sync_names[c->sync]));
			report_set(row, "bytes", report_u64(c->bytes));
			report_set(row, "budget_reached", json_boolean(c->budget_hit));
			report_set(row, "batches", report_u64(c->batches));
			report_set(row, "batched_writes", report_u64(c->writes));
			report_set(row, "syncs", report_u64(c->syncs));
		} else {
			report_set(row, "keys", report_u64(o->get_keys));
			report_set(row, "read_cache_bytes", report_u64(o->read_cache));
			report_set(row, "activate_ms", report_real(c->activate_ms, 3));
			report_set(row, "fio_region_bytes", report_u64(c->region));
		}
		if (dv_ratio(c) > 0)
			report_set(row, "ratio", report_real(dv_ratio(c), 4));
		report_set(row, "error", report_str(c->err));
		json_array_append_new(cells, row);
	}
	for (size_t i = 0; i < nt; i++) {
		json_t *row = json_pack("{s:s,s:s,s:o}", "target", t[i].name, "state",
		                        dv_verdict(&t[i]), "want_ratio", report_real(t[i].want, 4));
		if (t[i].state == DV_OK) {
			report_set(row, "kvd", report_real(t[i].kvd, 2));
			report_set(row, "fio", report_real(t[i].fio, 2));
			report_set(row, "unit", json_string(t[i].unit));
			report_set(row, "ratio", report_real(t[i].ratio, 4));
		} else {
			report_set(row, "why", report_str(t[i].why));
		}
		json_array_append_new(targets, row);
	}
	report_set(rep->doc, "bench", json_string("device"));
	report_set(rep->doc, "ok", json_boolean(ok));
	report_set(rep->doc, "command", report_str(b->run.command));
	report_set(
	        rep->doc, "config",
	        json_pack("{s:o,s:o,s:b,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "device",
	                  report_str(o->device), "device_bytes", report_u64(b->dev_bytes),
	                  "block_device", b->is_block, "extent_size",
	                  report_u64(o->extent_size ? o->extent_size : KV_DEV_EXTENT_SIZE_DEFAULT),
	                  "seconds", report_real(o->seconds, 3), "warmup_s",
	                  report_real(o->warmup, 3), "budget_bytes", report_u64(b->budget), "sizes",
	                  sizes, "writers", writers, "sync", syncs, "get_keys",
	                  report_u64(o->get_keys), "read_cache_bytes", report_u64(o->read_cache),
	                  "fio", report_str(b->fio_skip[0] ? "" : b->fio_path), "fio_version",
	                  report_str(b->fio_version)));
	report_set(rep->doc, "header", json_incref(rep->lines));
	report_set(rep->doc, "cells", cells);
	report_set(rep->doc, "targets", targets);
	if (b->fio_skip[0] != '\0')
		report_set(rep->doc, "fio_skipped", report_str(b->fio_skip));
	(void)report_json(rep, stdout);
}
