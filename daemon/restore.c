/*
 * restore.c — kvd --restore DIR --tenant NAME [--force]: a backup written
 * by the Backup method (kvctl tenant backup) made a tenant of the data
 * directory or device kvd is configured with, while no kvd serves it (the
 * store's lock, taken by open_store, says so). docs/BACKUP.md.
 */
#include "kvd.h"

#include "log.h"

#include <errno.h>
#include <string.h>

int restore_run(struct kvd *d)
{
	const char *dir = d->restore_dir, *name = d->restore_tenant;
	const char *where = d->cfg.device[0] != '\0' ? d->cfg.device : d->cfg.data_dir;
	int rv;

	if (!kv_tenant_name_valid(name, strlen(name))) {
		kvd_say(stderr, LOG_ERR,
		        "--tenant '%s': a tenant name is 1-64 characters of [A-Za-z0-9._-], not "
		        "starting with '.'",
		        name);
		return 2;
	}
	rv = kv_store_restore(d->store, name, dir, d->restore_force);
	switch (rv) {
	case 0:
		kvd_say(stdout, LOG_NOTICE, "restored %s as tenant %s of %s", dir, name, where);
		return 0;
	case -EEXIST:
		kvd_say(stderr, LOG_ERR,
		        "tenant %s already exists in %s; --force drops it and restores over it",
		        name, where);
		return 1;
	case -ENOENT:
		kvd_say(stderr, LOG_ERR,
		        "%s is not a whole backup (no TENANT, BACKUP or META file in it, or no "
		        "such directory)",
		        dir);
		return 1;
	case KV_EREFUSED:
		kvd_say(stderr, LOG_ERR, "%s/TENANT is damaged: not restored", dir);
		return 1;
	case -ENOTSUP:
		kvd_say(stderr, LOG_ERR,
		        "%s is shared by several nodes: restore into a device of one node, or a "
		        "data directory",
		        where);
		return 1;
	case -EPERM:
		kvd_say(stderr, LOG_ERR,
		        "tenant default cannot be dropped: restore it under "
		        "another name");
		return 1;
	default:
		kvd_say(stderr, LOG_ERR, "cannot restore %s as tenant %s of %s: %s", dir, name,
		        where, kv_strerror(rv));
		return 1;
	}
}
