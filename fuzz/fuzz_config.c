/*
 * fuzz_config — kvd's settings file parser (daemon/config.c: config_load
 * and its own line parser, parse_size, config_check) against arbitrary
 * bytes. The input is the file; it is read back through a memfd's
 * /proc/self/fd path, as kvd would read /etc/kvd/kvd.conf.
 *
 * Invariants: config_load returns 0 or -EINVAL, with a one-line reason
 * exactly when it fails; the settings can always be released (every
 * string NUL-terminated in its array, at most KVD_LISTEN_MAX listen
 * addresses); after a successful load they are sane (no NULL listen
 * address, a known log level, ipc_mode within 0777, a sync mode of the
 * three; an empty ipc_mode refused, not taken as 0) and config_check
 * neither crashes nor fails without a reason;
 * config_release frees everything (LeakSanitizer). parse_size on each
 * line agrees with a plain reference (digits, one K/M/G/T suffix with
 * optional "i" and "B", no overflow).
 */
#include "fuzz.h"

#include "config.h"
#include "log.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static int memfd = -1;
static char path[64];

static bool terminated(const char *s, size_t cap)
{
	return memchr(s, '\0', cap) != NULL;
}

/* parse_size, written out again: digits, then an optional K/M/G/T with an
 * optional "i" and "B", nothing else, and no overflow. */
static int ref_size(const char *s, uint64_t *ret)
{
	unsigned __int128 v = 0;
	uint64_t mul = 1;
	const char *p = s;

	if (*p < '0' || *p > '9')
		return -EINVAL;
	while (*p >= '0' && *p <= '9') {
		v = v * 10 + (unsigned)(*p++ - '0');
		if (v > UINT64_MAX)
			return -EINVAL;
	}
	switch (*p) {
	case '\0': break;
	case 'k': case 'K': mul = 1ull << 10; p++; break;
	case 'm': case 'M': mul = 1ull << 20; p++; break;
	case 'g': case 'G': mul = 1ull << 30; p++; break;
	case 't': case 'T': mul = 1ull << 40; p++; break;
	default: return -EINVAL;
	}
	if (mul != 1 && (*p == 'i' || *p == 'I'))
		p++;
	if (mul != 1 && (*p == 'b' || *p == 'B'))
		p++;
	if (*p != '\0' || v * mul > UINT64_MAX)
		return -EINVAL;
	*ret = (uint64_t)(v * mul);
	return 0;
}

static void check_sizes(const uint8_t *data, size_t size)
{
	char line[128];
	size_t i = 0;

	/* each line of the input (up to 127 bytes) as a size */
	while (i < size) {
		size_t n = 0;
		uint64_t got = 1, want = 2;
		int rv, ref;
		while (i < size && data[i] != '\n' && n < sizeof(line) - 1)
			line[n++] = (char)data[i++];
		line[n] = '\0';
		i++;
		if (strlen(line) != n)
			continue; /* a NUL inside: parse_size sees a shorter string */
		rv = parse_size(line, &got);
		ref = ref_size(line, &want);
		FZ_CHECK(rv == 0 || rv == -EINVAL);
		FZ_CHECK(rv == ref);
		if (rv == 0)
			FZ_CHECK(got == want);
	}
}

/* A line "ipc_mode =" (or ':') with nothing after it, at the start of a
 * line. */
static bool empty_ipc_mode(const uint8_t *data, size_t size)
{
	static const char key[] = "ipc_mode";
	size_t i = 0;

	while (i < size) {
		size_t j = i;
		if (size - i >= sizeof(key) - 1 && memcmp(data + i, key, sizeof(key) - 1) == 0) {
			j = i + sizeof(key) - 1;
			while (j < size && (data[j] == ' ' || data[j] == '\t'))
				j++;
			if (j < size && (data[j] == '=' || data[j] == ':')) {
				j++;
				while (j < size && (data[j] == ' ' || data[j] == '\t' || data[j] == '\r'))
					j++;
				if (j == size || data[j] == '\n')
					return true;
			}
		}
		while (j < size && data[j] != '\n')
			j++;
		i = j + 1;
	}
	return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kvd_config c;
	char err[256];
	int rv, crv;

	if (memfd < 0) {
		memfd = memfd_create("fuzz_config", MFD_CLOEXEC);
		FZ_CHECK(memfd >= 0);
		snprintf(path, sizeof(path), "/proc/self/fd/%d", memfd);
	}
	FZ_CHECK(ftruncate(memfd, 0) == 0);
	FZ_CHECK(size == 0 || pwrite(memfd, data, size, 0) == (ssize_t)size);

	check_sizes(data, size);

	config_defaults(&c);
	memset(err, 0x5a, sizeof(err));
	rv = config_load(&c, path, err, sizeof(err));
	FZ_CHECK(rv == 0 || rv == -EINVAL);
	FZ_CHECK(terminated(err, sizeof(err)));
	FZ_CHECK((rv != 0) == (err[0] != '\0'));
	FZ_CHECK(strchr(err, '\n') == NULL); /* one line */
	/* whatever happened, the settings can be released and printed */
	FZ_CHECK(terminated(c.data_dir, sizeof(c.data_dir)));
	FZ_CHECK(terminated(c.token, sizeof(c.token)));
	FZ_CHECK(terminated(c.tls_cert, sizeof(c.tls_cert)));
	FZ_CHECK(terminated(c.tls_key, sizeof(c.tls_key)));
	FZ_CHECK(c.nlisten >= 0 && c.nlisten <= KVD_LISTEN_MAX);
	if (rv != 0) {
		/* both callers (start, SIGHUP) throw a failed load away whole;
		 * the value of the failing line may have been stored (log_level
		 * -1, say), so nothing more is promised */
		config_release(&c);
		return 0;
	}
	for (int i = 0; i < c.nlisten; i++)
		FZ_CHECK(c.listen[i] != NULL);
	FZ_CHECK(c.log_level >= LOG_ERR && c.log_level <= LOG_DEBUG);
	FZ_CHECK(c.ipc_mode <= 0777);
	/* an empty ipc_mode is refused, not read as mode 0 */
	FZ_CHECK(!empty_ipc_mode(data, size));
	FZ_CHECK(c.defaults.sync == KV_SYNC_ALWAYS || c.defaults.sync == KV_SYNC_INTERVAL ||
	         c.defaults.sync == KV_SYNC_NONE);

	memset(err, 0x5a, sizeof(err));
	crv = config_check(&c, err, sizeof(err));
	FZ_CHECK(crv == 0 || crv == -EINVAL);
	if (crv != 0)
		FZ_CHECK(terminated(err, sizeof(err)) && err[0] != '\0');
	config_release(&c);
	FZ_CHECK(c.nlisten == 0);
	return 0;
}
