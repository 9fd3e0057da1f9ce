/*
 * device.c — kvd --format DEVICE and kvd --check DEVICE: the engine's
 * kv_dev_format and kv_dev_check, with their results said the way kvd
 * --check DIR says a data directory's (main.c): one line per finding on
 * stdout, a summary line, refusals as one "kvd: " line on stderr.
 *
 * Exit statuses: --format 0 formatted, 1 refused or failed, 2 a bad
 * --extent-size or --nodes; --check 0 clean, 1 damage found, 2 could not check.
 * Neither touches a device that another kvd serves (the engine answers
 * KV_ELOCKED or -EBUSY, said here as "in use"); --check, like a kvd
 * serving the device, first waits up to DEVICE_LOCK_WAIT_MS for the lock
 * of one that just ended (device_lock_wait).
 */
#include "device.h"

#include "config.h"
#include "kvengine.h"
#include "log.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The largest extent kv_dev_format takes (engine/dev_format.c; kvengine.h
 * names only the smallest). */
#define DEVICE_EXTENT_SIZE_MAX (1ull << 30)

/* "64M", "1G", "1536K": the largest unit that divides n. */
static void size_text(uint64_t n, char *buf, size_t cap)
{
	static const char units[] = "KMGT";
	int u = -1;

	while (u < 3 && n != 0 && n % 1024 == 0) {
		n /= 1024;
		u++;
	}
	if (u < 0)
		snprintf(buf, cap, "%" PRIu64, n);
	else
		snprintf(buf, cap, "%" PRIu64 "%c", n, units[u]);
}

int device_format(const char *device, const char *extent_size, const char *nodes, bool force)
{
	struct kv_dev_format_options o = {.extent_size = 0, .force = force, .nodes = 1};
	char err[512], size[32];
	int rv;

	if (nodes != NULL) {
		char *end;
		unsigned long n;
		errno = 0;
		n = strtoul(nodes, &end, 10);
		if (nodes[0] < '0' || nodes[0] > '9' || *end != '\0' || errno != 0 || n < 1 ||
		    n > KV_DEV_NODES_MAX) {
			kvd_say(stderr, LOG_ERR, "--nodes takes a number of nodes 1..%d, not '%s'",
			        KV_DEV_NODES_MAX, nodes);
			return 2;
		}
		o.nodes = (uint32_t)n;
	}
	if (extent_size != NULL) {
		uint64_t v;
		if (parse_size(extent_size, &v) != 0 || v < KV_DEV_EXTENT_SIZE_MIN ||
		    v > DEVICE_EXTENT_SIZE_MAX || (v & (v - 1)) != 0) {
			kvd_say(stderr, LOG_ERR,
			        "--extent-size takes a power of two from 1M to 1G (like 1M, 64M), "
			        "not '%s'",
			        extent_size);
			return 2;
		}
		o.extent_size = v;
	}
	if (config_device_usable("device", device, err, sizeof(err)) != 0) {
		kvd_say(stderr, LOG_ERR, "cannot format: %s", err);
		return 1;
	}
	err[0] = '\0';
	rv = kv_dev_format(device, &o, err, sizeof(err));
	if (rv != 0) {
		/* the engine's line mostly names the device itself: "DEV: why"
		 * is said once, "DEV carries ext4: …" as it is */
		size_t n = strlen(device);
		bool named = strncmp(err, device, n) == 0 && err[n] == ' ';
		const char *why = err[0] ? err : kv_strerror(rv);
		const char *hint = "";

		if (strncmp(err, device, n) == 0 && err[n] == ':' && err[n + 1] == ' ')
			why = err + n + 2;
		if (rv == KV_EREFUSED && strstr(why, "force") == NULL)
			hint = " (kvd --format --force formats over it, destroying what is there)";
		else if ((rv == KV_ELOCKED || rv == -EBUSY) && err[0] == '\0')
			why = "it is in use (mounted, or served by a kvd)";
		if (named)
			kvd_say(stderr, LOG_ERR, "cannot format: %s%s", why, hint);
		else
			kvd_say(stderr, LOG_ERR, "cannot format %s: %s%s", device, why, hint);
		return 1;
	}
	size_text(o.extent_size ? o.extent_size : KV_DEV_EXTENT_SIZE_DEFAULT, size, sizeof(size));
	if (o.nodes > 1)
		kvd_say(stdout, LOG_INFO,
		        "%s: formatted for kvd, extents of %s, shared by %u nodes", device, size,
		        o.nodes);
	else
		kvd_say(stdout, LOG_INFO, "%s: formatted for kvd, extents of %s", device, size);
	return 0;
}

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int device_lock_wait(const char *device, int (*attempt)(void *arg), void *arg)
{
	uint64_t deadline = mono_ms() + DEVICE_LOCK_WAIT_MS;
	bool said = false;
	int rv;

	while ((rv = attempt(arg)) == KV_ELOCKED && mono_ms() < deadline) {
		if (!said)
			kvd_say(stderr, LOG_NOTICE,
			        "device %s is locked: waiting up to %d s for it (a kvd that just "
			        "ended holds its lock until the kernel has torn its I/O down)",
			        device, DEVICE_LOCK_WAIT_MS / 1000);
		said = true;
		poll(NULL, 0, DEVICE_LOCK_POLL_MS);
	}
	return rv;
}

struct dev_check_out {
	const char *device;
	uint32_t damaged;
	uint32_t lines; /* printed so far */
	struct kv_dev_check_summary sum;
};

static void dev_check_item(void *arg, const struct kv_dev_check_item *it)
{
	struct dev_check_out *o = arg;

	o->lines++;
	if (it->damage)
		o->damaged++;
	printf("%s: %s%s at %" PRIu64 ": %s\n", o->device, it->damage ? "" : "note: ", it->where,
	       it->off, it->what);
}

/* One try of the check; a lock taken while it ran, once it has printed
 * findings, is not waited for (-EBUSY: the findings would repeat). */
static int check_once(void *arg)
{
	struct dev_check_out *o = arg;
	int rv;

	memset(&o->sum, 0, sizeof(o->sum));
	rv = kv_dev_check(o->device, dev_check_item, o, &o->sum);
	return rv == KV_ELOCKED && o->lines > 0 ? -EBUSY : rv;
}

int device_check(const char *device)
{
	struct dev_check_out o = {.device = device};
	struct kv_dev_check_summary sum;
	char err[512];
	int rv;

	if (config_device_usable("device", device, err, sizeof(err)) != 0) {
		kvd_say(stderr, LOG_ERR, "cannot check: %s", err);
		return 2;
	}
	rv = device_lock_wait(device, check_once, &o);
	sum = o.sum;
	fflush(stdout);
	if (rv == KV_ELOCKED || rv == -EBUSY) {
		kvd_say(stderr, LOG_ERR, "%s is in use by a running kvd; stop it (or check a copy)",
		        device);
		return 2;
	}
	if (rv == KV_EFORMAT || rv == KV_ECORRUPT) {
		kvd_say(stderr, LOG_ERR,
		        "cannot check %s: no superblock copy or no catalog slot is sound (%s): "
		        "not a kvd device (kvd --format makes one), or damaged beyond them",
		        device, kv_strerror(rv));
		return 2;
	}
	if (rv != 0) {
		kvd_say(stderr, LOG_ERR, "cannot check %s: %s", device, kv_strerror(rv));
		return 2;
	}
	if (o.damaged < sum.damaged)
		o.damaged = sum.damaged;
	printf("%" PRIu32 " tenant(s), %" PRIu32 " extent(s) in use, %" PRIu32 " free, %" PRIu64
	       " records checked: %s\n",
	       sum.tenants, sum.extents_used, sum.extents_free, sum.records,
	       o.damaged ? "damage found" : "no damage");
	return o.damaged ? 1 : 0;
}
