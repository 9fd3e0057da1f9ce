/*
 * config.h — kvd's settings: defaults, the INI file (/etc/kvd/kvd.conf by
 * default; read by config.c itself, lines of any length), and command-line
 * flags, which win.
 * docs/kvd.conf.5 / systemd/kvd.conf list every setting.
 */
#ifndef KVD_CONFIG_H
#define KVD_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvengine.h"

#define KVD_LISTEN_MAX 8
#define KVD_MESSAGE_SIZE_MAX (4ull << 30) /* max_message_size at most */
#define KVD_DEFAULT_CONFIG "/etc/kvd/kvd.conf"
#define KVD_DEFAULT_LISTEN "ipc:///run/kvd/kvd.sock"        /* nng REQ/REP */
#define KVD_DEFAULT_LISTEN_STREAM "kv+ipc:///run/kvd/kv.sock" /* kvd's own framing */
#define KVD_DEFAULT_DATA "/var/lib/kvd"
/* device_cache at least (0: the engine's default, KV_DEV_CACHE_DEFAULT) */
#define KVD_DEVICE_CACHE_MIN (1ull << 20)
#define KVD_LEASE_TTL_DEFAULT 10 /* s; lease_ttl */
#define KVD_LEASE_TTL_MAX 3600

struct kvd_config {
	char data_dir[4096];   /* the files backend's directory; unused with device */
	char device[4096];     /* a block device (or a file used as one) holding every
	                          tenant (kv_store_options.device); "": the files backend */
	uint64_t device_cache; /* bytes of the device backend's read cache; 0: its default */
	uint32_t device_node;  /* which node of a shared device this kvd is, 1..nodes
	                          (kv_store_options.device_node; docs/SCALEOUT.md) */
	char *listen[KVD_LISTEN_MAX];
	int nlisten;
	uint32_t workers;         /* 0: one per CPU */
	int log_level;            /* LOG_* */
	uint32_t idle_timeout_s;  /* 0: never passivate for idleness */
	uint64_t memory_budget;   /* bytes of key directories; 0: none */
	uint64_t max_message_size;
	uint32_t max_value_size;
	uint32_t contexts;        /* requests served at once per listener socket */
	uint32_t max_connections; /* connections open at once on each kv+ipc:// and kv+tcp://
	                             listener (each listener counts its own) */
	uint32_t client_timeout_s; /* close a kv+ connection idle this long; 0: never */
	uint32_t frame_timeout_s;  /* a started hello or frame must be whole within; 0: never */
	uint32_t auth_guesses;     /* unknown tokens a source may send in a minute; 0: no limit */
	uint64_t input_budget;     /* bytes of large partial frames held at once, all kv+
	                              connections together (at least max_message_size) */
	uint64_t output_budget;    /* bytes of replies waiting for kv+ clients to read them,
	                              all together, before connections holding some pause */
	bool auto_create;
	char token[256];          /* legacy: one token with daemon=admin, tenant=*:admin */
	char tokens_file[4096];   /* tokens, their hashes and grants (auth.h); "": none */
	char tls_cert[4096];      /* PEM certificate chain and key for tls+tcp:// and kv+tls:// */
	char tls_key[4096];
	char tls_client_ca[4096]; /* kv+tls://: CAs client certificates are verified with */
	uint32_t tls_client_auth; /* kv+tls://: KVD_TLS_CLIENT_NONE, _OPTIONAL or _REQUIRE */
	uint32_t ipc_mode;        /* permissions of ipc:// and kv+ipc:// socket files */
	uint64_t segment_size;
	uint32_t open_files;      /* segment files open at most; 0: half of RLIMIT_NOFILE */
	uint32_t max_queue;       /* requests queued per worker before RESOURCE_EXHAUSTED */
	uint32_t upload_idle_ms;  /* a blob upload with no request this long is aborted */
	char metrics_listen[256]; /* HOST:PORT of the Prometheus endpoint (metrics.c); "": off */
	struct kv_tenant_config defaults;
	/* cluster mode (docs/CLUSTER.md); etcd "": a single node, no etcd */
	char etcd[1024];          /* etcd endpoints, comma-separated http(s):// URLs */
	char cluster[65];         /* the cluster's name: its keys' prefix in etcd */
	char node_id[65];         /* this node's id; "": the host name */
	char advertise[256];      /* where clients are sent; "": the first kv+tcp:// listener */
	uint32_t lease_ttl_s;     /* the node's etcd lease */
};

/* tls_client_auth: whether a kv+tls:// client is asked for a certificate. */
enum {
	KVD_TLS_CLIENT_DEFAULT,  /* not set: REQUIRE with tls_client_ca, else NONE */
	KVD_TLS_CLIENT_NONE,     /* not asked for one */
	KVD_TLS_CLIENT_OPTIONAL, /* asked; one that is sent must verify against tls_client_ca */
	KVD_TLS_CLIENT_REQUIRE,  /* a handshake without a verified one fails */
};

void config_defaults(struct kvd_config *c);
/* Reads an INI file into c. A missing file is -ENOENT, a directory -EISDIR
 * (any other non-regular file -EINVAL); an unknown section or key, a bad
 * value or a line that is not INI is -EINVAL; each with a one-line reason,
 * naming the file and the line, in err. */
int config_load(struct kvd_config *c, const char *path, char *err, size_t errlen);
/* Checks the combination (at least one listener, sizes in range) and, when
 * a device is set, the device itself (config_device_usable). */
int config_check(const struct kvd_config *c, char *err, size_t errlen);
/* Whether path can be a kvd device: it exists and is a block device or a
 * regular file (one used as a device). 0, or -errno from stat (-ENOENT…)
 * or -ENOTBLK (another kind of file) with one line in err naming path as
 * "what" ("device", "--format"…). Nothing is opened. */
int config_device_usable(const char *what, const char *path, char *err, size_t errlen);
void config_release(struct kvd_config *c);
/* Replaces the listen list. */
int config_set_listen(struct kvd_config *c, char *const *urls, int n);

/* "64M", "1G", "4096" -> bytes; -EINVAL on junk or overflow. */
int parse_size(const char *s, uint64_t *ret);

#endif
