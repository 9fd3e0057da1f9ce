/*
 * backup.h — what backup.c needs of the store (store.c) and shares with it.
 */
#ifndef KV_BACKUP_H
#define KV_BACKUP_H

#include "kvengine.h"
#include "storage.h"

/* The store's directory (NULL on a device) and its storage instance, which
 * the tenants' databases share. */
const char *store_dir_of(kv_store *s);
struct kv_storage *store_storage_of(kv_store *s);

#endif
