/* test_wire.c — wire.h, server.c and PROTOCOL.md agree: status codes, method names, version. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kvclient.h"
#include "server.h"
#include "wire.h"

/* The server's enums are numbered as the wire's. */
#define STATUS_SAME(name, code) _Static_assert((int)KVC_##name == (int)WIRE_##name, "KVC_" #name);
WIRE_STATUSES(STATUS_SAME)
#undef STATUS_SAME
_Static_assert((int)RPC_OK == (int)WIRE_OK, "OK");
_Static_assert((int)RPC_INVALID_ARGUMENT == (int)WIRE_INVALID_ARGUMENT, "INVALID_ARGUMENT");
_Static_assert((int)RPC_DEADLINE_EXCEEDED == (int)WIRE_DEADLINE_EXCEEDED, "DEADLINE_EXCEEDED");
_Static_assert((int)RPC_NOT_FOUND == (int)WIRE_NOT_FOUND, "NOT_FOUND");
_Static_assert((int)RPC_ALREADY_EXISTS == (int)WIRE_ALREADY_EXISTS, "ALREADY_EXISTS");
_Static_assert((int)RPC_RESOURCE_EXHAUSTED == (int)WIRE_RESOURCE_EXHAUSTED, "RESOURCE_EXHAUSTED");
_Static_assert((int)RPC_FAILED_PRECONDITION == (int)WIRE_FAILED_PRECONDITION,
               "FAILED_PRECONDITION");
_Static_assert((int)RPC_OUT_OF_RANGE == (int)WIRE_OUT_OF_RANGE, "OUT_OF_RANGE");
_Static_assert((int)RPC_UNIMPLEMENTED == (int)WIRE_UNIMPLEMENTED, "UNIMPLEMENTED");
_Static_assert((int)RPC_INTERNAL == (int)WIRE_INTERNAL, "INTERNAL");
_Static_assert((int)RPC_UNAVAILABLE == (int)WIRE_UNAVAILABLE, "UNAVAILABLE");
_Static_assert((int)RPC_DATA_LOSS == (int)WIRE_DATA_LOSS, "DATA_LOSS");
_Static_assert((int)RPC_UNAUTHENTICATED == (int)WIRE_UNAUTHENTICATED, "UNAUTHENTICATED");
#define METHOD_SAME(id, name, role) _Static_assert((int)RPC_##id == (int)WIRE_METHOD_##id, #id);
WIRE_METHODS(METHOD_SAME)
#undef METHOD_SAME
_Static_assert((int)RPC_METHODS == (int)WIRE_METHOD_COUNT, "method count");
_Static_assert(KVC_PROTOCOL_VERSION == WIRE_VERSION, "version");
_Static_assert(WIRE_KEY_MAX == KV_KEY_SIZE_MAX, "the engine's key size");

static const char *protocol_md;

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	assert_true(n > 0);
	rewind(f);
	buf = malloc((size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

/* The server answers each method under the name the client sends. */
static void method_names(void **state)
{
	static const struct {
		int id;
		const char *name;
	} methods[] = {
#define METHOD_ROW(id, name, role) {WIRE_METHOD_##id, name},
	        WIRE_METHODS(METHOD_ROW)
#undef METHOD_ROW
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
		assert_string_equal(rpc_method_name((enum rpc_method)methods[i].id),
		                    methods[i].name);
}

/* PROTOCOL.md's status table has a row "| code | NAME |" for each status
 * the server sends, and kvc_code_name agrees. */
static void status_table(void **state)
{
	static const struct {
		int code;
		const char *name;
	} sent[] = {
	        {RPC_OK, "OK"},
	        {RPC_INVALID_ARGUMENT, "INVALID_ARGUMENT"},
	        {RPC_DEADLINE_EXCEEDED, "DEADLINE_EXCEEDED"},
	        {RPC_NOT_FOUND, "NOT_FOUND"},
	        {RPC_ALREADY_EXISTS, "ALREADY_EXISTS"},
	        {RPC_PERMISSION_DENIED, "PERMISSION_DENIED"},
	        {RPC_RESOURCE_EXHAUSTED, "RESOURCE_EXHAUSTED"},
	        {RPC_FAILED_PRECONDITION, "FAILED_PRECONDITION"},
	        {RPC_OUT_OF_RANGE, "OUT_OF_RANGE"},
	        {RPC_UNIMPLEMENTED, "UNIMPLEMENTED"},
	        {RPC_INTERNAL, "INTERNAL"},
	        {RPC_UNAVAILABLE, "UNAVAILABLE"},
	        {RPC_DATA_LOSS, "DATA_LOSS"},
	        {RPC_UNAUTHENTICATED, "UNAUTHENTICATED"},
	        {RPC_MOVED, "MOVED"},
	};
	char *md = slurp(protocol_md), row[64];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(sent) / sizeof(sent[0]); i++) {
		snprintf(row, sizeof(row), "\n| %d | %s |", sent[i].code, sent[i].name);
		if (strstr(md, row) == NULL)
			fail_msg("PROTOCOL.md has no status row \"%s\"", row + 1);
		assert_string_equal(kvc_code_name(sent[i].code), sent[i].name);
	}
	free(md);
}

/* Each method has a section of its own in PROTOCOL.md. */
static void method_sections(void **state)
{
	static const char *const names[] = {
#define METHOD_NAME(id, name, role) name,
	        WIRE_METHODS(METHOD_NAME)
#undef METHOD_NAME
	};
	char *md = slurp(protocol_md), head[64];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(head, sizeof(head), "\n### %s", names[i]);
		if (strstr(md, head) == NULL)
			fail_msg("PROTOCOL.md has no section \"%s\"", head + 1);
	}
	free(md);
}

/* PROTOCOL.md's key size is WIRE_KEY_MAX. */
static void key_size(void **state)
{
	char *md = slurp(protocol_md), text[64];

	(void)state;
	snprintf(text, sizeof(text), "keys 1 … %u bytes", WIRE_KEY_MAX);
	if (strstr(md, text) == NULL)
		fail_msg("PROTOCOL.md does not say \"%s\"", text);
	free(md);
}

/* PROTOCOL.md's BlobRead cap is WIRE_BLOB_READ_MAX, and libkvclient's. */
static void blob_read_max(void **state)
{
	char *md = slurp(protocol_md), text[96];

	(void)state;
	snprintf(text, sizeof(text), "default and at most %u\nbytes", WIRE_BLOB_READ_MAX);
	if (strstr(md, text) == NULL)
		fail_msg("PROTOCOL.md does not say \"%s\"", text);
	assert_int_equal(KVC_BLOB_READ_MAX, WIRE_BLOB_READ_MAX);
	free(md);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(method_names),
	        cmocka_unit_test(status_table),
	        cmocka_unit_test(method_sections),
	        cmocka_unit_test(key_size),
	        cmocka_unit_test(blob_read_max),
	};

	if (argc < 2) {
		fprintf(stderr, "usage: test_wire PROTOCOL.md\n");
		return 2;
	}
	protocol_md = argv[1];
	return cmocka_run_group_tests(tests, NULL, NULL);
}
