/*
 * device.h — kvd's offline commands for a block device (or a regular file
 * used as one): kvd --format DEVICE and kvd --check DEVICE. Both run
 * instead of serving and return kvd's exit status; they print what they
 * found or why they failed (kvd_say, printf), once, as main's other
 * offline commands do. Serving on a device is main.c's open_store
 * (kv_store_options.device), which waits for the device's lock as --check
 * does (device_lock_wait).
 */
#ifndef KVD_DEVICE_H
#define KVD_DEVICE_H

#include <stdbool.h>

/* kvd --format DEVICE [--extent-size SIZE] [--nodes N] [--force]:
 * extent_size NULL for the engine's default, nodes NULL for one node (a
 * device shared by N nodes: docs/SCALEOUT.md). 0 formatted; 1 refused or
 * failed (one line on stderr: the engine's reason); 2 a bad --extent-size
 * or --nodes. */
int device_format(const char *device, const char *extent_size, const char *nodes, bool force);

/* kvd --check DEVICE: one line per finding, then a summary line. 0 nothing
 * damaged; 1 damage found; 2 the device could not be checked (in use by a
 * kvd, not a kvd device, unreadable). */
int device_check(const char *device);

/* How long kvd waits for a device's lock before it refuses the device as
 * in use (serving, kvd --check): a kvd that was killed holds the lock until
 * the kernel has torn its io_uring rings down, which happens after the
 * process was reaped (a few ms). */
#define DEVICE_LOCK_WAIT_MS 5000
#define DEVICE_LOCK_POLL_MS 20

/* Calls attempt(arg) until it returns anything but KV_ELOCKED or
 * DEVICE_LOCK_WAIT_MS have passed, every DEVICE_LOCK_POLL_MS; returns its
 * last return. Says once on stderr that it waits for device's lock. */
int device_lock_wait(const char *device, int (*attempt)(void *arg), void *arg);

#endif
