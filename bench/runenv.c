/*
 * bench/runenv.c — the run of a kvbench versions, durable or coldstart
 * benchmark: options, directory, binaries, report header (runenv.h).
 */
#include "runenv.h"

#include "ycsb_gen.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define RUNENV_SOCKET_DIR_MAX 80 /* socket paths live in the run's directory: sun_path is 108 */

int runenv_parse_backends(const char *cmd, const char *s, const char *const *allowed,
                          const struct yb_backend **vals, size_t max, size_t *ret_n)
{
	char buf[512], names[512] = "", *save = NULL;
	size_t n = 0;

	for (size_t i = 0; allowed[i] != NULL; i++)
		snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "",
		         allowed[i]);
	if (strlen(s) >= sizeof buf) {
		fprintf(stderr, "kvbench %s: --backend is too long\n", cmd);
		return -EINVAL;
	}
	snprintf(buf, sizeof buf, "%s", s);
	for (char *t = strtok_r(buf, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
		const struct yb_backend *be = NULL;
		for (size_t i = 0; allowed[i] != NULL; i++)
			if (strcmp(allowed[i], t) == 0)
				be = yb_find(t);
		if (be == NULL) {
			fprintf(stderr, "kvbench %s: unknown backend '%s' (%s)\n", cmd, t, names);
			return -EINVAL;
		}
		for (size_t i = 0; i < n; i++)
			if (vals[i] == be) {
				fprintf(stderr, "kvbench %s: backend '%s' twice\n", cmd, t);
				return -EINVAL;
			}
		if (n == max) {
			fprintf(stderr, "kvbench %s: at most %zu backends\n", cmd, max);
			return -EINVAL;
		}
		vals[n++] = be;
	}
	if (n == 0) {
		fprintf(stderr, "kvbench %s: --backend is empty\n", cmd);
		return -EINVAL;
	}
	*ret_n = n;
	return 0;
}

int runenv_parse_transport(const char *cmd, const char *s, bool *ret_stream)
{
	if (strcmp(s, "nng") != 0 && strcmp(s, "stream") != 0) {
		fprintf(stderr, "kvbench %s: --transport is nng or stream, not '%s'\n", cmd, s);
		return -EINVAL;
	}
	*ret_stream = strcmp(s, "stream") == 0;
	return 0;
}

int runenv_init(struct runenv *r, const char *cmd, int argc, char **argv, const char *dir,
                const char *kvd, const char *endpoint, const char *redis_server, bool need_kvd)
{
	const char *parent = dir ? dir : "/tmp";
	int rv;

	memset(r, 0, sizeof(*r));
	r->cmd = cmd;
	bench_command_line(r->command, sizeof r->command, argc, argv);
	if (need_kvd && endpoint == NULL &&
	    (rv = bench_kvd_path(kvd, r->kvd_path, sizeof r->kvd_path)) != 0) {
		fprintf(stderr, "kvbench %s: kvd binary %s: %s (give it with --kvd PATH)\n", cmd,
		        r->kvd_path[0] ? r->kvd_path : "?", strerror(-rv));
		return -1;
	}
	if (redis_server != NULL) {
		if (access(redis_server, X_OK) != 0) {
			fprintf(stderr, "kvbench %s: --redis-server %s: %s\n", cmd, redis_server,
			        strerror(errno));
			return -1;
		}
		bench_fmt(r->redis_path, sizeof r->redis_path, "%s", redis_server);
	} else {
		(void)bench_find_in_path("redis-server", r->redis_path, sizeof r->redis_path);
	}
	if (dir != NULL && mkdir(parent, 0755) != 0 && errno != EEXIST) {
		fprintf(stderr, "kvbench %s: mkdir %s: %s\n", cmd, parent, strerror(errno));
		return -1;
	}
	if ((size_t)snprintf(r->base, sizeof r->base, "%s/kvbench-%s-XXXXXX", parent, cmd) >=
	    RUNENV_SOCKET_DIR_MAX) {
		fprintf(stderr, "kvbench %s: --dir path too long for socket paths\n", cmd);
		r->base[0] = '\0';
		return -1;
	}
	if (mkdtemp(r->base) == NULL) {
		fprintf(stderr, "kvbench %s: mkdtemp %s: %s\n", cmd, r->base, strerror(errno));
		r->base[0] = '\0';
		return -1;
	}
	bench_fs_name(r->base, r->fs, sizeof r->fs);
	if (r->kvd_path[0] != '\0') {
		char err[512];
		if (bench_kvd_pin(r->kvd_path, r->base, r->kvd_bin, sizeof r->kvd_bin, err,
		                  sizeof err) != 0) {
			fprintf(stderr, "kvbench %s: %s\n", cmd, err);
			return -1;
		}
	}
	r->env.base = r->base;
	r->env.kvd_path = r->kvd_bin[0] ? r->kvd_bin : NULL;
	r->env.endpoint = endpoint;
	r->env.redis_path = r->redis_path[0] ? r->redis_path : NULL;
	return 0;
}

int runenv_fini(struct runenv *r, bool remove)
{
	int rv;

	if (r->env.kvd_started && yb_env_fini(&r->env, r->kvd_err, sizeof r->kvd_err) != 0) {
		r->kvd_failed = true;
		fprintf(stderr, "kvbench %s: kvd: %s\n", r->cmd, r->kvd_err);
	}
	if (remove && !r->kvd_failed && r->base[0] != '\0' && (rv = bench_rmtree(r->base)) != 0)
		fprintf(stderr, "kvbench %s: removing %s: %s\n", r->cmd, r->base, strerror(-rv));
	return r->kvd_failed ? -1 : 0;
}

int runenv_finish(const struct runenv *r, bool ok, const char *what)
{
	int rv;

	if (!ok) {
		fprintf(stderr,
		        "kvbench %s: FAILED: %s, or a server did not exit 0 (files kept in %s)\n",
		        r->cmd, what, r->base);
		return 1;
	}
	if (r->base[0] != '\0' && (rv = bench_rmtree(r->base)) != 0)
		fprintf(stderr, "kvbench %s: removing %s: %s\n", r->cmd, r->base, strerror(-rv));
	return 0;
}

void runenv_fill_pool(char *pool, size_t n, uint64_t seed)
{
	struct yg_rng rng;

	yg_rng_seed(&rng, seed);
	for (size_t i = 0; i < n; i++)
		pool[i] = (char)(' ' + (yg_rng_next(&rng) & 63));
}

size_t runenv_skip_unavailable(const struct runenv *r, const struct yb_backend *const *backends,
                               size_t n, char *skip, size_t skip_len, FILE *progress)
{
	size_t can = 0;

	for (size_t i = 0; i < n; i++) {
		const char *why = backends[i]->unavailable(backends[i], &r->env);
		char *row = skip + i * skip_len;

		if (why == NULL) {
			row[0] = '\0';
			can++;
			continue;
		}
		bench_fmt(row, skip_len, "%s", why);
		fprintf(progress, "%s: %s, skipped\n", backends[i]->name, why);
	}
	return can;
}

void runenv_lines_common(struct report *h, const struct runenv *r)
{
	char tmp[512];

	bench_date(tmp, sizeof tmp);
	report_line(h, "date", "%s", tmp);
	bench_machine(tmp, sizeof tmp);
	report_line(h, "machine", "%s; clients and servers share these CPUs", tmp);
	report_line(h, "build", "%s", bench_build());
	report_line(h, "command", "%s", r->command);
	report_line(h, "directory", "%s (%s), removed afterwards unless the run failed", r->base,
	            r->fs);
}

void runenv_lines_kvd(struct report *h, const struct runenv *r)
{
	if (r->env.endpoint != NULL) {
		report_line(h, "kvd", "the running kvd at %s (--endpoint)%s%s", r->env.endpoint,
		            r->env.kvd_version[0] ? ", version " : "", r->env.kvd_version);
		return;
	}
	if (r->env.kvd.pid == 0)
		return;
	report_line(h, "kvd", "%s", r->env.kvd.command);
	report_line(h, "kvd",
	            "binary %s (run from a copy), version %s, %" PRIu64 " workers; config file: "
	            "[kvd] (nothing set; tenants get their settings from TenantCreate)",
	            r->kvd_path, r->env.kvd_version, r->env.kvd_workers);
}

json_t *runenv_json_backends(const struct yb_backend *const *backends, size_t n)
{
	json_t *a = json_array();

	for (size_t i = 0; i < n; i++)
		(void)json_array_append_new(a, json_string(backends[i]->name));
	return a;
}

json_t *runenv_json_skipped(const struct yb_backend *const *backends, size_t n, const char *skip,
                            size_t skip_len)
{
	json_t *a = json_array();

	for (size_t i = 0; i < n; i++) {
		const char *why = skip + i * skip_len;
		if (why[0] != '\0')
			(void)json_array_append_new(a, json_pack("{s:s,s:o}", "backend",
			                                         backends[i]->name, "reason",
			                                         report_str(why)));
	}
	return a;
}

double runenv_loadavg(void)
{
	double v = -1;
	FILE *f = fopen("/proc/loadavg", "r");

	if (f != NULL) {
		if (fscanf(f, "%lf", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

double runenv_median(double *v, size_t n)
{
	if (n == 0)
		return 0;
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void runenv_opts_init(struct runenv_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->seed = 1;
	o->stream = true; /* libkvclient's default transport */
}

static int parse_transport(const char *cmd, const char *name, const char *arg, void *val)
{
	(void)name;
	return runenv_parse_transport(cmd, arg, val);
}

size_t runenv_opts_table(struct runenv_opts *o, bool timed, const char *seed_help,
                         const char *quick_help, struct bench_opt *t)
{
	size_t n = 0;

	if (timed) {
		t[n++] = (struct bench_opt){BENCH_OPT("seconds", BENCH_OPT_DOUBLE, &o->seconds, "S",
		                                      "recorded seconds per cell (default %D)"),
		                            .lo = 0.01, .hi = 3600, .set = &o->seconds_set};
		t[n++] =
		        (struct bench_opt){BENCH_OPT("warmup", BENCH_OPT_DOUBLE, &o->warmup, "S",
		                                     "unrecorded seconds before them (default %D)"),
		                           .lo = 0, .hi = 3600, .set = &o->warmup_set};
	}
	t[n++] = (struct bench_opt){BENCH_OPT("seed", BENCH_OPT_U64, &o->seed, "S", seed_help),
	                            .lo = 0, .hi = (double)UINT64_MAX};
	t[n++] =
	        (struct bench_opt){BENCH_OPT("kvd", BENCH_OPT_STRING, &o->kvd, "PATH",
	                                     "kvd binary (default ../daemon/kvd next to kvbench)")};
	t[n++] = (struct bench_opt){BENCH_OPT("endpoint", BENCH_OPT_STRING, &o->endpoint, "URL",
	                                      "use this running kvd instead of starting one")};
	t[n++] = (struct bench_opt){
	        BENCH_OPT("transport", BENCH_OPT_FUNC, &o->stream, "T",
	                  "the kvd started here listens on kv+ipc:// and\n"
	                  "kv+tcp:// (stream, the default) or on ipc:// and tcp://\n"
	                  "(nng)"),
	        .parse = parse_transport};
	if (timed)
		t[n++] = (struct bench_opt){BENCH_OPT("redis-server", BENCH_OPT_STRING,
		                                      &o->redis_server, "PATH",
		                                      "redis-server binary (default: from PATH)")};
	t[n++] = (struct bench_opt){BENCH_OPT("dir", BENCH_OPT_STRING, &o->dir, "DIR",
	                                      "make the run's directory in DIR (default /tmp)")};
	t[n++] =
	        (struct bench_opt){BENCH_OPT("quick", BENCH_OPT_FLAG, &o->quick, NULL, quick_help)};
	t[n++] = (struct bench_opt){BENCH_OPT("markdown", BENCH_OPT_FLAG, &o->markdown, NULL,
	                                      "print the header and a markdown table at the end")};
	t[n++] = (struct bench_opt){BENCH_OPT("json", BENCH_OPT_FLAG, &o->json, NULL,
	                                      "print one JSON object at the end")};
	assert(n <= RUNENV_OPTS_N);
	return n;
}

int runenv_opts_done(const char *cmd, const struct runenv_opts *o)
{
	if (o->json && o->markdown) {
		fprintf(stderr, "kvbench %s: --json and --markdown exclude each other\n", cmd);
		return -EINVAL;
	}
	return 0;
}
