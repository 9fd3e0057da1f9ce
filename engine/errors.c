/* errors.c — kv_strerror: one line for every KV_E* code and errno. */
#include "kvengine.h"

#include <string.h>

const char *kv_strerror(int err)
{
	switch (err) {
	case 0:
		return "success";
	case KV_ENOTFOUND:
		return "key not found";
	case KV_ECONFLICT:
		return "version mismatch (if_version)";
	case KV_ECORRUPT:
		return "stored record failed its checksum (data loss)";
	case KV_EREADONLY:
		return "database is read-only after an I/O error";
	case KV_EKEYSIZE:
		return "key is empty or longer than the maximum key size";
	case KV_EVALSIZE:
		return "value is longer than the maximum value size";
	case KV_ECOMPACTED:
		return "requested version is older than the retained history";
	case KV_ELOCKED:
		return "database is locked by another process";
	case KV_EFORMAT:
		return "unrecognised on-disk format";
	case KV_ECLOSED:
		return "database is closing";
	case KV_EMAXKEYS:
		return "maximum number of keys reached";
	case KV_EEND:
		return "end of iteration";
	case KV_EBATCHSIZE:
		return "batch too large";
	case KV_EREFUSED:
		return "tenant refused: its TENANT file is missing or damaged";
	case KV_ENOTBLOB:
		return "the value is not a blob";
	default:
		break;
	}
	if (err < 0 && err > -4096)
		return strerror(-err);
	return "unknown error";
}
