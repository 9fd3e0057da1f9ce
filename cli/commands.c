/*
 * commands.c — kvctl's commands. Each parses its options and arguments,
 * opens the handle, makes its calls through libkvclient and prints the
 * result as text or as one JSON document (shapes: kvctl --help, kvctl(1)).
 * Their synopses and help are in the command table in kvctl.c.
 */
#include "kvctl.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Options parsed by more than one command. */
enum {
	OPT_TTL = KVCTL_OPT_OWN,
	OPT_IF_VERSION,
	OPT_VERSION,
	OPT_AS_OF,
	OPT_PREFIX,
	OPT_START,
	OPT_END,
	OPT_LIMIT,
	OPT_KEYS_ONLY,
	OPT_REVERSE,
	OPT_VALUES,
	OPT_SYNC,
	OPT_HISTORY,
	OPT_MAX_KEYS,
	OPT_COMPRESSION,
	OPT_MAX_BYTES,
	OPT_EVICT,
	OPT_DAEMON,
	OPT_REVISION,
};

#define OPT(name, has_arg, val)                                                                    \
	{                                                                                          \
		name, has_arg, NULL, val                                                           \
	}
#define OPT_END_OF_LIST                                                                            \
	{                                                                                          \
		NULL, 0, NULL, 0                                                                   \
	}

/* The positional arguments after the options: between min and max. usage:
 * the synopsis for the error line; NULL for the command table's. */
static int want_args(struct kvctl *k, int argc, int min, int max, const char *usage)
{
	int n = argc - optind;

	if (n >= min && n <= max)
		return 0;
	if (usage != NULL)
		return kvctl_usage(k, "usage: kvctl %s", usage);
	assert(k->cmd != NULL);
	return kvctl_usage(k, "usage: kvctl %s%s%s", k->cmd->name,
	                   k->cmd->args[0] != '\0' ? " " : "", k->cmd->args);
}

/* A key argument: sets what the error line names, checks the length. */
static int key_arg(struct kvctl *k, const char *cmd, const char *key)
{
	kvctl_what(k, cmd, key, strlen(key));
	return kvctl_check_key(k, key);
}

/* --if-version V: any version; KVC_ANY_VERSION itself is "unconditional". */
static int parse_version(struct kvctl *k, const char *opt, uint64_t *ret)
{
	return kvctl_parse_u64(k, opt, optarg, KVC_ANY_VERSION - 1, ret);
}

/* --ttl SECONDS in ms; 0 asks for no expiry at all. */
static int parse_ttl(struct kvctl *k, uint64_t *ret_ms)
{
	uint64_t s;
	int rv;

	if ((rv = kvctl_parse_u64(k, "--ttl", optarg, UINT64_MAX / 1000 - 1, &s)) != 0)
		return rv;
	*ret_ms = s == 0 ? KVC_TTL_NONE : s * 1000;
	return 0;
}

/* Everything on stdin, binary safe, up to KVCTL_VALUE_MAX bytes. */
static int read_stdin(struct kvctl *k, char **ret, size_t *ret_len)
{
	size_t cap = 64 << 10, n = 0, r;
	char *buf = malloc(cap), *grown;

	for (;;) {
		if (buf == NULL)
			return kvctl_error(k, "out of memory reading stdin");
		r = fread(buf + n, 1, cap - n, stdin);
		n += r;
		if (n > KVCTL_VALUE_MAX) {
			free(buf);
			return kvctl_error(k, "the value on stdin is larger than %zu bytes",
			                   KVCTL_VALUE_MAX);
		}
		if (n < cap) {
			if (ferror(stdin)) {
				free(buf);
				return kvctl_error(k, "cannot read the value from stdin");
			}
			if (feof(stdin))
				break;
			continue;
		}
		cap = cap * 2 > KVCTL_VALUE_MAX + 1 ? KVCTL_VALUE_MAX + 1 : cap * 2;
		if ((grown = realloc(buf, cap)) == NULL)
			free(buf);
		buf = grown;
	}
	*ret = buf;
	*ret_len = n;
	return 0;
}

/* {key, key_b64, version} */
static json_t *key_version_json(const char *key, uint64_t version)
{
	json_t *doc = json_object();

	kvctl_json_bytes(doc, "key", key, strlen(key));
	json_object_set_new(doc, "version", kvctl_json_u64(version));
	return doc;
}

/* put and del print the version they wrote. */
static int print_version(struct kvctl *k, const char *key, uint64_t version)
{
	if (k->json)
		return kvctl_emit_json(k, key_version_json(key, version));
	printf("%llu\n", (unsigned long long)version);
	return kvctl_finish(k);
}

/* Text: "name: value" per member, in order; JSON: the object. Frees obj. */
static int print_fields(struct kvctl *k, json_t *obj)
{
	const char *name;
	json_t *v;

	if (k->json)
		return kvctl_emit_json(k, obj);
	json_object_foreach(obj, name, v)
	{
		if (json_is_string(v))
			printf("%s: %s\n", name, json_string_value(v));
		else if (json_is_integer(v))
			printf("%s: %" JSON_INTEGER_FORMAT "\n", name, json_integer_value(v));
		else
			printf("%s: %s\n", name, json_is_true(v) ? "true" : "false");
	}
	json_decref(obj);
	return kvctl_finish(k);
}

/* ---- put, get, del ------------------------------------------------------------- */

int cmd_put(struct kvctl *k, int argc, char **argv)
{
	static const struct option own[] = {
	        OPT("ttl", required_argument, OPT_TTL),
	        OPT("if-version", required_argument, OPT_IF_VERSION),
	        OPT_END_OF_LIST,
	};
	struct kvctl_opts oi;
	struct kvc_status st;
	struct kvc_call call = {.status = &st};
	struct kvc_write w = KVC_WRITE_INIT;
	char *input = NULL;
	const char *key, *value;
	size_t value_len = 0;
	uint64_t version = 0;
	int opt, rv = 0;

	kvctl_opts_begin(k, &oi, "put", own);
	while (rv == 0 && (opt = kvctl_opts_next(k, &oi, argc, argv)) != -1) {
		if (opt == OPT_TTL)
			rv = parse_ttl(k, &w.ttl_ms);
		else if (opt == OPT_IF_VERSION)
			rv = parse_version(k, "--if-version", &w.if_version);
		else
			return KVCTL_EXIT_USAGE;
	}
	if (rv != 0 || (rv = want_args(k, argc, 1, 2, NULL)) != 0 ||
	    (rv = key_arg(k, "put", key = argv[optind])) != 0)
		return rv;
	if (argc - optind == 2 && strcmp(argv[optind + 1], "-") != 0) {
		value = argv[optind + 1];
		value_len = strlen(value);
	} else {
		if ((rv = read_stdin(k, &input, &value_len)) != 0)
			return rv;
		value = input;
	}
	if ((rv = kvctl_connect(k)) == 0) {
		rv = kvc_put(k->c, &call, key, strlen(key), value, value_len, &w, &version);
		rv = rv != 0 ? kvctl_fail(k, rv, &st) : print_version(k, key, version);
	}
	free(input);
	return rv;
}

int cmd_get(struct kvctl *k, int argc, char **argv)
{
	static const struct option own[] = {
	        OPT("version", required_argument, OPT_VERSION),
	        OPT("as-of", required_argument, OPT_AS_OF),
	        OPT_END_OF_LIST,
	};
	struct kvctl_opts oi;
	struct kvc_status st;
	struct kvc_call call = {.status = &st};
	struct kvc_value v = {0};
	uint64_t version = 0, as_of = 0, blob_size = 0;
	const char *key;
	char when[32];
	bool blob = false;
	json_t *doc;
	int opt, rv = 0;

	kvctl_opts_begin(k, &oi, "get", own);
	while (rv == 0 && (opt = kvctl_opts_next(k, &oi, argc, argv)) != -1) {
		if (opt == OPT_VERSION)
			rv = parse_version(k, "--version", &version);
		else if (opt == OPT_AS_OF)
			rv = parse_version(k, "--as-of", &as_of);
		else
			return KVCTL_EXIT_USAGE;
		if (rv == 0 && (opt == OPT_VERSION ? version : as_of) == 0)
			rv = kvctl_usage(k, "versions start at 1");
	}
	if (rv != 0 || (rv = want_args(k, argc, 1, 1, NULL)) != 0 ||
	    (rv = key_arg(k, "get", key = argv[optind])) != 0)
		return rv;
	if (version != 0 && as_of != 0)
		return kvctl_usage(k, "--version and --as-of exclude each other");
	if ((rv = kvctl_connect(k)) != 0)
		return rv;
	if ((rv = kvc_get_ex(k->c, &call, key, strlen(key), version, as_of, &v, &blob,
	                     &blob_size)) != 0)
		return kvctl_fail(k, rv, &st);
	if (blob && !k->json) {
		char msg[160];
		/* no bytes on stdout: they are the blob's, not a value */
		snprintf(msg, sizeof(msg),
		         "version %llu is a blob of %llu bytes: read it with 'kvctl blob get'",
		         (unsigned long long)v.version, (unsigned long long)blob_size);
		return kvctl_report(k, KVC_FAILED_PRECONDITION, KVCTL_EXIT_ERROR, msg);
	}
	if (!k->json) {
		kvctl_write_value(v.data, v.len); /* as stored; a newline on a tty */
		kvc_value_free(&v);
		return kvctl_finish(k);
	}
	doc = key_version_json(key, v.version);
	if (blob) {
		json_object_set_new(doc, "blob", json_true());
		json_object_set_new(doc, "blob_size", kvctl_json_u64(blob_size));
	} else {
		kvctl_json_bytes(doc, "value", v.data, v.len);
	}
	kvctl_format_time(v.timestamp_ms, when);
	json_object_set_new(doc, "timestamp_ms", kvctl_json_u64(v.timestamp_ms));
	json_object_set_new(doc, "timestamp", json_string(when));
	json_object_set_new(doc, "expiry_ms", kvctl_json_u64(v.expiry_ms));
	kvc_value_free(&v);
	return kvctl_emit_json(k, doc);
}

int cmd_del(struct kvctl *k, int argc, char **argv)
{
	static const struct option own[] = {
	        OPT("if-version", required_argument, OPT_IF_VERSION),
	        OPT_END_OF_LIST,
	};
	struct kvctl_opts oi;
	struct kvc_status st;
	struct kvc_call call = {.status = &st};
	uint64_t if_version = KVC_ANY_VERSION, version;
	const char *key;
	int opt, rv = 0;

	kvctl_opts_begin(k, &oi, "del", own);
	while (rv == 0 && (opt = kvctl_opts_next(k, &oi, argc, argv)) != -1) {
		if (opt == OPT_IF_VERSION)
			rv = parse_version(k, "--if-version", &if_version);
		else
			return KVCTL_EXIT_USAGE;
	}
	if (rv != 0 || (rv = want_args(k, argc, 1, 1, NULL)) != 0 ||
	    (rv = key_arg(k, "del", key = argv[optind])) != 0 || (rv = kvctl_connect(k)) != 0)
		return rv;
	if ((rv = kvc_delete(k->c, &call, key, strlen(key), if_version, &version)) != 0)
		return kvctl_fail(k, rv, &st);
	return print_version(k, key, version);
}

/* ---- scan, versions ------------------------------------------------------------- */

int cmd_scan(struct kvctl *k, int argc, char **argv)
{
	static const struct option own[] = {
	        OPT("prefix", required_argument, OPT_PREFIX),
	        OPT("start", required_argument, OPT_START),
	        OPT("end", required_argument, OPT_END),
	        OPT("limit", required_argument, OPT_LIMIT),
	        OPT("keys-only", no_argument, OPT_KEYS_ONLY),
	        OPT("reverse", no_argument, OPT_REVERSE),
	        OPT_END_OF_LIST,
	};
	struct kvctl_opts oi;
	struct kvc_status st;
	struct kvc_call call = {.status = &st};
	struct kvc_scan_opts so = {0};
	struct kvc_item it;
	kvc_iter *iter = NULL;
	json_t *doc = NULL, *items = NULL;
	uint64_t count = 0;
	int opt, rv = 0;

	kvctl_opts_begin(k, &oi, "scan", own);
	while (rv == 0 && (opt = kvctl_opts_next(k, &oi, argc, argv)) != -1) {
		switch (opt) {
		case OPT_PREFIX:
			so.prefix = optarg;
			so.prefix_len = strlen(optarg);
			break;
		case OPT_START:
			so.start = optarg;
			so.start_len = strlen(optarg);
			break;
		case OPT_END:
			so.end = optarg;
			so.end_len = strlen(optarg);
			break;
		case OPT_LIMIT:
			rv = kvctl_parse_u64(k, "--limit", optarg, UINT64_MAX, &so.limit);
			break;
		case OPT_KEYS_ONLY:
			so.keys_only = true;
			break;
		case OPT_REVERSE:
			so.reverse = true;
			break;
		default:
			return KVCTL_EXIT_USAGE;
		}
	}
	if (rv != 0 || (rv = want_args(k, argc, 0, 0, NULL)) != 0 || (rv = kvctl_connect(k)) != 0)
		return rv;
	if ((rv = kvc_scan_open(k->c, &call, &so, &iter)) != 0)
		return kvctl_fail(k, rv, &st);
	if (k->json) {
		doc = json_object();
		items = json_array();
		json_object_set_new(doc, "items", items);
	}
	while ((rv = kvc_scan_next(iter, &it)) == 0) {
		count++;
		if (k->json) {
			json_t *item = json_object();

			uint64_t bsize = 0;

			kvctl_json_bytes(item, "key", it.key, it.key_len);
			if (kvc_scan_blob(iter, &bsize)) {
				json_object_set_new(item, "blob", json_true());
				json_object_set_new(item, "blob_size", kvctl_json_u64(bsize));
			} else if (!so.keys_only) {
				kvctl_json_bytes(item, "value", it.value != NULL ? it.value : "",
				                 it.value_len);
			}
			json_object_set_new(item, "version", kvctl_json_u64(it.version));
			json_array_append_new(items, item);
			continue;
		}
		kvctl_write(it.key, it.key_len);
		if (!so.keys_only) {
			putchar('\t');
			kvctl_write(it.value, it.value_len);
		}
		putchar('\n');
	}
	if (rv < 0) {
		json_decref(doc);
		rv = kvctl_fail(k, rv, &st);
	} else if (k->json) {
		json_object_set_new(doc, "revision", kvctl_json_u64(kvc_scan_revision(iter)));
		json_object_set_new(doc, "count", kvctl_json_u64(count));
		rv = kvctl_emit_json(k, doc);
	} else {
		rv = kvctl_finish(k);
	}
	kvc_scan_close(iter);
	return rv;
}

int cmd_versions(struct kvctl *k, int argc, char **argv)
{
	static const struct option own[] = {
	        OPT("limit", required_argument, OPT_LIMIT),
	        OPT("values", no_argument, OPT_VALUES),
	        OPT_END_OF_LIST,
	};
	struct kvctl_opts oi;
	struct kvc_status st;
	struct kvc_call call = {.status = &st};
	struct kvc_version *list = NULL;
	uint64_t *blobs = NULL;
	size_t count = 0, i;
	uint64_t limit = 0;
	bool values = false, truncated = false;
	const char *key;
	json_t *doc = NULL, *arr = NULL;
	int opt, rv = 0;

	kvctl_opts_begin(k, &oi, "versions", own);
	while (rv == 0 && (opt = kvctl_opts_next(k, &oi, argc, argv)) != -1) {
		if (opt == OPT_LIMIT)
			rv = kvctl_parse_u64(k, "--limit", optarg, UINT32_MAX, &limit);
		else if (opt == OPT_VALUES)
			values = true;
		else
			return KVCTL_EXIT_USAGE;
	}
	if (rv != 0 || (rv = want_args(k, argc, 1, 1, NULL)) != 0 ||
	    (rv = key_arg(k, "versions", key = argv[optind])) != 0 || (rv = kvctl_connect(k)) != 0)
		return rv;
	rv = kvc_versions_ex(k->c, &call, key, strlen(key), (uint32_t)limit, 0, values, &list,
	                     &count, &truncated, &blobs);
	if (rv != 0)
		return kvctl_fail(k, rv, &st);
	if (k->json) {
		doc = json_object();
		kvctl_json_bytes(doc, "key", key, strlen(key));
		arr = json_array();
		json_object_set_new(doc, "versions", arr);
	}
	for (i = 0; i < count; i++) {
		const struct kvc_version *v = &list[i];
		char when[32];

		kvctl_format_time(v->timestamp_ms, when);
		if (k->json) {
			json_t *e = json_object();

			json_object_set_new(e, "version", kvctl_json_u64(v->version));
			json_object_set_new(e, "timestamp_ms", kvctl_json_u64(v->timestamp_ms));
			json_object_set_new(e, "timestamp", json_string(when));
			json_object_set_new(e, "deleted", json_boolean(v->deleted));
			if (blobs[i] != KVC_NOT_BLOB) {
				json_object_set_new(e, "blob", json_true());
				json_object_set_new(e, "blob_size", kvctl_json_u64(blobs[i]));
			} else if (values && !v->deleted && v->data != NULL) {
				kvctl_json_bytes(e, "value", v->data, v->len);
			}
			json_array_append_new(arr, e);
			continue;
		}
		/* Fixed columns: the third is the mark ("deleted" or empty),
		 * the fourth the value, so a value reading "deleted" is never
		 * taken for a tombstone. */
		printf("%llu\t%s", (unsigned long long)v->version, when);
		if (v->deleted) {
			fputs("\tdeleted", stdout);
		} else if (blobs[i] != KVC_NOT_BLOB) {
			fputs("\tblob", stdout); /* no bytes: kvctl blob get --version */
		} else if (values) {
			fputs("\t\t", stdout);
			kvctl_write(v->data, v->len);
		}
		putchar('\n');
	}
	kvc_versions_free(list, count);
	free(blobs);
	if (!k->json)
		return kvctl_finish(k);
	json_object_set_new(doc, "truncated", json_boolean(truncated));
	return kvctl_emit_json(k, doc);
}

/* ---- tenants ---------------------------------------------------------------------- */

static const char *const sync_names[] = {"always", "interval", "none"};

static const char *sync_name(enum kvc_sync s)
{
	return (unsigned)s < 3 ? sync_names[s] : "always";
}

/* TenantInfo's fields, and with stats those only Stats has; the
 * compression fields from ci, the eviction ones from ei (NULL: none). */
static json_t *tenant_json(const struct kvc_tenant_info *ti, const struct kvc_codec_info *ci,
                           const struct kvc_evict_info *ei, bool stats)
{
	json_t *o = json_object();

#define U(f) json_object_set_new(o, #f, kvctl_json_u64(ti->f))
	json_object_set_new(o, "name", json_string(ti->name));
	json_object_set_new(o, "state", json_string(ti->active ? "active" : "passive"));
	U(idle_s);
	U(keys);
	U(live_bytes);
	U(disk_bytes);
	U(keydir_bytes);
	U(activations);
	U(last_activation_ms);
	U(last_version);
	json_object_set_new(o, "sync", json_string(sync_name(ti->sync)));
	U(history);
	U(ttl_ms);
	U(max_keys);
	if (ci != NULL && ci->compression[0] != '\0')
		json_object_set_new(o, "compression", json_string(ci->compression));
	if (ei != NULL && ei->evict[0] != '\0') {
		json_object_set_new(o, "max_bytes", kvctl_json_u64(ei->max_bytes));
		json_object_set_new(o, "evict", json_string(ei->evict));
	}
	if (stats) {
		U(dead_bytes);
		U(segments);
		U(tombstones);
		U(merges);
		U(compact_revision);
		json_object_set_new(o, "io_uring", json_boolean(ti->io_uring));
		U(batches);
		U(batched_writes);
		U(syncs);
		U(last_activation_us);
		json_object_set_new(o, "read_only", json_boolean(ti->read_only));
	}
	if (stats && ci != NULL) {
		json_object_set_new(o, "value_logical_bytes",
		                    kvctl_json_u64(ci->value_logical_bytes));
		json_object_set_new(o, "value_stored_bytes",
		                    kvctl_json_u64(ci->value_stored_bytes));
		json_object_set_new(o, "values_compressed", kvctl_json_u64(ci->values_compressed));
	}
	if (stats && ei != NULL && ei->evict[0] != '\0') {
		json_object_set_new(o, "evictions", kvctl_json_u64(ei->evictions));
		json_object_set_new(o, "tombstone_bytes", kvctl_json_u64(ei->tombstone_bytes));
	}
#undef U
	return o;
}

int cmd_tenant_create(struct kvctl *k, int argc, char **argv)
{
	static const struct option own[] = {
	        OPT("sync", required_argument, OPT_SYNC),
	        OPT("history", required_argument, OPT_HISTORY),
	        OPT("ttl", required_argument, OPT_TTL),
	        OPT("max-keys", required_argument, OPT_MAX_KEYS),
	        OPT("compression", required_argument, OPT_COMPRESSION),
	        OPT("max-bytes", required_argument, OPT_MAX_BYTES),
	        OPT("evict", required_argument, OPT_EVICT),
	        OPT_END_OF_LIST,
	};
	struct kvctl_opts oi;
	struct kvc_status st;
	struct kvc_call call = {.status = &st};
	struct kvc_tenant_opts to = {0};
	struct kvc_evict_opts eo = {0};
	bool evict_set = false;
	uint64_t v;
	const char *name, *compression = NULL;
	int opt, rv = 0;

	kvctl_opts_begin(k, &oi, "tenant create", own);
	while (rv == 0 && (opt = kvctl_opts_next(k, &oi, argc, argv)) != -1) {
		switch (opt) {
		case OPT_SYNC:
			if (strcmp(optarg, "always") == 0)
				to.sync = KVC_SYNC_ALWAYS;
			else if (strcmp(optarg, "interval") == 0)
				to.sync = KVC_SYNC_INTERVAL;
			else if (strcmp(optarg, "none") == 0)
				to.sync = KVC_SYNC_NONE;
			else
				rv = kvctl_usage(k, "--sync is always, interval or none, not '%s'",
				                 optarg);
			break;
		case OPT_HISTORY:
			if ((rv = kvctl_parse_u64(k, "--history", optarg, UINT32_MAX, &v)) == 0)
				to.history = (uint32_t)v;
			break;
		case OPT_TTL:
			if ((rv = parse_ttl(k, &to.ttl_ms)) == 0 && to.ttl_ms == KVC_TTL_NONE)
				to.ttl_ms = 0; /* a tenant's default TTL 0 is "none" */
			break;
		case OPT_MAX_KEYS:
			rv = kvctl_parse_u64(k, "--max-keys", optarg, UINT64_MAX, &to.max_keys);
			break;
		case OPT_COMPRESSION:
			compression = optarg; /* the daemon checks it */
			break;
		case OPT_MAX_BYTES:
			rv = kvctl_parse_u64(k, "--max-bytes", optarg, UINT64_MAX, &eo.max_bytes);
			evict_set = true;
			break;
		case OPT_EVICT:
			if (strcmp(optarg, "refuse") != 0 && strcmp(optarg, "oldest") != 0)
				rv = kvctl_usage(k, "--evict is refuse or oldest, not '%s'", optarg);
			eo.evict = optarg;
			evict_set = true;
			break;
		default:
			return KVCTL_EXIT_USAGE;
		}
	}
	if (rv != 0 || (rv = want_args(k, argc, 1, 1, NULL)) != 0)
		return rv;
	name = argv[optind];
	kvctl_what(k, "tenant create", name, strlen(name));
	if ((rv = kvctl_connect(k)) != 0)
		return rv;
	if ((rv = kvc_tenant_create_evict(k->c, &call, name, &to, compression,
	                                  evict_set ? &eo : NULL)) != 0)
		return kvctl_fail(k, rv, &st);
	if (!k->json)
		return kvctl_finish(k);
	return kvctl_emit_json(k, json_pack("{s:s}", "name", name));
}

/* A TenantList entry's state as kvd names it. */
static const char *owner_state(const struct kvc_tenant_owner *e)
{
	return e->refused ? "refused" : e->active ? "active" : "passive";
}

int cmd_tenant_list(struct kvctl *k, int argc, char **argv)
{
	struct kvctl_opts oi;
	struct kvc_status st;
	struct kvc_call call = {.status = &st};
	struct kvc_tenant_owner *list = NULL;
	size_t n = 0, i;
	bool owners = false;
	json_t *arr;
	int rv;

	kvctl_opts_begin(k, &oi, "tenant list", NULL);
	if (kvctl_opts_next(k, &oi, argc, argv) != -1)
		return KVCTL_EXIT_USAGE;
	if ((rv = want_args(k, argc, 0, 0, NULL)) != 0 || (rv = kvctl_connect(k)) != 0)
		return rv;
	if ((rv = kvc_tenant_owners(k->c, &call, &list, &n)) != 0)
		return kvctl_fail(k, rv, &st);
	/* cluster mode (some tenant has an owner): every line gets a third
	 * column, the owner node ("-": none) */
	for (i = 0; i < n; i++)
		owners = owners || list[i].node[0] != '\0';
	if (!k->json) {
		for (i = 0; i < n; i++) {
			if (owners)
				printf("%s\t%s\t%s\n", list[i].name, owner_state(&list[i]),
				       list[i].node[0] != '\0' ? list[i].node : "-");
			else
				printf("%s\t%s\n", list[i].name, owner_state(&list[i]));
		}
		kvc_tenant_owners_free(list);
		return kvctl_finish(k);
	}
	arr = json_array();
	for (i = 0; i < n; i++) {
		json_t *e = json_pack("{s:s,s:s}", "name", list[i].name, "state",
		                      owner_state(&list[i]));
		if (list[i].node[0] != '\0') {
			json_object_set_new(e, "owner", json_string(list[i].node));
			json_object_set_new(e, "epoch", kvctl_json_u64(list[i].epoch));
		}
		json_array_append_new(arr, e);
	}
	kvc_tenant_owners_free(list);
	return kvctl_emit_json(k, json_pack("{s:o}", "tenants", arr));
}

/* info, drop, passivate, activate, release, adopt: one NAME, no options of
 * their own. */
static int tenant_named(struct kvctl *k, const char *action, int argc, char **argv)
{
	struct kvctl_opts oi;
	struct kvc_status st;
	struct kvc_call call = {.status = &st};
	struct kvc_tenant_info ti;
	struct kvc_owner own;
	uint64_t us = 0;
	char what[32];
	const char *name;
	int rv;

	snprintf(what, sizeof(what), "tenant %s", action);
	kvctl_opts_begin(k, &oi, what, NULL);
	if (kvctl_opts_next(k, &oi, argc, argv) != -1)
		return KVCTL_EXIT_USAGE;
	if ((rv = want_args(k, argc, 1, 1, NULL)) != 0)
		return rv;
	name = argv[optind];
	kvctl_what(k, what, name, strlen(name));
	if ((rv = kvctl_connect(k)) != 0)
		return rv;
	if (strcmp(action, "info") == 0) {
		struct kvc_codec_info ci;
		struct kvc_evict_info ei;
		if ((rv = kvc_tenant_info(k->c, &call, name, &ti)) != 0 ||
		    (rv = kvc_tenant_codec(k->c, &call, name, &ci)) != 0 ||
		    (rv = kvc_tenant_evict(k->c, &call, name, &ei)) != 0)
			return kvctl_fail(k, rv, &st);
		return print_fields(k, tenant_json(&ti, &ci, &ei, false));
	}
	if (strcmp(action, "adopt") == 0) {
		if ((rv = kvc_tenant_adopt(k->c, &call, name, &own)) != 0)
			return kvctl_fail(k, rv, &st);
		return print_fields(k, json_pack("{s:s,s:s,s:s,s:o}", "name", name, "node", own.node,
		                                 "address", own.address, "epoch",
		                                 kvctl_json_u64(own.epoch)));
	}
	if (strcmp(action, "drop") == 0)
		rv = kvc_tenant_drop(k->c, &call, name);
	else if (strcmp(action, "release") == 0)
		rv = kvc_tenant_release(k->c, &call, name);
	else if (strcmp(action, "passivate") == 0)
		rv = kvc_tenant_passivate(k->c, &call, name);
	else
		rv = kvc_tenant_activate(k->c, &call, name, &us);
	if (rv != 0)
		return kvctl_fail(k, rv, &st);
	if (strcmp(action, "drop") == 0) {
		if (!k->json)
			return kvctl_finish(k);
		return kvctl_emit_json(k, json_pack("{s:s}", "name", name));
	}
	if (strcmp(action, "passivate") == 0 || strcmp(action, "release") == 0)
		return print_fields(k, json_pack("{s:s,s:s}", "name", name, "state", "passive"));
	return print_fields(k, json_pack("{s:s,s:s,s:o}", "name", name, "state", "active",
	                                 "activation_us", kvctl_json_u64(us)));
}

int cmd_tenant_info(struct kvctl *k, int argc, char **argv)
{
	return tenant_named(k, "info", argc, argv);
}

int cmd_tenant_drop(struct kvctl *k, int argc, char **argv)
{
	return tenant_named(k, "drop", argc, argv);
}

int cmd_tenant_passivate(struct kvctl *k, int argc, char **argv)
{
	return tenant_named(k, "passivate", argc, argv);
}

int cmd_tenant_activate(struct kvctl *k, int argc, char **argv)
{
	return tenant_named(k, "activate", argc, argv);
}

int cmd_tenant_release(struct kvctl *k, int argc, char **argv)
{
	return tenant_named(k, "release", argc, argv);
}

int cmd_tenant_adopt(struct kvctl *k, int argc, char **argv)
{
	return tenant_named(k, "adopt", argc, argv);
}

/* ---- the daemon --------------------------------------------------------------------- */

/* A latency percentile: its bucket's upper bound in ns, null past the last. */
static json_t *latency_json(uint64_t ns)
{
	return ns == KVC_LATENCY_OVER ? json_null() : kvctl_json_u64(ns);
}

static json_t *daemon_json(const struct kvc_daemon_detail *dd)
{
	const struct kvc_daemon_stats *ds = &dd->daemon;
	json_t *methods = json_array(), *conns = json_array();

	for (size_t i = 0; i < dd->nmethods; i++) {
		const struct kvc_method_stats *m = &dd->methods[i];
		json_t *statuses = json_object();
		for (int c = 0; c < KVC_STATUS_SLOTS; c++)
			if (m->by_status[c] != 0)
				json_object_set_new(statuses, kvc_code_name(c),
				                    kvctl_json_u64(m->by_status[c]));
		json_array_append_new(
		        methods,
		        json_pack("{s:s,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "method", m->method,
		                  "requests", kvctl_json_u64(m->requests), "errors",
		                  kvctl_json_u64(m->errors), "statuses", statuses, "latency_count",
		                  kvctl_json_u64(m->latency_count), "latency_sum_ns",
		                  kvctl_json_u64(m->latency_sum_ns), "p50_ns",
		                  latency_json(m->p50_ns), "p90_ns", latency_json(m->p90_ns),
		                  "p99_ns", latency_json(m->p99_ns)));
	}
	for (size_t i = 0; i < dd->nconnections; i++)
		json_array_append_new(conns, json_pack("{s:s,s:s,s:o}", "transport",
		                                       dd->connections[i].transport, "listen",
		                                       dd->connections[i].listen, "open",
		                                       kvctl_json_u64(dd->connections[i].open)));
	return json_pack("{s:s,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:b,s:o,s:o,s:o,s:o}", "version",
	                 ds->version, "uptime_s", kvctl_json_u64(ds->uptime_s), "tenants",
	                 kvctl_json_u64(ds->tenants), "active_tenants",
	                 kvctl_json_u64(ds->active_tenants), "requests",
	                 kvctl_json_u64(ds->requests), "in_flight", kvctl_json_u64(ds->in_flight),
	                 "keydir_bytes", kvctl_json_u64(ds->keydir_bytes), "workers",
	                 kvctl_json_u64(ds->workers), "counting", dd->counting, "received_bytes",
	                 kvctl_json_u64(dd->received_bytes), "sent_bytes",
	                 kvctl_json_u64(dd->sent_bytes), "methods", methods, "connections", conns);
}

/* A duration: "50us", "2.5ms", "10s"; ">10s" for KVC_LATENCY_OVER. */
static void print_ns(const char *prefix, uint64_t ns)
{
	if (ns == KVC_LATENCY_OVER)
		printf("%s>10s", prefix);
	else if (ns < 1000000)
		printf("%s%.3gus", prefix, (double)ns / 1e3);
	else if (ns < 1000000000)
		printf("%s%.3gms", prefix, (double)ns / 1e6);
	else
		printf("%s%.3gs", prefix, (double)ns / 1e9);
}

/* Text: the totals as "name: value" lines, then two lines per method
 * ("requests Get: 6 (OK 5, NOT_FOUND 1)", "latency Get: p50 <=50us p90
 * <=100us p99 <=250us mean 41.2us (6 timed)") and one per listener
 * ("connections stream kv+ipc:///run/kvd/kv.sock: 3"). */
static int print_daemon(struct kvctl *k, const struct kvc_daemon_detail *dd)
{
	json_t *obj = daemon_json(dd);

	if (obj == NULL)
		return kvctl_fail(k, -KVC_RESOURCE_EXHAUSTED, NULL);
	if (k->json)
		return kvctl_emit_json(k, obj);
	json_object_del(obj, "methods");
	json_object_del(obj, "connections");
	{
		const char *name;
		json_t *v;
		json_object_foreach(obj, name, v)
		{
			if (json_is_string(v))
				printf("%s: %s\n", name, json_string_value(v));
			else if (json_is_integer(v))
				printf("%s: %" JSON_INTEGER_FORMAT "\n", name,
				       json_integer_value(v));
			else
				printf("%s: %s\n", name, json_is_true(v) ? "true" : "false");
		}
	}
	json_decref(obj);
	for (size_t i = 0; i < dd->nmethods; i++) {
		const struct kvc_method_stats *m = &dd->methods[i];
		const char *sep = " (";
		printf("requests %s: %" PRIu64, m->method, m->requests);
		for (int c = 0; c < KVC_STATUS_SLOTS; c++)
			if (m->by_status[c] != 0) {
				printf("%s%s %" PRIu64, sep, kvc_code_name(c), m->by_status[c]);
				sep = ", ";
			}
		printf("%s\n", sep[0] == ',' ? ")" : "");
		if (m->latency_count == 0)
			continue;
		/* the percentiles are bucket bounds: "at most" */
		printf("latency %s:", m->method);
		print_ns(" p50 <=", m->p50_ns);
		print_ns(" p90 <=", m->p90_ns);
		print_ns(" p99 <=", m->p99_ns);
		print_ns(" mean ", m->latency_sum_ns / m->latency_count);
		printf(" (%" PRIu64 " timed)\n", m->latency_count);
	}
	for (size_t i = 0; i < dd->nconnections; i++)
		printf("connections %s %s: %" PRIu64 "\n", dd->connections[i].transport,
		       dd->connections[i].listen, dd->connections[i].open);
	return kvctl_finish(k);
}

int cmd_stats(struct kvctl *k, int argc, char **argv)
{
	static const struct option own[] = {
	        OPT("daemon", no_argument, OPT_DAEMON),
	        OPT_END_OF_LIST,
	};
	struct kvctl_opts oi;
	struct kvc_status st;
	struct kvc_call call = {.status = &st};
	struct kvc_tenant_info ti;
	struct kvc_daemon_detail *dd;
	bool daemon = false;
	int opt, rv;

	kvctl_opts_begin(k, &oi, "stats", own);
	while ((opt = kvctl_opts_next(k, &oi, argc, argv)) != -1) {
		if (opt != OPT_DAEMON)
			return KVCTL_EXIT_USAGE;
		daemon = true;
	}
	if ((rv = want_args(k, argc, 0, 0, "stats [--daemon]")) != 0 ||
	    (rv = kvctl_connect(k)) != 0)
		return rv;
	if (!daemon) {
		struct kvc_codec_info ci;
		struct kvc_evict_info ei;
		if ((rv = kvc_stats(k->c, &call, &ti)) != 0 ||
		    (rv = kvc_stats_codec(k->c, &call, &ci)) != 0 ||
		    (rv = kvc_stats_evict(k->c, &call, &ei)) != 0)
			return kvctl_fail(k, rv, &st);
		return print_fields(k, tenant_json(&ti, &ci, &ei, true));
	}
	if ((rv = kvc_stats_daemon_detail(k->c, &call, &dd)) != 0)
		return kvctl_fail(k, rv, &st);
	rv = print_daemon(k, dd);
	kvc_daemon_detail_free(dd);
	return rv;
}

int cmd_compact(struct kvctl *k, int argc, char **argv)
{
	static const struct option own[] = {
	        OPT("revision", required_argument, OPT_REVISION),
	        OPT_END_OF_LIST,
	};
	struct kvctl_opts oi;
	struct kvc_status st;
	struct kvc_call call = {.status = &st};
	struct kvc_compact_result r;
	uint64_t revision = 0;
	int opt, rv = 0;

	kvctl_opts_begin(k, &oi, "compact", own);
	while (rv == 0 && (opt = kvctl_opts_next(k, &oi, argc, argv)) != -1) {
		if (opt != OPT_REVISION)
			return KVCTL_EXIT_USAGE;
		rv = parse_version(k, "--revision", &revision);
	}
	if (rv != 0 || (rv = want_args(k, argc, 0, 0, NULL)) != 0 || (rv = kvctl_connect(k)) != 0)
		return rv;
	if ((rv = kvc_compact(k->c, &call, revision, &r)) != 0)
		return kvctl_fail(k, rv, &st);
	return print_fields(k, json_pack("{s:o,s:o,s:o}", "compact_revision",
	                                 kvctl_json_u64(r.compact_revision), "disk_bytes_before",
	                                 kvctl_json_u64(r.disk_bytes_before), "disk_bytes_after",
	                                 kvctl_json_u64(r.disk_bytes_after)));
}

int cmd_health(struct kvctl *k, int argc, char **argv)
{
	struct kvctl_opts oi;
	struct kvc_status st;
	struct kvc_call call = {.status = &st};
	struct kvc_health h;
	bool serving;
	int rv;

	kvctl_opts_begin(k, &oi, "health", NULL);
	if (kvctl_opts_next(k, &oi, argc, argv) != -1)
		return KVCTL_EXIT_USAGE;
	if ((rv = want_args(k, argc, 0, 0, NULL)) != 0 || (rv = kvctl_connect(k)) != 0)
		return rv;
	if ((rv = kvc_health(k->c, &call, &h)) != 0)
		return kvctl_fail(k, rv, &st);
	serving = strcmp(h.status, "serving") == 0;
	rv = print_fields(k, json_pack("{s:s,s:s,s:o}", "status", h.status, "version", h.version,
	                               "uptime_s", kvctl_json_u64(h.uptime_s)));
	if (rv == 0 && !serving) {
		/* The document above is the one document; the line says why. */
		fprintf(stderr, "kvctl: health: the daemon is %s\n", h.status);
		rv = KVCTL_EXIT_UNAVAILABLE;
	}
	return rv;
}
