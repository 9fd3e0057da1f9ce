/* blob.c — kvctl blob put, get and info: values too large for one message
 * (rpc/PROTOCOL.md, "Blobs"), streamed through libkvclient's blob writer
 * and read back by ranges. A progress line goes to stderr when stderr is a
 * terminal and the transfer is larger than PROGRESS_MIN. */
#include "kvctl.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PIECE        ((size_t)1 << 20) /* bytes read from the input or asked of kvd at once */
#define PROGRESS_MIN ((uint64_t)8 << 20)
#define PROGRESS_MS  200 /* the line is redrawn this often at most */

enum {
	OPT_TTL = KVCTL_OPT_OWN,
	OPT_IF_VERSION,
	OPT_CHUNK_SIZE,
	OPT_VERSION,
	OPT_OFFSET,
	OPT_LENGTH,
	OPT_FILE,
};

/* ---- progress on stderr ------------------------------------------------------ */

struct progress {
	bool on;
	uint64_t total; /* 0: unknown */
	uint64_t last_ms;
};

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* total 0 (unknown, stdin): shown once PROGRESS_MIN bytes went by. */
static void progress_begin(struct progress *p, uint64_t total)
{
	p->on = isatty(STDERR_FILENO) && (total == 0 || total > PROGRESS_MIN);
	p->total = total;
	p->last_ms = 0;
}

static void progress_show(struct progress *p, uint64_t done, bool last)
{
	uint64_t now = mono_ms();

	if (!p->on || (p->total == 0 && done <= PROGRESS_MIN && !last) ||
	    (!last && now - p->last_ms < PROGRESS_MS))
		return;
	p->last_ms = now;
	if (p->total != 0)
		fprintf(stderr, "\r%10.1f MiB of %.1f MiB %3u%%", (double)done / 1048576.0,
		        (double)p->total / 1048576.0, (unsigned)(done * 100 / p->total));
	else
		fprintf(stderr, "\r%10.1f MiB", (double)done / 1048576.0);
	if (last)
		fputc('\n', stderr);
}

/* ---- put -------------------------------------------------------------------------- */

int cmd_blob_put(struct kvctl *k, int argc, char **argv)
{
	static const struct option own[] = {
	        {"ttl", required_argument, NULL, OPT_TTL},
	        {"if-version", required_argument, NULL, OPT_IF_VERSION},
	        {"chunk-size", required_argument, NULL, OPT_CHUNK_SIZE},
	        {NULL, 0, NULL, 0},
	};
	struct kvctl_opts oi;
	struct kvc_status st;
	struct kvc_call call = {.status = &st};
	struct kvc_blob_opts bo = KVC_BLOB_OPTS_INIT;
	struct progress pr;
	struct stat sb;
	kvc_blob_writer *w = NULL;
	const char *key, *path;
	uint64_t v, version = 0, done = 0;
	char *buf = NULL;
	int fd = STDIN_FILENO, opt, rv = 0;

	kvctl_opts_begin(k, &oi, "blob put", own);
	while (rv == 0 && (opt = kvctl_opts_next(k, &oi, argc, argv)) != -1) {
		if (opt == OPT_TTL) {
			if ((rv = kvctl_parse_u64(k, "--ttl", optarg, UINT64_MAX / 1000 - 1, &v)) ==
			    0)
				bo.ttl_ms = v == 0 ? KVC_TTL_NONE : v * 1000;
		} else if (opt == OPT_IF_VERSION) {
			rv = kvctl_parse_u64(k, "--if-version", optarg, KVC_ANY_VERSION - 1,
			                     &bo.if_version);
		} else if (opt == OPT_CHUNK_SIZE) {
			if ((rv = kvctl_parse_u64(k, "--chunk-size", optarg, 4u << 20, &v)) == 0 &&
			    v < 4096)
				rv = kvctl_usage(k, "--chunk-size is 4096..4194304 bytes");
			bo.chunk_size = (uint32_t)v;
		} else {
			return KVCTL_EXIT_USAGE;
		}
	}
	if (rv != 0)
		return rv;
	if (argc - optind != 2)
		return kvctl_usage(k, "usage: kvctl blob put KEY FILE|-");
	key = argv[optind];
	path = argv[optind + 1];
	kvctl_what(k, "blob put", key, strlen(key));
	if ((rv = kvctl_check_key(k, key)) != 0)
		return rv;
	if (strcmp(path, "-") != 0 && (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return kvctl_error(k, "cannot open %s: %s", path, strerror(errno));
	progress_begin(&pr, fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) ? (uint64_t)sb.st_size : 0);
	if ((buf = malloc(PIECE)) == NULL) {
		rv = kvctl_error(k, "out of memory");
		goto out;
	}
	if ((rv = kvctl_connect(k)) != 0)
		goto out;
	if ((rv = kvc_blob_writer_open(k->c, &call, key, strlen(key), &bo, &w)) != 0) {
		rv = kvctl_fail(k, rv, &st);
		goto out;
	}
	for (;;) {
		ssize_t n = read(fd, buf, PIECE);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rv = kvctl_error(k, "cannot read %s: %s",
			                 fd == STDIN_FILENO ? "stdin" : path, strerror(errno));
			goto out;
		}
		if (n == 0)
			break;
		if ((rv = kvc_blob_write(w, buf, (size_t)n)) != 0) {
			rv = kvctl_fail(k, rv, &st);
			goto out;
		}
		done += (uint64_t)n;
		progress_show(&pr, done, false);
	}
	if ((rv = kvc_blob_commit(w, &version)) != 0) {
		rv = kvctl_fail(k, rv, &st);
		goto out;
	}
	progress_show(&pr, done, true);
	if (k->json) {
		json_t *doc = json_object();
		kvctl_json_bytes(doc, "key", key, strlen(key));
		json_object_set_new(doc, "version", kvctl_json_u64(version));
		json_object_set_new(doc, "size", kvctl_json_u64(done));
		rv = kvctl_emit_json(k, doc);
	} else {
		printf("%" PRIu64 "\n", version);
		rv = kvctl_finish(k);
	}
out:
	kvc_blob_writer_close(w); /* aborts it when not committed */
	free(buf);
	if (fd != STDIN_FILENO)
		close(fd);
	return rv;
}

/* A value that is not a blob: exit 5 (exit 3 is a version that did not
 * match); other failures as every command's. */
static int not_blob_or_fail(struct kvctl *k, int rv, const struct kvc_status *st)
{
	if (rv == -KVC_FAILED_PRECONDITION)
		return kvctl_report(k, KVC_FAILED_PRECONDITION, KVCTL_EXIT_ERROR, st->message);
	return kvctl_fail(k, rv, st);
}

/* ---- get ------------------------------------------------------------------------- */

static int write_all(int fd, const uint8_t *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

int cmd_blob_get(struct kvctl *k, int argc, char **argv)
{
	static const struct option own[] = {
	        {"version", required_argument, NULL, OPT_VERSION},
	        {"offset", required_argument, NULL, OPT_OFFSET},
	        {"length", required_argument, NULL, OPT_LENGTH},
	        {"file", required_argument, NULL, OPT_FILE},
	        {NULL, 0, NULL, 0},
	};
	struct kvctl_opts oi;
	struct kvc_status st;
	struct kvc_call call = {.status = &st};
	struct kvc_blob_info bi;
	struct progress pr;
	const char *key, *file = NULL;
	uint64_t version = 0, offset = 0, length = UINT64_MAX, done = 0, end;
	uint8_t *buf = NULL;
	int fd = STDOUT_FILENO, opt, rv = 0;

	kvctl_opts_begin(k, &oi, "blob get", own);
	oi.o_file = true;
	while (rv == 0 && (opt = kvctl_opts_next(k, &oi, argc, argv)) != -1) {
		if (opt == OPT_VERSION) {
			if ((rv = kvctl_parse_u64(k, "--version", optarg, KVC_ANY_VERSION - 1,
			                          &version)) == 0 &&
			    version == 0)
				rv = kvctl_usage(k, "versions start at 1");
		} else if (opt == OPT_OFFSET) {
			rv = kvctl_parse_u64(k, "--offset", optarg, UINT64_MAX, &offset);
		} else if (opt == OPT_LENGTH) {
			rv = kvctl_parse_u64(k, "--length", optarg, UINT64_MAX, &length);
		} else if (opt == OPT_FILE || opt == KVCTL_OPT_O_FILE) {
			file = optarg;
			if (file[0] == '\0')
				rv = kvctl_usage(k, "--file wants a file name");
		} else {
			return KVCTL_EXIT_USAGE;
		}
	}
	if (rv != 0)
		return rv;
	if (argc - optind != 1)
		return kvctl_usage(k, "usage: kvctl blob get KEY [--version V] [--offset O] "
		                      "[--length L] [-o FILE]");
	key = argv[optind];
	kvctl_what(k, "blob get", key, strlen(key));
	if ((rv = kvctl_check_key(k, key)) != 0)
		return rv;
	if (file == NULL && k->json)
		return kvctl_usage(k, "-o json needs -o FILE or --file: the blob itself goes to "
		                      "stdout");
	if ((rv = kvctl_connect(k)) != 0)
		return rv;
	/* the version and size first: every read is of that one version */
	if ((rv = kvc_blob_info(k->c, &call, key, strlen(key), version, &bi)) != 0)
		return not_blob_or_fail(k, rv, &st);
	version = bi.version;
	end = offset >= bi.size ? offset : (length < bi.size - offset ? offset + length : bi.size);
	if (file != NULL && (fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666)) < 0)
		return kvctl_error(k, "cannot create %s: %s", file, strerror(errno));
	if ((buf = malloc(PIECE)) == NULL) {
		rv = kvctl_error(k, "out of memory");
		goto out;
	}
	progress_begin(&pr, end - offset);
	while (offset + done < end) {
		size_t want = end - offset - done < PIECE ? (size_t)(end - offset - done) : PIECE,
		       n = 0;
		if ((rv = kvc_blob_read(k->c, &call, key, strlen(key), version, offset + done, buf,
		                        want, &n)) != 0) {
			rv = kvctl_fail(k, rv, &st);
			goto out;
		}
		if (n == 0)
			break; /* (cannot be: the size said more) */
		if ((rv = write_all(fd, buf, n)) != 0) {
			rv = kvctl_error(k, "cannot write %s: %s", file != NULL ? file : "stdout",
			                 strerror(-rv));
			goto out;
		}
		done += n;
		progress_show(&pr, done, false);
	}
	progress_show(&pr, done, true);
	if (file != NULL && close(fd) != 0) {
		fd = STDOUT_FILENO;
		rv = kvctl_error(k, "cannot write %s: %s", file, strerror(errno));
		goto out;
	}
	fd = STDOUT_FILENO;
	if (k->json) {
		json_t *doc = json_object();
		kvctl_json_bytes(doc, "key", key, strlen(key));
		json_object_set_new(doc, "version", kvctl_json_u64(version));
		json_object_set_new(doc, "offset", kvctl_json_u64(offset));
		json_object_set_new(doc, "bytes", kvctl_json_u64(done));
		json_object_set_new(doc, "size", kvctl_json_u64(bi.size));
		json_object_set_new(doc, "file", json_string(file));
		rv = kvctl_emit_json(k, doc);
	} else {
		rv = file != NULL ? kvctl_finish(k) : 0;
	}
out:
	free(buf);
	if (fd != STDOUT_FILENO)
		close(fd);
	if (rv != 0 && file != NULL)
		unlink(file); /* no partial file is left */
	return rv;
}

/* ---- info ------------------------------------------------------------------------ */

int cmd_blob_info(struct kvctl *k, int argc, char **argv)
{
	static const struct option own[] = {
	        {"version", required_argument, NULL, OPT_VERSION},
	        {NULL, 0, NULL, 0},
	};
	struct kvctl_opts oi;
	struct kvc_status st;
	struct kvc_call call = {.status = &st};
	struct kvc_blob_info bi;
	const char *key;
	char when[32], hex[17];
	uint64_t version = 0;
	json_t *doc;
	int opt, rv = 0;

	kvctl_opts_begin(k, &oi, "blob info", own);
	while (rv == 0 && (opt = kvctl_opts_next(k, &oi, argc, argv)) != -1) {
		if (opt == OPT_VERSION) {
			if ((rv = kvctl_parse_u64(k, "--version", optarg, KVC_ANY_VERSION - 1,
			                          &version)) == 0 &&
			    version == 0)
				rv = kvctl_usage(k, "versions start at 1");
		} else {
			return KVCTL_EXIT_USAGE;
		}
	}
	if (rv != 0)
		return rv;
	if (argc - optind != 1)
		return kvctl_usage(k, "usage: kvctl blob info KEY [--version V]");
	key = argv[optind];
	kvctl_what(k, "blob info", key, strlen(key));
	if ((rv = kvctl_check_key(k, key)) != 0 || (rv = kvctl_connect(k)) != 0)
		return rv;
	if ((rv = kvc_blob_info(k->c, &call, key, strlen(key), version, &bi)) != 0)
		return not_blob_or_fail(k, rv, &st);
	snprintf(hex, sizeof(hex), "%016" PRIx64, bi.xxh64);
	kvctl_format_time(bi.timestamp_ms, when);
	if (k->json) {
		doc = json_object();
		kvctl_json_bytes(doc, "key", key, strlen(key));
		json_object_set_new(doc, "size", kvctl_json_u64(bi.size));
		json_object_set_new(doc, "chunk_size", kvctl_json_u64(bi.chunk_size));
		json_object_set_new(doc, "chunks", kvctl_json_u64(bi.chunks));
		json_object_set_new(doc, "xxh64", json_string(hex));
		json_object_set_new(doc, "stored_bytes", kvctl_json_u64(bi.stored_bytes));
		json_object_set_new(doc, "version", kvctl_json_u64(bi.version));
		json_object_set_new(doc, "timestamp_ms", kvctl_json_u64(bi.timestamp_ms));
		json_object_set_new(doc, "timestamp", json_string(when));
		json_object_set_new(doc, "expiry_ms", kvctl_json_u64(bi.expiry_ms));
		return kvctl_emit_json(k, doc);
	}
	printf("size: %" PRIu64 "\nchunk_size: %" PRIu32 "\nchunks: %" PRIu32 "\nxxh64: %s\n"
	       "stored_bytes: %" PRIu64 "\nversion: %" PRIu64 "\ntimestamp: %s\nexpiry_ms: %" PRIu64
	       "\n",
	       bi.size, bi.chunk_size, bi.chunks, hex, bi.stored_bytes, bi.version, when,
	       bi.expiry_ms);
	return kvctl_finish(k);
}
