/*
 * server_internal.h — what server.c shares with the rest of the server side
 * (server_blob.c): reading arguments and answering errors.
 */
#ifndef KV_RPC_SERVER_INTERNAL_H
#define KV_RPC_SERVER_INTERNAL_H

#include "server.h"

/* A key argument: bin, 1..KV_KEY_SIZE_MAX bytes. 0, or -EINVAL with the
 * error reply in out. */
int rpc_arg_key(const struct rpc_req *r, struct rpc_reply *out, const char *field,
                const void **ret, size_t *ret_len);
/* An optional unsigned argument (*ret untouched when absent). 0, or
 * -EINVAL with the error reply in out. */
int rpc_arg_uint(const struct rpc_req *r, struct rpc_reply *out, const char *field,
                 uint64_t *ret);
/* The arguments of a read of one key: key, and version / as_of (absent:
 * 0) into *ret_ro. 0, or -EINVAL with the error reply in out. */
int rpc_arg_read(const struct rpc_req *r, struct rpc_reply *out, const void **ret_key,
                 size_t *ret_len, struct kv_read_opts *ret_ro);
/* The reply for an engine error (rpc_status_of, rpc_message_of). */
void rpc_reply_kv_error(struct rpc_reply *rp, uint64_t id, int err);

/* BlobInfo, BlobRead (server_blob.c). */
void rpc_run_blob_info(kv_tenant *t, const struct rpc_req *r, struct rpc_reply *out);
void rpc_run_blob_read(kv_tenant *t, const struct rpc_req *r, struct rpc_reply *out);

#endif
