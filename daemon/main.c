/*
 * main.c — kvd: command line, start-up, signals, shutdown; the offline
 * checks kvd --check DIR (a data directory) and kvd --check-config (the
 * settings, as a start would read them). kvd --check DEVICE and kvd
 * --format DEVICE are device.c's; kvd --restore DIR --tenant NAME is
 * restore.c's, on the store opened as a start would open it.
 *
 * Start-up: settings (file, then flags), the store (refuses a locked data
 * directory or device; with a device, data_dir is not used), workers, the
 * maintenance thread, listeners, the metrics endpoint (metrics_listen);
 * then READY=1.
 * SIGHUP reloads log_level, idle_timeout and memory_budget from the file,
 * and the tokens (tokens_file and token; a bad tokens file keeps the old
 * ones). kvd --hash-token and --new-token make lines of a tokens file.
 * SIGTERM/SIGINT: STOPPING=1, the metrics endpoint stops, stop accepting
 * work (new requests get UNAVAILABLE), answer requests in flight, close the
 * listeners, finish maintenance, close every tenant (sync, hints), exit 0.
 */
#include "kvd.h"

#include "activate.h"
#include "cluster.h"

#include "device.h"
#include "io.h" /* struct kv_io_fault, for the test fault hooks */
#include "log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#ifndef KVD_VERSION /* meson.build's project version, from daemon/meson.build */
#error "KVD_VERSION is not defined"
#endif
#define DRAIN_TIMEOUT_MS 30000

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: kvd [--data-dir DIR | --device DEVICE] [--listen URL]... [--config FILE]\n"
	        "           [--workers N] [--log-level LEVEL] [--auto-create]\n"
	        "           [--metrics-listen HOST:PORT] [--help] [--version]\n"
	        "       kvd --check DIR | DEVICE\n"
	        "       kvd --format DEVICE [--extent-size SIZE] [--nodes N] [--force]\n"
	        "       kvd --check-config [FILE] [flags]\n"
	        "       kvd --restore DIR --tenant NAME [--force] [--config FILE | --data-dir DIR\n"
	        "           | --device DEVICE]\n"
	        "       kvd --hash-token | --new-token\n"
	        "\n"
	        "  -d, --data-dir DIR    where tenant databases live (default %s)\n"
	        "      --device DEVICE   keep every tenant on DEVICE instead, a block device\n"
	        "                        (or a regular file) made by kvd --format; data_dir\n"
	        "                        is then not used\n"
	        "  -l, --listen URL      kv+ipc:///path, kv+tcp://host:port or\n"
	        "                        kv+tls://host:port (kvd's own framing),\n"
	        "                        ipc:///path, tcp://host:port or\n"
	        "                        tls+tcp://host:port (nng REQ/REP); repeat for\n"
	        "                        several (default %s and %s)\n"
	        "  -c, --config FILE     INI settings (default %s if it exists)\n"
	        "  -w, --workers N       worker threads (default: one per CPU)\n"
	        "      --log-level L     err, warning, notice, info, debug (default info)\n"
	        "      --auto-create     create unknown tenants on first use\n"
	        "      --metrics-listen HOST:PORT\n"
	        "                        serve Prometheus metrics at http://HOST:PORT/metrics\n"
	        "                        (default: off)\n"
	        "      --check-config [FILE]\n"
	        "                        read and check the settings (FILE, else --config's,\n"
	        "                        else %s) with the flags as kvd would start\n"
	        "                        with them; print ok and exit 0, or the error (with its\n"
	        "                        line) and exit 1\n"
	        "      --hash-token      read a token on stdin, print its tokens_file hash\n"
	        "      --new-token       print a new random token, then its tokens_file hash\n"
	        "      --check DIR       read every file of a stopped kvd's data directory (or of\n"
	        "                        one database), list what is damaged; exit 0 when\n"
	        "                        nothing is, 1 when something is, 2 when it cannot\n"
	        "                        check\n"
	        "      --check DEVICE    the same for a device (a block device or a regular\n"
	        "                        file): superblocks, catalog, extents, every record\n"
	        "      --format DEVICE   make DEVICE a kvd device, erasing what it holds;\n"
	        "                        refuses one with a file system, a partition table\n"
	        "                        or another kvd on it unless --force\n"
	        "      --extent-size SIZE\n"
	        "                        --format's extent size, a power of two from 1M to\n"
	        "                        1G (default 64M)\n"
	        "      --nodes N         --format DEVICE for N kvd nodes that share it\n"
	        "                        (1..64, default 1; each sets device_node and etcd,\n"
	        "                        docs/SCALEOUT.md)\n"
	        "      --force           --format over whatever DEVICE holds; --restore over\n"
	        "                        an existing tenant (dropped first)\n"
	        "      --restore DIR     make the backup in DIR (kvctl tenant backup) the\n"
	        "                        tenant --tenant NAME of the configured data directory\n"
	        "                        or device, which no kvd may be serving; then exit\n"
	        "                        (docs/BACKUP.md)\n"
	        "\n"
	        "Flags override the file. Logs go to stderr with syslog priority prefixes.\n"
	        "Signals: SIGTERM/SIGINT drain and stop, SIGHUP reloads log_level,\n"
	        "idle_timeout, memory_budget and the tokens from the settings file.\n",
	        KVD_DEFAULT_DATA, KVD_DEFAULT_LISTEN_STREAM, KVD_DEFAULT_LISTEN, KVD_DEFAULT_CONFIG,
	        KVD_DEFAULT_CONFIG);
}

/* ---- kvd --check ---------------------------------------------------------- */

struct check_out {
	const char *db;
	uint32_t damaged;
};

static void check_item(void *arg, const struct kv_check_item *it)
{
	struct check_out *o = arg;
	const char *kind = it->damage ? "" : "note: ";

	if (it->damage)
		o->damaged++;
	if (it->len)
		printf("%s: %s%s at %" PRIu64 " (%" PRIu64 " bytes): %s\n", o->db, kind, it->file,
		       it->off, it->len, it->what);
	else
		printf("%s: %s%s: %s\n", o->db, kind, it->file, it->what);
}

/* Checks one database directory; returns 0 clean, 1 damaged, 2 error. */
static int check_db(const char *path, const char *label, uint64_t *records)
{
	struct check_out o = {label, 0};
	struct kv_check_summary sum;
	int rv = kv_check(path, check_item, &o, &sum);

	if (rv == KV_ELOCKED) {
		kvd_say(stderr, LOG_ERR, "%s is open in a running kvd; stop it (or check a copy)",
		        path);
		return 2;
	}
	if (rv != 0) {
		kvd_say(stderr, LOG_ERR, "cannot check %s: %s", path, kv_strerror(rv));
		return 2;
	}
	*records += sum.records;
	return o.damaged ? 1 : 0;
}

/* Checks tenants/<name>/TENANT as kv_store_open reads it; 0 sound, 1 damaged
 * (or missing beside a database), 2 error. */
static int check_tenant_file(const char *path, const char *label)
{
	char why[320];
	struct kv_tenant_config c;
	int rv = kv_tenant_file_read(path, NULL, why, sizeof(why), &c);

	if (rv == 0 || rv == -ENOENT)
		return 0;
	if (rv == KV_EREFUSED) {
		printf("%s: TENANT: %s (kvd refuses this tenant)\n", label, why);
		return 1;
	}
	kvd_say(stderr, LOG_ERR, "cannot check %s: %s", path, kv_strerror(rv));
	return 2;
}

/* kvd --check DIR: a data directory (tenants/…) or one database; kvd
 * --check DEVICE (a block device or a regular file): device.c's. */
static int run_check(const char *dir)
{
	char tdir[4096], lock[4096];
	uint64_t records = 0;
	int worst = 0, ndb = 0, fd;
	struct stat st;
	DIR *d;
	struct dirent *de;

	if (stat(dir, &st) == 0 && (S_ISBLK(st.st_mode) || S_ISREG(st.st_mode)))
		return device_check(dir);
	snprintf(lock, sizeof(lock), "%s/LOCK", dir);
	if ((fd = open(lock, O_RDONLY | O_CLOEXEC)) >= 0) {
		if (flock(fd, LOCK_SH | LOCK_NB) != 0) {
			kvd_say(stderr, LOG_ERR,
			        "%s is in use by a running kvd; stop it (or check a copy)", dir);
			close(fd);
			return 2;
		}
	}
	snprintf(tdir, sizeof(tdir), "%s/tenants", dir);
	if ((d = opendir(tdir)) == NULL) {
		int r = check_db(dir, dir, &records);
		worst = r;
		ndb = 1;
	} else {
		while ((de = readdir(d)) != NULL) {
			char path[8192];
			int r;
			if (!kv_tenant_name_valid(de->d_name, strlen(de->d_name)))
				continue;
			snprintf(path, sizeof(path), "%s/%s", tdir, de->d_name);
			r = check_tenant_file(path, de->d_name);
			if (r > worst)
				worst = r;
			r = check_db(path, de->d_name, &records);
			if (r > worst)
				worst = r;
			ndb++;
		}
		closedir(d);
	}
	if (fd >= 0)
		close(fd);
	printf("%d database(s), %" PRIu64 " records checked: %s\n", ndb, records,
	       worst == 0 ? "no damage" : worst == 1 ? "damage found" : "not all could be checked");
	return worst;
}

/* Reads the tokens of cfg into d->auth; a bad tokens file keeps the old ones. */
static void reload_tokens(struct kvd *d, struct kvd_config *fresh)
{
	struct auth_table *t;
	char err[512];

	if (auth_table_load(fresh->tokens_file, fresh->token, &t, err, sizeof(err)) != 0) {
		klog(LOG_ERR, "SIGHUP: keeping the current tokens: %s", err);
		return;
	}
	auth_swap(&d->auth, t);
	memcpy(d->cfg.token, fresh->token, sizeof(d->cfg.token));
	memcpy(d->cfg.tokens_file, fresh->tokens_file, sizeof(d->cfg.tokens_file));
	klog(LOG_NOTICE, "reload: %zu token(s)%s", t ? t->n : 0,
	     t ? "" : ": none configured, access is not checked");
}

/* kvd --hash-token: the first line of stdin (without its line end). */
static int hash_token(void)
{
	char buf[4096], line[80];
	size_t n;

	if (fgets(buf, sizeof(buf), stdin) == NULL) {
		kvd_say(stderr, LOG_ERR, "--hash-token: no token on stdin");
		return 2;
	}
	n = strcspn(buf, "\r\n");
	if (n == 0) {
		kvd_say(stderr, LOG_ERR, "--hash-token: an empty token");
		return 2;
	}
	if (n < 16)
		kvd_say(stderr, LOG_WARNING,
		        "--hash-token: a token of %zu characters can be guessed; kvd --new-token "
		        "makes one of %u",
		        n, 2 * AUTH_TOKEN_BYTES);
	auth_hash_line(buf, n, line);
	memset(buf, 0, sizeof(buf));
	printf("%s\n", line);
	return 0;
}

/* kvd --new-token: a token and its hash, one per line. */
static int new_token(void)
{
	char tok[2 * AUTH_TOKEN_BYTES + 1], line[80];

	if (auth_new_token(tok) != 0) {
		kvd_say(stderr, LOG_ERR, "--new-token: no random bytes");
		return 1;
	}
	auth_hash_line(tok, strlen(tok), line);
	printf("%s\n%s\n", tok, line);
	return 0;
}

static void reload(struct kvd *d)
{
	struct kvd_config fresh;
	char err[512];

	if (!d->config_from_file) {
		klog(LOG_NOTICE, "SIGHUP: no settings file to reload");
		return;
	}
	config_defaults(&fresh);
	if (config_load(&fresh, d->config_path, err, sizeof(err)) != 0) {
		klog(LOG_ERR, "SIGHUP: keeping the current settings: %s", err);
		config_release(&fresh);
		return;
	}
	{
		/* what a reload cannot change: say so instead of ignoring it */
		const struct kvd_config *o = &d->cfg, *n = &fresh;
		struct {
			const char *name;
			bool changed;
		} fixed[] = {
		        {"workers", n->workers != o->workers},
		        {"max_message_size", n->max_message_size != o->max_message_size},
		        {"max_value_size", n->max_value_size != o->max_value_size},
		        {"contexts", n->contexts != o->contexts},
		        {"auto_create", n->auto_create != o->auto_create},
		        {"tls_cert", strcmp(n->tls_cert, o->tls_cert) != 0},
		        {"tls_key", strcmp(n->tls_key, o->tls_key) != 0},
		        {"tls_client_ca", strcmp(n->tls_client_ca, o->tls_client_ca) != 0},
		        {"tls_client_auth", n->tls_client_auth != o->tls_client_auth},
		        {"ipc_mode", n->ipc_mode != o->ipc_mode},
		        {"segment_size", n->segment_size != o->segment_size},
		        {"device", strcmp(n->device, o->device) != 0},
		        {"device_cache", n->device_cache != o->device_cache},
		        {"device_node", n->device_node != o->device_node},
		        {"open_files", n->open_files != o->open_files},
		        {"max_queue", n->max_queue != o->max_queue},
		        {"upload_idle_ms", n->upload_idle_ms != o->upload_idle_ms},
		        {"max_connections", n->max_connections != o->max_connections},
		        {"client_timeout", n->client_timeout_s != o->client_timeout_s},
		        {"frame_timeout", n->frame_timeout_s != o->frame_timeout_s},
		        {"auth_guesses", n->auth_guesses != o->auth_guesses},
		        {"input_budget", n->input_budget != o->input_budget},
		        {"output_budget", n->output_budget != o->output_budget},
		        {"metrics_listen", strcmp(n->metrics_listen, o->metrics_listen) != 0},
		        {"etcd", strcmp(n->etcd, o->etcd) != 0},
		        {"cluster", strcmp(n->cluster, o->cluster) != 0},
		        {"node_id", strcmp(n->node_id, o->node_id) != 0},
		        {"advertise", strcmp(n->advertise, o->advertise) != 0},
		        {"lease_ttl", n->lease_ttl_s != o->lease_ttl_s},
		        {"tenant-defaults",
		         memcmp(&n->defaults, &o->defaults, sizeof(n->defaults)) != 0},
		};
		for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
			if (fixed[i].changed)
				klog(LOG_WARNING, "reload: %s changed in %s; restart kvd to apply it",
				     fixed[i].name, d->config_path);
	}
	if (d->log_level_from_flag)
		fresh.log_level = d->cfg.log_level;
	if (fresh.log_level != d->cfg.log_level) {
		klog(LOG_NOTICE, "reload: log_level %s -> %s", log_level_name(d->cfg.log_level),
		     log_level_name(fresh.log_level));
		d->cfg.log_level = fresh.log_level;
		log_set_level(fresh.log_level);
	}
	if (fresh.idle_timeout_s != d->cfg.idle_timeout_s) {
		klog(LOG_NOTICE, "reload: idle_timeout %u -> %u s", d->cfg.idle_timeout_s,
		     fresh.idle_timeout_s);
		d->cfg.idle_timeout_s = fresh.idle_timeout_s;
	}
	if (fresh.memory_budget != d->cfg.memory_budget) {
		klog(LOG_NOTICE, "reload: memory_budget %" PRIu64 " -> %" PRIu64 " bytes",
		     d->cfg.memory_budget, fresh.memory_budget);
		d->cfg.memory_budget = fresh.memory_budget;
	}
	kv_store_set_limits(d->store, d->cfg.memory_budget, d->cfg.idle_timeout_s);
	reload_tokens(d, &fresh);
	klog(LOG_INFO, "reloaded %s", d->config_path);
	config_release(&fresh);
}

/* Settings from the file and the flags into d->cfg. 0: serve; -1:
 * --check-config found them sound (said so); 1: bad settings; 2: a bad
 * command line (said why, in one line). */
static int parse_args(struct kvd *d, int argc, char **argv)
{
	static const struct option lo[] = {
	        {"data-dir", required_argument, NULL, 'd'},
	        {"listen", required_argument, NULL, 'l'},
	        {"config", required_argument, NULL, 'c'},
	        {"workers", required_argument, NULL, 'w'},
	        {"log-level", required_argument, NULL, 'L'},
	        {"auto-create", no_argument, NULL, 'A'},
	        {"check", required_argument, NULL, 'K'},
	        {"device", required_argument, NULL, 'D'},
	        {"format", required_argument, NULL, 'F'},
	        {"extent-size", required_argument, NULL, 'E'},
	        {"force", no_argument, NULL, 'X'},
	        {"nodes", required_argument, NULL, 'P'},
	        {"metrics-listen", required_argument, NULL, 'M'},
	        {"check-config", optional_argument, NULL, 'T'},
	        {"hash-token", no_argument, NULL, 'H'},
	        {"new-token", no_argument, NULL, 'N'},
	        {"restore", required_argument, NULL, 'R'},
	        {"tenant", required_argument, NULL, 'U'},
	        {"help", no_argument, NULL, 'h'},
	        {"version", no_argument, NULL, 'V'},
	        {NULL, 0, NULL, 0},
	};
	char *listen[KVD_LISTEN_MAX], *data = NULL, *workers = NULL, *level = NULL;
	char *metrics = NULL, *device = NULL, *format = NULL, *extent_size = NULL, *nodes = NULL;
	const char *config = NULL, *check = NULL;
	char err[512];
	int nlisten = 0, ch, rv, serving_flags = 0;
	bool auto_create = false, check_config = false, force = false;

	opterr = 0; /* kvd says what is wrong itself, in one line (kvd_say) */
	while ((ch = getopt_long(argc, argv, ":d:l:c:w:h", lo, NULL)) != -1) {
		/* the flags --format has no use for: it formats and exits */
		if (ch != 'F' && ch != 'E' && ch != 'X' && ch != 'P' && ch != ':' && ch != '?')
			serving_flags++;
		switch (ch) {
		case 'd':
			data = optarg;
			break;
		case 'l':
			if (nlisten == KVD_LISTEN_MAX) {
				kvd_say(stderr, LOG_ERR, "at most %d --listen addresses",
				        KVD_LISTEN_MAX);
				return 2;
			}
			listen[nlisten++] = optarg;
			break;
		case 'c':
			config = optarg;
			break;
		case 'w':
			workers = optarg;
			break;
		case 'L':
			level = optarg;
			break;
		case 'A':
			auto_create = true;
			break;
		case 'M':
			metrics = optarg;
			break;
		case 'D':
			device = optarg;
			break;
		case 'F':
			format = optarg;
			break;
		case 'E':
			extent_size = optarg;
			break;
		case 'X':
			force = true;
			break;
		case 'P':
			nodes = optarg;
			break;
		case 'K':
			exit(run_check(optarg));
		case 'R':
			d->restore_dir = optarg;
			break;
		case 'U':
			d->restore_tenant = optarg;
			break;
		case 'H':
			exit(hash_token());
		case 'N':
			exit(new_token());
		case 'T':
			/* --check-config[=FILE] or --check-config FILE */
			check_config = true;
			check = optarg;
			if (check == NULL && optind < argc && argv[optind][0] != '-')
				check = argv[optind++];
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case 'V':
			printf("kvd %s\n", KVD_VERSION);
			exit(0);
		case ':':
			kvd_say(stderr, LOG_ERR, "option '%s' needs an argument (kvd --help)",
			        argv[optind - 1]);
			return 2;
		default:
			if (optopt != 0)
				kvd_say(stderr, LOG_ERR,
				        "unknown option '-%c' (kvd --help lists them)", optopt);
			else
				kvd_say(stderr, LOG_ERR,
				        "unknown option '%s' (kvd --help lists them)",
				        argv[optind - 1]);
			return 2;
		}
	}
	if (optind < argc) {
		kvd_say(stderr, LOG_ERR, "unexpected argument '%s'", argv[optind]);
		return 2;
	}
	if (format != NULL) {
		if (serving_flags > 0) {
			kvd_say(stderr, LOG_ERR,
			        "--format takes only --extent-size, --nodes and --force (kvd "
			        "--help)");
			return 2;
		}
		exit(device_format(format, extent_size, nodes, force));
	}
	if ((d->restore_dir != NULL) != (d->restore_tenant != NULL)) {
		kvd_say(stderr, LOG_ERR,
		        "--restore DIR and --tenant NAME go together (kvd --help)");
		return 2;
	}
	d->restore_force = force;
	if (extent_size != NULL || nodes != NULL || (force && d->restore_dir == NULL)) {
		kvd_say(stderr, LOG_ERR, "%s goes with --format DEVICE (kvd --help)",
		        force           ? "--force"
		        : nodes != NULL ? "--nodes"
		                        : "--extent-size");
		return 2;
	}
	config_defaults(&d->cfg);
	{
		char *def[2] = {(char *)KVD_DEFAULT_LISTEN_STREAM, (char *)KVD_DEFAULT_LISTEN};
		config_set_listen(&d->cfg, def, 2);
	}
	if (check_config && check == NULL && config == NULL)
		check = KVD_DEFAULT_CONFIG; /* the file must be there to be checked */
	if (check != NULL)
		config = check;
	if (config != NULL || access(KVD_DEFAULT_CONFIG, R_OK) == 0) {
		const char *path = config ? config : KVD_DEFAULT_CONFIG;
		if ((rv = config_load(&d->cfg, path, err, sizeof(err))) != 0) {
			kvd_say(stderr, LOG_ERR, "%s", err);
			return 1;
		}
		snprintf(d->config_path, sizeof(d->config_path), "%s", path);
		d->config_from_file = true;
	}
	if (data != NULL)
		snprintf(d->cfg.data_dir, sizeof(d->cfg.data_dir), "%s", data);
	if (device != NULL && (device[0] == '\0' ||
	                       snprintf(d->cfg.device, sizeof(d->cfg.device), "%s", device) >=
	                               (int)sizeof(d->cfg.device))) {
		kvd_say(stderr, LOG_ERR, "--device takes a path of 1 to %zu bytes",
		        sizeof(d->cfg.device) - 1);
		return 2;
	}
	if (nlisten > 0 && config_set_listen(&d->cfg, listen, nlisten) != 0) {
		kvd_say(stderr, LOG_ERR, "out of memory");
		return 1;
	}
	if (workers != NULL) {
		char *end;
		unsigned long w = strtoul(workers, &end, 10);
		if (*end != '\0' || w > 1024) {
			kvd_say(stderr, LOG_ERR, "--workers takes a number 0..1024");
			return 2;
		}
		d->cfg.workers = (uint32_t)w;
	}
	d->log_level_from_flag = level != NULL;
	if (level != NULL && (d->cfg.log_level = log_level_parse(level)) < 0) {
		kvd_say(stderr, LOG_ERR, "unknown log level '%s'", level);
		return 2;
	}
	if (auto_create)
		d->cfg.auto_create = true;
	if (metrics != NULL && snprintf(d->cfg.metrics_listen, sizeof(d->cfg.metrics_listen), "%s",
	                                metrics) >= (int)sizeof(d->cfg.metrics_listen)) {
		kvd_say(stderr, LOG_ERR, "--metrics-listen takes at most %zu bytes",
		        sizeof(d->cfg.metrics_listen) - 1);
		return 2;
	}
	if (config_check(&d->cfg, err, sizeof(err)) != 0) {
		if (check_config)
			kvd_say(stderr, LOG_ERR, "%s: %s", d->config_path, err);
		else
			kvd_say(stderr, LOG_ERR, "%s", err);
		return 1;
	}
	{
		struct auth_table *t;
		if (auth_table_load(d->cfg.tokens_file, d->cfg.token, &t, err, sizeof(err)) != 0) {
			kvd_say(stderr, LOG_ERR, "%s", err);
			return 1;
		}
		auth_init(&d->auth, t);
		d->auth.src_fails_max = d->cfg.auth_guesses;
	}
	if (check_config) {
		kvd_say(stdout, LOG_INFO, "%s: ok", d->config_path);
		return -1;
	}
	return 0;
}

#ifdef KVD_TEST_HOOKS
/*
 * Test hooks, compiled into the test build of kvd alone (build/daemon/
 * kvd-test, never installed): environment variables that hold replies,
 * slow workers, activations or a Compact (KVD_TEST_REPLY_DELAY_MS,
 * KVD_TEST_WORKER_DELAY_MS, KVD_TEST_ACTIVATE_HOLD_MS in activate.c,
 * KVD_TEST_COMPACT_HOLD_MS), hold a write whose
 * first key starts with "kvd-test-delay" between the fencing check and the
 * engine, so that it comes after its node was fenced and another took the
 * tenant (KVD_TEST_WRITE_DELAY_MS, worker.c), and fault injection:
 * with KVD_TEST_FAULT_FILE=/path, every write, sync and file creation of a
 * tenant's files first reads that file; "write-eio", "write-enospc" or
 * "sync-eio" in it makes the operation fail so, "merge-eio" or
 * "merge-enospc" the creation of a merge's output file (a merge fails, the
 * tenant's writes go on). KVD_TEST_MERGE_MIN_BYTES lowers the dead bytes a
 * tenant needs before it is merged automatically (merge_min_bytes).
 */
static const char *fault_file;

static int fault_mode(void)
{
	char buf[32] = "";
	FILE *f = fopen(fault_file, "r");

	if (f == NULL)
		return 0;
	if (fgets(buf, sizeof(buf), f) == NULL)
		buf[0] = '\0';
	fclose(f);
	if (strncmp(buf, "write-eio", 9) == 0)
		return 1;
	if (strncmp(buf, "write-enospc", 12) == 0)
		return 2;
	if (strncmp(buf, "sync-eio", 8) == 0)
		return 3;
	if (strncmp(buf, "merge-eio", 9) == 0)
		return 4;
	if (strncmp(buf, "merge-enospc", 12) == 0)
		return 5;
	return 0;
}

static int fault_write(void *arg, int fd, uint64_t off, size_t len)
{
	int m = fault_mode();

	(void)arg, (void)fd, (void)off, (void)len;
	return m == 1 ? -EIO : m == 2 ? -ENOSPC : 0;
}

static int fault_sync(void *arg, int fd)
{
	(void)arg, (void)fd;
	return fault_mode() == 3 ? -EIO : 0;
}

/* A merge's output is the only file created with the name of a temporary
 * segment (engine/storage_file.c, seg_file). */
static int fault_dirop(void *arg, const struct kv_io_event *ev)
{
	static const char out[] = ".seg.tmp";
	size_t n = ev->name ? strlen(ev->name) : 0;
	int m;

	(void)arg;
	if (ev->type != KV_IO_EV_CREATE || n < sizeof(out) - 1 ||
	    strcmp(ev->name + n - (sizeof(out) - 1), out) != 0)
		return 0;
	m = fault_mode();
	return m == 4 ? -EIO : m == 5 ? -ENOSPC : 0;
}

static struct kv_io_fault test_fault = {
        .on_write = fault_write, .on_sync = fault_sync, .on_dirop = fault_dirop};

/* Reads the hooks' variables into d and so (test_hooks_store after the
 * store's options are set, test_hooks_daemon before the workers start). */
static void test_hooks_store(struct kv_store_options *so)
{
	const char *min = getenv("KVD_TEST_MERGE_MIN_BYTES");

	if (min != NULL) {
		so->base.merge_min_bytes = strtoull(min, NULL, 10);
		klog(LOG_WARNING, "test mode: merges start at %" PRIu64 " dead bytes",
		     (uint64_t)so->base.merge_min_bytes);
	}
	if ((fault_file = getenv("KVD_TEST_FAULT_FILE")) != NULL) {
		so->base.fault = &test_fault;
		klog(LOG_WARNING, "test mode: I/O faults are read from %s", fault_file);
	}
}

static void test_hooks_daemon(struct kvd *d)
{
	const char *delay;

	if ((delay = getenv("KVD_TEST_REPLY_DELAY_MS")) != NULL) {
		d->reply_delay_ms = (uint32_t)strtoul(delay, NULL, 10);
		klog(LOG_WARNING, "test mode: every reply is held %u ms", d->reply_delay_ms);
	}
	if ((delay = getenv("KVD_TEST_WORKER_DELAY_MS")) != NULL) {
		d->job_delay_ms = (uint32_t)strtoul(delay, NULL, 10);
		klog(LOG_WARNING, "test mode: workers wait %u ms before each request",
		     d->job_delay_ms);
	}
	if ((delay = getenv("KVD_TEST_ACTIVATE_HOLD_MS")) != NULL) {
		d->activate_hold_ms = (uint32_t)strtoul(delay, NULL, 10);
		klog(LOG_WARNING, "test mode: activations wait %u ms first", d->activate_hold_ms);
	}
	if ((delay = getenv("KVD_TEST_COMPACT_HOLD_MS")) != NULL) {
		d->compact_hold_ms = (uint32_t)strtoul(delay, NULL, 10);
		klog(LOG_WARNING, "test mode: Compact holds its tenant %u ms first",
		     d->compact_hold_ms);
	}
	if ((delay = getenv("KVD_TEST_WRITE_DELAY_MS")) != NULL) {
		d->write_delay_ms = (uint32_t)strtoul(delay, NULL, 10);
		klog(LOG_WARNING,
		     "test mode: a write of a key kvd-test-delay... waits %u ms after the fencing "
		     "check",
		     d->write_delay_ms);
	}
}
#else
static void test_hooks_store(struct kv_store_options *so)
{
	(void)so;
}

static void test_hooks_daemon(struct kvd *d)
{
	(void)d;
}
#endif

/* Says what recovery found when a tenant comes back, once per activation. */
static void tenant_activated(void *arg, const char *tenant, kv_db *db, uint64_t us)
{
	struct kv_recovery_info ri;

	(void)arg;
	if (kv_recovery_info(db, &ri) != 0)
		return;
	if (ri.lost_segments || ri.lost_bytes)
		klog(LOG_ERR,
		     "tenant %s: data lost: %u sealed segment(s) gone or unreadable, %" PRIu64
		     " bytes of sealed segments missing (first: %s); keys they held read "
		     "DATA_LOSS%s; run kvd --check on a copy of the data directory",
		     tenant, ri.lost_segments, ri.lost_bytes, ri.damaged_file,
		     ri.versions_raised ? ", versions go on above the last one handed out" : "");
	if (ri.corrupt_records)
		klog(LOG_WARNING,
		     "tenant %s: %u damaged region(s) (%" PRIu64 " bytes) skipped (first in %s); run "
		     "kvd --check on a copy of the data directory",
		     tenant, ri.corrupt_records, ri.corrupt_bytes, ri.damaged_file);
	if (ri.hints_rejected)
		klog(LOG_NOTICE, "tenant %s: %u hint file(s) unusable, their segments scanned",
		     tenant, ri.hints_rejected);
	if (ri.open_segment)
		/* on a device: the rest of the extent was room, not a torn write */
		klog(LOG_NOTICE,
		     "tenant %s: segment %08x was left open: its records end at %" PRIu64
		     ", where it is sealed now",
		     tenant, ri.open_segment, ri.open_end);
	else if (ri.truncated_bytes)
		klog(LOG_NOTICE, "tenant %s: torn write of %" PRIu64 " bytes cut off the log",
		     tenant, ri.truncated_bytes);
	klog(LOG_DEBUG, "tenant %s: activated in %" PRIu64 " us, %" PRIu64 " records, from %s",
	     tenant, us, ri.records,
	     ri.keydir_image ? "the key-directory image"
	                     : (ri.segments_scanned ? "hint files and log scans" : "hint files"));
}

/* One line per tenant the store refused (a damaged or missing TENANT): the
 * others are served, this one answers UNAVAILABLE until it is repaired. */
static void log_refused(struct kvd *d)
{
	struct kv_tenant_state *list;
	size_t n, i;
	char why[320];

	if (kv_store_list(d->store, &list, &n) != 0)
		return;
	for (i = 0; i < n; i++)
		if (list[i].refused &&
		    kv_store_why_refused(d->store, list[i].name, why, sizeof(why)) == 0)
			klog(LOG_ERR,
			     "tenant %s refused: %s; its requests get UNAVAILABLE until the file "
			     "is repaired and kvd restarted (other tenants are served)",
			     list[i].name, why);
	free(list);
}

/* Descriptors of the process open now. */
static unsigned open_fds(void)
{
	DIR *dir = opendir("/proc/self/fd");
	unsigned n = 0;

	if (dir == NULL)
		return 16;
	while (readdir(dir) != NULL)
		n++;
	closedir(dir);
	return n > 3 ? n - 3 : 0; /* ".", ".." and the directory's own */
}

#define FDS_PER_TENANT 3  /* directory, io_uring ring, event fd (engine/store.c) */
#define FDS_TENANTS_MIN 16 /* active tenants the plan leaves room for, at least */
#define FDS_NNG_RESERVE 64 /* nng connections (unbounded; a guess) */

/*
 * The open file limit, shared out before the store opens: the soft limit
 * is raised to the hard one; when it is still below what the settings
 * need (descriptors open now and for the threads, max_connections per kv+
 * listener, open_files for segment files, FDS_PER_TENANT per active
 * tenant), kvd says so once, and — unless open_files was set — sizes the
 * segment budget and the active tenants to what is left after a quarter
 * for connections, so that tenants keep working (connections beyond the
 * limit wait in the backlog, logged at most once in 10 s).
 */
static void plan_descriptors(struct kvd *d, struct kv_store_options *so)
{
	struct rlimit rl;
	unsigned long long lim, base, conns, seg, want;
	int nkv = 0, nnng = 0;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
		return;
	if (rl.rlim_cur < rl.rlim_max) {
		rlim_t was = rl.rlim_cur;
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
			klog(LOG_INFO, "open file limit raised from %llu to %llu (the hard limit)",
			     (unsigned long long)was, (unsigned long long)rl.rlim_cur);
		else
			getrlimit(RLIMIT_NOFILE, &rl);
		if (rl.rlim_cur == RLIM_INFINITY)
			return;
	}
	for (int i = 0; i < d->cfg.nlisten; i++) {
		if (stream_url(d->cfg.listen[i]))
			nkv++;
		else
			nnng++;
	}
	lim = rl.rlim_cur;
	base = open_fds() + 2ull * d->nworkers + 16;
	conns = (unsigned long long)nkv * d->cfg.max_connections + (nnng ? FDS_NNG_RESERVE : 0);
	seg = d->cfg.open_files ? d->cfg.open_files : lim / 2;
	want = base + conns + seg + FDS_TENANTS_MIN * FDS_PER_TENANT;
	if (lim >= want)
		return;
	klog(LOG_WARNING,
	     "the open file limit (%llu) is below the %llu descriptors the settings need: "
	     "%llu for kvd itself, %llu for connections (max_connections %u x %d kv+ "
	     "listener(s)%s), %llu for segment files (open_files), %u for %u active tenants; "
	     "raise it (LimitNOFILE=, ulimit -n) or lower max_connections and open_files",
	     lim, want, base, conns, d->cfg.max_connections, nkv,
	     nnng ? " + 64 for nng" : "", seg, FDS_TENANTS_MIN * FDS_PER_TENANT, FDS_TENANTS_MIN);
	if (d->cfg.open_files == 0 && so->max_active == 0) {
		unsigned long long left = lim > base ? lim - base : 0, share, rest;
		share = conns < left / 4 ? conns : left / 4;
		rest = left - share;
		seg = rest / 2 > 8 ? rest / 2 : 8;
		so->max_active = (uint32_t)((rest - rest / 2) / FDS_PER_TENANT > 2
		                                    ? (rest - rest / 2) / FDS_PER_TENANT
		                                    : 2);
		kv_set_open_files_budget((size_t)seg);
		klog(LOG_WARNING,
		     "so: segment files at most %llu, active tenants at most %u, about %llu "
		     "descriptors for connections",
		     seg, so->max_active, share);
	}
}

struct store_try {
	struct kv_store_options *so;
	kv_store **ret;
};

static int store_open_once(void *arg)
{
	struct store_try *t = arg;
	return kv_store_open(NULL, t->so, t->ret);
}

/* The store on d->cfg.device: every tenant in its extents, data_dir unused;
 * a lock still held (by a kvd that just ended) is waited for a while. */
static int open_device_store(struct kvd *d, struct kv_store_options *so)
{
	const char *dev = d->cfg.device;
	int rv;

	so->device = dev;
	so->device_cache_bytes = d->cfg.device_cache;
	so->device_node = d->cfg.device_node;
	{
		struct store_try t = {so, &d->store};
		rv = device_lock_wait(dev, store_open_once, &t);
	}
	if (rv == 0) {
		struct kv_store_stats st;
		kv_store_stats(d->store, &st);
		if (st.device_superblocks_damaged > 0)
			klog(LOG_WARNING,
			     "device %s: one of its two superblock copies is damaged; kvd runs on "
			     "the other (kvd --check DEVICE says which; kvd --format would lose the "
			     "data)",
			     dev);
		if (st.device_extents_reclaimed > 0)
			klog(LOG_NOTICE,
			     "device %s: %u extent(s) taken but named by no segment or blob (left "
			     "by a crash during a merge) were given back",
			     dev, st.device_extents_reclaimed);
		log_refused(d);
		return 0;
	}
	if (rv == KV_ELOCKED)
		kvd_say(stderr, LOG_ERR,
		        "device %s is in use: another kvd holds its lock (still after %d s)", dev,
		        DEVICE_LOCK_WAIT_MS / 1000);
	else if (rv == -EBUSY)
		kvd_say(stderr, LOG_ERR,
		        "device %s is in use: another kvd holds its lock (or it is mounted or "
		        "open exclusively)",
		        dev);
	else if (rv == KV_EFORMAT || rv == KV_ECORRUPT)
		kvd_say(stderr, LOG_ERR,
		        "cannot open device %s: no sound superblock copy or catalog slot (%s): "
		        "not a kvd device (kvd --format DEVICE makes one), or damaged (kvd "
		        "--check DEVICE says where)",
		        dev, kv_strerror(rv));
	else
		kvd_say(stderr, LOG_ERR, "cannot open device %s: %s", dev, kv_strerror(rv));
	return rv;
}

static int open_store(struct kvd *d)
{
	struct kv_store_options so;
	int rv;

	kv_store_options_init(&so);
	so.base.segment_size = d->cfg.segment_size;
	so.base.max_value_size = d->cfg.max_value_size;
	so.base.external_loop = true;
	so.base.background = false;
	so.base.merge_ratio_pct = KV_MERGE_RATIO_PCT_DEFAULT;
	so.memory_budget = d->cfg.memory_budget;
	so.idle_timeout_s = d->cfg.idle_timeout_s;
	so.auto_create = d->cfg.auto_create;
	so.busy_wait_ms = 2000; /* an explicit TenantPassivate/Drop outwaits maintenance */
	so.activated = tenant_activated;
	test_hooks_store(&so);
	so.defaults = d->cfg.defaults;
	if (d->cfg.open_files)
		kv_set_open_files_budget(d->cfg.open_files);
	plan_descriptors(d, &so);
	if (d->cfg.device[0] != '\0')
		return open_device_store(d, &so);
	rv = kv_store_open(d->cfg.data_dir, &so, &d->store);
	if (rv == 0)
		log_refused(d);
	if (rv == KV_ELOCKED)
		kvd_say(stderr, LOG_ERR, "%s is in use by another kvd (its LOCK is held)",
		        d->cfg.data_dir);
	else if (rv != 0)
		kvd_say(stderr, LOG_ERR, "cannot open data directory %s: %s", d->cfg.data_dir,
		        kv_strerror(rv));
	return rv;
}

static void wait_drained(struct kvd *d)
{
	uint64_t t0 = now_ms();

	while (atomic_load(&d->in_flight) > 0 && now_ms() - t0 < DRAIN_TIMEOUT_MS)
		poll(NULL, 0, 10);
	if (atomic_load(&d->in_flight) > 0)
		klog(LOG_WARNING, "%" PRIu64 " request(s) still in flight after %d s",
		     atomic_load(&d->in_flight), DRAIN_TIMEOUT_MS / 1000);
}

/*
 * The transports, started in this order from one table and stopped in three
 * phases: stop_accepting before the drain (new connections refused, the
 * ones there stay), close after it (nng: closing a listener also closes the
 * connections it accepted), stop after the workers stopped (what is still
 * queued is flushed, the rest freed). Every phase is safe on a transport
 * that did not start, or started in part.
 */
struct transport {
	const char *name;
	int (*start)(struct kvd *d, char *err, size_t errlen);
	void (*stop_accepting)(struct kvd *d);
	void (*close)(struct kvd *d);
	void (*stop)(struct kvd *d);
};

static const struct transport transports[] = {
        {"stream", stream_start, stream_stop_accepting, NULL, stream_stop},
        {"nng", listeners_start, NULL, listeners_close, conns_stop},
};
#define NTRANSPORTS (sizeof(transports) / sizeof(transports[0]))

/* The signals this thread reads from a signalfd; every thread started after
 * this inherits the mask. -1 and errno on failure. */
static int signals_open(void)
{
	sigset_t mask;

	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	return signalfd(-1, &mask, SFD_CLOEXEC);
}

/* Serves until SIGTERM or SIGINT: SIGHUP reloads, the watchdog is fed and
 * the nng ipc:// listeners are watched between signals. */
static void serve(struct kvd *d, int sfd)
{
	for (;;) {
		struct signalfd_siginfo si;
		struct pollfd p = {sfd, POLLIN, 0};
		int timeout = 1000;
		ssize_t n;

		if (d->watchdog_usec && d->watchdog_usec / 1000 / 2 < (uint64_t)timeout)
			timeout = (int)(d->watchdog_usec / 1000 / 2);
		if (poll(&p, 1, timeout) == 0) {
			/* the watchdog is fed while every worker still turns its loop */
			uint64_t oldest = workers_oldest_beat(d);
			if (d->watchdog_usec && now_ms() - oldest < d->watchdog_usec / 1000)
				sd_notify(0, "WATCHDOG=1");
			else if (d->watchdog_usec)
				klog(LOG_ERR, "a worker has been stuck for %" PRIu64 " ms",
				     now_ms() - oldest);
			listeners_watch(d);
			activators_tick(d);
			continue;
		}
		n = read(sfd, &si, sizeof(si));
		if (n != sizeof(si)) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			klog(LOG_ERR, "signalfd: %m");
			return;
		}
		if (si.ssi_signo == SIGHUP) {
			if (d->notify)
				sd_notify(0, "RELOADING=1");
			reload(d);
			if (d->notify)
				sd_notify(0, "READY=1");
			continue;
		}
		klog(LOG_INFO, "%s: stopping", si.ssi_signo == SIGTERM ? "SIGTERM" : "SIGINT");
		return;
	}
}

int main(int argc, char **argv)
{
	struct kvd d;
	char err[512];
	size_t i;
	int sfd, rv, e;
	bool shared;

	memset(&d, 0, sizeof(d));
	/* -1: --check-config found the settings sound */
	if ((rv = parse_args(&d, argc, argv)) != 0) {
		config_release(&d.cfg);
		auth_fini(&d.auth);
		return rv < 0 ? 0 : rv;
	}
	log_set_level(d.cfg.log_level);
	d.start_ms = now_ms();
	d.notify = getenv("NOTIFY_SOCKET") != NULL;
	if (sd_watchdog_enabled(0, &d.watchdog_usec) <= 0)
		d.watchdog_usec = 0;
	test_hooks_daemon(&d);
	d.nworkers = d.cfg.workers ? d.cfg.workers : (uint32_t)sysconf(_SC_NPROCESSORS_ONLN);
	if (d.nworkers == 0)
		d.nworkers = 1;
	d.lim.max_value_size = d.cfg.max_value_size;
	d.lim.defaults = &d.cfg.defaults;
	d.lim.version = KVD_VERSION;
	d.lim.figures = metrics_figures; /* Stats (daemon) */
	d.lim.figures_arg = &d;

	rv = 1;
	if ((sfd = signals_open()) < 0) {
		kvd_say(stderr, LOG_ERR, "signalfd: %s", strerror(errno));
		goto out_config;
	}
	if ((e = kv_io_uring_probe()) != 0)
		klog(LOG_WARNING, "io_uring is not available (%s): tenants use pread/pwrite",
		     strerror(-e));
	if (open_store(&d) != 0)
		goto out_signals;
	if (d.restore_dir != NULL) {
		rv = restore_run(&d);
		kv_store_close(d.store);
		goto out_signals;
	}
	if ((e = activators_start(&d)) != 0 || (e = workers_start(&d)) != 0 ||
	    (e = maint_start(&d)) != 0) {
		kvd_say(stderr, LOG_ERR, "cannot start threads: %s", strerror(-e));
		goto out_threads;
	}
	/* before the transports: their requests ask it who owns a tenant */
	if (cluster_start(&d, err, sizeof(err)) != 0) {
		kvd_say(stderr, LOG_ERR, "%s", err);
		goto out_threads;
	}
	for (i = 0; i < NTRANSPORTS; i++) {
		if (transports[i].start(&d, err, sizeof(err)) != 0) {
			kvd_say(stderr, LOG_ERR, "%s", err);
			goto out_transports;
		}
	}
	/* after the transports (it reads their connections), stopped before them */
	if (metrics_start(&d, err, sizeof(err)) != 0) {
		kvd_say(stderr, LOG_ERR, "%s", err);
		goto out_transports;
	}
	klog(LOG_INFO, "kvd %s ready: %s %s, %u workers, %u contexts, %s", KVD_VERSION,
	     d.cfg.device[0] ? "device" : "data", d.cfg.device[0] ? d.cfg.device : d.cfg.data_dir,
	     d.nworkers, d.nconns,
	     atomic_load(&d.auth.cur) ? "tokens checked"
	                              : "no tokens (access by socket permissions)");
	if (d.notify)
		sd_notifyf(0, "READY=1\nSTATUS=serving, %s %s\nMAINPID=%ld",
		           d.cfg.device[0] ? "device" : "data",
		           d.cfg.device[0] ? d.cfg.device : d.cfg.data_dir, (long)getpid());

	serve(&d, sfd);

	if (d.notify)
		sd_notify(0, "STOPPING=1\nSTATUS=draining");
	metrics_stop(&d);
	/* Requests that arrive from here on are refused with UNAVAILABLE; the
	 * connections there stay until the drain is over. */
	atomic_store(&d.stopping, true);
	for (i = 0; i < NTRANSPORTS; i++)
		if (transports[i].stop_accepting != NULL)
			transports[i].stop_accepting(&d);
	wait_drained(&d);
	/* nng 1.5 has no linger: a finished send may still sit in a pipe's
	 * queue, so give the transports a moment to put it on the wire */
	poll(NULL, 0, 200);
	rv = 0;
out_transports:
	metrics_stop(&d);
	for (i = 0; i < NTRANSPORTS; i++)
		if (transports[i].stop_accepting != NULL)
			transports[i].stop_accepting(&d);
	for (i = 0; i < NTRANSPORTS; i++)
		if (transports[i].close != NULL)
			transports[i].close(&d);
out_threads:
	maint_stop(&d);
	activators_stop(&d);
	workers_stop(&d);
	activators_free(&d);
	for (i = 0; i < NTRANSPORTS; i++)
		transports[i].stop(&d);
	cluster_store_closing(&d);
	shared = kv_store_shared(d.store);
	if ((e = kv_store_close(d.store)) == -ESTALE && shared) {
		/* a tenant this node gave up (fenced, released) is not its to sync:
		 * what it acknowledged is on the device for its new owner */
		klog(LOG_NOTICE, "closing the store: tenants this node gave up on the shared "
		                 "device were left to their new owners");
	} else if (e != 0) {
		klog(LOG_ERR, "closing the store: %s", kv_strerror(e));
		rv = 1;
	}
	/* no request runs any more and the store is closed (its tenants
	 * synced): the lease goes, and every tenant with it */
	cluster_stop(&d);
	if (rv == 0)
		klog(LOG_INFO, "stopped: %" PRIu64 " requests served", atomic_load(&d.requests));
out_signals:
	close(sfd);
out_config:
	auth_fini(&d.auth);
	config_release(&d.cfg);
	return rv;
}
