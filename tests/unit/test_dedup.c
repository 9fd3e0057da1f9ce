/* test_dedup.c — a worker's de-duplication table remembers a write exactly as long as PROTOCOL.md says, by count and by time, whatever the time of the sweep. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "dedup.h"
#include "protocol_doc.h"

/* stands in for the daemon's jobs: the table only keeps the pointer */
struct job {
	int n;
};

static struct job jobs[8];

/* Remembers (client, id) as a write going in flight at `now`, answered at
 * `answered` with a reply naming its id. */
static struct dedup_ent *write_once(struct dedup *dd, uint64_t client, uint64_t id, uint64_t now,
                                    uint64_t answered)
{
	struct dedup_ent *e;
	char reply[32];

	assert_null(dedup_find(dd, client, id, now));
	e = dedup_insert(dd, client, id, &jobs[0], now);
	assert_non_null(e);
	snprintf(reply, sizeof(reply), "reply-%llu", (unsigned long long)id);
	dedup_answered(dd, e, reply, strlen(reply), answered);
	return e;
}

static void assert_remembered(struct dedup *dd, uint64_t client, uint64_t id, uint64_t now)
{
	struct dedup_ent *e = dedup_find(dd, client, id, now);
	char want[32];

	assert_non_null(e);
	assert_null(e->pending);
	snprintf(want, sizeof(want), "reply-%llu", (unsigned long long)id);
	assert_int_equal(e->len, strlen(want));
	assert_memory_equal(e->reply, want, e->len);
}

/* A sweep whose time was read before a write was remembered (a worker's
 * turn reads the clock once, then runs the turn's writes) keeps that write:
 * its age is 0, not a wrapped-around 2^64 - 1 ms. */
static void test_sweep_with_an_earlier_time(void **state)
{
	struct dedup dd;

	(void)state;
	assert_int_equal(dedup_init(&dd, DEDUP_CAP, DEDUP_TTL_MS), 0);
	write_once(&dd, 1, 7, 1000250, 1000250);
	dedup_expire(&dd, 1000000);
	assert_int_equal(dd.n, 1);
	assert_remembered(&dd, 1, 7, 1000000);
	assert_remembered(&dd, 1, 7, 1000260);
	dedup_release(&dd);
}

/* Remembered until ttl_ms after its reply, then not, with no sweep between:
 * the lookup itself checks the time. */
static void test_forgotten_after_its_time(void **state)
{
	struct dedup dd;

	(void)state;
	assert_int_equal(dedup_init(&dd, DEDUP_CAP, DEDUP_TTL_MS), 0);
	/* in flight for 5 s: the time runs from the reply */
	write_once(&dd, 1, 7, 10000, 15000);
	assert_remembered(&dd, 1, 7, 15000 + DEDUP_TTL_MS - 1);
	assert_null(dedup_find(&dd, 1, 7, 15000 + DEDUP_TTL_MS));
	assert_int_equal(dd.n, 0); /* the lookup freed it */
	/* and the same (client, id) is a new write */
	write_once(&dd, 1, 7, 15000 + DEDUP_TTL_MS, 15000 + DEDUP_TTL_MS);
	assert_remembered(&dd, 1, 7, 15000 + DEDUP_TTL_MS);

	/* the sweep frees it at the same time, not before */
	write_once(&dd, 1, 8, 200000, 200000);
	dedup_expire(&dd, 200000 + DEDUP_TTL_MS - 1);
	assert_remembered(&dd, 1, 8, 200000 + DEDUP_TTL_MS - 1);
	dedup_expire(&dd, 200000 + DEDUP_TTL_MS);
	assert_int_equal(dd.n, 0);
	dedup_release(&dd);
}

/* The last `cap` writes and no more: the write before them is a new write
 * at once, with no sweep and no time passing. */
static void test_last_cap_writes(void **state)
{
	struct dedup dd;
	const uint32_t cap = 4;

	(void)state;
	assert_int_equal(dedup_init(&dd, cap, DEDUP_TTL_MS), 0);
	for (uint64_t id = 1; id <= cap; id++)
		write_once(&dd, 1, id, 5000, 5000);
	for (uint64_t id = 1; id <= cap; id++)
		assert_remembered(&dd, 1, id, 5000);
	write_once(&dd, 1, cap + 1, 5000, 5000);
	assert_null(dedup_find(&dd, 1, 1, 5000));
	for (uint64_t id = 2; id <= cap + 1; id++)
		assert_remembered(&dd, 1, id, 5000);
	/* memory follows: never more than cap answered writes held */
	for (uint64_t id = 100; id < 100 + 10 * cap; id++) {
		write_once(&dd, 1, id, 5000, 5000);
		assert_true(dd.n <= cap);
	}
	dedup_release(&dd);
}

/* The daemon's own bound: write DEDUP_CAP + 1 distinct ones, and the first
 * is applied again when repeated. */
static void test_daemon_cap(void **state)
{
	struct dedup dd;

	(void)state;
	assert_int_equal(dedup_init(&dd, DEDUP_CAP, DEDUP_TTL_MS), 0);
	for (uint64_t id = 1; id <= DEDUP_CAP; id++)
		write_once(&dd, 9, id, 1, 1);
	assert_remembered(&dd, 9, 1, 1);
	write_once(&dd, 9, DEDUP_CAP + 1, 1, 1);
	assert_null(dedup_find(&dd, 9, 1, 1));
	assert_remembered(&dd, 9, 2, 1);
	assert_int_equal(dd.n, DEDUP_CAP);
	dedup_release(&dd);
}

/* A write in flight is found (a repeat waits for it) however many writes
 * and however much time pass; once answered, the bounds apply to it. */
static void test_in_flight_kept(void **state)
{
	struct dedup dd;
	struct dedup_ent *e;

	(void)state;
	assert_int_equal(dedup_init(&dd, 2, 1000), 0);
	e = dedup_insert(&dd, 3, 1, &jobs[1], 0);
	assert_non_null(e);
	for (uint64_t id = 2; id < 10; id++)
		write_once(&dd, 3, id, 50, 50);
	dedup_expire(&dd, 100000);
	e = dedup_find(&dd, 3, 1, 100000);
	assert_non_null(e);
	assert_ptr_equal(e->pending, &jobs[1]);
	assert_true(dd.n <= 3);
	/* answered now, it is not among the last 2 writes: forgotten */
	dedup_answered(&dd, e, "r", 1, 100000);
	assert_null(dedup_find(&dd, 3, 1, 100000));
	dedup_release(&dd);
}

/* A write is known by client and id together. */
static void test_client_and_id(void **state)
{
	struct dedup dd;

	(void)state;
	assert_int_equal(dedup_init(&dd, 16, DEDUP_TTL_MS), 0);
	write_once(&dd, 1, 7, 0, 0);
	assert_null(dedup_find(&dd, 2, 7, 0));
	assert_null(dedup_find(&dd, 1, 8, 0));
	write_once(&dd, 2, 7, 0, 0);
	assert_remembered(&dd, 1, 7, 0);
	assert_remembered(&dd, 2, 7, 0);
	dedup_release(&dd);
}

/* PROTOCOL.md names the same two bounds the daemon uses. */
static void test_protocol_says_so(void **state)
{
	char want[96];

	(void)state;
	snprintf(want, sizeof(want), "last %u %03u writes", DEDUP_CAP / 1000, DEDUP_CAP % 1000);
	assert_true(protocol_says(want));
	assert_int_equal(DEDUP_TTL_MS, 2 * 60 * 1000);
	assert_true(protocol_says("two minutes after its reply"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sweep_with_an_earlier_time),
		cmocka_unit_test(test_forgotten_after_its_time),
		cmocka_unit_test(test_last_cap_writes),
		cmocka_unit_test(test_daemon_cap),
		cmocka_unit_test(test_in_flight_kept),
		cmocka_unit_test(test_client_and_id),
		cmocka_unit_test(test_protocol_says_so),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
