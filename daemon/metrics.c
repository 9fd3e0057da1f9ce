/*
 * metrics.c — kvd's figures in the Prometheus text format (version 0.0.4)
 * at http://metrics_listen/metrics, served by libmicrohttpd from one thread
 * of its own. docs/METRICS.md lists every metric.
 *
 * What it owns:
 *   - the request counters: replies by method and status, a latency
 *     histogram per method, bytes received and sent. They live in
 *     METRICS_SHARDS cache-line-aligned shards; each thread that counts
 *     takes one shard (round robin, on its first request) and adds to it
 *     with relaxed atomics, so workers do not share cache lines while they
 *     count. A scrape sums the shards; a sum read while requests complete
 *     may be a request behind, never torn.
 *   - the merge counters and the gauge of tenants whose merges back off
 *     (maintenance thread).
 * Everything else a scrape shows is read from the store, the stream
 * transport and the nng listeners (listener.c) at scrape time. A daemon
 * Stats request reads the same counters (metrics_figures), also while
 * metrics are off: its connections then, its request figures stay 0.
 *
 * Invariants:
 *   1. metrics_on is set before the endpoint serves and cleared after it
 *      stopped; while it is false, metrics_request and metrics_reply count
 *      nothing (the cost of metrics that are off is one relaxed load).
 *   2. A job is counted once: metrics_request at dispatch stamps
 *      start_ns, metrics_reply in job_reply counts it; a job stamped 0 (it
 *      arrived while metrics were off) is not counted.
 *   3. Every client-controlled size is bounded: at most METRICS_CONNECTIONS
 *      scrapers at once, each for METRICS_TIMEOUT_S; only GET and HEAD of
 *      /metrics get the page; per-tenant series for at most
 *      METRICS_TENANTS_MAX tenants (the rest are counted, not listed).
 *
 * Threads: metrics_request, metrics_reply, metrics_figures any thread;
 * metrics_merge and metrics_merge_backoff the maintenance thread;
 * metrics_start and metrics_stop the main thread; the page is written on
 * libmicrohttpd's thread.
 */
#include "kvd.h"

#include "cluster.h"

#include "hostport.h"
#include "log.h"

#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define METRICS_SHARDS      16   /* counter shards (threads share one past that many) */
#define METRICS_CONNECTIONS 16   /* scrapers served at once */
#define METRICS_TIMEOUT_S   10   /* an idle scrape connection is closed after */
#define METRICS_TENANTS_MAX 1000 /* tenants with series of their own */
#define METRICS_PATH        "/metrics"
#define METRICS_CONTENT     "text/plain; version=0.0.4; charset=utf-8"

#define NMETHODS (RPC_METHODS + 1) /* the last: requests that did not decode */

/* Upper bounds of the request latency buckets, in nanoseconds (50 us .. 10 s). */
static const uint64_t lat_bounds[] = {
        50000,     100000,     250000,     500000,     1000000,     2500000,
        5000000,   10000000,   25000000,   50000000,   100000000,   250000000,
        500000000, 1000000000, 2500000000, 5000000000, 10000000000,
};
#define NLAT (sizeof(lat_bounds) / sizeof(lat_bounds[0]))

/* Upper bounds of the merge duration buckets, in milliseconds (10 ms .. 30 min). */
static const uint64_t merge_bounds[] = {10,    100,   500,   1000,   5000,
                                        10000, 30000, 60000, 300000, 1800000};
#define NMERGE (sizeof(merge_bounds) / sizeof(merge_bounds[0]))

struct shard {
	_Alignas(64) _Atomic uint64_t replies[NMETHODS][WIRE_STATUS_COUNT];
	_Atomic uint64_t lat[NMETHODS][NLAT + 1]; /* per bucket (not cumulative); last: +Inf */
	_Atomic uint64_t lat_sum_ns[NMETHODS];
	_Atomic uint64_t bytes_in, bytes_out;
};

static struct shard shards[METRICS_SHARDS];
static atomic_uint next_shard;
static _Thread_local struct shard *my_shard;
static atomic_bool metrics_on;

static _Atomic uint64_t merge_runs[2]; /* [0] failed, [1] finished */
static _Atomic uint64_t merge_hist[NMERGE + 1];
static _Atomic uint64_t merge_sum_ms;
static _Atomic uint32_t merge_backoff; /* tenants in a streak of failed merges */
static _Atomic int64_t uploads_open;   /* blob uploads open (upload.c) */
static _Atomic uint64_t uploads_aborted;

static struct MHD_Daemon *mhd;

#define RELAXED memory_order_relaxed

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static struct shard *shard(void)
{
	if (my_shard == NULL)
		my_shard = &shards[atomic_fetch_add_explicit(&next_shard, 1, RELAXED) %
		                   METRICS_SHARDS];
	return my_shard;
}

void metrics_request(struct job *j, size_t len)
{
	if (!atomic_load_explicit(&metrics_on, RELAXED)) {
		j->start_ns = 0;
		return;
	}
	j->start_ns = now_ns();
	atomic_fetch_add_explicit(&shard()->bytes_in, len, RELAXED);
}

void metrics_reply(const struct job *j, const struct rpc_reply *rp)
{
	struct shard *s;
	uint64_t ns;
	unsigned m, st, b;

	if (j->start_ns == 0 || !atomic_load_explicit(&metrics_on, RELAXED))
		return;
	ns = now_ns() - j->start_ns;
	m = j->mmethod < RPC_METHODS ? (unsigned)j->mmethod : RPC_METHODS;
	st = rp->status >= 0 && rp->status < WIRE_STATUS_COUNT ? (unsigned)rp->status : RPC_UNKNOWN;
	for (b = 0; b < NLAT && ns > lat_bounds[b]; b++)
		;
	s = shard();
	atomic_fetch_add_explicit(&s->replies[m][st], 1, RELAXED);
	atomic_fetch_add_explicit(&s->lat[m][b], 1, RELAXED);
	atomic_fetch_add_explicit(&s->lat_sum_ns[m], ns, RELAXED);
	atomic_fetch_add_explicit(&s->bytes_out, rp->buf.size, RELAXED);
}

void metrics_merge(uint64_t ms, bool ok)
{
	unsigned b;

	for (b = 0; b < NMERGE && ms > merge_bounds[b]; b++)
		;
	atomic_fetch_add_explicit(&merge_runs[ok], 1, RELAXED);
	atomic_fetch_add_explicit(&merge_hist[b], 1, RELAXED);
	atomic_fetch_add_explicit(&merge_sum_ms, ms, RELAXED);
}

void metrics_merge_backoff(uint32_t tenants)
{
	atomic_store_explicit(&merge_backoff, tenants, RELAXED);
}

void metrics_upload(int open_delta, bool aborted)
{
	atomic_fetch_add_explicit(&uploads_open, open_delta, RELAXED);
	if (aborted)
		atomic_fetch_add_explicit(&uploads_aborted, 1, RELAXED);
}

/* ---- the page -------------------------------------------------------------- */

static const char *const status_names[WIRE_STATUS_COUNT] = {
#define STATUS_NAME(name, code) [code] = #name,
        WIRE_STATUSES(STATUS_NAME)
#undef STATUS_NAME
};

static const char *method_label(unsigned m)
{
	return m < RPC_METHODS ? rpc_method_name((enum rpc_method)m) : "invalid";
}

/* A label value with \, " and newlines escaped, as the format asks. */
static void put_label(FILE *f, const char *v)
{
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			fputc('\\', f), fputc(*v, f);
		else if (*v == '\n')
			fputs("\\n", f);
		else
			fputc(*v, f);
	}
}

static void head(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void metric(FILE *f, const char *name, const char *type, const char *help, uint64_t v)
{
	head(f, name, type, help);
	fprintf(f, "%s %" PRIu64 "\n", name, v);
}

/* Seconds from nanoseconds or milliseconds, without losing digits. */
static void put_seconds(FILE *f, uint64_t v, uint64_t per_second)
{
	fprintf(f, "%" PRIu64 ".%0*" PRIu64, v / per_second, per_second == 1000 ? 3 : 9,
	        v % per_second);
}

/* The request counters of every shard, summed. */
struct request_sums {
	uint64_t replies[NMETHODS][WIRE_STATUS_COUNT];
	uint64_t lat[NMETHODS][NLAT + 1]; /* per bucket, not cumulative */
	uint64_t sum[NMETHODS];
	uint64_t in, out;
};

static void sum_shards(struct request_sums *r)
{
	unsigned m, st, b, i;

	memset(r, 0, sizeof(*r));
	for (i = 0; i < METRICS_SHARDS; i++) {
		struct shard *s = &shards[i];
		for (m = 0; m < NMETHODS; m++) {
			for (st = 0; st < WIRE_STATUS_COUNT; st++)
				r->replies[m][st] +=
				        atomic_load_explicit(&s->replies[m][st], RELAXED);
			for (b = 0; b <= NLAT; b++)
				r->lat[m][b] += atomic_load_explicit(&s->lat[m][b], RELAXED);
			r->sum[m] += atomic_load_explicit(&s->lat_sum_ns[m], RELAXED);
		}
		r->in += atomic_load_explicit(&s->bytes_in, RELAXED);
		r->out += atomic_load_explicit(&s->bytes_out, RELAXED);
	}
}

static void page_requests(FILE *f)
{
	static struct request_sums r; /* (the page is written by one thread) */
	uint64_t(*replies)[WIRE_STATUS_COUNT] = r.replies, (*lat)[NLAT + 1] = r.lat;
	uint64_t *sum = r.sum, in, out;
	unsigned m, st, b;

	sum_shards(&r);
	in = r.in;
	out = r.out;
	head(f, "kvd_requests_total", "counter",
	     "Requests answered, by method and reply status (OK for every method, others once "
	     "seen).");
	for (m = 0; m < NMETHODS; m++)
		for (st = 0; st < WIRE_STATUS_COUNT; st++)
			if (replies[m][st] != 0 || (st == RPC_OK && m < RPC_METHODS))
				fprintf(f,
				        "kvd_requests_total{method=\"%s\",status=\"%s\"} %" PRIu64
				        "\n",
				        method_label(m), status_names[st], replies[m][st]);
	head(f, "kvd_request_errors_total", "counter",
	     "Requests answered with a status other than OK, by method.");
	for (m = 0; m < NMETHODS; m++) {
		uint64_t errs = 0;
		for (st = 1; st < WIRE_STATUS_COUNT; st++)
			errs += replies[m][st];
		if (m < RPC_METHODS || errs != 0)
			fprintf(f, "kvd_request_errors_total{method=\"%s\"} %" PRIu64 "\n",
			        method_label(m), errs);
	}
	head(f, "kvd_request_duration_seconds", "histogram",
	     "Time from a request's arrival to its reply (for writes: once durable), by method "
	     "(methods seen).");
	for (m = 0; m < NMETHODS; m++) {
		uint64_t cum = 0;
		for (b = 0; b <= NLAT; b++)
			cum += lat[m][b];
		if (cum == 0)
			continue;
		cum = 0;
		for (b = 0; b < NLAT; b++) {
			cum += lat[m][b];
			fprintf(f, "kvd_request_duration_seconds_bucket{method=\"%s\",le=\"",
			        method_label(m));
			put_seconds(f, lat_bounds[b], 1000000000u);
			fprintf(f, "\"} %" PRIu64 "\n", cum);
		}
		cum += lat[m][NLAT];
		fprintf(f,
		        "kvd_request_duration_seconds_bucket{method=\"%s\",le=\"+Inf\"} %" PRIu64
		        "\n",
		        method_label(m), cum);
		fprintf(f, "kvd_request_duration_seconds_sum{method=\"%s\"} ", method_label(m));
		put_seconds(f, sum[m], 1000000000u);
		fprintf(f, "\nkvd_request_duration_seconds_count{method=\"%s\"} %" PRIu64 "\n",
		        method_label(m), cum);
	}
	metric(f, "kvd_received_bytes_total", "counter",
	       "Bytes of request messages received (without transport framing).", in);
	metric(f, "kvd_sent_bytes_total", "counter",
	       "Bytes of reply messages sent (without transport framing).", out);
}

static void page_merges(FILE *f)
{
	uint64_t cum = 0;
	unsigned b;

	head(f, "kvd_merges_total", "counter",
	     "Merges kvd's maintenance started on its own, by result (Compact requests are "
	     "counted as requests).");
	fprintf(f, "kvd_merges_total{result=\"ok\"} %" PRIu64 "\n",
	        atomic_load_explicit(&merge_runs[1], RELAXED));
	fprintf(f, "kvd_merges_total{result=\"failed\"} %" PRIu64 "\n",
	        atomic_load_explicit(&merge_runs[0], RELAXED));
	head(f, "kvd_merge_duration_seconds", "histogram",
	     "How long those merges took (attaching the tenant to its worker included).");
	for (b = 0; b < NMERGE; b++) {
		cum += atomic_load_explicit(&merge_hist[b], RELAXED);
		fprintf(f, "kvd_merge_duration_seconds_bucket{le=\"");
		put_seconds(f, merge_bounds[b], 1000);
		fprintf(f, "\"} %" PRIu64 "\n", cum);
	}
	cum += atomic_load_explicit(&merge_hist[NMERGE], RELAXED);
	fprintf(f, "kvd_merge_duration_seconds_bucket{le=\"+Inf\"} %" PRIu64 "\n", cum);
	fprintf(f, "kvd_merge_duration_seconds_sum ");
	put_seconds(f, atomic_load_explicit(&merge_sum_ms, RELAXED), 1000);
	fprintf(f, "\nkvd_merge_duration_seconds_count %" PRIu64 "\n", cum);
	head(f, "kvd_merge_backoff_tenants", "gauge",
	     "Tenants whose automatic merges wait after failing (1 s doubling to 5 min).");
	fprintf(f, "kvd_merge_backoff_tenants %" PRIu32 "\n",
	        atomic_load_explicit(&merge_backoff, RELAXED));
	head(f, "kvd_blob_uploads_open", "gauge", "Blob uploads begun and not yet ended.");
	fprintf(f, "kvd_blob_uploads_open %" PRId64 "\n",
	        atomic_load_explicit(&uploads_open, RELAXED));
	head(f, "kvd_blob_uploads_aborted_total", "counter",
	     "Blob uploads aborted: BlobAbort, idle for upload_idle_ms, their tenant "
	     "passivated, dropped or released, a failed write.");
	fprintf(f, "kvd_blob_uploads_aborted_total %" PRIu64 "\n",
	        atomic_load_explicit(&uploads_aborted, RELAXED));
}

_Static_assert(RPC_FIG_METHODS == NMETHODS, "Stats reports the methods the page does");
_Static_assert(RPC_FIG_CONNS_MAX >= 2 * KVD_LISTEN_MAX, "room for every listener");

/* The open connections of every listener: kv+ ones (transport "stream"),
 * then nng's (transport "nng"), each in cfg.listen order. */
static size_t connections(struct kvd *d, struct rpc_conn_fig *ret, size_t max)
{
	const char *url[KVD_LISTEN_MAX];
	uint32_t open[KVD_LISTEN_MAX];
	int n = stream_connections(d, url, open, KVD_LISTEN_MAX);
	size_t k = 0;

	for (int i = 0; i < n && k < max; i++)
		ret[k++] = (struct rpc_conn_fig){"stream", url[i], open[i]};
	n = listener_connections(d, url, open, KVD_LISTEN_MAX);
	for (int i = 0; i < n && k < max; i++)
		ret[k++] = (struct rpc_conn_fig){"nng", url[i], open[i]};
	return k;
}

static void page_connections(FILE *f, struct kvd *d)
{
	struct rpc_conn_fig c[RPC_FIG_CONNS_MAX];
	size_t n = connections(d, c, RPC_FIG_CONNS_MAX);

	head(f, "kvd_connections", "gauge",
	     "Connections open, per listener: kv+ipc:// and kv+tcp:// (transport stream), "
	     "ipc://, tcp:// and tls+tcp:// (transport nng).");
	for (size_t i = 0; i < n; i++) {
		fprintf(f, "kvd_connections{transport=\"%s\",listen=\"", c[i].transport);
		put_label(f, c[i].listen);
		fprintf(f, "\"} %" PRIu64 "\n", c[i].open);
	}
	metric(f, "kvd_listener_restarts_total", "counter",
	       "nng ipc:// listeners replaced because they stopped accepting.",
	       atomic_load(&d->listener_restarts));
}

/* The upper bound of the bucket that holds the pct-th percentile of a
 * latency histogram (per bucket counts); 0 when it is empty. */
static uint64_t percentile(const uint64_t *lat, uint64_t count, unsigned pct)
{
	uint64_t rank = (count * pct + 99) / 100, cum = 0;

	if (count == 0)
		return 0;
	for (unsigned b = 0; b < NLAT; b++)
		if ((cum += lat[b]) >= rank)
			return lat_bounds[b];
	return RPC_FIG_OVER;
}

void metrics_figures(void *arg, struct rpc_daemon_fig *ret)
{
	struct kvd *d = arg;
	struct request_sums *r = malloc(sizeof(*r));

	memset(ret, 0, sizeof(*ret));
	ret->nconns = connections(d, ret->conns, RPC_FIG_CONNS_MAX);
	if (r == NULL)
		return; /* (the request figures stay 0, counting false) */
	ret->counting = atomic_load_explicit(&metrics_on, RELAXED);
	sum_shards(r);
	ret->received_bytes = r->in;
	ret->sent_bytes = r->out;
	for (unsigned m = 0; m < NMETHODS; m++) {
		struct rpc_method_fig *f = &ret->methods[m];
		memcpy(f->replies, r->replies[m], sizeof(f->replies));
		for (unsigned b = 0; b <= NLAT; b++)
			f->lat_count += r->lat[m][b];
		f->lat_sum_ns = r->sum[m];
		f->p50_ns = percentile(r->lat[m], f->lat_count, 50);
		f->p90_ns = percentile(r->lat[m], f->lat_count, 90);
		f->p99_ns = percentile(r->lat[m], f->lat_count, 99);
	}
	free(r);
}

/* A tenant as a scrape sees it; refused: no info. */
struct tenant_row {
	char name[KV_TENANT_NAME_MAX + 1];
	bool refused;
	struct kv_tenant_info info;
};

enum tenant_field {
	TF_KEYS,
	TF_TOMBSTONES,
	TF_LIVE_BYTES,
	TF_DISK_BYTES,
	TF_DEAD_BYTES,
	TF_SEGMENTS,
	TF_KEYDIR_BYTES,
	TF_LAST_VERSION,
	TF_ACTIVATIONS,
	TF_MERGES,
	TF_SYNCS,
	TF_BATCHES,
	TF_BATCHED_WRITES,
	TF_LAST_ACTIVATION,
	TF_VALUE_LOGICAL,
	TF_VALUE_STORED,
	TF_VALUES_COMPRESSED,
	TF_EVICTIONS,
};

static const struct {
	const char *name, *type, *help;
} tenant_heads[] = {
        [TF_KEYS] = {"kvd_tenant_keys", "gauge", "Live keys."},
        [TF_TOMBSTONES] = {"kvd_tenant_tombstones", "gauge", "Deleted keys still indexed."},
        [TF_LIVE_BYTES] = {"kvd_tenant_live_bytes", "gauge",
                           "Bytes of the newest record of every key."},
        [TF_DISK_BYTES] = {"kvd_tenant_disk_bytes", "gauge", "Bytes of segment files."},
        [TF_DEAD_BYTES] = {"kvd_tenant_dead_bytes", "gauge",
                           "Bytes of the log a merge can reclaim (disk bytes not live)."},
        [TF_SEGMENTS] = {"kvd_tenant_segments", "gauge", "Segment files."},
        [TF_KEYDIR_BYTES] = {"kvd_tenant_keydir_bytes", "gauge",
                             "Memory of the key directory (0 when passive)."},
        [TF_LAST_VERSION] = {"kvd_tenant_last_version", "gauge", "The last version handed out."},
        [TF_ACTIVATIONS] = {"kvd_tenant_activations_total", "counter",
                            "Times the tenant was activated."},
        [TF_MERGES] = {"kvd_tenant_merges_total", "counter",
                       "Merges since the tenant was last activated."},
        [TF_SYNCS] = {"kvd_tenant_syncs_total", "counter",
                      "fdatasync calls on the log since the tenant was last activated."},
        [TF_BATCHES] = {"kvd_tenant_batches_total", "counter",
                        "Write batches (group commits) since the tenant was last activated."},
        [TF_BATCHED_WRITES] = {"kvd_tenant_batched_writes_total", "counter",
                               "Writes those batches carried (divided by batches: the mean batch "
                               "size)."},
        [TF_LAST_ACTIVATION] = {"kvd_tenant_last_activation_seconds", "gauge",
                                "How long the tenant's last activation took."},
        [TF_VALUE_LOGICAL] = {"kvd_tenant_value_logical_bytes_total", "counter",
                              "Value bytes of puts as given, since the tenant was last "
                              "activated."},
        [TF_VALUE_STORED] = {"kvd_tenant_value_stored_bytes_total", "counter",
                             "The same values' bytes as stored (after compression)."},
        [TF_VALUES_COMPRESSED] = {"kvd_tenant_values_compressed_total", "counter",
                                  "Values of those puts stored compressed."},
        [TF_EVICTIONS] = {"kvd_tenant_evictions_total", "counter",
                          "Keys evicted (evict = oldest) since the tenant was last "
                          "activated."},
};
#define NTENANT_FIELDS (sizeof(tenant_heads) / sizeof(tenant_heads[0]))

static uint64_t tenant_value(const struct kv_tenant_info *in, enum tenant_field f)
{
	switch (f) {
	case TF_KEYS:
		return in->stats.keys;
	case TF_TOMBSTONES:
		return in->stats.tombstones;
	case TF_LIVE_BYTES:
		return in->stats.live_bytes;
	case TF_DISK_BYTES:
		return in->stats.disk_bytes;
	case TF_DEAD_BYTES:
		return in->stats.dead_bytes;
	case TF_SEGMENTS:
		return in->stats.segments;
	case TF_KEYDIR_BYTES:
		return in->active ? in->stats.keydir_bytes : 0;
	case TF_LAST_VERSION:
		return in->stats.last_version;
	case TF_ACTIVATIONS:
		return in->activations;
	case TF_MERGES:
		return in->stats.merges;
	case TF_SYNCS:
		return in->stats.syncs;
	case TF_BATCHES:
		return in->stats.batches;
	case TF_BATCHED_WRITES:
		return in->stats.batched_writes;
	case TF_LAST_ACTIVATION:
		return in->last_activation_us / 1000;
	case TF_VALUE_LOGICAL:
		return in->stats.value_logical_bytes;
	case TF_VALUE_STORED:
		return in->stats.value_stored_bytes;
	case TF_VALUES_COMPRESSED:
		return in->stats.values_compressed;
	case TF_EVICTIONS:
		return in->stats.evictions;
	}
	return 0;
}

static const char *tenant_state(const struct tenant_row *t)
{
	if (t->refused)
		return "refused";
	if (t->info.active)
		return t->info.stats.read_only ? "read_only" : "active";
	return "passive";
}

/* The engine's per-tenant histograms: fdatasync durations and batch sizes. */
static void page_tenant_histograms(FILE *f, const struct tenant_row *rows, size_t nrows)
{
	size_t i, b;

	head(f, "kvd_tenant_sync_duration_seconds", "histogram",
	     "fdatasyncs of the log since the tenant was last activated, by duration (under "
	     "sync=always a batch's write and fdatasync together).");
	for (i = 0; i < nrows; i++) {
		const struct kv_stats *st = &rows[i].info.stats;
		uint64_t cum = 0;
		if (rows[i].refused)
			continue;
		for (b = 0; b < KV_SYNC_BUCKETS; b++) {
			cum += st->sync_hist[b];
			fprintf(f, "kvd_tenant_sync_duration_seconds_bucket{tenant=\"%s\",le=\"",
			        rows[i].name);
			if (b < KV_SYNC_BUCKETS - 1)
				put_seconds(f, kv_sync_bucket_us[b] * 1000, 1000000000);
			else
				fputs("+Inf", f);
			fprintf(f, "\"} %" PRIu64 "\n", cum);
		}
		fprintf(f, "kvd_tenant_sync_duration_seconds_sum{tenant=\"%s\"} ", rows[i].name);
		put_seconds(f, st->sync_us_sum * 1000, 1000000000);
		fprintf(f, "\nkvd_tenant_sync_duration_seconds_count{tenant=\"%s\"} %" PRIu64 "\n",
		        rows[i].name, cum);
	}
	head(f, "kvd_tenant_batch_writes", "histogram",
	     "Write batches (group commits) since the tenant was last activated, by the writes "
	     "each carried.");
	for (i = 0; i < nrows; i++) {
		const struct kv_stats *st = &rows[i].info.stats;
		uint64_t cum = 0;
		if (rows[i].refused)
			continue;
		for (b = 0; b < KV_BATCH_BUCKETS; b++) {
			cum += st->batch_hist[b];
			fprintf(f, "kvd_tenant_batch_writes_bucket{tenant=\"%s\",le=\"",
			        rows[i].name);
			if (b < KV_BATCH_BUCKETS - 1)
				fprintf(f, "%" PRIu32, kv_batch_bucket_max[b]);
			else
				fputs("+Inf", f);
			fprintf(f, "\"} %" PRIu64 "\n", cum);
		}
		fprintf(f,
		        "kvd_tenant_batch_writes_sum{tenant=\"%s\"} %" PRIu64 "\n"
		        "kvd_tenant_batch_writes_count{tenant=\"%s\"} %" PRIu64 "\n",
		        rows[i].name, st->batched_writes, rows[i].name, cum);
	}
}

/* Every family in one group, as the text format wants: the tenants are read
 * first, then written family by family. (Tenant names are [A-Za-z0-9._-]:
 * nothing to escape.) */
static void page_tenants(FILE *f, struct kvd *d)
{
	static const char *const states[] = {"active", "passive", "read_only", "refused"};
	struct kv_tenant_state *list;
	struct tenant_row *rows;
	size_t n, i, nrows = 0, omitted;

	if (kv_store_list(d->store, &list, &n) != 0)
		return;
	omitted = n > METRICS_TENANTS_MAX ? n - METRICS_TENANTS_MAX : 0;
	n -= omitted;
	if ((rows = calloc(n ? n : 1, sizeof(*rows))) == NULL) {
		free(list);
		return;
	}
	for (i = 0; i < n; i++) {
		struct tenant_row *t = &rows[nrows];
		int rv;
		snprintf(t->name, sizeof(t->name), "%s", list[i].name);
		rv = list[i].refused ? KV_EREFUSED : kv_store_info(d->store, t->name, &t->info);
		t->refused = rv == KV_EREFUSED;
		if (rv == 0 || t->refused)
			nrows++; /* (one dropped since it was listed is left out) */
	}
	free(list);
	head(f, "kvd_tenant_state", "gauge",
	     "1 for the state the tenant is in: active, passive, read_only (a write or "
	     "fdatasync failed) or refused (its TENANT file is damaged); 0 for the others.");
	for (i = 0; i < nrows; i++)
		for (unsigned k = 0; k < 4; k++)
			fprintf(f, "kvd_tenant_state{tenant=\"%s\",state=\"%s\"} %d\n",
			        rows[i].name, states[k],
			        strcmp(states[k], tenant_state(&rows[i])) == 0);
	for (unsigned fi = 0; fi < NTENANT_FIELDS; fi++) {
		head(f, tenant_heads[fi].name, tenant_heads[fi].type, tenant_heads[fi].help);
		for (i = 0; i < nrows; i++) {
			uint64_t v;
			if (rows[i].refused)
				continue;
			v = tenant_value(&rows[i].info, (enum tenant_field)fi);
			fprintf(f, "%s{tenant=\"%s\"} ", tenant_heads[fi].name, rows[i].name);
			if (fi == TF_LAST_ACTIVATION)
				put_seconds(f, v, 1000);
			else
				fprintf(f, "%" PRIu64, v);
			fputc('\n', f);
		}
	}
	page_tenant_histograms(f, rows, nrows);
	free(rows);
	metric(f, "kvd_metrics_tenants_omitted", "gauge",
	       "Tenants past the first 1000 (by name), which have no kvd_tenant_* series.",
	       omitted);
}

static void page_daemon(FILE *f, struct kvd *d)
{
	struct kv_store_stats st;

	head(f, "kvd_build_info", "gauge", "kvd's version.");
	fprintf(f, "kvd_build_info{version=\"%s\"} 1\n", KVD_VERSION);
	metric(f, "kvd_uptime_seconds", "gauge", "Seconds since kvd started.",
	       (now_ms() - d->start_ms) / 1000);
	metric(f, "kvd_workers", "gauge", "Worker threads.", d->nworkers);
	metric(f, "kvd_requests_in_flight", "gauge", "Requests taken and not answered yet.",
	       atomic_load(&d->in_flight));
	kv_store_stats(d->store, &st);
	metric(f, "kvd_tenants", "gauge", "Tenants.", st.tenants);
	metric(f, "kvd_tenants_active", "gauge", "Active tenants (key directory in memory).",
	       st.active);
	metric(f, "kvd_keydir_bytes", "gauge", "Memory of the key directories of active tenants.",
	       st.keydir_bytes);
	metric(f, "kvd_activations_total", "counter", "Tenant activations.", st.activations);
	metric(f, "kvd_passivations_total", "counter", "Tenant passivations.", st.passivations);
	if (st.device) {
		metric(f, "kvd_device_extents", "gauge", "Extents of the block device.",
		       st.device_extents);
		metric(f, "kvd_device_extents_free", "gauge", "Extents of the block device no tenant holds.",
		       st.device_extents_free);
		metric(f, "kvd_device_cache_bytes", "gauge", "Size of the block device's read cache.",
		       st.device_cache_bytes);
		metric(f, "kvd_device_cache_hits_total", "counter",
		       "Reads the device's read cache served.", st.device_cache_hits);
		metric(f, "kvd_device_cache_misses_total", "counter",
		       "Reads that missed the device's read cache and went to the device.", st.device_cache_misses);
	}
	if (st.device_nodes > 1 && d->cluster != NULL)
		metric(f, "kvd_failover_adoptions_total", "counter",
		       "Tenants of a shared device this node took over from a node that was gone.",
		       cluster_failover_adoptions(d->cluster));
	metric(f, "kvd_open_segment_files", "gauge", "Segment files open.",
	       kv_open_segment_files());
	metric(f, "kvd_open_segment_files_limit", "gauge",
	       "Segment files kept open at most (open_files).", kv_open_files_budget());
}

/* The whole page, malloc'd; NULL when out of memory. */
static char *page(struct kvd *d, size_t *ret_len)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (f == NULL)
		return NULL;
	page_daemon(f, d);
	page_requests(f);
	page_connections(f, d);
	page_merges(f);
	page_tenants(f, d);
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	*ret_len = len;
	return buf;
}

/* ---- the endpoint -------------------------------------------------------- */

static enum MHD_Result reply_text(struct MHD_Connection *c, unsigned code, const char *text)
{
	struct MHD_Response *r =
	        MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
	enum MHD_Result rv;

	if (r == NULL)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
	if (code == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	rv = MHD_queue_response(c, code, r);
	MHD_destroy_response(r);
	return rv;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_size, void **req_cls)
{
	struct kvd *d = cls;
	struct MHD_Response *r;
	enum MHD_Result rv;
	size_t len;
	char *body;

	(void)version, (void)upload_data, (void)req_cls;
	if (*upload_size != 0) {
		*upload_size = 0; /* a body is dropped: nothing here takes one */
		return MHD_YES;
	}
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
		return reply_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET and HEAD\n");
	if (strcmp(url, METRICS_PATH) != 0)
		return reply_text(c, MHD_HTTP_NOT_FOUND,
		                  "not found; the metrics are at /metrics\n");
	if ((body = page(d, &len)) == NULL)
		return reply_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
	if ((r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE)) == NULL) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, METRICS_CONTENT);
	rv = MHD_queue_response(c, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return rv;
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	char line[512];
	size_t n;

	(void)cls;
	vsnprintf(line, sizeof(line), fmt, ap);
	n = strlen(line);
	while (n > 0 && line[n - 1] == '\n')
		line[--n] = '\0';
	klog(LOG_WARNING, "metrics: %s", line);
}

/* The listening socket of HOST:PORT ("*" or an empty host: every address). */
static int listen_on(const char *hostport, int *ret, char *err, size_t errlen)
{
	char host[256], port[16];
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
	                         .ai_socktype = SOCK_STREAM,
	                         .ai_flags = AI_PASSIVE | AI_NUMERICSERV},
	                *res = NULL;
	int fd, one = 1, rv;

	if (rpc_hostport_split(hostport, host, sizeof(host), port, sizeof(port)) != 0) {
		snprintf(err, errlen, "metrics_listen %s: expected HOST:PORT or [ADDRESS]:PORT",
		         hostport);
		return -EINVAL;
	}
	if ((rv = getaddrinfo(host[0] == '\0' || strcmp(host, "*") == 0 ? NULL : host, port, &hints,
	                      &res)) != 0) {
		snprintf(err, errlen, "metrics_listen %s: %s", hostport, gai_strerror(rv));
		return -EINVAL;
	}
	fd = socket(res->ai_family, res->ai_socktype | SOCK_CLOEXEC, res->ai_protocol);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
	    bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 64) != 0) {
		rv = -errno;
		snprintf(err, errlen, "metrics_listen %s: %s", hostport, strerror(errno));
		if (fd >= 0)
			close(fd);
		freeaddrinfo(res);
		return rv;
	}
	freeaddrinfo(res);
	*ret = fd;
	return 0;
}

int metrics_start(struct kvd *d, char *err, size_t errlen)
{
	const union MHD_DaemonInfo *info;
	int fd, rv;

	if (d->cfg.metrics_listen[0] == '\0')
		return 0;
	if ((rv = listen_on(d->cfg.metrics_listen, &fd, err, errlen)) != 0)
		return rv;
	atomic_store(&metrics_on, true);
	/* the logger first, so that start-up complaints go through it too */
	/* epoll (AUTO on Linux), not select: kvd's descriptors pass FD_SETSIZE */
	mhd = MHD_start_daemon(MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL,
	                       on_request, d, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL,
	                       MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT,
	                       (unsigned)METRICS_CONNECTIONS, MHD_OPTION_CONNECTION_TIMEOUT,
	                       (unsigned)METRICS_TIMEOUT_S, MHD_OPTION_END);
	if (mhd == NULL) {
		atomic_store(&metrics_on, false);
		close(fd);
		snprintf(err, errlen, "metrics_listen %s: libmicrohttpd did not start",
		         d->cfg.metrics_listen);
		return -EIO;
	}
	info = MHD_get_daemon_info(mhd, MHD_DAEMON_INFO_BIND_PORT);
	klog(LOG_INFO, "metrics at http://%s%s (port %u)", d->cfg.metrics_listen, METRICS_PATH,
	     info != NULL ? (unsigned)info->port : 0u);
	return 0;
}

void metrics_stop(struct kvd *d)
{
	(void)d;
	if (mhd == NULL)
		return;
	MHD_stop_daemon(mhd); /* (closes the listening socket too) */
	mhd = NULL;
	atomic_store(&metrics_on, false);
}
