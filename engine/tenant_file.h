/*
 * tenant_file.h — a tenant's TENANT file (docs/FORMAT.md): written by the
 * store, read by the store and by `kvd --check` (kv_tenant_file_read in
 * kvengine.h). Returns 0, a negative errno or KV_EREFUSED.
 */
#ifndef KV_TENANT_FILE_H
#define KV_TENANT_FILE_H

#include "kvengine.h"

#include <stddef.h>

/* A TENANT larger than this is damage (kvd writes about 150 bytes). */
#define TENANT_FILE_MAX 4096

/* The text of a TENANT file for c, checksum line included, into buf.
 * -ENOBUFS when it does not fit in cap bytes, -EINVAL for an invalid codec
 * or evict mode. */
int tenant_file_format(const struct kv_tenant_config *c, char *buf, size_t cap);

/* Parses len bytes of TENANT text. *ret holds the settings a line does not
 * give on entry (a TENANT written by an older kvd may lack some) and the
 * file's settings on success; untouched on failure. KV_EREFUSED with a
 * one-line reason ("line 3: unknown setting 'histroy'") in why. */
int tenant_file_parse(const char *text, size_t len, char *why, size_t why_size,
                      struct kv_tenant_config *ret);

#endif
