/*
 * check_shm_names.c - unit tests for the shm name registry (src/shm/shm_names.c): distinct
 * keys get distinct exact ids and equal keys equal ones, per kind; forked processes racing
 * to claim the same and different keys agree on every id; a long key and a full table fall
 * back to the shared ids; the master's reclaim turns a dead claimer's slot into one that
 * lookups pass over. Also the pools' shared welcomes (src/shm/shm_welcome.c), keyed by pool
 * id: the first publisher wins, a forked process reads what its parent published, a
 * welcome too long for a slot and a full table are not shared.
 */
#include "neki/base.h"

#include <check.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "neki/clock.h"
#include "neki/shm.h"
#include "neki/shm_names.h"
#include "neki/shm_welcome.h"
#include "../../src/shm/shm_int.h"
#include "suites.h"

#define TEST_PROCS 5
#define RACERS 4
#define RACE_KEYS 300

static void
setup(void)
{
	char err[256];

	ck_assert_msg(shm_create(shm_min_size(TEST_PROCS), TEST_PROCS, err, sizeof(err)), "%s",
		      err);
}

static void
teardown(void)
{
	shm_destroy();
}

/* Key <i> of a family <prefix> ("db17"). */
static const char *
key_name(char *buf, size_t len, const char *prefix, unsigned i)
{
	snprintf(buf, len, "%s%u", prefix, i);
	return buf;
}

/* Register keys 0..<n>-1 of <prefix> in <kind>; assert their ids are exact and distinct. */
static void
register_distinct(enum shm_names_kind kind, const char *prefix, unsigned n, unsigned *ids)
{
	static bool seen[SHM_NAMES_SLOTS];
	char buf[32];

	memset(seen, 0, sizeof(seen));
	for (unsigned i = 0; i < n; i++) {
		ids[i] = shm_names_name(kind, key_name(buf, sizeof(buf), prefix, i));
		ck_assert_msg(shm_names_is_exact(ids[i]), "%s: id %u", buf, ids[i]);
		ck_assert_msg(!seen[ids[i]], "%s: id %u given twice", buf, ids[i]);
		seen[ids[i]] = true;
	}
}

START_TEST(test_distinct_and_stable)
{
	static unsigned ids[2000];
	char buf[32];

	register_distinct(SHM_NAMES_DB, "db", 2000, ids);
	for (unsigned i = 0; i < 2000; i++)
		ck_assert_uint_eq(shm_names_name(SHM_NAMES_DB, key_name(buf, sizeof(buf), "db", i)),
				  ids[i]);
	/* a kind has its own table: the first user name takes a slot of its own table */
	ck_assert(shm_names_is_exact(shm_names_name(SHM_NAMES_USER, "db0")));
	ck_assert_uint_eq(shm_names_name(SHM_NAMES_USER, "db0"),
			  shm_names_name(SHM_NAMES_USER, "db0"));
	/* a pool is its pair of ids, in order */
	ck_assert_uint_ne(shm_names_pool(ids[0], ids[1]), shm_names_pool(ids[1], ids[0]));
	ck_assert_uint_eq(shm_names_pool(ids[0], ids[1]), shm_names_pool(ids[0], ids[1]));
	/* keys compare exactly: a prefix or an empty key is another key */
	ck_assert_uint_ne(shm_names_id(SHM_NAMES_DB, "db1", 2), ids[1]);
	ck_assert_uint_ne(shm_names_id(SHM_NAMES_DB, "", 0), shm_names_id(SHM_NAMES_DB, "d", 1));
}
END_TEST

/*
 * Racer <r>: after the start flag, look up the keys "same<i>" (every racer) and "own<r>.<i>"
 * (its own) in an order of its own, and store the ids in <out>.
 */
static void
race_one(unsigned r, _Atomic unsigned *start, unsigned *out)
{
	static const unsigned stride[RACERS] = { 1, 7, 11, 13 };	/* prime to RACE_KEYS */
	uint64_t deadline = nk_now_ms() + 10000;
	char buf[32];

	shm_attach_self((int)r);
	atomic_fetch_add(start, 1);
	while (atomic_load(start) < RACERS && nk_now_ms() < deadline)
		;	/* go when every racer is forked (bounded: a failed fork fails later) */
	for (unsigned n = 0; n < RACE_KEYS; n++) {
		unsigned i = (n * stride[r] + r * 37) % RACE_KEYS;	/* a permutation */
		char own[16];

		snprintf(own, sizeof(own), "own%u.", r);
		out[i] = shm_names_name(SHM_NAMES_DB, key_name(buf, sizeof(buf), "same", i));
		out[RACE_KEYS + i] = shm_names_name(SHM_NAMES_DB,
						    key_name(buf, sizeof(buf), own, i));
	}
}

START_TEST(test_fork_race)
{
	size_t per = 2 * RACE_KEYS;
	size_t size = sizeof(_Atomic unsigned) + RACERS * per * sizeof(unsigned);
	void *area = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	_Atomic unsigned *start = area;
	unsigned *ids = (unsigned *)(start + 1);
	static bool seen[SHM_NAMES_SLOTS];
	pid_t pids[RACERS];

	ck_assert(area != MAP_FAILED);
	atomic_init(start, 0);
	for (unsigned r = 0; r < RACERS; r++) {
		pids[r] = fork();
		ck_assert_int_ne(pids[r], -1);
		if (pids[r] == 0) {
			race_one(r, start, ids + r * per);
			_exit(0);
		}
	}
	for (unsigned r = 0; r < RACERS; r++) {
		int status;

		ck_assert_int_eq(waitpid(pids[r], &status, 0), pids[r]);
		ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	/* the shared keys: one id each, the same in every racer; all ids distinct */
	for (unsigned i = 0; i < RACE_KEYS; i++) {
		for (unsigned r = 0; r < RACERS; r++)
			ck_assert_uint_eq(ids[r * per + i], ids[i]);
		ck_assert(shm_names_is_exact(ids[i]) && !seen[ids[i]]);
		seen[ids[i]] = true;
	}
	for (unsigned r = 0; r < RACERS; r++) {
		for (unsigned i = 0; i < RACE_KEYS; i++) {
			unsigned id = ids[r * per + RACE_KEYS + i];

			ck_assert(shm_names_is_exact(id) && !seen[id]);
			seen[id] = true;
		}
	}
	/* this process finds what they claimed */
	ck_assert_uint_eq(shm_names_name(SHM_NAMES_DB, "same0"), ids[0]);
	munmap(area, size);
}
END_TEST

START_TEST(test_full_table_and_long_key)
{
	static unsigned ids[SHM_NAMES_SLOTS];
	char key[SHM_NAMES_KEY_MAX + 1];
	unsigned a, b;

	memset(key, 'k', sizeof(key));
	ck_assert(shm_names_is_exact(shm_names_id(SHM_NAMES_POOL, key, SHM_NAMES_KEY_MAX)));
	a = shm_names_id(SHM_NAMES_POOL, key, SHM_NAMES_KEY_MAX + 1);
	ck_assert(!shm_names_is_exact(a) && a < SHM_NAMES_IDS);
	ck_assert_uint_eq(shm_names_id(SHM_NAMES_POOL, key, SHM_NAMES_KEY_MAX + 1), a);

	register_distinct(SHM_NAMES_USER, "u", SHM_NAMES_SLOTS, ids);
	b = shm_names_name(SHM_NAMES_USER, "one too many");
	ck_assert(!shm_names_is_exact(b) && b < SHM_NAMES_IDS);
	ck_assert_uint_eq(shm_names_name(SHM_NAMES_USER, "one too many"), b);
	ck_assert_uint_eq(shm_names_name(SHM_NAMES_USER, "u4095"), ids[4095]);
	/* the other kinds still have room */
	ck_assert(shm_names_is_exact(shm_names_name(SHM_NAMES_DB, "one too many")));
}
END_TEST

/* Slot <i> of kind <kind>'s table (the layout of shm_int.h). */
static struct shm_names_slot *
raw_slot(enum shm_names_kind kind, unsigned i)
{
	const struct shm_layout *l = shm_layout_get();

	return (struct shm_names_slot *)(l->base + l->names_off) +
	       (size_t)kind * SHM_NAMES_SLOTS + i;
}

START_TEST(test_reclaim_dead_claimer)
{
	unsigned a = shm_names_name(SHM_NAMES_DB, "kept");
	uint32_t claiming_by_2 = 1 | (2 + 1) << 8;	/* CLAIMING by process slot 2 */

	/* process 2 "died" while claiming every other slot */
	for (unsigned i = 0; i < SHM_NAMES_SLOTS; i++)
		if (atomic_load(&raw_slot(SHM_NAMES_DB, i)->state) == 0)
			atomic_store(&raw_slot(SHM_NAMES_DB, i)->state, claiming_by_2);
	shm_names_reclaim(1);	/* not its claims: nothing changes */
	ck_assert_uint_eq(atomic_load(&raw_slot(SHM_NAMES_DB, (a + 1) % SHM_NAMES_SLOTS)->state),
			  claiming_by_2);
	shm_names_reclaim(2);
	ck_assert_uint_eq(shm_names_name(SHM_NAMES_DB, "kept"), a);
	ck_assert(!shm_names_is_exact(shm_names_name(SHM_NAMES_DB, "new")));
}
END_TEST

START_TEST(test_welcome_shared)
{
	static const char one[] = "server_version\0" "15.8\0" "TimeZone\0" "UTC";
	static char big[SHM_WELCOME_MAX + 1];
	char buf[SHM_WELCOME_MAX];
	pid_t pid;
	int status;

	ck_assert_uint_eq(shm_welcome_get(7, buf, sizeof(buf)), 0);	/* none yet */
	ck_assert(shm_welcome_publish(7, one, sizeof(one)));
	ck_assert(shm_welcome_publish(7, "x\0y", 4));		/* has one: kept */
	ck_assert_uint_eq(shm_welcome_get(7, buf, sizeof(buf)), sizeof(one));
	ck_assert(memcmp(buf, one, sizeof(one)) == 0);
	ck_assert_uint_eq(shm_welcome_get(7, buf, 4), 0);		/* does not fit */
	ck_assert(!shm_welcome_publish(8, big, sizeof(big)));		/* too long */
	ck_assert_uint_eq(shm_welcome_get(8, buf, sizeof(buf)), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)		/* another process sees it, and publishes one of its own */
		_exit(shm_welcome_get(7, buf, sizeof(buf)) == sizeof(one) &&
		      shm_welcome_publish(9, "a\0b", 4) ? 0 : 1);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ck_assert_uint_eq(shm_welcome_get(9, buf, sizeof(buf)), 4);
	shm_welcome_clear(9);					/* the pool was reset */
	ck_assert_uint_eq(shm_welcome_get(9, buf, sizeof(buf)), 0);
	ck_assert_uint_eq(shm_welcome_get(7, buf, sizeof(buf)), sizeof(one));	/* not 7's */
	ck_assert(shm_welcome_publish(9, "c\0dd", 5));		/* the next login's */
	ck_assert_uint_eq(shm_welcome_get(9, buf, sizeof(buf)), 5);
	ck_assert(memcmp(buf, "c\0dd", 5) == 0);
	shm_welcome_clear(12345);				/* none: nothing happens */
	for (unsigned id = 100; id < 100 + SHM_WELCOME_SLOTS; id++)	/* fill the table */
		(void)shm_welcome_publish(id, "a\0b", 4);
	ck_assert(!shm_welcome_publish(100 + SHM_WELCOME_SLOTS, "a\0b", 4));
	ck_assert_uint_eq(shm_welcome_get(7, buf, sizeof(buf)), sizeof(one));	/* still found */
}
END_TEST

Suite *
shm_names_suite(void)
{
	Suite *s = suite_create("shm_names");
	TCase *tc = tcase_create("registry");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_distinct_and_stable);
	tcase_add_test(tc, test_fork_race);
	tcase_add_test(tc, test_full_table_and_long_key);
	tcase_add_test(tc, test_reclaim_dead_claimer);
	tcase_add_test(tc, test_welcome_shared);
	suite_add_tcase(s, tc);
	return s;
}
