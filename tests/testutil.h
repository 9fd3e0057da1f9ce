/*
 * testutil.h — helpers shared by the engine tests: temporary directories,
 * an injectable clock, small assertions on engine calls.
 */
#ifndef KV_TESTUTIL_H
#define KV_TESTUTIL_H


#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kvengine.h"

/* The seed of a randomised test: $KVTEST_SEED when set, otherwise the
 * test's fixed default, so that every run tries the same cases unless told
 * otherwise. Printed either way, so that a failure can be repeated. A seed
 * that is not a number, or 0 (xorshift generators stay at 0), stops the
 * program. */
static inline uint64_t tu_seed(const char *test, uint64_t dflt)
{
	const char *env = getenv("KVTEST_SEED");
	uint64_t seed = dflt;

	if (env != NULL && *env != '\0') {
		char *end;
		errno = 0;
		seed = strtoull(env, &end, 0);
		if (errno != 0 || *end != '\0' || seed == 0) {
			fprintf(stderr, "KVTEST_SEED=%s: want a number other than 0\n", env);
			exit(1);
		}
	}
	printf("%s: seed %llu (KVTEST_SEED=N repeats a run or tries another)\n", test,
	       (unsigned long long)seed);
	fflush(stdout);
	return seed;
}

/* A fresh directory under $TMPDIR (or /tmp); free() the result. */
static inline char *tu_mkdtemp(const char *tag)
{
	const char *base = getenv("TMPDIR");
	char *p;

	if (base == NULL || *base == '\0')
		base = "/tmp";
	if (asprintf(&p, "%s/kvtest-%s-XXXXXX", base, tag) < 0)
		abort();
	if (mkdtemp(p) == NULL) {
		perror("mkdtemp");
		abort();
	}
	return p;
}

static inline void tu_rmtree(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *de;

	if (d == NULL) {
		unlink(path);
		return;
	}
	while ((de = readdir(d)) != NULL) {
		char *child;
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (asprintf(&child, "%s/%s", path, de->d_name) < 0)
			abort();
		if (de->d_type == DT_DIR)
			tu_rmtree(child);
		else
			unlink(child);
		free(child);
	}
	closedir(d);
	rmdir(path);
}

/* Copies every regular file of src into dst (created). */
static inline void tu_copydir(const char *src, const char *dst)
{
	DIR *d = opendir(src);
	struct dirent *de;
	char buf[65536];

	mkdir(dst, 0755);
	if (d == NULL)
		abort();
	while ((de = readdir(d)) != NULL) {
		char *a, *b;
		int in, out;
		ssize_t n;
		if (de->d_type != DT_REG)
			continue;
		if (asprintf(&a, "%s/%s", src, de->d_name) < 0 ||
		    asprintf(&b, "%s/%s", dst, de->d_name) < 0)
			abort();
		in = open(a, O_RDONLY);
		out = open(b, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (in < 0 || out < 0)
			abort();
		{
			/* holes stay holes (a sparse device image copies fast) */
			off_t at = 0;
			static const char zero[65536];
			while ((n = read(in, buf, sizeof(buf))) > 0) {
				if (memcmp(buf, zero, (size_t)n) != 0 &&
				    pwrite(out, buf, (size_t)n, at) != n)
					abort();
				at += n;
			}
			if (ftruncate(out, at) != 0)
				abort();
		}
		close(in);
		close(out);
		free(a);
		free(b);
	}
	closedir(d);
}

static inline char *tu_path(const char *dir, const char *fmt, ...)
{
	char *name, *p;
	va_list ap;

	va_start(ap, fmt);
	if (vasprintf(&name, fmt, ap) < 0)
		abort();
	va_end(ap);
	if (asprintf(&p, "%s/%s", dir, name) < 0)
		abort();
	free(name);
	return p;
}

static inline off_t tu_file_size(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 ? st.st_size : -1;
}

/* Flips one byte of a file at off. */
static inline void tu_flip_byte(const char *path, off_t off)
{
	int fd = open(path, O_RDWR);
	unsigned char c;

	if (fd < 0 || pread(fd, &c, 1, off) != 1)
		abort();
	c ^= 0x5a;
	if (pwrite(fd, &c, 1, off) != 1)
		abort();
	close(fd);
}

/* Names of the segment files of a database, sorted; returns the count. */
static inline int tu_list_ext(const char *dir, const char *ext, char names[][64], int max)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0, i, j;

	if (d == NULL)
		return 0;
	while ((de = readdir(d)) != NULL && n < max) {
		size_t l = strlen(de->d_name), el = strlen(ext);
		if (l > el && strcmp(de->d_name + l - el, ext) == 0)
			snprintf(names[n++], 64, "%s", de->d_name);
	}
	closedir(d);
	for (i = 1; i < n; i++)
		for (j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
			char t[64];
			memcpy(t, names[j], 64);
			memcpy(names[j], names[j - 1], 64);
			memcpy(names[j - 1], t, 64);
		}
	return n;
}

/* A clock the test moves by hand. */
struct tu_clock {
	uint64_t ms;
};

static inline uint64_t tu_clock_read(void *arg)
{
	return __atomic_load_n(&((struct tu_clock *)arg)->ms, __ATOMIC_SEQ_CST);
}

#include <linux/loop.h>
#include <sys/ioctl.h>

/* A loop device over img, its node in path: an open descriptor (closing the
 * last one detaches it), or -1 with errno set. */
static inline int tu_loop_attach(const char *img, char *path, size_t len)
{
	int ctl, ifd, lfd = -1, err = 0;

	if ((ifd = open(img, O_RDWR | O_CLOEXEC)) < 0)
		return -1;
	if ((ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC)) < 0) {
		err = errno;
		close(ifd);
		errno = err;
		return -1;
	}
	/* another process may take the free device first: EBUSY, try again */
	for (int tries = 0; tries < 100 && lfd < 0; tries++) {
		struct loop_config lc;
		int n = ioctl(ctl, LOOP_CTL_GET_FREE);
		if (n < 0) {
			err = errno;
			break;
		}
		snprintf(path, len, "/dev/loop%d", n);
		if ((lfd = open(path, O_RDWR | O_CLOEXEC)) < 0) {
			err = errno;
			continue;
		}
		memset(&lc, 0, sizeof(lc));
		lc.fd = (uint32_t)ifd;
		lc.block_size = 4096;
		lc.info.lo_flags = LO_FLAGS_AUTOCLEAR | LO_FLAGS_DIRECT_IO;
		if (ioctl(lfd, LOOP_CONFIGURE, &lc) != 0) {
			err = errno;
			close(lfd);
			lfd = -1;
			if (err != EBUSY)
				break;
		}
	}
	close(ctl);
	close(ifd);
	if (lfd < 0)
		errno = err;
	return lfd;
}

#ifdef TU_DEVICE
/* Built with -DTU_DEVICE, a suite runs on the device backend: kv_open(dir)
 * opens the tenant "t" of a device image dir/dev.img (512 MiB, sparse, 1 MiB
 * extents), formatted on first use, so the same tests pass on both
 * backends. With $KVTEST_LOOP set (root), the image is served through a
 * real loop device (direct I/O, 4 KiB sectors, LO_FLAGS_AUTOCLEAR: the
 * kernel detaches it when the test process ends). */
#include "storage.h"
int db_open(struct kv_storage *st, bool own, const char *tenant, const struct kv_options *opts,
            kv_db **ret_db);


/* The loop device over img, attached on first use and kept (this process
 * holds it open) until the process ends, so that every open of one image
 * goes through one device node, as with a real device (a second store on it
 * meets the first's lock). NULL with errno set. */
static inline const char *tu_loop_of(const char *img)
{
	static struct {
		char *img;
		char path[32];
	} loops[512];
	static size_t n;
	int fd;

	for (size_t i = 0; i < n; i++)
		if (strcmp(loops[i].img, img) == 0)
			return loops[i].path;
	if (n == sizeof(loops) / sizeof(loops[0])) {
		errno = EMFILE;
		return NULL;
	}
	if ((fd = tu_loop_attach(img, loops[n].path, sizeof(loops[n].path))) < 0)
		return NULL;
	if ((loops[n].img = strdup(img)) == NULL)
		abort();
	return loops[n++].path; /* fd stays open: the device stays attached */
}

static inline int tu_device_open(const char *dir, const struct kv_options *o, kv_db **ret)
{
	struct kv_dev_format_options fo = {.extent_size = 1u << 20};
	struct kv_storage *st;
	char *img, err[256];
	const char *dev;
	struct stat sb;
	bool fresh;
	int rv;

	mkdir(dir, 0755);
	if (asprintf(&img, "%s/dev.img", dir) < 0)
		abort();
	if ((fresh = stat(img, &sb) != 0)) {
		int fd = open(img, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
		if (fd < 0 || ftruncate(fd, 512ll << 20) != 0)
			abort();
		close(fd);
	}
	dev = img;
	if (getenv("KVTEST_LOOP") != NULL && (dev = tu_loop_of(img)) == NULL) {
		fprintf(stderr, "KVTEST_LOOP: a loop device over %s: %s\n", img, strerror(errno));
		abort();
	}
	if (fresh && (rv = kv_dev_format(dev, &fo, err, sizeof(err))) != 0) {
		fprintf(stderr, "kv_dev_format %s: %s\n", dev, err);
		abort();
	}
	rv = kv_storage_dev_open(dev, 4u << 20, false, o ? o->fault : NULL, &st);
	free(img);
	if (rv != 0)
		return rv;
	if ((rv = db_open(st, true, "t", o, ret)) != 0)
		kv_storage_close(st);
	return rv;
}
#define kv_open tu_device_open
#endif

static inline void tu_options(struct kv_options *o, struct tu_clock *clk)
{
	kv_options_init(o);
	o->background = false;
	if (clk != NULL) {
		o->clock = tu_clock_read;
		o->clock_arg = clk;
	}
}

#endif
