/* hostport.c — the HOST:PORT part of kv+tcp:// addresses, for kvd and libkvclient. */
#include "hostport.h"

#include <string.h>

int rpc_hostport_split(const char *hostport, char *host, size_t host_cap, char *port,
                       size_t port_cap)
{
	const char *h = hostport, *p;
	size_t hl, pl;

	if (h[0] == '[') {
		const char *e = strchr(h, ']');
		if (e == NULL || e[1] != ':')
			return -1;
		hl = (size_t)(e - h - 1);
		h++;
		p = e + 2;
	} else {
		const char *colon = strrchr(h, ':');
		if (colon == NULL)
			return -1;
		hl = (size_t)(colon - h);
		p = colon + 1;
	}
	pl = strlen(p);
	if (hl >= host_cap || pl == 0 || pl >= port_cap || strspn(p, "0123456789") != pl)
		return -1;
	memcpy(host, h, hl);
	host[hl] = '\0';
	memcpy(port, p, pl + 1);
	return 0;
}
