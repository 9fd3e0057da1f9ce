/* test_tenant_file.c — TENANT files: written with a checksum line and read back; read without one (older kvd); every single flipped bit, a stray line, a value out of range, a directory or a missing file beside a database refused with the line named. */
#include "testutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "tenant_file.h"

static struct kv_tenant_config sample(void)
{
	struct kv_tenant_config c;

	kv_tenant_config_init(&c);
	c.sync = KV_SYNC_INTERVAL;
	c.sync_interval_ms = 50;
	c.history_versions = 5;
	c.default_ttl_ms = 30000;
	c.max_keys = 1000000;
	c.compression = KV_CODEC_ZSTD;
	c.compression_level = 7;
	c.max_bytes = 1u << 30;
	c.evict = KV_EVICT_OLDEST;
	return c;
}

static void assert_config_equal(const struct kv_tenant_config *a, const struct kv_tenant_config *b)
{
	assert_int_equal(a->sync, b->sync);
	assert_int_equal(a->sync_interval_ms, b->sync_interval_ms);
	assert_int_equal(a->history_versions, b->history_versions);
	assert_int_equal(a->default_ttl_ms, b->default_ttl_ms);
	assert_int_equal(a->max_keys, b->max_keys);
	assert_int_equal(a->compression, b->compression);
	assert_int_equal(a->compression_level, b->compression_level);
	assert_int_equal(a->max_bytes, b->max_bytes);
	assert_int_equal(a->evict, b->evict);
}

/* Parses text; returns the status, the reason in why. */
static int parse(const char *text, struct kv_tenant_config *c, char *why, size_t size)
{
	kv_tenant_config_init(c);
	return tenant_file_parse(text, strlen(text), why, size, c);
}

static void test_written_file_reads_back(void **state)
{
	struct kv_tenant_config c = sample(), got;
	char text[512], why[256];
	const char *last;

	(void)state;
	assert_int_equal(tenant_file_format(&c, text, sizeof(text)), 0);
	/* the checksum line is the last line */
	last = strstr(text, "crc32c = ");
	assert_non_null(last);
	assert_int_equal(strlen(last), strlen("crc32c = 01234567\n"));
	assert_int_equal(parse(text, &got, why, sizeof(why)), 0);
	assert_config_equal(&got, &c);
	/* the largest values round-trip */
	c.sync = KV_SYNC_NONE;
	c.sync_interval_ms = UINT32_MAX;
	c.history_versions = UINT32_MAX;
	c.default_ttl_ms = UINT64_MAX;
	c.max_keys = UINT64_MAX;
	c.max_bytes = UINT64_MAX;
	assert_int_equal(tenant_file_format(&c, text, sizeof(text)), 0);
	assert_int_equal(parse(text, &got, why, sizeof(why)), 0);
	assert_config_equal(&got, &c);
	assert_int_equal(tenant_file_format(&c, text, 40), -ENOBUFS);
}

/* A TENANT as kvd wrote it before the checksum line: read as before. */
static void test_file_without_checksum(void **state)
{
	struct kv_tenant_config c = sample(), got;
	char why[256];

	(void)state;
	assert_int_equal(parse("# kvd tenant configuration\n[tenant]\nsync = interval\n"
	                       "sync_interval_ms = 50\nhistory = 5\nttl_ms = 30000\n"
	                       "max_keys = 1000000\n",
	                       &got, why, sizeof(why)),
	                 0);
	/* (no compression line: an older kvd wrote none) */
	c.compression = KV_CODEC_NONE;
	c.compression_level = 0;
	/* (nor max_bytes or evict lines: unlimited, refuse) */
	c.max_bytes = 0;
	c.evict = KV_EVICT_REFUSE;
	assert_config_equal(&got, &c);
	/* settings it leaves out keep the defaults it was given */
	assert_int_equal(parse("[tenant]\nhistory = 7\n", &got, why, sizeof(why)), 0);
	assert_int_equal(got.history_versions, 7);
	assert_int_equal(got.sync, KV_SYNC_ALWAYS);
	/* blanks, CRLF and comments as an editor may leave them */
	assert_int_equal(parse("; edited\r\n  [ tenant ]  \r\n\thistory=3 \r\n\n# end\n", &got, why,
	                       sizeof(why)),
	                 0);
	assert_int_equal(got.history_versions, 3);
}

/* Each damaged text is refused, and the reason names the line and what. */
static void test_damage_is_named(void **state)
{
	static const struct {
		const char *text, *why;
	} cases[] = {
		{"", "empty"},
		{"# only a comment\n", "no [tenant] section"},
		{"[tenant]\nhistory = 0\n", "line 2: 'history' = 0 is out of range (1..4294967295)"},
		{"[tenant]\nhistory = 4294967296\n", "line 2: 'history' = 4294967296 is out of range"},
		{"[tenant]\nhistory = 4294967297\n", "line 2: 'history' = 4294967297 is out of range"},
		{"[tenant]\nsync_interval_ms = 4294967296\n", "line 2: 'sync_interval_ms'"},
		{"[tenant]\nttl_ms = 18446744073709551616\n", "line 2: 'ttl_ms' = 18446744073709551616 is out of range"},
		{"[tenant]\nmax_keys = -1\n", "line 2: bad value '-1' for 'max_keys'"},
		{"[tenant]\nhistory = 5 ; five\n", "line 2: bad value '5 ; five'"},
		{"[tenant]\nsync = sometimes\n", "line 2: bad value 'sometimes' for 'sync'"},
		{"[tenant]\ncompression = gzip\n", "line 2: bad value 'gzip' for 'compression'"},
		{"[tenant]\ncompression = zstd:23\n", "line 2: bad value 'zstd:23' for 'compression'"},
		{"[tenant]\ncompression = zstd:0\n", "line 2: bad value 'zstd:0' for 'compression'"},
		{"[tenant]\ncompression = lz4:1\n", "line 2: bad value 'lz4:1' for 'compression'"},
		{"[tenant]\nevict = lru\n", "line 2: bad value 'lru' for 'evict' (refuse or oldest)"},
		{"[tenant]\nevict = Oldest\n", "line 2: bad value 'Oldest' for 'evict'"},
		{"[tenant]\nmax_bytes = 1k\n", "line 2: bad value '1k' for 'max_bytes'"},
		{"[tenant]\nmax_bytes = 18446744073709551616\n",
		 "line 2: 'max_bytes' = 18446744073709551616 is out of range"},
		{"[tenant]\nhistroy = 5\n", "line 2: unknown setting 'histroy'"},
		{"# kvd tenant configuration\n[te\xff" "ant]\nhistory = 5\n", "line 2: unknown section '[te\\xffant]'"},
		{"[tenant]\nhistory = 5\ngarbage line\n", "line 3: not INI: 'garbage line'"},
		{"history = 5\n[tenant]\n", "line 1: 'history = 5' before [tenant]"},
		{"[tenant\n", "line 1: not INI"},
		{"[tenant]\nsync = interval\nsync_interval_ms = 0\n", "sync = interval with sync_interval_ms = 0"},
		{"[tenant]\nhistory = 5\ncrc32c = 0000000\n", "line 3: damaged checksum line"},
		{"[tenant]\nhistory = 5\ncrc32c = 0000000g\n", "line 3: damaged checksum line"},
		{"[tenant]\nhistory = 5\n#rc32c = 00000000\n", "line 3: damaged checksum line"},
		{"[tenant]\nhistory = 5\ncrc32c = 00000000\n", "checksum mismatch: line 3 says 00000000"},
		{"[tenant]\ncrc32c = 00000000\nhistory = 5\n", "line 2: the checksum line is not the last line"},
	};
	struct kv_tenant_config c;
	char why[256];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		why[0] = '\0';
		assert_int_equal(parse(cases[i].text, &c, why, sizeof(why)), KV_EREFUSED);
		if (strstr(why, cases[i].why) == NULL)
			fail_msg("case %zu: '%s' does not contain '%s'", i, why, cases[i].why);
	}
	/* a NUL byte */
	assert_int_equal(tenant_file_parse("[tenant]\nhis\0tory = 5\n", 22, why, sizeof(why), &c),
	                 KV_EREFUSED);
	assert_string_equal(why, "line 2: a NUL byte");
}

/* One flipped bit anywhere in a written TENANT is refused, never read as
 * other settings (or as a file without a checksum). */
static void test_every_flipped_bit_is_refused(void **state)
{
	struct kv_tenant_config c = sample(), got;
	char text[512], copy[512], why[256];
	size_t len, i;
	int bit;

	(void)state;
	assert_int_equal(tenant_file_format(&c, text, sizeof(text)), 0);
	len = strlen(text);
	for (i = 0; i < len; i++) {
		for (bit = 0; bit < 8; bit++) {
			memcpy(copy, text, len);
			copy[i] = (char)(copy[i] ^ (1 << bit));
			kv_tenant_config_init(&got);
			if (tenant_file_parse(copy, len, why, sizeof(why), &got) != KV_EREFUSED)
				fail_msg("bit %d of byte %zu ('%c') flipped: accepted", bit, i, text[i]);
		}
	}
	/* a line appended after the checksum line */
	snprintf(copy, sizeof(copy), "%sgarbage line\n", text);
	assert_int_equal(parse(copy, &got, why, sizeof(why)), KV_EREFUSED);
	assert_non_null(strstr(why, "not the last line"));
}

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

/* kv_tenant_file_read on a directory: a missing TENANT is "not a tenant"
 * only while the directory holds no database; TENANT must be a file. */
static void test_read_from_a_directory(void **state)
{
	char *dir = tu_mkdtemp("tenantfile"), *tenant = tu_path(dir, "TENANT"),
	     *seg = tu_path(dir, "00000001.seg"), why[256];
	struct kv_tenant_config c = sample(), got;
	char text[512];

	(void)state;
	/* nothing there, or what a creation cut short leaves: not a tenant */
	assert_int_equal(kv_tenant_file_read(dir, NULL, why, sizeof(why), &got), -ENOENT);
	{
		char *tmp = tu_path(dir, "TENANT.tmp");
		write_text(tmp, "[tenant]\n");
		free(tmp);
	}
	assert_int_equal(kv_tenant_file_read(dir, NULL, why, sizeof(why), &got), -ENOENT);
	/* a database without TENANT */
	write_text(seg, "x");
	assert_int_equal(kv_tenant_file_read(dir, NULL, why, sizeof(why), &got), KV_EREFUSED);
	assert_string_equal(why, "no TENANT file, but the directory holds a database "
	                         "('00000001.seg')");
	/* TENANT a directory */
	assert_int_equal(mkdir(tenant, 0755), 0);
	assert_int_equal(kv_tenant_file_read(dir, NULL, why, sizeof(why), &got), KV_EREFUSED);
	assert_string_equal(why, "not a regular file (a directory)");
	assert_int_equal(rmdir(tenant), 0);
	/* a FIFO: refused, without hanging */
	assert_int_equal(mkfifo(tenant, 0644), 0);
	assert_int_equal(kv_tenant_file_read(dir, NULL, why, sizeof(why), &got), KV_EREFUSED);
	assert_string_equal(why, "not a regular file (a special file)");
	assert_int_equal(unlink(tenant), 0);
	/* a sound one */
	assert_int_equal(tenant_file_format(&c, text, sizeof(text)), 0);
	write_text(tenant, text);
	assert_int_equal(kv_tenant_file_read(dir, NULL, why, sizeof(why), &got), 0);
	assert_config_equal(&got, &c);
	/* too large to be one */
	{
		FILE *f = fopen(tenant, "a");
		for (int i = 0; i < TENANT_FILE_MAX; i++)
			fputc('#', f);
		fclose(f);
	}
	assert_int_equal(kv_tenant_file_read(dir, NULL, why, sizeof(why), &got), KV_EREFUSED);
	assert_string_equal(why, "larger than 4096 bytes");
	tu_rmtree(dir);
	free(dir);
	free(tenant);
	free(seg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_written_file_reads_back),
		cmocka_unit_test(test_file_without_checksum),
		cmocka_unit_test(test_damage_is_named),
		cmocka_unit_test(test_every_flipped_bit_is_refused),
		cmocka_unit_test(test_read_from_a_directory),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
