"""
Garbage on the socket of a sharded database while other clients run a routed load (issue
21, faults): random bytes, huge lengths, a truncated startup, an SSLRequest then garbage, a
valid login then malformed messages (Parse without its terminator, Bind whose counts lie,
an unknown Describe kind, a huge Query, an unknown message type, CopyData outside a COPY,
random bytes). Each bad client gets a protocol-violation error (08P01) where the protocol
lets neki answer, or is closed; neki stays up with the same processes, and the pgbench run
beside them loses nothing (every transaction done, none failed, every UPDATE counted).
"""
import os
import random
import struct
import sys
from pathlib import Path

import pytest

from faultlib import DATA_SHARDS, ledger_neki, pgbench, pgbench_result

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "clients"))
from pgwire import Wire, bind, errors_in, execute, parse, sync  # noqa: E402

ROWS = 100
SCRIPT = ("\\set id random(1, %d)\n"
          "UPDATE ledger SET who = who + 1 WHERE id = :id;\n"
          "SELECT count(*) FROM ledger;\n" % ROWS)
MAX_PACKET = 1 << 20


@pytest.fixture(scope="module")
def ledger(pg_cluster):
    with ledger_neki(pg_cluster, "garb", settings={"max_packet_size": MAX_PACKET}) as st:
        st.run("INSERT INTO ledger SELECT g, 0, 'n' FROM generate_series(1, %d) g" % ROWS)
        yield st


def answer(w):
    """Every message until neki closes the connection (or 5 s pass: then none more)."""
    msgs = w.read_all()
    w.close()
    return msgs


def assert_protocol_error(msgs, what, fatal=None):
    errs = errors_in(msgs)
    assert errs, f"{what}: no ErrorResponse ({msgs[:3]})"
    assert errs[0]["C"] == "08P01", f"{what}: {errs[0]}"
    if fatal is not None:
        assert (errs[0]["S"] == "FATAL") == fatal, f"{what}: {errs[0]}"


def logged_in(st):
    w = Wire(st.neki.port, timeout=5)
    msgs = w.login(database=st.db)
    assert not errors_in(msgs), msgs
    return w


def before_login(st, rng):
    port = st.neki.port
    # random bytes in place of a startup packet (a random "version": 0A000, as Postgres)
    w = Wire(port, timeout=5)
    w.raw(struct.pack("!I", 40) + bytes(rng.getrandbits(8) for _ in range(36)))
    errs = errors_in(answer(w))
    assert errs and errs[0]["C"] in ("08P01", "0A000"), errs
    # a huge length: closed (with 08P01 or without a word, as Postgres)
    w = Wire(port, timeout=5)
    w.raw(struct.pack("!II", 0x7FFFFFF0, 196608))
    errs = errors_in(answer(w))
    assert not errs or errs[0]["C"] == "08P01", errs
    # a truncated startup packet, then the client goes away
    w = Wire(port, timeout=5)
    w.raw(struct.pack("!II", 100, 196608) + b"user\0post")
    w.close()
    # SSLRequest, then garbage instead of a TLS hello or a startup packet
    w = Wire(port, timeout=5)
    w.raw(struct.pack("!II", 8, 80877103))
    assert w.read_byte() in (b"N", b"S")
    w.raw(bytes(rng.getrandbits(8) for _ in range(64)))
    errs = errors_in(answer(w))
    assert not errs or errs[0]["C"] in ("08P01", "0A000"), errs


def after_login(st, rng):
    # a Parse whose statement text has no terminator
    w = logged_in(st)
    w.send(b"P", b"\0SELECT 1")
    w.raw(sync())
    assert_protocol_error(w.read_until("Z"), "unterminated Parse", fatal=False)  # as Postgres
    w.close()
    # a Bind that says it has 5 parameters and carries none
    w = logged_in(st)
    w.raw(parse("", "SELECT count(*) FROM ledger WHERE id = $1"))
    w.send(b"B", b"\0\0\0\0\0\x05\0\0\0\x10ab")
    w.raw(sync())
    msgs = w.read_until("Z")
    assert errors_in(msgs), msgs
    w.close()
    # Describe of an unknown kind
    w = logged_in(st)
    w.send(b"D", b"X\0")
    w.raw(sync())
    assert_protocol_error(w.read_until("Z"), "Describe 'X'", fatal=False)  # as Postgres
    w.close()
    # a Query larger than max_packet_size
    w = logged_in(st)
    w.raw(b"Q" + struct.pack("!I", MAX_PACKET * 4) + b"SELECT ")
    assert_protocol_error(answer(w), "huge Query", fatal=True)
    # a length below 4
    w = logged_in(st)
    w.raw(b"Q" + struct.pack("!I", 2))
    assert_protocol_error(answer(w), "length 2", fatal=True)
    # an unknown message type
    w = logged_in(st)
    w.send(b"z", b"abc")
    assert_protocol_error(answer(w), "type 'z'", fatal=True)
    # CopyData outside a COPY (Postgres ignores it; then a query works)
    w = logged_in(st)
    w.send(b"d", b"1\t2\n")
    msgs = w.query("SELECT count(*) FROM ledger")
    assert not errors_in(msgs) or errors_in(msgs)[0]["C"] == "08P01", msgs
    w.close()
    # an Execute of a portal that does not exist, then a valid extended query
    w = logged_in(st)
    w.raw(execute("nope") + sync())
    msgs = w.read_until("Z")
    assert errors_in(msgs) and errors_in(msgs)[0]["C"] == "34000", msgs
    w.raw(parse("", "SELECT count(*) FROM ledger WHERE id = $1") +
          bind("", "", ["7"]) + execute() + sync())
    msgs = w.read_until("Z")
    assert not errors_in(msgs) and any(t == "D" for t, _ in msgs), msgs
    w.close()
    # a truncated Query, then the client goes away
    w = logged_in(st)
    w.raw(b"Q" + struct.pack("!I", 100) + b"SELECT")
    w.close()
    # random bytes after the login
    for _ in range(10):
        w = logged_in(st)
        w.raw(bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 64))))
        w.sock.settimeout(0.5)      # (a message cut short waits for the rest)
        if rng.random() < 0.5:
            errs = errors_in(answer(w))
            assert all(e["S"] in ("ERROR", "FATAL") for e in errs), errs
        else:
            w.close()


def total_who(st):
    return sum(st.cluster.sql(s, "SELECT coalesce(sum(who), 0) FROM ledger",
                              dbname=st.db)[0][0] for s in DATA_SHARDS)


def test_garbage_beside_a_routed_load(ledger):
    st = ledger
    pids = set(st.neki.children())
    before = total_who(st)
    bench = pgbench(st.neki.port, st.db, SCRIPT, clients=4, count=300)
    rng = random.Random(int(os.environ.get("NEKI_FUZZ_SEED", "21021")))
    try:
        for _ in range(2):
            before_login(st, rng)
            after_login(st, rng)
    finally:
        rc, done, failed, out = pgbench_result(bench)
    assert rc == 0 and done == 1200 and failed == 0, out
    assert total_who(st) - before == 1200
    assert set(st.neki.children()) == pids, "a neki process was restarted"
    assert "killed by signal" not in st.neki.log() and "exited with" not in st.neki.log()
