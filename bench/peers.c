/*
 * bench/peers.c — the list of backends `kvbench engine` knows.
 *
 * The engine is always built, on files (engine) and on a block device
 * (engine-dev, which needs a device to format: kvbench ycsb --device). A peer is built when meson
 * found its library (KVB_HAVE_<NAME> is then defined and bench/peer_<name>.c is compiled);
 * otherwise it is listed here with no operations, and its rows say
 * "not built".
 */
#include "peers.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

extern const struct peer_backend peer_kvd;
extern const struct peer_backend peer_kvd_dev;

#ifdef KVB_HAVE_ROCKSDB
extern const struct peer_backend peer_rocksdb;
#else
static const struct peer_backend peer_rocksdb = {.name = "rocksdb"};
#endif

#ifdef KVB_HAVE_LEVELDB
extern const struct peer_backend peer_leveldb;
#else
static const struct peer_backend peer_leveldb = {.name = "leveldb"};
#endif

#ifdef KVB_HAVE_LMDB
extern const struct peer_backend peer_lmdb;
#else
static const struct peer_backend peer_lmdb = {.name = "lmdb"};
#endif

const struct peer_backend *const peer_backends[] = {
        &peer_kvd, &peer_kvd_dev, &peer_rocksdb, &peer_leveldb, &peer_lmdb,
};
const size_t peer_backend_count = sizeof peer_backends / sizeof peer_backends[0];

const struct peer_backend *peer_find(const char *name)
{
	for (size_t i = 0; i < peer_backend_count; i++)
		if (strcmp(peer_backends[i]->name, name) == 0)
			return peer_backends[i];
	return NULL;
}

void peer_errf(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL || len == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
}
