/* test-client.c — a program built against the installed libkvclient-dev
 * (cc test-client.c $(pkg-config --cflags --libs kvclient)) writes a key,
 * reads it back and asks for kvd's health, through the default endpoint
 * (kv+ipc:///run/kvd/kv.sock) or argv[1]. packaging/test-install.sh runs it.
 * Exit 0 when every step worked. */
#include <kvclient.h>
#include <stdio.h>
#include <string.h>

static int fail(const char *what, int rv, const struct kvc_status *st)
{
	fprintf(stderr, "test-client: %s: %s (%s)\n", what, kvc_code_name(rv), st->message);
	return 1;
}

int main(int argc, char **argv)
{
	static const char key[] = "from-c", value[] = "written by test-client";
	struct kvc_options o;
	struct kvc_status st = {0};
	struct kvc_call call = {.status = &st};
	struct kvc_write w = KVC_WRITE_INIT;
	struct kvc_value got = {0};
	struct kvc_health h;
	uint64_t version = 0;
	kvc *c = NULL;
	int rv, ret = 1;

	kvc_options_init(&o);
	if (argc > 1)
		o.endpoint = argv[1];
	if ((rv = kvc_open(&o, &c)) != 0)
		return fail("kvc_open", rv, &st);
	if ((rv = kvc_put(c, &call, key, strlen(key), value, strlen(value), &w, &version)) != 0) {
		ret = fail("kvc_put", rv, &st);
		goto out;
	}
	if ((rv = kvc_get(c, &call, key, strlen(key), 0, 0, &got)) != 0) {
		ret = fail("kvc_get", rv, &st);
		goto out;
	}
	if (got.len != strlen(value) || memcmp(got.data, value, got.len) != 0 ||
	    got.version != version) {
		fprintf(stderr, "test-client: read back %zu bytes at version %llu, wrote %zu at %llu\n",
		        got.len, (unsigned long long)got.version, strlen(value),
		        (unsigned long long)version);
		goto out;
	}
	if ((rv = kvc_health(c, &call, &h)) != 0) {
		ret = fail("kvc_health", rv, &st);
		goto out;
	}
	printf("test-client: %s = \"%s\" at version %llu; kvd %s %s\n", key, value,
	       (unsigned long long)version, h.version, h.status);
	ret = 0;
out:
	kvc_value_free(&got);
	kvc_close(c);
	return ret;
}
