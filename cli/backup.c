/* backup.c — kvctl tenant backup: kvd writes a tenant's backup into a
 * directory on its own host (docs/BACKUP.md). */
#include "kvctl.h"

#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cmd_tenant_backup(struct kvctl *k, int argc, char **argv)
{
	struct kvctl_opts oi;
	struct kvc_status st;
	struct kvc_call call = {.status = &st};
	struct kvc_backup_result r;
	const char *name, *dir;
	json_t *doc;
	int rv;

	kvctl_opts_begin(k, &oi, "tenant backup", NULL);
	if (kvctl_opts_next(k, &oi, argc, argv) != -1)
		return KVCTL_EXIT_USAGE;
	if (argc - optind != 2)
		return kvctl_usage(k, "usage: kvctl tenant backup NAME DIR");
	name = argv[optind];
	dir = argv[optind + 1];
	kvctl_what(k, "tenant backup", name, strlen(name));
	if (dir[0] != '/')
		return kvctl_usage(k,
		                   "tenant backup: DIR must be an absolute path (on kvd's host)");
	if ((rv = kvctl_connect(k)) != 0)
		return rv;
	if ((rv = kvc_tenant_backup(k->c, &call, name, dir, &r)) != 0)
		return kvctl_fail(k, rv, &st);
	doc = json_pack(
	        "{s:s,s:s,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "name", name, "dir", dir, "version",
	        kvctl_json_u64(r.version), "segments", kvctl_json_u64(r.segments),
	        "segments_linked", kvctl_json_u64(r.segments_linked), "bytes_linked",
	        kvctl_json_u64(r.bytes_linked), "bytes_copied", kvctl_json_u64(r.bytes_copied),
	        "files", kvctl_json_u64(r.files), "elapsed_us", kvctl_json_u64(r.elapsed_us));
	if (k->json)
		return kvctl_emit_json(k, doc);
	json_decref(doc);
	printf("version: %" PRIu64 "\n", r.version);
	printf("segments: %" PRIu64 " (%" PRIu64 " linked)\n", r.segments, r.segments_linked);
	printf("bytes_linked: %" PRIu64 "\n", r.bytes_linked);
	printf("bytes_copied: %" PRIu64 "\n", r.bytes_copied);
	printf("files: %" PRIu64 "\n", r.files);
	printf("elapsed_ms: %" PRIu64 "\n", r.elapsed_us / 1000);
	return kvctl_finish(k);
}
