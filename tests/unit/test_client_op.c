/* test_client_op.c — client_op.c on a fake transport: request envelope, checks, reply status. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h> /* after the headers it needs */

#include "client_op.h"
#include "wire.h"

/* The fake transport: keeps the request, answers with the packed reply. */
static struct {
	int runs;
	struct client_buf sent;
	uint64_t reply_id_delta; /* answer with id + this */
	uint64_t reply_status;
	const char *reply_message;
} fake;

static int fake_run(void *t, struct client_op *op)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;

	(void)t;
	fake.runs++;
	fake.sent = client_op_take_request(op);
	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, fake.reply_message != NULL ? 3 : 2);
	mp_pack_cstr(&pk, WIRE_F_ID);
	msgpack_pack_uint64(&pk, op->id + fake.reply_id_delta);
	mp_pack_cstr(&pk, WIRE_F_STATUS);
	msgpack_pack_uint64(&pk, fake.reply_status);
	if (fake.reply_message != NULL) {
		mp_pack_cstr(&pk, WIRE_F_MESSAGE);
		mp_pack_cstr(&pk, fake.reply_message);
	}
	op->reply =
	        (struct client_buf){.data = (uint8_t *)sb.data, .len = sb.size, .cap = sb.alloc};
	return client_op_decode_reply(op);
}

static const struct client_transport fake_transport = {
        .name = "fake",
        .run = fake_run,
};

static kvc *fake_handle(size_t max_message_size)
{
	static kvc c;

	memset(&c, 0, sizeof(c));
	c.tr = &fake_transport;
	c.tenant = "t1";
	c.timeout_ms = 1000;
	c.max_message_size = max_message_size;
	c.client_id = 42;
	atomic_init(&c.next_id, 7);
	memset(&fake, 0, sizeof(fake));
	return &c;
}

/* The envelope as PROTOCOL.md gives it, in the buffer the transport gets. */
static void request_envelope(void **state)
{
	kvc *c = fake_handle(1 << 20);
	struct client_op op;
	msgpack_zone zone;
	msgpack_object root;
	const char *s;
	size_t n;
	uint64_t u;

	(void)state;
	client_op_init(&op, c, NULL, WIRE_M_HEALTH);
	assert_int_equal(client_op_request(&op, NULL, false, 0), 0);
	assert_int_equal(client_op_run(&op), 0);
	assert_int_equal(fake.runs, 1);
	assert_true(msgpack_zone_init(&zone, 1024));
	assert_int_equal(mp_parse(fake.sent.data, fake.sent.len, &zone, &root), 0);
	assert_int_equal(mp_field_uint(&root, WIRE_F_V, true, &u), 0);
	assert_int_equal(u, WIRE_VERSION);
	assert_int_equal(mp_field_uint(&root, WIRE_F_ID, true, &u), 0);
	assert_int_equal(u, 7);
	assert_int_equal(mp_field_uint(&root, WIRE_F_CLIENT, true, &u), 0);
	assert_int_equal(u, 42);
	assert_int_equal(mp_field_str(&root, WIRE_F_METHOD, true, &s, &n), 0);
	assert_true(n == strlen(WIRE_M_HEALTH) && memcmp(s, WIRE_M_HEALTH, n) == 0);
	assert_int_equal(mp_field_str(&root, WIRE_F_TENANT, true, &s, &n), 0);
	assert_true(n == 2 && memcmp(s, "t1", 2) == 0);
	msgpack_zone_destroy(&zone);
	client_buf_free(&fake.sent);
	assert_int_equal(client_op_end(&op, NULL, 0), 0);
}

/* A request over max_message_size never reaches the transport. */
static void request_too_large(void **state)
{
	kvc *c = fake_handle(16);
	struct kvc_status st;
	struct kvc_call call = {.status = &st};
	struct client_op op;

	(void)state;
	client_op_init(&op, c, &call, WIRE_M_HEALTH);
	assert_int_equal(client_op_request(&op, &call, false, 0), 0);
	assert_int_equal(client_op_end(&op, &call, client_op_run(&op)), -KVC_INVALID_ARGUMENT);
	assert_int_equal(fake.runs, 0);
	assert_int_equal(st.code, KVC_INVALID_ARGUMENT);
	assert_non_null(strstr(st.message, "max_message_size"));
}

/* The reply's status is the call's outcome, with the server's message. */
static void reply_status(void **state)
{
	kvc *c = fake_handle(1 << 20);
	struct kvc_status st;
	struct kvc_call call = {.status = &st};
	struct client_op op;

	(void)state;
	fake.reply_status = WIRE_NOT_FOUND;
	fake.reply_message = "no such key";
	client_op_init(&op, c, &call, WIRE_M_GET);
	assert_int_equal(client_op_request(&op, &call, false, 0), 0);
	assert_int_equal(client_op_end(&op, &call, client_op_run(&op)), -KVC_NOT_FOUND);
	assert_int_equal(st.code, KVC_NOT_FOUND);
	assert_string_equal(st.message, "no such key");
	client_buf_free(&fake.sent);
}

/* A reply to another request is a malformed reply, not an answer. */
static void reply_wrong_id(void **state)
{
	kvc *c = fake_handle(1 << 20);
	struct kvc_status st;
	struct kvc_call call = {.status = &st};
	struct client_op op;

	(void)state;
	fake.reply_id_delta = 1;
	client_op_init(&op, c, &call, WIRE_M_GET);
	assert_int_equal(client_op_request(&op, &call, false, 0), 0);
	assert_int_equal(client_op_end(&op, &call, client_op_run(&op)), -KVC_INTERNAL);
	assert_non_null(strstr(st.message, "malformed reply"));
	client_buf_free(&fake.sent);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(request_envelope),
	        cmocka_unit_test(request_too_large),
	        cmocka_unit_test(reply_status),
	        cmocka_unit_test(reply_wrong_id),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
