/*
 * check_shm.c - unit tests for src/shm: segment layout, process slots and stats,
 * mailboxes (order, wrap-around, full ring, eventfd wake-up, acks, many senders in
 * forked processes), global counters (limits under a fork() race, reclaim) and
 * topology image slots (claim, publish, pin, reuse only when unpinned), per-database
 * stats areas, list areas and their row encoding, the global socket id counter.
 */
#include "neki/base.h"

#include <check.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "neki/clock.h"
#include "neki/shm.h"
#include "neki/shm_counter.h"
#include "neki/shm_seq.h"
#include "neki/shm_list.h"
#include "neki/shm_dbstats.h"
#include "neki/shm_servers.h"
#include "suites.h"

#define TEST_PROCS 5

static void
setup(void)
{
	char err[256];

	ck_assert_msg(shm_create(shm_min_size(TEST_PROCS) + 65536, TEST_PROCS, err, sizeof(err)),
		      "%s", err);
}

static void
teardown(void)
{
	shm_destroy();
}

/* Wait for every child in <pids> and assert it exited with status 0. */
static void
wait_children(const pid_t *pids, int n)
{
	for (int i = 0; i < n; i++) {
		int status;

		ck_assert_int_eq(waitpid(pids[i], &status, 0), pids[i]);
		ck_assert(WIFEXITED(status));
		ck_assert_int_eq(WEXITSTATUS(status), 0);
	}
}

START_TEST(test_create_layout)
{
	struct shm_header *h = shm_header();

	ck_assert_uint_eq(h->magic, SHM_MAGIC);
	ck_assert_uint_eq(h->layout_version, SHM_LAYOUT_VERSION);
	ck_assert_uint_eq(h->n_procs, TEST_PROCS);
	ck_assert_uint_eq(shm_n_procs(), TEST_PROCS);
	ck_assert_uint_ge(shm_topo_capacity(), 4096);
	ck_assert_uint_eq(shm_topo_revision(), 0);
	for (unsigned i = 0; i < TEST_PROCS; i++) {
		ck_assert_int_ge(shm_proc(i)->eventfd, 0);
		ck_assert_uint_eq((uintptr_t)shm_proc(i) % SHM_CACHE_LINE, 0);
	}
	/* slots do not overlap: the last one ends before the topology area */
	ck_assert((char *)(shm_proc(TEST_PROCS - 1) + 1) <= (char *)shm_topo_data(0));
}
END_TEST

START_TEST(test_create_too_small)
{
	char err[256];

	shm_destroy();
	ck_assert(!shm_create(4096, TEST_PROCS, err, sizeof(err)));
	ck_assert_ptr_nonnull(strstr(err, "shm_size 4096 is too small"));
	ck_assert(!shm_create(1 << 20, 0, err, sizeof(err)));
	ck_assert(shm_create(shm_min_size(1), 1, err, sizeof(err)));
}
END_TEST

START_TEST(test_proc_slot_reset_and_state)
{
	struct shm_proc *p = shm_proc(2);
	uint32_t gen = atomic_load(&p->generation);

	atomic_store(&p->pid, 1234);
	atomic_store(&p->clients, 7);
	shm_proc_set_state(p, SHM_PST_PAUSED);
	shm_proc_beat(p);
	ck_assert_uint_gt(atomic_load(&p->heartbeat_ms), 0);
	ck_assert_str_eq(shm_proc_state_str(atomic_load(&p->state)), "paused");
	atomic_store(&p->heartbeat_ms, 1);	/* a long-gone child's last beat */
	shm_proc_reset(2, SHM_PROC_ADMIN);
	ck_assert_int_eq(atomic_load(&p->pid), 0);
	ck_assert_int_eq(atomic_load(&p->clients), 0);
	ck_assert_uint_eq(atomic_load(&p->state), SHM_PST_EMPTY);
	/* the new child's silence counts from now, even before its first beat */
	ck_assert_uint_ge(atomic_load(&p->heartbeat_ms) + 1000, nk_now_ms());
	ck_assert_uint_eq(atomic_load(&p->generation), gen + 1);
	ck_assert_str_eq(shm_proc_kind_str(atomic_load(&p->kind)), "admin");
}
END_TEST

START_TEST(test_stats_publish_read)
{
	struct shm_stats s = { 0 }, out;

	s.total_query_count = 42;
	s.total_bind_count = 7;
	s.total_received = UINT64_C(1) << 40;
	shm_stats_publish(shm_proc(1), &s);
	shm_stats_read(shm_proc(1), &out);
	ck_assert_int_eq(memcmp(&s, &out, sizeof(s)), 0);
	ck_assert_uint_eq(atomic_load(&shm_proc(1)->stats_seq) % 2, 0);
	shm_stats_read(shm_proc(0), &out);
	ck_assert_uint_eq(out.total_query_count, 0);
}
END_TEST

START_TEST(test_dbstats_publish_read)
{
	static struct shm_dbstat out[SHM_DB_STATS_MAX];
	struct shm_stats *a = shm_dbstats_get("app"), *b = shm_dbstats_get("other"), total;
	char name[32];

	ck_assert_ptr_eq(shm_dbstats_get("app"), a);
	a->total_xact_count = 3;
	b->total_xact_count = 4;
	b->total_sent = 100;
	shm_dbstats_publish(2);
	ck_assert_uint_eq(shm_dbstats_read(2, out), 2);
	ck_assert_str_eq(out[0].name, "app");
	ck_assert_uint_eq(out[0].st.total_xact_count, 3);
	ck_assert_str_eq(out[1].name, "other");
	ck_assert_uint_eq(out[1].st.total_sent, 100);
	ck_assert_uint_eq(shm_dbstats_read(1, out), 0);
	/* more databases than entries: the rest share the unnamed last entry */
	for (int i = 0; i < SHM_DB_STATS_MAX + 10; i++) {
		snprintf(name, sizeof(name), "db%d", i);
		shm_dbstats_get(name)->total_query_count++;
	}
	shm_dbstats_publish(2);
	ck_assert_uint_eq(shm_dbstats_read(2, out), SHM_DB_STATS_MAX);
	ck_assert_str_eq(out[SHM_DB_STATS_MAX - 1].name, "");
	ck_assert_uint_eq(out[SHM_DB_STATS_MAX - 1].st.total_query_count, 13);
	shm_dbstats_total(&total);
	ck_assert_uint_eq(total.total_query_count, SHM_DB_STATS_MAX + 10);
	ck_assert_uint_eq(total.total_xact_count, 7);
}
END_TEST

START_TEST(test_list_rows_and_area)
{
	const char *in[3] = { "a", NULL, "" }, *vals[SHM_LIST_MAX_COLS];
	size_t cap, len = 0, pos = 0, n;
	uint64_t req, seen;
	char kind, small[7];
	bool trunc;
	void *area = shm_list_area(3, &cap, &seen);

	ck_assert_uint_eq(cap, shm_list_capacity());
	ck_assert(shm_list_put_row(area, cap, &len, 'c', in, 3));
	ck_assert(shm_list_put_row(area, cap, &len, 'p', in, 1));
	ck_assert(shm_list_next_row(area, len, &pos, &kind, vals, &n));
	ck_assert(kind == 'c' && n == 3);
	ck_assert_str_eq(vals[0], "a");
	ck_assert_ptr_null(vals[1]);
	ck_assert_str_eq(vals[2], "");
	ck_assert(shm_list_next_row(area, len, &pos, &kind, vals, &n));
	ck_assert(kind == 'p' && n == 1);
	ck_assert(!shm_list_next_row(area, len, &pos, &kind, vals, &n));
	n = 0;
	ck_assert(!shm_list_put_row(small, sizeof(small), &n, 'c', in, 3));	/* too big */
	ck_assert_uint_eq(n, 0);
	/* the request / answer protocol (the mailbox gets SHM_CMD_LIST) */
	req = shm_list_request(3);
	ck_assert_uint_gt(req, 0);
	ck_assert_ptr_null(shm_list_result(3, req, &len, &trunc));
	(void)shm_list_area(3, &cap, &seen);
	ck_assert_uint_eq(seen, req);
	shm_list_done(3, req, pos, true);
	ck_assert_ptr_nonnull(shm_list_result(3, req, &len, &trunc));
	ck_assert(trunc && len == pos);
}
END_TEST

START_TEST(test_socket_ids)
{
	uint64_t a = shm_socket_id_next(), b = shm_socket_id_next();

	ck_assert_uint_eq(a, 1);
	ck_assert_uint_eq(b, 2);
}
END_TEST

/* setval() generations: a bump is seen by another process (a forked child bumps), other
 * sequences keep theirs; without a segment the cells are process-local. */
START_TEST(test_seq_generations)
{
	uint64_t g = shm_seq_generation("db", "public", "s");
	uint64_t other = shm_seq_generation("db", "public", "t");
	pid_t pid = fork();

	ck_assert_int_ne(pid, -1);
	if (pid == 0) {
		shm_seq_bump("db", "public", "s");
		_exit(0);
	}
	wait_children(&pid, 1);
	ck_assert_uint_eq(shm_seq_generation("db", "public", "s"), g + 1);
	ck_assert_uint_eq(shm_seq_generation("db", "public", "t"), other);
	ck_assert_uint_eq(shm_seq_generation("db2", "public", "s"),
			  shm_seq_generation("db2", "public", "s"));
	g = shm_seq_generation("db", "public", "s");
	shm_seq_bump_all();
	ck_assert_uint_eq(shm_seq_generation("db", "public", "s"), g + 1);
	ck_assert_uint_eq(shm_seq_generation("db", "public", "t"), other + 1);
	shm_destroy();
	g = shm_seq_generation("db", "public", "s");
	shm_seq_bump("db", "public", "s");
	ck_assert_uint_eq(shm_seq_generation("db", "public", "s"), g + 1);
}
END_TEST

START_TEST(test_mbox_post_take_ack)
{
	struct shm_proc *p = shm_proc(0);
	struct shm_msg m = { .cmd = SHM_CMD_PAUSE }, out;
	struct pollfd pfd = { .fd = p->eventfd, .events = POLLIN };
	uint64_t s1, s2;

	ck_assert(!shm_mbox_take(p, &out));
	ck_assert_int_eq(poll(&pfd, 1, 0), 0);
	strcpy(m.name, "appdb");
	s1 = shm_mbox_post(0, &m);
	m.cmd = SHM_CMD_CANCEL;
	m.key_len = 8;
	memcpy(m.key, "\1\2\3\4\5\6\7\x8", 8);
	s2 = shm_mbox_post(0, &m);
	ck_assert_uint_eq(s1, 1);
	ck_assert_uint_eq(s2, 2);
	ck_assert_int_eq(poll(&pfd, 1, 0), 1);	/* the owner is woken */
	shm_mbox_drain_eventfd(p);
	ck_assert_int_eq(poll(&pfd, 1, 0), 0);

	ck_assert(shm_mbox_take(p, &out));
	ck_assert_uint_eq(out.cmd, SHM_CMD_PAUSE);
	ck_assert_str_eq(out.name, "appdb");
	ck_assert_uint_eq(out.seq, s1);
	ck_assert_uint_eq(shm_mbox_acked(0), 0);
	shm_mbox_ack(p, out.seq);
	ck_assert_uint_eq(shm_mbox_acked(0), s1);
	ck_assert(shm_mbox_take(p, &out));
	ck_assert_uint_eq(out.cmd, SHM_CMD_CANCEL);
	ck_assert_int_eq(memcmp(out.key, "\1\2\3\4\5\6\7\x8", 8), 0);
	shm_mbox_ack(p, out.seq);
	shm_mbox_ack(p, s1);	/* acks never go backwards */
	ck_assert_uint_eq(shm_mbox_acked(0), s2);
	ck_assert(!shm_mbox_take(p, &out));
	/* other mailboxes are untouched */
	ck_assert(!shm_mbox_take(shm_proc(1), &out));
}
END_TEST

START_TEST(test_mbox_full_and_wrap)
{
	struct shm_proc *p = shm_proc(3);
	struct shm_msg m = { .cmd = SHM_CMD_RELOAD }, out;
	uint64_t expect = 1;

	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < SHM_MBOX_DEPTH; i++)
			ck_assert_uint_ne(shm_mbox_post(3, &m), 0);
		ck_assert_uint_eq(shm_mbox_post(3, &m), 0);	/* full */
		for (int i = 0; i < SHM_MBOX_DEPTH; i++) {
			ck_assert(shm_mbox_take(p, &out));
			ck_assert_uint_eq(out.seq, expect++);
		}
		ck_assert(!shm_mbox_take(p, &out));
	}
}
END_TEST

START_TEST(test_mbox_broadcast_and_acks)
{
	uint64_t seqs[TEST_PROCS];
	struct shm_msg m = { .cmd = SHM_CMD_RELOAD }, out;

	for (unsigned i = 0; i < TEST_PROCS; i++)
		shm_proc_reset(i, i == TEST_PROCS - 1 ? SHM_PROC_ADMIN : SHM_PROC_WORKER);
	ck_assert_uint_eq(shm_mbox_broadcast(SHM_PROC_ADMIN, &m, seqs), 1);
	ck_assert_uint_eq(seqs[0], 0);
	ck_assert_uint_eq(seqs[TEST_PROCS - 1], 1);
	ck_assert(shm_mbox_take(shm_proc(TEST_PROCS - 1), &out));
	shm_mbox_ack(shm_proc(TEST_PROCS - 1), out.seq);

	ck_assert_uint_eq(shm_mbox_broadcast(SHM_PROC_NONE, &m, seqs), TEST_PROCS);
	/* slots without a process do not hold the broadcast up */
	ck_assert(shm_mbox_broadcast_done(seqs));
	for (unsigned i = 0; i < TEST_PROCS; i++)
		atomic_store(&shm_proc(i)->pid, 1000 + (int)i);
	ck_assert(!shm_mbox_broadcast_done(seqs));
	for (unsigned i = 0; i < TEST_PROCS; i++) {
		ck_assert(!shm_mbox_broadcast_done(seqs));
		ck_assert(shm_mbox_take(shm_proc(i), &out));
		ck_assert_uint_eq(out.seq, seqs[i]);
		shm_mbox_ack(shm_proc(i), out.seq);
	}
	ck_assert(shm_mbox_broadcast_done(seqs));
	/* a process that dies before acting no longer holds it up either */
	ck_assert_uint_eq(shm_mbox_broadcast(SHM_PROC_WORKER, &m, seqs), TEST_PROCS - 1);
	ck_assert(!shm_mbox_broadcast_done(seqs));
	for (unsigned i = 0; i < TEST_PROCS - 1; i++)
		atomic_store(&shm_proc(i)->pid, 0);
	ck_assert(shm_mbox_broadcast_done(seqs));
}
END_TEST

#define SENDERS 3
#define PER_SENDER 2000

/* Several forked senders post to mailbox 0 while this process takes: nothing is lost. */
START_TEST(test_mbox_many_senders_fork)
{
	pid_t pids[SENDERS];
	int got[SENDERS] = { 0 };
	uint64_t last_seq = 0;
	struct shm_msg out;

	for (int s = 0; s < SENDERS; s++) {
		pids[s] = fork();
		ck_assert_int_ne(pids[s], -1);
		if (pids[s] == 0) {
			struct shm_msg m = { .cmd = SHM_CMD_CANCEL, .key_len = 4 };

			for (uint32_t n = 0; n < PER_SENDER; n++) {
				m.key[0] = (uint8_t)s;
				memcpy(m.key + 1, &n, 3);
				while (shm_mbox_post(0, &m) == 0)
					usleep(50);
			}
			_exit(0);
		}
	}
	for (int total = 0; total < SENDERS * PER_SENDER;) {
		if (!shm_mbox_take(shm_proc(0), &out)) {
			usleep(10);
			continue;
		}
		uint32_t n = 0;

		memcpy(&n, out.key + 1, 3);
		ck_assert_uint_gt(out.seq, last_seq);
		ck_assert_int_eq((int)n, got[out.key[0]]);	/* each sender's order is kept */
		last_seq = out.seq;
		got[out.key[0]]++;
		total++;
	}
	wait_children(pids, SENDERS);
	ck_assert(!shm_mbox_take(shm_proc(0), &out));
}
END_TEST

START_TEST(test_counter_limit_release_reclaim)
{
	shm_attach_self(1);
	ck_assert(shm_counter_try_acquire(5, 2));
	ck_assert(shm_counter_try_acquire(5, 2));
	ck_assert(!shm_counter_try_acquire(5, 2));
	ck_assert_int_eq(shm_counter_get(5), 2);
	shm_counter_release(5);
	ck_assert_int_eq(shm_counter_get(5), 1);
	ck_assert(shm_counter_try_acquire(5, 0));	/* 0 = no limit */
	ck_assert(shm_counter_try_acquire(5, 0));
	ck_assert_int_eq(shm_counter_get(5), 3);
	ck_assert_int_eq(shm_counter_get(6), 0);
	/* slot 1's process "dies": the master gives its units back */
	shm_attach_self(-1);
	shm_counter_reclaim(1);
	ck_assert_int_eq(shm_counter_get(5), 0);
}
END_TEST

#define RACERS 4
#define RACE_LIMIT 1000

/* Racing forked processes never take more than the limit, and reclaim zeroes it. */
START_TEST(test_counter_fork_race)
{
	pid_t pids[RACERS];

	for (int r = 0; r < RACERS; r++) {
		pids[r] = fork();
		ck_assert_int_ne(pids[r], -1);
		if (pids[r] == 0) {
			shm_attach_self(r);
			/* churn: take and give back, then keep whatever we can get */
			for (int i = 0; i < 20000; i++) {
				if (shm_counter_try_acquire(0, RACE_LIMIT)) {
					if (shm_counter_get(0) > RACE_LIMIT)
						_exit(2);
					shm_counter_release(0);
				}
			}
			while (shm_counter_try_acquire(0, RACE_LIMIT))
				;
			_exit(0);
		}
	}
	wait_children(pids, RACERS);
	ck_assert_int_eq(shm_counter_get(0), RACE_LIMIT);
	for (int r = 0; r < RACERS; r++)
		shm_counter_reclaim((unsigned)r);
	ck_assert_int_eq(shm_counter_get(0), 0);
}
END_TEST

/* Write <text> as revision <rev> into a freshly claimed slot; returns the slot. */
static unsigned
publish_text(const char *text, uint64_t rev)
{
	unsigned slot;

	ck_assert(shm_topo_claim(&slot));
	memcpy(shm_topo_data(slot), text, strlen(text) + 1);
	shm_topo_publish(slot, rev, strlen(text) + 1);
	return slot;
}

/* The servers table: the admin publishes, anyone reads one shard's servers, in a child. */
START_TEST(test_servers_publish_read)
{
	struct shm_server v[3], out[4];
	pid_t pid;
	int st;

	memset(v, 0, sizeof(v));
	ck_assert_uint_eq(shm_servers_read("s1", out, 4), 0);
	snprintf(v[0].uid, sizeof(v[0].uid), "s1");
	v[0].role = SHM_SRV_PRIMARY;
	v[0].flags = SHM_SRV_F_CHOSEN;
	snprintf(v[1].uid, sizeof(v[1].uid), "s2");
	snprintf(v[2].uid, sizeof(v[2].uid), "s1");
	v[2].index = 1;
	v[2].role = SHM_SRV_STANDBY;
	v[2].flags = SHM_SRV_F_LAG;
	v[2].lag_ms = 1234;
	shm_servers_publish(v, 3);
	ck_assert_uint_ge(shm_servers_version(), 1);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		size_t n = shm_servers_read("s1", out, 4);

		_exit(n == 2 && out[0].index == 0 && out[0].flags == SHM_SRV_F_CHOSEN &&
		      out[1].index == 1 && out[1].lag_ms == 1234 &&
		      shm_servers_read("s3", out, 4) == 0 ? 0 : 1);
	}
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	ck_assert_uint_eq(shm_servers_read("s1", out, 1), 1);	/* room for one */
	ck_assert_str_eq(shm_srv_role_str(SHM_SRV_STANDBY), "standby");
}
END_TEST

START_TEST(test_topo_publish_pin_reuse)
{
	struct shm_topo_ref r1, r2;
	unsigned s1, s2, slot;

	ck_assert(!shm_topo_pin(&r1));		/* nothing published yet */
	s1 = publish_text("rev one", 1);
	ck_assert_uint_eq(shm_topo_revision(), 1);
	ck_assert(shm_topo_pin(&r1));
	ck_assert_uint_eq(r1.revision, 1);
	ck_assert_str_eq(r1.data, "rev one");

	s2 = publish_text("rev two", 2);
	ck_assert_uint_ne(s1, s2);
	ck_assert_uint_eq(shm_topo_revision(), 2);
	ck_assert(shm_topo_pin(&r2));
	ck_assert_str_eq(r2.data, "rev two");
	/* r1 still sees its image while pinned */
	ck_assert_str_eq(r1.data, "rev one");

	/* claim every free slot: neither the current nor the pinned one is handed out */
	unsigned claimed[SHM_TOPO_SLOTS], n = 0;

	while (shm_topo_claim(&slot)) {
		ck_assert_uint_ne(slot, s1);
		ck_assert_uint_ne(slot, s2);
		claimed[n++] = slot;
	}
	ck_assert_uint_eq(n, SHM_TOPO_SLOTS - 2);
	for (unsigned i = 0; i < n; i++)
		shm_topo_abandon(claimed[i]);

	/* once unpinned, the old slot is reusable */
	shm_topo_unpin(&r1);
	n = 0;
	bool saw_s1 = false;

	while (shm_topo_claim(&slot)) {
		saw_s1 |= slot == s1;
		claimed[n++] = slot;
	}
	ck_assert(saw_s1);
	for (unsigned i = 0; i < n; i++)
		shm_topo_abandon(claimed[i]);
	shm_topo_unpin(&r2);
	ck_assert_uint_eq(atomic_load(&shm_header()->topo[s2].pins), 0);
}
END_TEST

/* A forked reader keeps pinning while the writer publishes: it never sees a torn image. */
START_TEST(test_topo_fork_readers)
{
	pid_t pid;
	char buf[64];

	publish_text("revision 1", 1);
	pid = fork();
	ck_assert_int_ne(pid, -1);
	if (pid == 0) {
		uint64_t last = 0;

		while (last < 200) {
			struct shm_topo_ref r;

			if (!shm_topo_pin(&r))
				_exit(3);
			snprintf(buf, sizeof(buf), "revision %llu", (unsigned long long)r.revision);
			if (strcmp(buf, r.data) != 0 || r.revision < last)
				_exit(4);
			last = r.revision;
			shm_topo_unpin(&r);
		}
		_exit(0);
	}
	for (uint64_t rev = 2; rev <= 200; rev++) {
		unsigned slot;

		while (!shm_topo_claim(&slot))
			;
		snprintf(buf, sizeof(buf), "revision %llu", (unsigned long long)rev);
		memcpy(shm_topo_data(slot), buf, strlen(buf) + 1);
		shm_topo_publish(slot, rev, strlen(buf) + 1);
	}
	wait_children(&pid, 1);
}
END_TEST

Suite *
shm_suite(void)
{
	Suite *s = suite_create("shm");
	TCase *tc = tcase_create("shm");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_create_layout);
	tcase_add_test(tc, test_create_too_small);
	tcase_add_test(tc, test_proc_slot_reset_and_state);
	tcase_add_test(tc, test_stats_publish_read);
	tcase_add_test(tc, test_dbstats_publish_read);
	tcase_add_test(tc, test_list_rows_and_area);
	tcase_add_test(tc, test_socket_ids);
	tcase_add_test(tc, test_seq_generations);
	tcase_add_test(tc, test_mbox_post_take_ack);
	tcase_add_test(tc, test_mbox_full_and_wrap);
	tcase_add_test(tc, test_mbox_broadcast_and_acks);
	tcase_add_test(tc, test_mbox_many_senders_fork);
	tcase_add_test(tc, test_counter_limit_release_reclaim);
	tcase_add_test(tc, test_counter_fork_race);
	tcase_add_test(tc, test_topo_publish_pin_reuse);
	tcase_add_test(tc, test_servers_publish_read);
	tcase_add_test(tc, test_topo_fork_readers);
	suite_add_tcase(s, tc);
	return s;
}
