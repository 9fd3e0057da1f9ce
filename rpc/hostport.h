/*
 * hostport.h — splitting the HOST:PORT of a kv+tcp:// address: "host:7070",
 * "10.0.0.1:7070", "[::1]:7070"; an empty host (":7070") is left empty for
 * the caller to read as "every address" (a listener) or refuse (a client).
 */
#ifndef KV_RPC_HOSTPORT_H
#define KV_RPC_HOSTPORT_H

#include <stddef.h>

/* 0, with host and port (decimal digits) copied out; -1 when the text is not
 * HOST:PORT or a part does not fit. */
int rpc_hostport_split(const char *hostport, char *host, size_t host_cap, char *port,
                       size_t port_cap);

#endif
