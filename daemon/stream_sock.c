/* stream_sock.c — the stream transport's sockets (stream_sock.h): its
 * listening Unix and TCP sockets, and the name of a connection's peer. */
#include "stream_sock.h"

#include "hostport.h"
#include "log.h"

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define STREAM_BACKLOG 1024

static void ensure_dir_of(const char *path)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)], *slash;

	snprintf(dir, sizeof(dir), "%s", path);
	if ((slash = strrchr(dir, '/')) == NULL || slash == dir)
		return;
	*slash = '\0';
	if (mkdir(dir, 0755) != 0 && errno != EEXIST)
		klog(LOG_WARNING, "cannot create %s: %m", dir);
}

int stream_listen_unix(const char *path, unsigned mode, int *ret, char *err, size_t errlen)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd, probe;

	if (path[0] == '\0' || strlen(path) >= sizeof(sa.sun_path)) {
		snprintf(err, errlen, "listen kv+ipc://%s: the path must be 1 to %zu bytes", path,
		         sizeof(sa.sun_path) - 1);
		return -EINVAL;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	ensure_dir_of(path);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) < 0)
		goto fail;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		if (errno != EADDRINUSE)
			goto fail;
		probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (probe >= 0 && connect(probe, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
			close(probe);
			errno = EADDRINUSE;
			goto fail;
		}
		if (probe >= 0)
			close(probe);
		if (unlink(path) != 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
			goto fail;
	}
	/* before listen(): nobody can connect yet */
	if (chmod(path, (mode_t)mode) != 0 || listen(fd, STREAM_BACKLOG) != 0)
		goto fail;
	*ret = fd;
	return 0;
fail:
	snprintf(err, errlen, "listen kv+ipc://%s: %s", path, strerror(errno));
	if (fd >= 0)
		close(fd);
	return -EADDRINUSE;
}

int stream_listen_tcp(const char *url, int *ret, char *err, size_t errlen)
{
	const char *hostport = url + 9;
	char host[256], port[16];
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
	                         .ai_socktype = SOCK_STREAM,
	                         .ai_flags = AI_PASSIVE | AI_NUMERICSERV},
	                *res = NULL;
	int fd = -1, one = 1, rv;

	if (rpc_hostport_split(hostport, host, sizeof(host), port, sizeof(port)) != 0)
		goto bad;
	if ((rv = getaddrinfo(host[0] == '\0' || strcmp(host, "*") == 0 ? NULL : host, port, &hints,
	                      &res)) != 0) {
		snprintf(err, errlen, "listen %s: %s", url, gai_strerror(rv));
		return -EINVAL;
	}
	fd = socket(res->ai_family, res->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
	            res->ai_protocol);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
	    bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, STREAM_BACKLOG) != 0) {
		snprintf(err, errlen, "listen %s: %s", url, strerror(errno));
		if (fd >= 0)
			close(fd);
		freeaddrinfo(res);
		return -EADDRINUSE;
	}
	freeaddrinfo(res);
	*ret = fd;
	return 0;
bad:
	snprintf(err, errlen, "listen %s: expected HOST:PORT or [ADDRESS]:PORT", url);
	return -EINVAL;
}

void stream_peer_name(int fd, bool tcp, char *out, size_t len)
{
	struct sockaddr_storage sa;
	socklen_t sl = sizeof(sa);
	char host[INET6_ADDRSTRLEN], port[8];
	struct ucred uc;
	socklen_t ul = sizeof(uc);

	if (!tcp && getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &ul) == 0)
		snprintf(out, len, "uid %u pid %d", (unsigned)uc.uid, (int)uc.pid);
	else if (tcp && getpeername(fd, (struct sockaddr *)&sa, &sl) == 0 &&
	         getnameinfo((struct sockaddr *)&sa, sl, host, sizeof(host), port, sizeof(port),
	                     NI_NUMERICHOST | NI_NUMERICSERV) == 0)
		snprintf(out, len, "%s port %s", host, port);
	else
		snprintf(out, len, "an unknown peer");
}
