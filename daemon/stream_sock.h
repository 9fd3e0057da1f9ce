/*
 * stream_sock.h — the stream transport's sockets: listening on kv+ipc://
 * and kv+tcp:// / kv+tls:// addresses, and naming a connection's peer.
 */
#ifndef KVD_STREAM_SOCK_H
#define KVD_STREAM_SOCK_H

#include <stdbool.h>
#include <stddef.h>

/* A listening Unix socket at path, mode its permissions (set before it
 * listens): a stale socket there (nobody accepting) is replaced, a live one
 * is -EADDRINUSE; -EINVAL for a path too long. err gets one line. */
int stream_listen_unix(const char *path, unsigned mode, int *ret, char *err, size_t errlen);
/* A listening TCP socket for url: kv+tcp:// or kv+tls://, then HOST:PORT,
 * [V6]:PORT, or *:PORT / :PORT for every address. -EINVAL (a bad address),
 * -EADDRINUSE (it cannot bind); err gets one line. */
int stream_listen_tcp(const char *url, int *ret, char *err, size_t errlen);
/* "uid U pid P" of a Unix socket's peer, "ADDRESS port P" of a TCP one
 * (auth.c's auth_source reads the source from these forms). */
void stream_peer_name(int fd, bool tcp, char *out, size_t len);

#endif
