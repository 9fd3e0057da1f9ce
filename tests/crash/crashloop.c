/* crashloop.c — acknowledged writes survive SIGKILL of kvd: write, kill, restart, check, repeat. */
/*
 * One kvd (sync = always, history kept in full) on one directory. Each
 * round, --clients threads write through libkvclient over kv+ipc:// (Put, conditional Put,
 * Delete, Batch; values 0 … 64 KiB derived from key and nonce) and record
 * every outcome; after a random 50 ms … 1 s (seeded) kvd gets SIGKILL, the
 * clients are joined, kvd is restarted on the same directory and check.c
 * verifies every acknowledged write, resolves the unanswered ones and
 * checks versions, batches and holes. The model carries over to the next
 * round. After the last round kvd is stopped cleanly (it must exit 0),
 * started again and checked in full once more.
 *
 * Before each restart the files the round changed are copied to
 * <dir>/last-kill/, so a violation can be studied on the bytes the killed
 * kvd left (the restart's recovery cuts torn tails in place).
 *
 * Both storage backends: on files by default (a data directory, <dir>/data),
 * on a block device with --device PATH (a block device or a regular file,
 * formatted first by kvd --format, which refuses one carrying a file system
 * or an earlier kvd format) or --device-image SIZE (a sparse <dir>/dev.img),
 * with --extent-size (default 1M, so segments roll every MiB and extents
 * freed by merges are taken again). On a device kvd gets --device; the
 * directory keeps its settings, sockets and log. Before each restart a
 * device that is a regular file is copied whole (holes kept) to
 * <dir>/last-kill/dev.img and `kvd --check` of the copy must find no
 * damage (exit 0: the segment the kill left open is a note, not a torn
 * end); a block device is not copied (a line says so) and is checked
 * itself. Before that the harness waits for the device's lock, which a
 * killed kvd's io_uring teardown holds a few ms past the reap, so that the
 * copy is taken once the killed kvd's last writes have landed (kvd and kvd
 * --check wait for the lock themselves). After the last round's clean stop `kvd --check` of the
 * device must exit 0. --damage-every is for files only. The meson test
 * crashloop-device runs `crashloop --device-image 1G --extent-size 1M`.
 *
 * Exit status: 0 when no violation was found; 1 on a violation (the
 * directory is kept, whatever --keep says); 2 when the harness could not
 * run (bad options, kvd would not start the first time; the directory is
 * kept with --keep).
 *
 * The seed fixes the key names, the values, each client's choice of
 * operations and the kill times; the interleaving of the clients and where
 * the kill lands in kvd's work are the machine's, so a seed reproduces a
 * run's shape, not its every byte.
 */
#include "harness.h"

#include <dirent.h>
#include <getopt.h>
#include <inttypes.h>
#include <sys/file.h>
#include <sys/stat.h>

#include "crash.h"

#define CL_SNAPSHOT "last-kill"

static const char usage[] =
        "usage: crashloop [--iterations N] [--seed S] [--clients C] [--kvd PATH] [--dir D]\n"
        "                 [--keep] [--verbose] [--keys K] [--min-ms MS] [--max-ms MS]\n"
        "                 [--full-every N] [--sample N] [--segment-size SIZE]\n"
        "                 [--check-threads N] [--value-max BYTES] [--damage-every N]\n"
        "                 [--device PATH | --device-image SIZE] [--extent-size SIZE]\n"
        "\n"
        "  --iterations N     rounds, each ending in a SIGKILL of kvd (default 20)\n"
        "  --seed S           PRNG seed (default: $KVTEST_SEED, else 1; printed)\n"
        "  --clients C        writer threads (default 4, at most 64)\n"
        "  --kvd PATH         kvd binary (default $KVD_BIN, else ./build/daemon/kvd)\n"
        "  --dir D            scratch directory (created; must be empty); default: a new\n"
        "                     one under $TMPDIR. Removed after a run without violations\n"
        "  --keep             keep the directory also when the harness fails (it is\n"
        "                     always kept on a violation)\n"
        "  --verbose          one line per round\n"
        "  --keys K           key space shared by the clients (default 1024)\n"
        "  --min-ms, --max-ms a round lasts this long before the kill (default 50, 1000)\n"
        "  --full-every N     every N-th check reads every version of every key back\n"
        "                     (default 50; the last check always does)\n"
        "  --sample N         older versions read back by exact Get per check (default 64)\n"
        "  --segment-size S   kvd's segment_size (default 8M: segments seal during a run)\n"
        "  --check-threads N  threads (kvc handles) checking keys after a restart (default 4)\n"
        "  --value-max BYTES  longest value, a power of two 1 … 65536 (default 65536); every\n"
        "                     version is kept, so a long run wants smaller values\n"
        "  --damage-every N   every N-th round, a copy of the data has one sealed segment\n"
        "                     deleted, cut in half or replaced by a directory: kvd --check\n"
        "                     must name it, a kvd on the copy must log the loss and hand\n"
        "                     out no version already acknowledged (default 5; 0: never;\n"
        "                     files only: not run on a device)\n"
        "  --device PATH      kvd serves PATH (kvd --device) instead of a data directory:\n"
        "                     a block device or a regular file, formatted first by kvd\n"
        "                     --format (which refuses one that carries a file system or\n"
        "                     a kvd device: wipe it first). ERASES what PATH holds\n"
        "  --device-image SIZE  the same on a sparse file of SIZE (like 512M, 1G) made\n"
        "                     as <dir>/dev.img\n"
        "  --extent-size SIZE the device's extents (kvd --format --extent-size; default\n"
        "                     1M: segments roll every MiB)\n";

static int parse_u64(const char *s, uint64_t *ret)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno != 0 || end == s || *end != '\0' || *s == '-')
		return -1;
	*ret = v;
	return 0;
}

/* "512M", "1G", "4096": bytes (K, M, G, T are powers of 1024); 0 when not a size. */
static uint64_t parse_size(const char *s)
{
	char *end;
	unsigned long long v;
	int shift = 0;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || end == s || *s == '-')
		return 0;
	if (*end != '\0') {
		const char *u = strchr("KMGT", end[0]);
		if (u == NULL || end[1] != '\0')
			return 0;
		shift = 10 * (int)(u - "KMGT" + 1);
	}
	if (v > (UINT64_MAX >> shift))
		return 0;
	return (uint64_t)v << shift;
}

static int parse_opts(int argc, char **argv, struct cl_opts *o)
{
	static const struct option longs[] = {
	        {"iterations", required_argument, NULL, 'n'},
	        {"seed", required_argument, NULL, 's'},
	        {"clients", required_argument, NULL, 'c'},
	        {"kvd", required_argument, NULL, 'k'},
	        {"dir", required_argument, NULL, 'd'},
	        {"keep", no_argument, NULL, 'K'},
	        {"verbose", no_argument, NULL, 'v'},
	        {"keys", required_argument, NULL, 'y'},
	        {"min-ms", required_argument, NULL, 'a'},
	        {"max-ms", required_argument, NULL, 'b'},
	        {"full-every", required_argument, NULL, 'f'},
	        {"sample", required_argument, NULL, 'S'},
	        {"segment-size", required_argument, NULL, 'z'},
	        {"check-threads", required_argument, NULL, 'T'},
	        {"value-max", required_argument, NULL, 'V'},
	        {"damage-every", required_argument, NULL, 'D'},
	        {"device", required_argument, NULL, 'E'},
	        {"device-image", required_argument, NULL, 'I'},
	        {"extent-size", required_argument, NULL, 'X'},
	        {"help", no_argument, NULL, 'h'},
	        {NULL, 0, NULL, 0},
	};
	int ch;

	memset(o, 0, sizeof(*o));
	o->iterations = 20;
	/* a fixed default: every run writes the same keys and values (the kill
	 * moments stay the machine's); --seed or $KVTEST_SEED for others */
	o->seed = 1;
	if (getenv("KVTEST_SEED") != NULL && parse_u64(getenv("KVTEST_SEED"), &o->seed) != 0) {
		fprintf(stderr, "crashloop: KVTEST_SEED is not a number: %s\n",
		        getenv("KVTEST_SEED"));
		return -1;
	}
	o->clients = 4;
	o->keys = 1024;
	o->min_ms = 50;
	o->max_ms = 1000;
	o->full_every = 50;
	o->damage_every = 5;
	o->sample = 64;
	o->check_threads = 4;
	o->timeout_ms = 10000;
	o->segment_size = "8M";
	o->kvd = getenv("KVD_BIN");
	while ((ch = getopt_long(argc, argv, "n:s:c:k:d:Kvy:a:b:f:S:z:T:V:h", longs, NULL)) != -1) {
		uint64_t v = 0;
		switch (ch) {
		case 'n':
		case 's':
		case 'c':
		case 'y':
		case 'a':
		case 'b':
		case 'f':
		case 'S':
		case 'T':
			if (parse_u64(optarg, &v) != 0) {
				fprintf(stderr, "crashloop: not a number: %s\n", optarg);
				return -1;
			}
			break;
		default:
			break;
		}
		switch (ch) {
		case 'n':
			o->iterations = v;
			break;
		case 's':
			o->seed = v;
			break;
		case 'c':
			if (v == 0 || v > CL_CLIENTS_MAX) {
				fprintf(stderr, "crashloop: --clients 1 … %u\n", CL_CLIENTS_MAX);
				return -1;
			}
			o->clients = (uint32_t)v;
			break;
		case 'y':
			if (v < CL_BATCH_MAX || v > CL_KEYS_MAX) {
				fprintf(stderr, "crashloop: --keys %u … %u\n", CL_BATCH_MAX,
				        CL_KEYS_MAX);
				return -1;
			}
			o->keys = (uint32_t)v;
			break;
		case 'a':
		case 'b':
			if (v > 600000) {
				fprintf(stderr, "crashloop: a round lasts at most 600000 ms\n");
				return -1;
			}
			if (ch == 'a')
				o->min_ms = (uint32_t)v;
			else
				o->max_ms = (uint32_t)v;
			break;
		case 'f':
			o->full_every = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
			break;
		case 'S':
			o->sample = v > 1000000 ? 1000000 : (uint32_t)v;
			break;
		case 'T':
			if (v == 0 || v > 16) {
				fprintf(stderr, "crashloop: --check-threads 1 … 16\n");
				return -1;
			}
			o->check_threads = (uint32_t)v;
			break;
		case 'k':
			o->kvd = optarg;
			break;
		case 'd':
			o->dir = optarg;
			break;
		case 'K':
			o->keep = true;
			break;
		case 'v':
			o->verbose = true;
			break;
		case 'z':
			o->segment_size = optarg;
			break;
		case 'E':
			o->device = optarg;
			break;
		case 'I':
			o->device_image = optarg;
			break;
		case 'X':
			o->extent_size = optarg;
			break;
		case 'D': {
			uint64_t v;
			if (parse_u64(optarg, &v) != 0 || v > UINT32_MAX) {
				fprintf(stderr, "crashloop: --damage-every takes a count\n");
				exit(2);
			}
			o->damage_every = (uint32_t)v;
			break;
		}
		case 'V': {
			uint64_t v;
			if (parse_u64(optarg, &v) != 0 || v == 0 || v > CL_VALUE_MAX ||
			    (v & (v - 1))) {
				fprintf(stderr, "crashloop: --value-max is a power of two 1 … %u\n",
				        CL_VALUE_MAX);
				exit(2);
			}
			cl_value_max_log2 = (uint32_t)__builtin_ctzll(v);
			break;
		}
		case 'h':
			fputs(usage, stdout);
			exit(0);
		default:
			fputs(usage, stderr);
			return -1;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "crashloop: unexpected argument %s\n%s", argv[optind], usage);
		return -1;
	}
	if (o->min_ms > o->max_ms) {
		fprintf(stderr, "crashloop: --min-ms above --max-ms\n");
		return -1;
	}
	if (o->device != NULL && o->device_image != NULL) {
		fprintf(stderr, "crashloop: --device or --device-image, not both\n");
		return -1;
	}
	if (o->device_image != NULL && parse_size(o->device_image) == 0) {
		fprintf(stderr, "crashloop: --device-image takes a size like 512M, not %s\n",
		        o->device_image);
		return -1;
	}
	if (o->extent_size == NULL)
		o->extent_size = "1M";
	if (o->kvd == NULL)
		o->kvd = "./build/daemon/kvd";
	return 0;
}

/* ---- the directory ---------------------------------------------------------- */

/* Copies src to dst (a regular file). */
static int copy_file(const char *src, const char *dst)
{
	char buf[1 << 16];
	int in, out, rv = 0;
	ssize_t n;

	if ((in = open(src, O_RDONLY)) < 0)
		return -errno;
	if ((out = open(dst, O_WRONLY | O_CREAT | O_TRUNC, 0644)) < 0) {
		rv = -errno;
		close(in);
		return rv;
	}
	while ((n = read(in, buf, sizeof(buf))) > 0) {
		if (write(out, buf, (size_t)n) != n) {
			rv = -EIO;
			break;
		}
	}
	if (n < 0)
		rv = -errno;
	close(in);
	close(out);
	return rv;
}

/* Copies every file under src changed at or after since (recursively) to
 * the same place under dst. */
static int copy_changed(const char *src, const char *dst, const struct timespec *since)
{
	DIR *d = opendir(src);
	struct dirent *de;
	int rv = 0;

	if (d == NULL)
		return -errno;
	mkdir(dst, 0755);
	while (rv == 0 && (de = readdir(d)) != NULL) {
		char *a, *b;
		struct stat sb;
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (asprintf(&a, "%s/%s", src, de->d_name) < 0 ||
		    asprintf(&b, "%s/%s", dst, de->d_name) < 0)
			abort();
		if (lstat(a, &sb) == 0) {
			bool changed = sb.st_mtim.tv_sec > since->tv_sec ||
			               (sb.st_mtim.tv_sec == since->tv_sec &&
			                sb.st_mtim.tv_nsec >= since->tv_nsec);
			if (S_ISDIR(sb.st_mode))
				rv = copy_changed(a, b, since);
			else if (S_ISREG(sb.st_mode) && changed)
				rv = copy_file(a, b);
		}
		free(a);
		free(b);
	}
	closedir(d);
	return rv;
}

/* Removes what the run made in dir, then dir itself if that left it empty. */
static void remove_dir(const char *dir)
{
	static const char *const made[] = {"data",     CL_SNAPSHOT, "kvd.sock",       "kvd.log",
	                                   "kvd.conf", "damaged",   "kvd-stacks.txt", "dev.img"};
	size_t i;

	for (i = 0; i < sizeof(made) / sizeof(made[0]); i++) {
		char *p = tu_path(dir, "%s", made[i]);
		tu_rmtree(p);
		free(p);
	}
	rmdir(dir);
}

static int prepare_dir(const struct cl_opts *o, char **ret)
{
	DIR *d;
	struct dirent *de;

	if (o->dir == NULL) {
		*ret = tu_mkdtemp("crashloop");
		return 0;
	}
	if (mkdir(o->dir, 0755) != 0 && errno != EEXIST) {
		fprintf(stderr, "crashloop: mkdir %s: %s\n", o->dir, strerror(errno));
		return -1;
	}
	if ((d = opendir(o->dir)) == NULL) {
		fprintf(stderr, "crashloop: %s: %s\n", o->dir, strerror(errno));
		return -1;
	}
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0) {
			fprintf(stderr,
			        "crashloop: %s is not empty (the model must see every write)\n",
			        o->dir);
			closedir(d);
			return -1;
		}
	}
	closedir(d);
	if ((*ret = realpath(o->dir, NULL)) == NULL)
		abort();
	return 0;
}

/* ---- the device ---------------------------------------------------------------- */

/* The device kvd serves (--device, or <dir>/dev.img for --device-image);
 * "" on files. */
static char device_path[KVD_RUN_PATH_MAX];
static bool device_is_file;        /* a regular file stands in for it: last-kill/ gets a copy */
static uint64_t device_copies;     /* devices as a killed kvd left them checked */
static uint64_t device_open_notes; /* … where kvd --check noted a segment left open */
static int device_end_check = -1; /* exit status of kvd --check after the clean stop; -1: not run */
static uint64_t device_lock_waits; /* kills after which the lock outlived the reaped kvd */
static uint64_t device_lock_wait_max_us;

#define CL_DEVICE_LOCK_WAIT_MS 30000

/*
 * Waits (at most CL_DEVICE_LOCK_WAIT_MS) until the device's lock is free
 * after a SIGKILL. kvd holds its flock on the fd its io_uring rings have
 * registered, and the kernel tears a dead process's rings down (waiting for
 * their requests in flight) after the process has been reaped: until then
 * the lock is held, the killed kvd's last writes may still land, and a kvd
 * started on the device exits 1 ("in use"). Counted for the report; 0 once
 * free, -1 when it did not come free in time. Needed for the copy of
 * the device (device_snapshot) to be one state; kvd and kvd --check wait
 * for the lock by themselves (up to 5 s).
 */
static int device_wait_unlocked(struct cl_model *m)
{
	uint64_t t0 = cl_now_us(m), waited;
	int fd = open(device_path, O_RDONLY | O_CLOEXEC), rv = -1;

	if (fd < 0)
		return -1;
	for (;;) {
		if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
			flock(fd, LOCK_UN);
			rv = 0;
			break;
		}
		if (errno != EWOULDBLOCK ||
		    cl_now_us(m) - t0 > (uint64_t)CL_DEVICE_LOCK_WAIT_MS * 1000)
			break;
		poll(NULL, 0, 2);
	}
	close(fd);
	waited = cl_now_us(m) - t0;
	if (waited > 1000)
		device_lock_waits++;
	if (waited > device_lock_wait_max_us)
		device_lock_wait_max_us = waited;
	return rv;
}

/* Runs `kvd ARGS` (args quoted by the caller): its exit status (-1: not
 * run, or killed), stdout and stderr in out. */
static int run_kvd(const char *args, char *out, size_t cap)
{
	char cmd[4096];
	FILE *p;
	size_t n;
	int status;

	snprintf(cmd, sizeof(cmd), "'%s' %s 2>&1", getenv("KVD_BIN"), args);
	if ((p = popen(cmd, "r")) == NULL)
		return -1;
	n = fread(out, 1, cap - 1, p);
	out[n] = '\0';
	status = pclose(p);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Runs `kvd --check path` (a data directory or a device): its exit status,
 * its output in out. */
static int run_check(const char *path, char *out, size_t cap)
{
	char args[KVD_RUN_PATH_MAX + 32];

	snprintf(args, sizeof(args), "--check '%s'", path);
	return run_kvd(args, out, cap);
}

/* Makes device_path a freshly formatted kvd device: <dir>/dev.img (sparse,
 * --device-image bytes) or --device as given. kvd --format runs without
 * --force: it refuses a device with a file system or an earlier kvd
 * format on it. */
static int device_prepare(const struct cl_opts *o, const char *dir)
{
	char args[KVD_RUN_PATH_MAX + 128], out[4096];
	struct stat sb;
	int st;

	if (o->device_image != NULL) {
		int fd;
		snprintf(device_path, sizeof(device_path), "%s/dev.img", dir);
		fd = open(device_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (fd < 0 || ftruncate(fd, (off_t)parse_size(o->device_image)) != 0) {
			fprintf(stderr, "crashloop: cannot make the image %s: %s\n", device_path,
			        strerror(errno));
			if (fd >= 0)
				close(fd);
			return -1;
		}
		close(fd);
	} else if (snprintf(device_path, sizeof(device_path), "%s", o->device) >=
	           (int)sizeof(device_path)) {
		fprintf(stderr, "crashloop: --device: the path is too long\n");
		return -1;
	}
	if (stat(device_path, &sb) != 0 || !(S_ISREG(sb.st_mode) || S_ISBLK(sb.st_mode))) {
		fprintf(stderr, "crashloop: %s is neither a block device nor a regular file\n",
		        device_path);
		return -1;
	}
	device_is_file = S_ISREG(sb.st_mode);
	snprintf(args, sizeof(args), "--format '%s' --extent-size '%s'", device_path,
	         o->extent_size);
	if ((st = run_kvd(args, out, sizeof(out))) != 0) {
		fprintf(stderr, "crashloop: kvd %s exited %d:\n%s", args, st, out);
		return -1;
	}
	return 0;
}

/* Copies the regular file src to dst, holes left holes (a sparse image of
 * 512 MiB copies in what it holds). */
static int copy_sparse(const char *src, const char *dst)
{
	static char buf[1 << 20];
	int in, out, rv = 0;
	off_t size, data = 0, hole;

	if ((in = open(src, O_RDONLY | O_CLOEXEC)) < 0)
		return -errno;
	if ((out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0) {
		rv = -errno;
		close(in);
		return rv;
	}
	size = lseek(in, 0, SEEK_END);
	while (rv == 0 && size > 0 && (data = lseek(in, data, SEEK_DATA)) >= 0) {
		if ((hole = lseek(in, data, SEEK_HOLE)) < 0) {
			rv = -errno;
			break;
		}
		while (data < hole) {
			size_t want = (size_t)(hole - data) < sizeof(buf) ? (size_t)(hole - data)
			                                                  : sizeof(buf);
			ssize_t n = pread(in, buf, want, data);
			if (n <= 0 || pwrite(out, buf, (size_t)n, data) != n) {
				rv = -EIO;
				break;
			}
			data += n;
		}
	}
	if (rv == 0 && data < 0 && errno != ENXIO) /* ENXIO: no data past the offset */
		rv = -errno;
	if (rv == 0 && size > 0 && ftruncate(out, size) != 0)
		rv = -errno;
	close(in);
	close(out);
	return rv;
}

/* Whether `kvd --check img` (out) noted a segment left open: a line
 * "IMG: note: tenant T FILE at OFF: open (not sealed): …". */
static bool noted_open(const char *out, const char *img)
{
	size_t n = strlen(img);
	const char *line = out;

	while (*line != '\0') {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);
		if (strncmp(line, img, n) == 0 && strncmp(line + n, ": note: ", 8) == 0) {
			char text[1024];
			snprintf(text, sizeof(text), "%.*s", (int)(len < 1023 ? len : 1023), line);
			if (strstr(text, ": open (not sealed): ") != NULL)
				return true;
		}
		line += len + (end != NULL);
	}
	return false;
}

/*
 * What the killed kvd left, before the restart's recovery changes it: a
 * device that is a regular file is copied to <dir>/last-kill/dev.img and
 * `kvd --check` runs on the copy; a block device is not copied (said once)
 * and `kvd --check` runs on the device itself (it only reads). It must find
 * no damage (exit 0). A segment left open reads as long as its extent
 * (storage_dev.c, invariant 5); kvd --check notes its unwritten rest
 * ("open (not sealed)"), which is there after nearly every kill: such
 * states are counted in the report. Any damage, or another exit status,
 * is a violation.
 */
static void device_snapshot(struct cl_model *m, const char *snap)
{
	static bool said;
	char *img, out[8192];
	int st;

	if (device_is_file) {
		mkdir(snap, 0755);
		img = tu_path(snap, "dev.img");
		if (copy_sparse(device_path, img) != 0) {
			cl_note(m, "could not copy %s to %s", device_path, img);
			free(img);
			return;
		}
	} else {
		if (!said)
			printf("crashloop: %s is a block device: %s/ gets no copy of it; kvd "
			       "--check reads the device itself after each kill\n",
			       device_path, CL_SNAPSHOT);
		said = true;
		img = strdup(device_path);
		if (img == NULL)
			abort();
	}
	st = run_check(img, out, sizeof(out));
	device_copies++;
	if (st != 0)
		cl_violation(m, NULL, 0,
		             "kvd --check of the device as the SIGKILL left it (%s) exit %d, "
		             "want 0: %s",
		             img, st, out);
	else if (noted_open(out, img))
		device_open_notes++;
	free(img);
}

/* ---- kvd ---------------------------------------------------------------------- */

static char config_text[512];

/*
 * Starts kvd on dir and waits (bounded) until it answers Health, through
 * harness/kvdrun.h as harness.h's kvd_start, but it says how a kvd that did
 * not come up ended: kvd_start keeps no status, and "did not start again
 * after a SIGKILL" needs its exit status or signal. ret_why gets that text
 * on failure.
 */
static int start_kvd(struct kvd_proc *k, const char *dir, char *ret_why, size_t why_len)
{
	struct kvd_run r = {.bin = getenv("KVD_BIN"),
	                    .dir = dir,
	                    .config_text = config_text,
	                    .listen = KVD_RUN_LISTEN(KVD_RUN_IPC) | KVD_RUN_LISTEN(KVD_RUN_KVIPC),
	                    .log_append = true,
	                    .start_timeout_ms = 30000,
	                    .probe_timeout_ms = 300};
	int rv;

	if (device_path[0] != '\0') {
		r.extra[0] = "--device";
		r.extra[1] = device_path;
	}

	memset(k, 0, sizeof(*k));
	k->dir = strdup(dir);
	if (k->dir == NULL || asprintf(&k->data, "%s/data", dir) < 0)
		abort();
	if (kvd_run_spawn(&r, ret_why, why_len) != 0)
		return -1;
	h_copy(k->url, sizeof(k->url), r.url[KVD_RUN_IPC]);
	h_copy(k->surl, sizeof(k->surl), r.url[KVD_RUN_KVIPC]);
	h_copy(k->log, sizeof(k->log), r.log);
	h_copy(k->config, sizeof(k->config), r.config);
	k->pid = r.pid;
	h_track(k->pid, true);
	if ((rv = kvd_run_wait(&r, ret_why, why_len)) == 0)
		return 0;
	if (rv == -ECHILD) {
		int status = r.status;
		h_track(k->pid, false);
		k->pid = 0;
		if (WIFSIGNALED(status))
			snprintf(ret_why, why_len, "kvd died of signal %d (%s)%s", WTERMSIG(status),
			         strsignal(WTERMSIG(status)),
			         WCOREDUMP(status) ? ", core dumped" : "");
		else
			snprintf(ret_why, why_len, "kvd exited %d", WEXITSTATUS(status));
		return -1;
	}
	if (rv != -ETIMEDOUT)
		return -1;
	{
		/* leave its threads' stacks with the directory, for the report */
		char cmd[1024];
		snprintf(cmd, sizeof(cmd),
		         "command -v gdb >/dev/null && gdb -p %d -batch -ex 'thread apply all bt' "
		         ">'%s/kvd-stacks.txt' 2>&1",
		         (int)k->pid, dir);
		if (system(cmd) != 0)
			cmd[0] = '\0';
		if (getenv("CL_DEBUG_STUCK")) {
			fprintf(stderr, "STUCK pid %d dir %s\n", (int)k->pid, dir);
			sleep(100000);
		}
	}
	snprintf(ret_why, why_len,
	         "kvd (pid %d) runs but did not answer Health within 30 s (its threads: "
	         "kvd-stacks.txt, when gdb is there)",
	         (int)k->pid);
	return -1;
}

/* The last lines of kvd.log, for a violation's context. */
static void log_tail(const struct kvd_proc *k, int lines)
{
	char *buf = NULL, *p;
	size_t len = 0;
	FILE *f = fopen(k->log, "r");
	int seen = 0;

	if (f == NULL)
		return;
	{
		char chunk[4096];
		size_t n;
		long size;
		fseek(f, 0, SEEK_END);
		size = ftell(f);
		fseek(f, size > 16384 ? size - 16384 : 0, SEEK_SET);
		while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
			if ((p = realloc(buf, len + n + 1)) == NULL)
				break;
			buf = p;
			memcpy(buf + len, chunk, n);
			len += n;
		}
	}
	fclose(f);
	if (buf == NULL)
		return;
	buf[len] = '\0';
	for (p = buf + len; p > buf && seen <= lines; p--)
		if (p[-1] == '\n')
			seen++;
	fprintf(stderr, "---- the end of %s\n%s", k->log, p == buf ? buf : p + 1);
	free(buf);
}

/* SIGKILL and reap. */
static void kill_kvd(struct kvd_proc *k)
{
	kill(k->pid, SIGKILL);
	waitpid(k->pid, NULL, 0);
	h_track(k->pid, false);
	k->pid = 0;
}

static void free_proc(struct kvd_proc *k)
{
	free(k->dir);
	free(k->data);
	k->dir = k->data = NULL;
}

/* ---- the report --------------------------------------------------------------- */

struct times {
	double write_s, restart_s, check_s, total_s;
	double snapshot_s; /* of restart_s: the copy to last-kill/ (and its kvd --check) */
	uint64_t kills;
	uint64_t disk_bytes; /* of the data directory at the end */
	uint32_t damaged;    /* copies damaged and checked (damage_probe) */
};

/* Bytes of the files below path. */
static uint64_t tree_bytes(const char *path)
{
	struct stat st;
	uint64_t n = 0;
	DIR *d;
	struct dirent *de;

	if (lstat(path, &st) != 0)
		return 0;
	if (!S_ISDIR(st.st_mode))
		return (uint64_t)st.st_size;
	if ((d = opendir(path)) == NULL)
		return 0;
	while ((de = readdir(d)) != NULL) {
		char *child;
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (asprintf(&child, "%s/%s", path, de->d_name) < 0)
			break;
		n += tree_bytes(child);
		free(child);
	}
	closedir(d);
	return n;
}

static double secs(uint64_t us)
{
	return (double)us / 1e6;
}

static void report(const struct cl_model *m, const struct times *t)
{
	const struct cl_counts *n = &m->n;
	uint64_t acked = 0;
	int i;

	for (i = 0; i < CL_HOW_N; i++)
		acked += n->acked[i];
	printf("crashloop: seed %" PRIu64 ", %u clients, %u keys\n", m->seed, m->o->clients,
	       m->nkeys);
	printf("  kills survived             %" PRIu64 " of %" PRIu64 "\n", t->kills,
	       m->o->iterations);
	printf("  writes acknowledged        %" PRIu64 " (put %" PRIu64 ", conditional put %" PRIu64
	       ", delete %" PRIu64 ", conditional delete %" PRIu64 ", batch ops %" PRIu64
	       "), %.1f MiB of values\n",
	       acked, (uint64_t)n->acked[CL_HOW_PUT], (uint64_t)n->acked[CL_HOW_CPUT],
	       (uint64_t)n->acked[CL_HOW_DEL], (uint64_t)n->acked[CL_HOW_CDEL],
	       (uint64_t)n->acked[CL_HOW_BATCH], (double)n->bytes / 1048576.0);
	printf("  acknowledged, then checked %" PRIu64 " (found in their key's version chain "
	       "after their round's kill, value and version read back by exact Get); %" PRIu64
	       " of them acknowledged < 50 ms before the kill\n",
	       n->checked_acked, n->acked_near_kill);
	printf("  full checks                %" PRIu64 " (%" PRIu64 " versions compared)\n",
	       n->full_checks, n->full_versions);
	printf("  exact-version Gets         %" PRIu64 " (%" PRIu64
	       " of older versions at random), "
	       "head Gets %" PRIu64 "\n",
	       n->checked_contents, n->sampled, n->checked_heads);
	printf("  maybe writes               %" PRIu64 ": applied %" PRIu64 ", not applied %" PRIu64
	       "\n",
	       (uint64_t)n->maybe, (uint64_t)n->maybe_applied, (uint64_t)n->maybe_lost);
	printf("  maybe batches              %" PRIu64 ": all puts applied %" PRIu64 "\n",
	       (uint64_t)n->maybe_batches, (uint64_t)n->maybe_batches_applied);
	printf("  refused (condition, NOT_FOUND) %" PRIu64 ", batch no-op deletes %" PRIu64
	       ", unexpected statuses %" PRIu64 "\n",
	       (uint64_t)n->rejected, (uint64_t)n->batch_noops, (uint64_t)n->errors);
	cl_blobs_report();
	printf("  time                       %.1f s (writing %.1f s, restarting %.1f s of which "
	       "%.1f s %s, checking %.1f s)\n",
	       t->total_s, t->write_s, t->restart_s, t->snapshot_s,
	       device_path[0] == '\0' ? "copying to " CL_SNAPSHOT "/"
	       : device_is_file       ? "copying to " CL_SNAPSHOT "/ and kvd --check of the copy"
	                              : "waiting for the device's lock and kvd --check of it",
	       t->check_s);
	if (device_path[0] == '\0') {
		printf("  data directory             %.1f MiB at the end (every version kept; the "
		       "copies of a merge a kill interrupts are removed at restart)\n",
		       (double)t->disk_bytes / 1048576.0);
	} else {
		struct stat sb;
		if (device_is_file && stat(device_path, &sb) == 0)
			printf("  device                     %s: %.1f MiB of %.1f MiB written to "
			       "at the end (every version kept)\n",
			       device_path, (double)sb.st_blocks * 512.0 / 1048576.0,
			       (double)sb.st_size / 1048576.0);
		else
			printf("  device                     %s\n", device_path);
		printf("  device lock after a kill   still held after the reap %" PRIu64
		       " times (up to %.3f s: a dead kvd's io_uring rings, its flock's fd "
		       "registered, are torn down after it; the restart waited for it)\n",
		       device_lock_waits, secs(device_lock_wait_max_us));
		printf("  killed states checked      %" PRIu64
		       " (kvd --check of the copy in %s/, or of the block device: no damage "
		       "in each); %" PRIu64 " noted a segment left open; kvd --check of the "
		       "device after the clean stop: %s\n",
		       device_copies, CL_SNAPSHOT, device_open_notes,
		       device_end_check < 0    ? "not run"
		       : device_end_check == 0 ? "no damage"
		                               : "FAILED");
	}
	printf("  damaged copies             %u (a sealed segment deleted, cut or replaced: "
	       "named by kvd --check, logged by kvd, no version handed out twice)\n",
	       t->damaged);
	printf("  violations                 %" PRIu64 "\n", m->violations);
	fflush(stdout);
}

/* ---- the rounds ---------------------------------------------------------------- */

/* ---- a damaged copy ---------------------------------------------------------- */

/* The ids of the sealed segments META lists (docs/FORMAT.md, META format 2:
 * a 48-byte header with the count at 12, then 16 bytes a segment, the id
 * first). Returns how many went into ids, 0 when META is not there. */
static int meta_segments(const char *tdir, uint32_t *ids, int max)
{
	uint8_t buf[48 + 16 * 256];
	char *path = tu_path(tdir, "META");
	int fd = open(path, O_RDONLY), n = 0;
	ssize_t got;

	free(path);
	if (fd < 0)
		return 0;
	got = read(fd, buf, sizeof(buf));
	close(fd);
	if (got < 52 || buf[8] != 2)
		return 0;
	for (uint32_t i = 0; i < (uint32_t)(buf[12] | buf[13] << 8) && n < max; i++) {
		const uint8_t *p = buf + 48 + 16 * i;
		if (p + 16 > buf + got)
			break;
		ids[n++] = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
		           (uint32_t)p[3] << 24;
	}
	return n;
}

/*
 * Returns whether a copy was damaged and checked (false: nothing sealed yet).
 * A copy of the data of the kvd that was just checked — taken while that kvd
 * is stopped (SIGSTOP), so the copy is a state a crash could leave — with
 * one sealed segment META lists deleted, cut in half or replaced by a
 * directory, by turns: `kvd --check` must exit 1 and name it; a kvd started
 * on the copy must log the loss with the file's name, and its next write
 * must get a version above every one acknowledged so far.
 */
static bool damage_probe(struct cl_model *m, const char *dir, pid_t running, uint64_t turn)
{
	static const char *const how[] = {"deleted", "cut in half", "replaced by a directory"};
	struct timespec all = {0, 0};
	char *data = tu_path(dir, "data"), *cdir = tu_path(dir, "damaged");
	char *cdata = tu_path(cdir, "data"), *tdir = tu_path(cdir, "data/tenants/default");
	char victim[64], why[256], out[8192], *path = NULL;
	uint32_t listed[256];
	struct kvd_proc k2;
	int nlisted, st, h = (int)(turn % 3);
	bool probed = false;

	tu_rmtree(cdir);
	mkdir(cdir, 0755);
	kill(running, SIGSTOP);
	st = copy_changed(data, cdata, &all);
	kill(running, SIGCONT);
	if (st != 0) {
		cl_note(m, "could not copy the data to %s: no damage probe", cdir);
		goto out;
	}
	/* the copy as taken: a state a crash could leave, so nothing is missing */
	run_check(cdata, out, sizeof(out));
	if (strstr(out, "missing") != NULL)
		cl_violation(m, NULL, 0, "a copy of the data taken with kvd stopped: %s", out);
	/* a sealed segment META lists and the copy has */
	nlisted = meta_segments(tdir, listed, 256);
	for (int i = 0; i < nlisted; i++) {
		uint32_t id = listed[(turn + (uint64_t)i) % (uint64_t)nlisted];
		snprintf(victim, sizeof(victim), "%08x.seg", id);
		path = tu_path(tdir, "%s", victim);
		if (access(path, F_OK) == 0)
			break;
		free(path);
		path = NULL;
	}
	if (path == NULL)
		goto out; /* nothing sealed yet */
	if (h == 0) {
		st = unlink(path);
	} else if (h == 1) {
		st = truncate(path, tu_file_size(path) / 2);
	} else {
		st = unlink(path);
		if (st == 0)
			st = mkdir(path, 0755);
	}
	free(path);
	if (st != 0) {
		cl_note(m, "could not damage %s: %s", victim, strerror(errno));
		goto out;
	}
	st = run_check(cdata, out, sizeof(out));
	if (st != 1 || strstr(out, victim) == NULL)
		cl_violation(m, NULL, 0, "%s %s in a copy: kvd --check exit %d, said: %s", victim,
		             how[h], st, out);
	if (start_kvd(&k2, cdir, why, sizeof(why)) != 0) {
		cl_violation(m, NULL, 0, "%s %s in a copy: kvd did not start on it: %s", victim,
		             how[h], why);
	} else {
		struct kvc_options co;
		uint64_t ver = 0;
		int rv;
		kvc *c;
		kvc_options_init(&co);
		co.endpoint = k2.surl;
		rv = kvc_open(&co, &c);
		if (rv == 0) {
			rv = kvc_put(c, NULL, "damage-probe", 12, "x", 1, NULL, &ver);
			kvc_close(c);
		}
		if (rv != 0)
			cl_violation(m, NULL, 0, "%s %s in a copy: a put failed: %s", victim, how[h],
			             kvc_code_name(rv));
		else if (ver <= m->version_floor)
			cl_violation(m, NULL, 0,
			             "%s %s in a copy: the next write got version %" PRIu64
			             ", at or below %" PRIu64 " (acknowledged before)",
			             victim, how[h], ver, m->version_floor);
		if (kvd_stop(&k2) != 0)
			cl_violation(m, NULL, 0, "%s %s in a copy: kvd did not exit 0", victim,
			             how[h]);
		if (!h_log_has(&k2, "data lost") || !h_log_has(&k2, victim))
			cl_violation(m, NULL, 0, "%s %s in a copy: kvd's log does not say so", victim,
			             how[h]);
		free_proc(&k2);
	}
	probed = true;
out:
	tu_rmtree(cdir);
	free(data);
	free(cdir);
	free(cdata);
	free(tdir);
	return probed;
}

int main(int argc, char **argv)
{
	struct cl_opts o;
	struct cl_model m;
	struct kvd_proc k;
	struct times t;
	pthread_t threads[CL_CLIENTS_MAX];
	char *dir = NULL, why[256];
	uint64_t rng, round;
	bool harness_failed = false;
	int rv = 2;

	signal(SIGPIPE, SIG_IGN);
	memset(&t, 0, sizeof(t));
	memset(&k, 0, sizeof(k));
	if (parse_opts(argc, argv, &o) != 0)
		return 2;
	if (access(o.kvd, X_OK) != 0) {
		fprintf(stderr, "crashloop: kvd binary %s: %s (--kvd or $KVD_BIN)\n", o.kvd,
		        strerror(errno));
		return 2;
	}
	setenv("KVD_BIN", o.kvd, 1);
	if (prepare_dir(&o, &dir) != 0)
		return 2;
	if (cl_model_init(&m, &o) != 0 ||
	    (m.kills = calloc(o.iterations + 2, sizeof(*m.kills))) == NULL) {
		fprintf(stderr, "crashloop: out of memory\n");
		return 2;
	}
	m.dir = dir;
	rng = cl_mix(o.seed ^ 0x6b696c6cULL);
	snprintf(config_text, sizeof(config_text),
	         "[kvd]\n"
	         "segment_size = %s\n"
	         "[tenant-defaults]\n"
	         "sync = always\n"
	         "history = 1000000\n",
	         o.segment_size);
	printf("crashloop: seed %" PRIu64 ", %" PRIu64 " iterations, %u clients, %u keys, dir %s\n",
	       o.seed, o.iterations, o.clients, o.keys, dir);
	if (o.device != NULL || o.device_image != NULL) {
		if (device_prepare(&o, dir) != 0) {
			harness_failed = true;
			goto out;
		}
		printf("crashloop: on the device %s (%s, extents of %s)%s\n", device_path,
		       device_is_file ? "a regular file" : "a block device", o.extent_size,
		       o.damage_every ? "; no damaged copies (--damage-every: files only)" : "");
		o.damage_every = 0;
	}
	fflush(stdout);

	if (start_kvd(&k, dir, why, sizeof(why)) != 0) {
		fprintf(stderr, "crashloop: kvd %s did not start on %s: %s\n", o.kvd, dir, why);
		log_tail(&k, 30);
		harness_failed = true;
		goto out;
	}
	for (round = 1; round <= o.iterations; round++) {
		struct cl_round r;
		struct timespec since;
		uint64_t t0, t1, t2, t3, delay_ms, acked0 = 0, acked1 = 0;
		int status, i;
		char *snap, *data;
		bool up;

		for (i = 0; i < CL_HOW_N; i++)
			acked0 += m.n.acked[i];
		m.round = (uint32_t)round;
		memset(&r, 0, sizeof(r));
		r.m = &m;
		r.url = k.surl; /* the clients: the stream transport */
		r.round = (uint32_t)round;
		atomic_init(&r.stop, false);
		clock_gettime(CLOCK_REALTIME, &since);
		since.tv_sec -= 1; /* mtime granularity: a little early is harmless */
		t0 = cl_now_us(&m);
		if (cl_writers_start(&r, o.clients, threads) != 0 || cl_blobs_start(&r) != 0) {
			fprintf(stderr, "crashloop: cannot start the writer threads\n");
			harness_failed = true;
			goto out;
		}
		delay_ms = o.min_ms + cl_below(&rng, (uint64_t)o.max_ms - o.min_ms + 1);
		poll(NULL, 0, (int)delay_ms);
		if (waitpid(k.pid, &status, WNOHANG) == k.pid) {
			h_track(k.pid, false);
			k.pid = 0;
			cl_violation(&m, NULL, 0, "kvd exited by itself during the round (%s %d)",
			             WIFEXITED(status) ? "exit" : "signal",
			             WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
		}
		atomic_store(&r.stop, true);
		m.kills[round] = cl_now_us(&m);
		if (k.pid > 0)
			kill_kvd(&k);
		cl_writers_join(threads, o.clients);
		cl_blobs_join();
		t1 = cl_now_us(&m);
		data = tu_path(dir, "data");
		snap = tu_path(dir, CL_SNAPSHOT);
		tu_rmtree(snap);
		if (device_path[0] != '\0' && device_wait_unlocked(&m) != 0)
			cl_violation(&m, NULL, 0,
			             "the device's lock was still held %d s after the killed kvd "
			             "was reaped",
			             CL_DEVICE_LOCK_WAIT_MS / 1000);
		if (device_path[0] != '\0')
			device_snapshot(&m, snap);
		else if (copy_changed(data, snap, &since) != 0)
			cl_note(&m, "could not copy the changed files to %s", snap);
		free(data);
		free(snap);
		t.snapshot_s += secs(cl_now_us(&m) - t1);
		free_proc(&k);
		/* after a violation of the round too: the check tells the rest */
		up = start_kvd(&k, dir, why, sizeof(why)) == 0;
		if (!up)
			cl_violation(&m, NULL, 0, "kvd did not start again after the SIGKILL: %s",
			             why);
		t2 = cl_now_us(&m);
		if (up)
			cl_check(&m, k.surl,
			         round == o.iterations ||
			                 (o.full_every && round % o.full_every == 0));
		if (up)
			cl_blobs_check(&m, k.surl);
		if (up && m.violations == 0 && o.damage_every && round % o.damage_every == 0)
			t.damaged += damage_probe(&m, dir, k.pid, round / o.damage_every);
		t3 = cl_now_us(&m);
		t.write_s += secs(t1 - t0);
		t.restart_s += secs(t2 - t1);
		t.check_s += secs(t3 - t2);
		for (i = 0; i < CL_HOW_N; i++)
			acked1 += m.n.acked[i];
		if (o.verbose)
			printf("round %" PRIu64 ": killed after %" PRIu64 " ms, %" PRIu64
			       " acknowledged, maybe %" PRIu64 " (applied %" PRIu64
			       "), last_version "
			       "%" PRIu64 ", restart %.2f s, check %.2f s\n",
			       round, delay_ms, acked1 - acked0, (uint64_t)m.n.maybe,
			       (uint64_t)m.n.maybe_applied, m.version_floor, secs(t2 - t1),
			       secs(t3 - t2));
		if (m.violations != 0) {
			log_tail(&k, 30);
			goto out;
		}
		t.kills++;
		fflush(stdout);
	}

	/* a clean stop must exit 0 and lose nothing either */
	{
		uint64_t t0 = cl_now_us(&m), t1;
		int st = kvd_stop(&k);
		if (st != 0)
			cl_violation(&m, NULL, 0, "kvd exited %d on SIGTERM after the last round",
			             st);
		free_proc(&k);
		if (m.violations == 0 && start_kvd(&k, dir, why, sizeof(why)) != 0)
			cl_violation(&m, NULL, 0, "kvd did not start after a clean stop: %s", why);
		t1 = cl_now_us(&m);
		t.restart_s += secs(t1 - t0);
		m.round = (uint32_t)o.iterations + 1;
		if (m.violations == 0)
			cl_check(&m, k.surl, true);
		t.check_s += secs(cl_now_us(&m) - t1);
		if (m.violations != 0)
			log_tail(&k, 30);
	}
out:
	t.total_s = secs(cl_now_us(&m));
	if (k.data != NULL)
		t.disk_bytes = tree_bytes(k.data);
	if (k.pid > 0 && kvd_stop(&k) != 0 && m.violations == 0 && !harness_failed)
		cl_violation(&m, NULL, 0, "kvd did not exit 0 on SIGTERM at the end");
	if (device_path[0] != '\0' && k.pid == 0 && !harness_failed) {
		/* after the clean stop: no damage either (read in full) */
		char out[8192];
		int st = run_check(device_path, out, sizeof(out));
		device_end_check = st < 0 ? 2 : st;
		if (st != 0)
			cl_violation(&m, NULL, 0, "kvd --check %s at the end exit %d, want 0: %s",
			             device_path, st, out);
		else if (o.verbose)
			printf("kvd --check %s: %s", device_path, out);
	}
	free_proc(&k);
	report(&m, &t);
	if (m.violations != 0) {
		printf("FAILED: %" PRIu64 " violations; seed %" PRIu64 "; directory kept: %s "
		       "(kvd.log; %s/ holds the files the last killed kvd changed)\n",
		       m.violations, o.seed, dir, CL_SNAPSHOT);
		rv = 1;
	} else if (harness_failed) {
		printf("crashloop: the harness failed (not a finding); directory %s %s\n", dir,
		       o.keep ? "kept" : "removed");
		if (!o.keep)
			remove_dir(dir);
		rv = 2;
	} else {
		remove_dir(dir);
		rv = 0;
	}
	cl_writers_free();
	cl_blobs_free();
	free(m.kills);
	cl_model_fini(&m);
	free(dir);
	return rv;
}
