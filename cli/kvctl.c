/*
 * kvctl.c — the kvd command line: global options, the command table, option
 * parsing shared by the commands, and how a failure becomes one line on
 * stderr and an exit code. The commands are in commands.c, the output
 * helpers in output.c; docs/kvctl.1 is the manual.
 */
#include "kvctl.h"

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef KVCTL_VERSION
#define KVCTL_VERSION "unknown"
#endif

static const char help_text[] =
        "usage: kvctl [-e|--endpoint URL] [-t|--tenant NAME] [--token T]\n"
        "             [-o|--output text|json] [--timeout MS] COMMAND [ARGS]\n"
        "\n"
        "Commands:\n"
        "  put KEY [VALUE] [--ttl SECONDS] [--if-version V]\n"
        "        VALUE from stdin when absent or '-'; prints the new version\n"
        "  get KEY [--version V | --as-of V]   prints the value's bytes as stored\n"
        "  del KEY [--if-version V]            prints the tombstone's version\n"
        "  scan [--prefix P] [--start K] [--end K] [--limit N] [--keys-only]\n"
        "       [--reverse]                    KEY<TAB>VALUE lines (or KEY lines)\n"
        "  versions KEY [--limit M] [--values] newest first:\n"
        "        VERSION<TAB>TIME[<TAB>deleted] (with --values: <TAB>MARK<TAB>VALUE)\n"
        "  tenant create NAME [--sync always|interval|none] [--history N]\n"
        "                     [--ttl SECONDS] [--max-keys N]\n"
        "  tenant list | info NAME | drop NAME | passivate NAME | activate NAME\n"
        "  stats [--daemon]    the tenant's statistics, or the daemon's\n"
        "  compact [--revision V]\n"
        "  health              exits 0 when the daemon is serving\n"
        "\n"
        "Options may come before or after a command's arguments; '--' ends them.\n"
        "Environment: KVD_ENDPOINT (default " KVC_DEFAULT_ENDPOINT "),\n"
        "KVD_TENANT (default 'default').\n"
        "\n"
        "-o json prints one JSON document. Keys and values appear as \"key\" (when\n"
        "UTF-8 without NUL) and always \"key_b64\" (base64); likewise \"value\",\n"
        "\"value_b64\". Times are \"timestamp_ms\" and ISO 8601 \"timestamp\".\n"
        "  put, del   {key, key_b64, version}\n"
        "  get        {key, key_b64, value, value_b64, version, timestamp_ms,\n"
        "              timestamp, expiry_ms}\n"
        "  scan       {items: [{key, key_b64, value, value_b64, version}],\n"
        "              revision, count}\n"
        "  versions   {key, key_b64, versions: [{version, timestamp_ms, timestamp,\n"
        "              deleted, value, value_b64}], truncated}\n"
        "  tenant create|drop {name}; passivate|activate {name, state[,\n"
        "              activation_us]}; list {tenants: [{name, state}]};\n"
        "              info {name, state, idle_s, keys, ...}\n"
        "  stats      tenant info plus dead_bytes, segments, tombstones, merges,\n"
        "              compact_revision, io_uring, batches, batched_writes, syncs,\n"
        "              last_activation_us, read_only; --daemon: {version, uptime_s,\n"
        "              tenants, ...}\n"
        "  compact    {compact_revision, disk_bytes_before, disk_bytes_after}\n"
        "  health     {status, version, uptime_s}\n"
        "  failure    {error: {code, name, message, exit}}\n"
        "\n"
        "Exit status: 0 success, 1 not found, 2 usage error, 3 version mismatch,\n"
        "4 daemon unreachable or unavailable, 5 any other error.\n"
        "See kvctl(1).\n";

void kvctl_help(void)
{
	fputs(help_text, stdout);
}

/* ---- errors ------------------------------------------------------------------- */

/* One line on stderr, and with -o json the error document on stdout. */
static int report(struct kvctl *k, int code, int exit_code, const char *msg)
{
	if (k->what[0] != '\0')
		fprintf(stderr, "kvctl: %s: %s\n", k->what, msg);
	else
		fprintf(stderr, "kvctl: %s\n", msg);
	if (k->json) {
		json_t *doc = json_pack("{s:{s:i,s:s,s:s,s:i}}", "error", "code", code, "name",
		                        kvc_code_name(code), "message", msg, "exit", exit_code);

		if (doc != NULL)
			kvctl_emit_json(k, doc);
	}
	return exit_code;
}

static int exit_code_of(int rv)
{
	switch (-rv) {
	case KVC_NOT_FOUND:
		return KVCTL_EXIT_NOT_FOUND;
	case KVC_FAILED_PRECONDITION:
		return KVCTL_EXIT_PRECONDITION;
	case KVC_UNAVAILABLE:
	case KVC_DEADLINE_EXCEEDED: /* nothing answered in time */
		return KVCTL_EXIT_UNAVAILABLE;
	default:
		return KVCTL_EXIT_ERROR;
	}
}

int kvctl_fail(struct kvctl *k, int rv, const struct kvc_status *st)
{
	const char *msg = st != NULL && st->message[0] != '\0' ? st->message : kvc_code_name(rv);

	return report(k, -rv, exit_code_of(rv), msg);
}

static int vreport(struct kvctl *k, int code, int exit_code, const char *fmt, va_list ap)
{
	char msg[512];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	return report(k, code, exit_code, msg);
}

int kvctl_usage(struct kvctl *k, const char *fmt, ...)
{
	va_list ap;
	int rv;

	va_start(ap, fmt);
	rv = vreport(k, KVC_INVALID_ARGUMENT, KVCTL_EXIT_USAGE, fmt, ap);
	va_end(ap);
	if (!k->json)
		fputs("Try 'kvctl --help'.\n", stderr);
	return rv;
}

int kvctl_error(struct kvctl *k, const char *fmt, ...)
{
	va_list ap;
	int rv;

	va_start(ap, fmt);
	rv = vreport(k, KVC_INTERNAL, KVCTL_EXIT_ERROR, fmt, ap);
	va_end(ap);
	return rv;
}

void kvctl_what(struct kvctl *k, const char *cmd, const void *key, size_t key_len)
{
	const unsigned char *p = key;
	size_t n = (size_t)snprintf(k->what, sizeof(k->what), "%s", cmd), i;

	if (key == NULL)
		return;
	if (n + 1 < sizeof(k->what))
		k->what[n++] = ' ';
	/* Bytes a terminal would act on are shown as \xNN; long keys are cut. */
	for (i = 0; i < key_len && n + 8 < sizeof(k->what); i++) {
		if (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '\\')
			k->what[n++] = (char)p[i];
		else
			n += (size_t)snprintf(k->what + n, sizeof(k->what) - n, "\\x%02x", p[i]);
	}
	if (i < key_len)
		n += (size_t)snprintf(k->what + n, sizeof(k->what) - n, "...");
	k->what[n] = '\0';
}

int kvctl_check_key(struct kvctl *k, const char *key)
{
	size_t n = strlen(key);

	if (n == 0 || n > WIRE_KEY_MAX)
		return kvctl_usage(k, "a key is 1 to %u bytes, not %zu", WIRE_KEY_MAX, n);
	return 0;
}

int kvctl_connect(struct kvctl *k)
{
	int rv = kvc_open(&k->opts, &k->c);

	if (rv == -KVC_INVALID_ARGUMENT)
		return kvctl_usage(k,
		                   "cannot use endpoint '%s' (a URL such as kv+ipc:///path, "
		                   "kv+tcp://host:port, "
		                   "ipc:///path, tcp://host:port or tls+tcp://host:port)",
		                   k->opts.endpoint);
	if (rv != 0)
		return kvctl_error(k, "cannot open a client for %s: %s", k->opts.endpoint,
		                   kvc_code_name(rv));
	return 0;
}

/* ---- options ------------------------------------------------------------------ */

int kvctl_parse_u64(struct kvctl *k, const char *opt, const char *s, uint64_t max, uint64_t *ret)
{
	unsigned long long v;
	char *end;

	errno = 0;
	if (s[0] < '0' || s[0] > '9' || (v = strtoull(s, &end, 10), errno != 0) || *end != '\0' ||
	    v > max)
		return kvctl_usage(k, "%s wants a number from 0 to %llu, not '%s'", opt,
		                   (unsigned long long)max, s);
	*ret = v;
	return 0;
}

static const struct option common_opts[] = {
        {"endpoint", required_argument, NULL, 'e'},
        {"tenant", required_argument, NULL, 't'},
        {"token", required_argument, NULL, KVCTL_OPT_TOKEN},
        {"output", required_argument, NULL, 'o'},
        {"timeout", required_argument, NULL, KVCTL_OPT_TIMEOUT},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
};

void kvctl_opts_begin(struct kvctl *k, struct kvctl_opts *oi, const char *cmd,
                      const struct option *own)
{
	size_t n = 0, i;

	memset(oi, 0, sizeof(*oi));
	snprintf(k->what, sizeof(k->what), "%s", cmd);
	for (i = 0; own != NULL && own[i].name != NULL; i++)
		oi->all[n++] = own[i];
	for (i = 0; common_opts[i].name != NULL; i++)
		oi->all[n++] = common_opts[i];
	assert(n < KVCTL_OPTS_MAX); /* room for the zeroed end */
	/* a zeroed entry ends the list */
	optind = 0; /* GNU: start over on a new argv */
	opterr = 0;
}

/* A global option, wherever it appears: 0, or an exit code. */
static int common_option(struct kvctl *k, int opt, const char *arg)
{
	uint64_t v;
	int rv;

	switch (opt) {
	case 'e':
		k->opts.endpoint = arg;
		return 0;
	case 't':
		if (arg[0] == '\0')
			return kvctl_usage(k, "--tenant wants a name");
		k->opts.tenant = arg;
		return 0;
	case KVCTL_OPT_TOKEN:
		k->opts.token = arg;
		return 0;
	case 'o':
		if (strcmp(arg, "json") == 0)
			k->json = true;
		else if (strcmp(arg, "text") == 0)
			k->json = false;
		else
			return kvctl_usage(k, "--output is text or json, not '%s'", arg);
		return 0;
	case KVCTL_OPT_TIMEOUT:
		if ((rv = kvctl_parse_u64(k, "--timeout", arg, UINT32_MAX, &v)) != 0)
			return rv;
		if (v == 0)
			return kvctl_usage(k, "--timeout wants at least 1 ms");
		k->opts.timeout_ms = (uint32_t)v;
		return 0;
	default:
		return kvctl_usage(k, "unknown option");
	}
}

int kvctl_opts_next(struct kvctl *k, struct kvctl_opts *oi, int argc, char **argv)
{
	int opt;

	for (;;) {
		opt = getopt_long(argc, argv, ":e:t:o:h", oi->all, NULL);
		switch (opt) {
		case -1:
			return -1;
		case 'h':
			kvctl_help();
			exit(KVCTL_EXIT_OK);
		case ':':
			kvctl_usage(k, "option '%s' needs a value", argv[optind - 1]);
			return KVCTL_OPTS_USAGE;
		case '?':
			if (optopt != 0)
				kvctl_usage(k, "unknown option '-%c'", optopt);
			else
				kvctl_usage(k, "unknown option '%s'", argv[optind - 1]);
			return KVCTL_OPTS_USAGE;
		case 'e':
		case 't':
		case 'o':
		case KVCTL_OPT_TOKEN:
		case KVCTL_OPT_TIMEOUT:
			if (common_option(k, opt, optarg) != 0)
				return KVCTL_OPTS_USAGE;
			continue;
		default:
			return opt;
		}
	}
}

/* ---- main ---------------------------------------------------------------------- */

static const struct {
	const char *name;
	int (*fn)(struct kvctl *k, int argc, char **argv);
} commands[] = {
        {"put", cmd_put},     {"get", cmd_get},           {"del", cmd_del},
        {"scan", cmd_scan},   {"versions", cmd_versions}, {"tenant", cmd_tenant},
        {"stats", cmd_stats}, {"compact", cmd_compact},   {"health", cmd_health},
};

int main(int argc, char **argv)
{
	static const struct option global_opts[] = {
	        {"version", no_argument, NULL, 'V'},
	        {"endpoint", required_argument, NULL, 'e'},
	        {"tenant", required_argument, NULL, 't'},
	        {"token", required_argument, NULL, KVCTL_OPT_TOKEN},
	        {"output", required_argument, NULL, 'o'},
	        {"timeout", required_argument, NULL, KVCTL_OPT_TIMEOUT},
	        {"help", no_argument, NULL, 'h'},
	        {NULL, 0, NULL, 0},
	};
	struct kvctl k;
	const char *env;
	size_t i;
	int opt, rv;

	memset(&k, 0, sizeof(k));
	kvc_options_init(&k.opts);
	if ((env = getenv("KVD_ENDPOINT")) != NULL && env[0] != '\0')
		k.opts.endpoint = env;
	if ((env = getenv("KVD_TENANT")) != NULL && env[0] != '\0')
		k.opts.tenant = env;

	/* '+': the first word that is not an option is the command. */
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "+:e:t:o:h", global_opts, NULL)) != -1) {
		switch (opt) {
		case 'h':
			kvctl_help();
			return KVCTL_EXIT_OK;
		case 'V':
			printf("kvctl %s (protocol %d)\n", KVCTL_VERSION, KVC_PROTOCOL_VERSION);
			return KVCTL_EXIT_OK;
		case ':':
			return kvctl_usage(&k, "option '%s' needs a value", argv[optind - 1]);
		case '?':
			if (optopt != 0)
				return kvctl_usage(&k, "unknown option '-%c'", optopt);
			return kvctl_usage(&k, "unknown option '%s'", argv[optind - 1]);
		default:
			if ((rv = common_option(&k, opt, optarg)) != 0)
				return rv;
		}
	}
	if (optind >= argc)
		return kvctl_usage(&k, "no command");
	for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		if (strcmp(argv[optind], commands[i].name) == 0) {
			snprintf(k.what, sizeof(k.what), "%s", commands[i].name);
			rv = commands[i].fn(&k, argc - optind, argv + optind);
			kvc_close(k.c);
			return rv;
		}
	}
	return kvctl_usage(&k, "unknown command '%s'", argv[optind]);
}
