/*
 * kvctl.c — the kvd command line: global options, the command table, option
 * parsing shared by the commands, and how a failure becomes one line on
 * stderr and an exit code. The commands are in commands.c (export and
 * import in export.c), the output helpers in output.c; docs/kvctl.1 is the manual.
 */
#include "kvctl.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef KVCTL_VERSION
#define KVCTL_VERSION "unknown"
#endif

/* ---- the command table and the help printed from it ------------------------- */

static int cmd_help(struct kvctl *k, int argc, char **argv);

/* Every command, in the order of `kvctl --help`; a group's row comes before
 * its subcommands'. */
static const struct kvctl_command commands[] = {
        {"put", "KEY [VALUE|-] [--ttl SECONDS] [--if-version V]",
         "writes VALUE (stdin when absent or '-') under KEY; prints the new version",
         "  --ttl SECONDS   the key expires after SECONDS; 0: never (default: the\n"
         "                  tenant's TTL)\n"
         "  --if-version V  writes only if the key's newest version is V; 0: only if\n"
         "                  the key does not exist (else exit 3)\n",
         cmd_put},
        {"get", "KEY [--version V | --as-of V]",
         "prints the value as stored (on a terminal, followed by a newline)",
         "  --version V  exactly version V of the key\n"
         "  --as-of V    the newest version of the key not newer than V\n",
         cmd_get},
        {"del", "KEY [--if-version V]", "deletes KEY; prints the tombstone's version",
         "  --if-version V  deletes only if the key's newest version is V (else exit 3)\n",
         cmd_del},
        {"scan", "[--prefix P] [--start K] [--end K] [--limit N] [--keys-only] [--reverse]",
         "KEY<TAB>VALUE lines (or KEY lines) in key order, one snapshot",
         "  --prefix P   only keys that start with P\n"
         "  --start K    from key K (inclusive)\n"
         "  --end K      up to key K (exclusive)\n"
         "  --limit N    at most N keys (0: all)\n"
         "  --keys-only  KEY lines, no values\n"
         "  --reverse    in reverse key order\n",
         cmd_scan},
        {"versions", "KEY [--limit M] [--values]",
         "the key's versions, newest first: VERSION<TAB>TIME[<TAB>deleted|blob]",
         "  --limit M  at most M versions (the daemon's default is 10)\n"
         "  --values   the values too: VERSION<TAB>TIME<TAB>MARK<TAB>VALUE, MARK\n"
         "             being 'deleted' or empty\n",
         cmd_versions},
        {"export", "[--history] [--as-of V] [--file F]",
         "writes the tenant, at one version, as JSON lines (docs/EXPORT.md)",
         "  --history  every version of each key, deletes too, oldest first (default:\n"
         "             the newest value of each key)\n"
         "  --as-of V  the tenant as it was at version V (default: now)\n"
         "  --file F   into F (default: stdout); a failed export removes F\n",
         cmd_export},
        {"import", "[--file F] [--batch N]",
         "loads an export into the tenant; a second run writes nothing twice",
         "  --file F   from F (default: stdin); refused unless whole and unchanged\n"
         "  --batch N  records per write (default 1000, at most 10000)\n",
         cmd_import},
        {"blob", "ACTION [ARGS]",
         "values too large for one message, streamed in pieces and read by ranges", NULL,
         NULL},
        {"blob put", "KEY FILE|- [--ttl SECONDS] [--if-version V] [--chunk-size N]",
         "streams FILE (or stdin) into a blob under KEY; prints the new version",
         "  --ttl SECONDS    the key expires after SECONDS; 0: never (default: the\n"
         "                   tenant's TTL)\n"
         "  --if-version V   commits only if the key's newest version is V; 0: only\n"
         "                   if the key does not exist (else exit 3)\n"
         "  --chunk-size N   the blob's chunk size, 4K..4M (default: the daemon's, 64K)\n",
         cmd_blob_put},
        {"blob get",
         "KEY [--version V] [--offset O] [--length L] [-o FILE | --file FILE]",
         "writes the blob, or L bytes of it from O, to stdout or FILE",
         "  --version V      exactly version V (default: the newest)\n"
         "  --offset O       from byte O (default 0)\n"
         "  --length L       at most L bytes (default: to the end)\n"
         "  -o FILE          into FILE (-o text and -o json stay the output mode;\n"
         "  --file FILE      --file for a file named so); a failed get removes FILE\n",
         cmd_blob_get},
        {"blob info", "KEY [--version V]",
         "the blob's size, chunks, XXH64, stored bytes, version and times",
         "  --version V  exactly version V (default: the newest)\n", cmd_blob_info},
        {"tenant", "ACTION [ARGS]", "manages the daemon's tenants", NULL, NULL},
        {"tenant create",
         "NAME [--sync always|interval|none] [--history N] [--ttl SECONDS] [--max-keys N]\n"
         "     [--compression none|lz4|zstd[:LEVEL]] [--max-bytes N] [--evict refuse|oldest]",
         "creates a tenant",
         "  --sync always|interval|none  when writes reach the disk (default always:\n"
         "                               before the reply)\n"
         "  --history N                  versions kept per key (default 1)\n"
         "  --ttl SECONDS                the keys' default expiry (default none)\n"
         "  --max-keys N                 a limit on the tenant's keys (default none)\n"
         "  --compression CODEC          how values are stored: none, lz4, zstd or\n"
         "                               zstd:1..22 (default: the daemon's)\n"
         "  --max-bytes N                a limit on the bytes of the tenant's live keys\n"
         "                               (their newest records; default: the daemon's)\n"
         "  --evict refuse|oldest        a write past --max-keys or --max-bytes fails\n"
         "                               (refuse) or first evicts the least recently\n"
         "                               written keys (oldest; default: the daemon's)\n",
         cmd_tenant_create},
        {"tenant list", "",
         "NAME<TAB>STATE lines (active, passive or refused), by name; in cluster\n"
         "mode a third column, the owner node ('-': none)",
         NULL, cmd_tenant_list},
        {"tenant info", "NAME", "the tenant's state, sizes and settings", NULL, cmd_tenant_info},
        {"tenant drop", "NAME", "removes the tenant and its files", NULL, cmd_tenant_drop},
        {"tenant passivate", "NAME", "writes the tenant's hint files and frees its index", NULL,
         cmd_tenant_passivate},
        {"tenant activate", "NAME", "loads the tenant's index now; says how long it took", NULL,
         cmd_tenant_activate},
        {"tenant release", "NAME",
         "cluster mode: the owner node passivates the tenant and gives it up", NULL,
         cmd_tenant_release},
        {"tenant adopt", "NAME",
         "cluster mode: this node takes the tenant (refused while another owns it)", NULL,
         cmd_tenant_adopt},
        {"tenant backup", "NAME DIR",
         "kvd writes a backup of the tenant, consistent at one version, into DIR\n"
         "(an absolute path on kvd's host: missing or empty, outside its data\n"
         "directory) while writes go on; restore it with kvd --restore\n"
         "(docs/BACKUP.md). Needs a daemon admin token where kvd checks tokens",
         NULL, cmd_tenant_backup},
        {"stats", "[--daemon]", "the tenant's statistics, or the daemon's",
         "  --daemon  the daemon's: version, uptime, tenants, requests, requests in\n"
         "            flight, index memory, workers; with metrics on, requests by\n"
         "            method and status, latency percentiles, bytes; connections\n"
         "            per listener\n",
         cmd_stats},
        {"compact", "[--revision V]", "merges the tenant's log",
         "  --revision V  first drops the history older than version V\n", cmd_compact},
        {"health", "", "the daemon's status, version and uptime; exits 0 when it is serving", NULL,
         cmd_health},
        {"help", "[COMMAND [ACTION]]", "this help, or that of one command", NULL, cmd_help},
};

#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))
#define HELP_WIDTH 79 /* columns of the help text */

/* The row named word, or within group (a group's row) "group word". */
static const struct kvctl_command *find_command(const struct kvctl_command *group, const char *word)
{
	size_t i, n = group != NULL ? strlen(group->name) : 0;

	for (i = 0; i < N_COMMANDS; i++) {
		const char *name = commands[i].name;

		if (group == NULL && strchr(name, ' ') == NULL && strcmp(name, word) == 0)
			return &commands[i];
		if (group != NULL && strncmp(name, group->name, n) == 0 && name[n] == ' ' &&
		    strcmp(name + n + 1, word) == 0)
			return &commands[i];
	}
	return NULL;
}

/* A row within group: "group word". */
static bool in_group(const struct kvctl_command *cmd, const struct kvctl_command *group)
{
	size_t n = strlen(group->name);

	return strncmp(cmd->name, group->name, n) == 0 && cmd->name[n] == ' ';
}

/* lead, then "kvctl NAME ARGS", wrapped at HELP_WIDTH between bracketed
 * words, the lines after the first indented as far as NAME. */
static void print_synopsis(const char *lead, int indent, const struct kvctl_command *cmd)
{
	const char *p = cmd->args;
	int col = printf("%*s%skvctl %s", indent, "", lead, cmd->name);

	while (*p != '\0') {
		const char *e = p;
		int depth = 0;

		/* one word: up to a space outside brackets */
		for (; *e != '\0' && (*e != ' ' || depth > 0); e++)
			depth += *e == '[' ? 1 : *e == ']' ? -1 : 0;
		if (col + 1 + (int)(e - p) > HELP_WIDTH)
			col = printf("\n%*s", indent + (int)strlen(lead) + 6, "") - 1;
		else
			col += printf(" ");
		col += printf("%.*s", (int)(e - p), p);
		p = *e == ' ' ? e + 1 : e;
	}
	putchar('\n');
}

/* "create|list|info|..." for a group's usage line. */
static void group_actions(const struct kvctl_command *group, char *buf, size_t size)
{
	size_t i, n = 0;

	buf[0] = '\0';
	for (i = 0; i < N_COMMANDS && n < size; i++) {
		if (in_group(&commands[i], group))
			n += (size_t)snprintf(buf + n, size - n, "%s%s", n > 0 ? "|" : "",
			                      commands[i].name + strlen(group->name) + 1);
	}
}

static const char global_help[] =
        "Global options, before or after a command's arguments ('--' ends them):\n"
        "  -e, --endpoint URL      the daemon: kv+ipc:///path, kv+tcp://host:port,\n"
        "                          kv+tls://host:port, ipc:///path, tcp://host:port,\n"
        "                          tls+tcp://host:port\n"
        "                          (default $KVD_ENDPOINT, else " KVC_DEFAULT_ENDPOINT ")\n"
        "  -t, --tenant NAME       the tenant (default $KVD_TENANT, else 'default')\n"
        "  --token-file FILE       the daemon's token: FILE's first line (refused\n"
        "                          when others may read FILE); else $KVD_TOKEN\n"
        "  --token T               the token (other users see it in ps)\n"
        "  --tls-ca FILE           kv+tls://, tls+tcp://: the CA the server's\n"
        "                          certificate is verified with (default\n"
        "                          $KVD_TLS_CA, else the system's CAs)\n"
        "  --tls-cert FILE         kv+tls://: a client certificate (PEM) for a server\n"
        "                          that asks for one (default $KVD_TLS_CERT)\n"
        "  --tls-key FILE          its private key (default $KVD_TLS_KEY)\n"
        "  -o, --output text|json  text (default), or one JSON document\n"
        "  --timeout MS            a request's deadline in ms (default 10000)\n"
        "  -h, --help              this help; after a command, the command's\n"
        "  --version               kvctl's version and its protocol's\n"
        "\n"
        "-o json prints one JSON document. Keys and values appear as \"key\" (when\n"
        "UTF-8 without NUL) and always \"key_b64\" (base64); likewise \"value\",\n"
        "\"value_b64\". Times are \"timestamp_ms\" and ISO 8601 \"timestamp\".\n"
        "  put, del   {key, key_b64, version}\n"
        "  get        {key, key_b64, value, value_b64, version, timestamp_ms,\n"
        "              timestamp, expiry_ms}; a blob: blob, blob_size, no value\n"
        "  blob put   {key, key_b64, version, size}\n"
        "  blob get   {key, key_b64, version, offset, bytes, size, file} (with a file)\n"
        "  blob info  {key, key_b64, size, chunk_size, chunks, xxh64, stored_bytes,\n"
        "              version, timestamp_ms, timestamp, expiry_ms}\n"
        "  scan       {items: [{key, key_b64, value, value_b64, version}],\n"
        "              revision, count}; a blob: blob, blob_size, no value\n"
        "  versions   {key, key_b64, versions: [{version, timestamp_ms, timestamp,\n"
        "              deleted, value, value_b64}], truncated}; a blob: blob,\n"
        "              blob_size, no value\n"
        "  tenant create|drop {name}; passivate|activate {name, state[,\n"
        "              activation_us]}; list {tenants: [{name, state[, owner,\n"
        "              epoch]}]}; release {name, state}; adopt {name, node,\n"
        "              address, epoch}; backup {name, dir, version, segments,\n"
        "              segments_linked, bytes_linked, bytes_copied, files,\n"
        "              elapsed_us};\n"
        "              info {name, state, idle_s, keys, ...}\n"
        "  stats      tenant info plus dead_bytes, segments, tombstones, merges,\n"
        "              compact_revision, io_uring, batches, batched_writes, syncs,\n"
        "              last_activation_us, read_only; --daemon: {version, uptime_s,\n"
        "              tenants, ..., counting, received_bytes, sent_bytes, methods:\n"
        "              [{method, requests, errors, statuses, latency_count,\n"
        "              latency_sum_ns, p50_ns, p90_ns, p99_ns}], connections:\n"
        "              [{transport, listen, open}]}\n"
        "  compact    {compact_revision, disk_bytes_before, disk_bytes_after}\n"
        "  health     {status, version, uptime_s}\n"
        "  export     {file, as_of, history, keys, records, deletes, expired,\n"
        "              value_bytes, bytes, elapsed_ms} (with --file)\n"
        "  import     {tenant, keys, records, deletes, present, expired_keys,\n"
        "              expired, value_bytes, bytes, elapsed_ms}\n"
        "  failure    {error: {code, name, message, exit}}\n"
        "\n"
        "Exit status: 0 success, 1 not found, 2 usage error, 3 version mismatch,\n"
        "4 daemon unreachable or unavailable, 5 any other error.\n"
        "See kvctl(1).\n";

/* kvctl --help: every command that runs (a group's through its rows). */
static void print_help(void)
{
	size_t i;

	puts("usage: kvctl [-e|--endpoint URL] [-t|--tenant NAME]\n"
	     "             [--token-file FILE | --token T] [-o|--output text|json]\n"
	     "             [--timeout MS] COMMAND [ARGS]\n"
	     "       kvctl COMMAND --help | kvctl help COMMAND\n"
	     "\n"
	     "Commands:");
	for (i = 0; i < N_COMMANDS; i++) {
		if (commands[i].run == NULL)
			continue;
		print_synopsis("", 2, &commands[i]);
		printf("        %s\n", commands[i].summary);
	}
	putchar('\n');
	fputs(global_help, stdout);
}

void kvctl_command_help(const struct kvctl_command *cmd)
{
	size_t i;

	if (cmd == NULL) {
		print_help();
		return;
	}
	print_synopsis("usage: ", 0, cmd);
	printf("\n%c%s.\n", toupper((unsigned char)cmd->summary[0]), cmd->summary + 1);
	if (cmd->run == NULL) {
		printf("\nActions (kvctl %s ACTION --help for one):\n", cmd->name);
		for (i = 0; i < N_COMMANDS; i++) {
			if (!in_group(&commands[i], cmd))
				continue;
			print_synopsis("", 2, &commands[i]);
			printf("        %s\n", commands[i].summary);
		}
	}
	if (cmd->options != NULL)
		printf("\nOptions:\n%s", cmd->options);
	puts("\nGlobal options: -e URL, -t NAME, --token-file FILE, --token T,\n"
	     "-o text|json, --timeout MS (kvctl --help). See kvctl(1).");
}

/* ---- errors (reported by output.c) ---------------------------------------------- */

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

/* A token file that cannot be used: exit 2, like any argument that cannot. */
static int token_file_error(struct kvctl *k, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	int n;

	n = snprintf(msg, sizeof(msg), "--token-file %s: ", k->token_file);
	va_start(ap, fmt);
	vsnprintf(msg + n, sizeof(msg) - (size_t)n, fmt, ap);
	va_end(ap);
	return kvctl_report(k, KVC_INVALID_ARGUMENT, KVCTL_EXIT_USAGE, msg);
}

/*
 * The token is the first line of the file, without its line end ("\n" or
 * "\r\n"). As ssh does with a private key, a file that others (neither its
 * owner nor its group) may read or write is refused: the token would be
 * known to every user of the machine. Group access is allowed, so that a
 * group of operators can share one file (as the group kvd shares kvd.conf).
 */
static int read_token_file(struct kvctl *k)
{
	char buf[KVCTL_TOKEN_MAX + 2]; /* the token, a '\r' and one byte more */
	size_t n = 0, len;
	struct stat st;
	ssize_t r;
	char *nl;
	int fd, rv = 0;

	if ((fd = open(k->token_file, O_RDONLY | O_CLOEXEC | O_NOCTTY)) < 0)
		return token_file_error(k, "%s", strerror(errno));
	if (fstat(fd, &st) != 0) {
		rv = token_file_error(k, "%s", strerror(errno));
		goto out;
	}
	if (S_ISDIR(st.st_mode)) {
		rv = token_file_error(k, "is a directory");
		goto out;
	}
	if ((st.st_mode & S_IRWXO) != 0) {
		rv = token_file_error(k,
		                      "others may read or write it (mode %04o); "
		                      "chmod o= the file",
		                      (unsigned)(st.st_mode & 07777));
		goto out;
	}
	while (n < sizeof(buf) && (nl = memchr(buf, '\n', n)) == NULL) {
		if ((r = read(fd, buf + n, sizeof(buf) - n)) < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rv = token_file_error(k, "%s", strerror(errno));
			goto out;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	nl = memchr(buf, '\n', n);
	len = nl != NULL ? (size_t)(nl - buf) : n;
	if (len > 0 && buf[len - 1] == '\r')
		len--;
	if (len > KVCTL_TOKEN_MAX)
		rv = token_file_error(k, "the first line is longer than %d bytes", KVCTL_TOKEN_MAX);
	else if (len == 0)
		rv = token_file_error(k, "the first line is empty");
	else if (memchr(buf, '\0', len) != NULL)
		rv = token_file_error(k, "the first line holds a NUL byte");
	if (rv == 0) {
		memcpy(k->token, buf, len);
		k->token[len] = '\0';
		k->opts.token = k->token;
	}
out:
	close(fd);
	return rv;
}

int kvctl_connect(struct kvctl *k)
{
	int rv;

	if (k->token_file != NULL && (rv = read_token_file(k)) != 0)
		return rv;
	if ((k->tls_cert == NULL) != (k->tls_key == NULL))
		return kvctl_usage(k, "--tls-cert and --tls-key go together (or KVD_TLS_CERT and "
		                      "KVD_TLS_KEY)");
	rv = kvc_open_tls(&k->opts, k->tls_cert, k->tls_key, &k->c);

	if (rv == -KVC_INVALID_ARGUMENT && strncmp(k->opts.endpoint, "kv+tls://", 9) == 0)
		return kvctl_usage(k,
		                   "cannot use endpoint '%s' with these TLS files (--tls-ca, "
		                   "--tls-cert, --tls-key: readable PEM, a key that matches the "
		                   "certificate)",
		                   k->opts.endpoint);
	if (rv == -KVC_INVALID_ARGUMENT)
		return kvctl_usage(k,
		                   "cannot use endpoint '%s' (a URL such as kv+ipc:///path, "
		                   "kv+tcp://host:port, kv+tls://host:port, "
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
        {"token-file", required_argument, NULL, KVCTL_OPT_TOKEN_FILE},
        {"output", required_argument, NULL, 'o'},
        {"timeout", required_argument, NULL, KVCTL_OPT_TIMEOUT},
        {"tls-ca", required_argument, NULL, KVCTL_OPT_TLS_CA},
        {"tls-cert", required_argument, NULL, KVCTL_OPT_TLS_CERT},
        {"tls-key", required_argument, NULL, KVCTL_OPT_TLS_KEY},
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
	case KVCTL_OPT_TOKEN: /* the last of --token and --token-file wins */
		k->opts.token = arg;
		k->token_file = NULL;
		return 0;
	case KVCTL_OPT_TOKEN_FILE:
		if (arg[0] == '\0')
			return kvctl_usage(k, "--token-file wants a file");
		k->token_file = arg;
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
	case KVCTL_OPT_TLS_CA:
		k->opts.tls_ca_file = arg[0] != '\0' ? arg : NULL;
		return 0;
	case KVCTL_OPT_TLS_CERT:
		k->tls_cert = arg[0] != '\0' ? arg : NULL;
		return 0;
	case KVCTL_OPT_TLS_KEY:
		k->tls_key = arg[0] != '\0' ? arg : NULL;
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
			kvctl_command_help(k->cmd);
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
		case 'o':
			if (oi->o_file && strcmp(optarg, "json") != 0 && strcmp(optarg, "text") != 0)
				return KVCTL_OPT_O_FILE;
			if (common_option(k, opt, optarg) != 0)
				return KVCTL_OPTS_USAGE;
			continue;
		case 'e':
		case 't':
		case KVCTL_OPT_TOKEN:
		case KVCTL_OPT_TOKEN_FILE:
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

/* kvctl help [COMMAND [ACTION]] */
static int cmd_help(struct kvctl *k, int argc, char **argv)
{
	const struct kvctl_command *cmd = NULL;
	struct kvctl_opts oi;
	int rv;

	kvctl_opts_begin(k, &oi, "help", NULL);
	if (kvctl_opts_next(k, &oi, argc, argv) != -1)
		return KVCTL_EXIT_USAGE;
	if ((rv = argc - optind > 2 ? kvctl_usage(k, "usage: kvctl help [COMMAND [ACTION]]") : 0) !=
	    0)
		return rv;
	if (argc - optind >= 1 && (cmd = find_command(NULL, argv[optind])) == NULL)
		return kvctl_usage(k, "unknown command '%s'", argv[optind]);
	if (argc - optind == 2) {
		const struct kvctl_command *sub =
		        cmd->run == NULL ? find_command(cmd, argv[optind + 1]) : NULL;

		if (sub == NULL)
			return kvctl_usage(k, "no '%s %s' command", cmd->name, argv[optind + 1]);
		cmd = sub;
	}
	kvctl_command_help(cmd);
	return kvctl_finish(k);
}

int main(int argc, char **argv)
{
	static const struct option global_opts[] = {
	        {"version", no_argument, NULL, 'V'},
	        {"endpoint", required_argument, NULL, 'e'},
	        {"tenant", required_argument, NULL, 't'},
	        {"token", required_argument, NULL, KVCTL_OPT_TOKEN},
	        {"token-file", required_argument, NULL, KVCTL_OPT_TOKEN_FILE},
	        {"token-file", required_argument, NULL, KVCTL_OPT_TOKEN_FILE},
	        {"output", required_argument, NULL, 'o'},
	        {"timeout", required_argument, NULL, KVCTL_OPT_TIMEOUT},
	        {"tls-ca", required_argument, NULL, KVCTL_OPT_TLS_CA},
	        {"tls-cert", required_argument, NULL, KVCTL_OPT_TLS_CERT},
	        {"tls-key", required_argument, NULL, KVCTL_OPT_TLS_KEY},
	        {"help", no_argument, NULL, 'h'},
	        {NULL, 0, NULL, 0},
	};
	const struct kvctl_command *cmd;
	struct kvctl k;
	const char *env;
	char actions[128];
	int opt, rv;

	memset(&k, 0, sizeof(k));
	kvc_options_init(&k.opts);
	if ((env = getenv("KVD_ENDPOINT")) != NULL && env[0] != '\0')
		k.opts.endpoint = env;
	if ((env = getenv("KVD_TENANT")) != NULL && env[0] != '\0')
		k.opts.tenant = env;
	/* Unlike --token, not shown by ps to other users. */
	if ((env = getenv("KVD_TOKEN")) != NULL && env[0] != '\0')
		k.opts.token = env;
	if ((env = getenv("KVD_TLS_CA")) != NULL && env[0] != '\0')
		k.opts.tls_ca_file = env;
	if ((env = getenv("KVD_TLS_CERT")) != NULL && env[0] != '\0')
		k.tls_cert = env;
	if ((env = getenv("KVD_TLS_KEY")) != NULL && env[0] != '\0')
		k.tls_key = env;

	/* '+': the first word that is not an option is the command. */
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "+:e:t:o:h", global_opts, NULL)) != -1) {
		switch (opt) {
		case 'h':
			print_help();
			return kvctl_finish(&k);
		case 'V':
			printf("kvctl %s (protocol %d)\n", KVCTL_VERSION, KVC_PROTOCOL_VERSION);
			return kvctl_finish(&k);
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
	if ((cmd = find_command(NULL, argv[optind])) == NULL)
		return kvctl_usage(&k, "unknown command '%s'", argv[optind]);
	if (cmd->run == NULL) {
		/* A group: the next word is the action, or --help. */
		k.cmd = cmd;
		snprintf(k.what, sizeof(k.what), "%s", cmd->name);
		group_actions(cmd, actions, sizeof(actions));
		if (optind + 1 >= argc)
			return kvctl_usage(&k, "usage: kvctl %s %s ...", cmd->name, actions);
		if (strcmp(argv[optind + 1], "--help") == 0 ||
		    strcmp(argv[optind + 1], "-h") == 0) {
			kvctl_command_help(cmd);
			return kvctl_finish(&k);
		}
		if ((cmd = find_command(cmd, argv[++optind])) == NULL)
			return kvctl_usage(&k, "unknown %s action '%s' (%s)", k.cmd->name,
			                   argv[optind], actions);
	}
	k.cmd = cmd;
	snprintf(k.what, sizeof(k.what), "%s", cmd->name);
	rv = cmd->run(&k, argc - optind, argv + optind);
	kvc_close(k.c);
	return rv;
}
