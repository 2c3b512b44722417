"""Host lists (pgbouncer's test_load_balance_hosts.py, test_host_strategy.py and
test_load_balance_min_connections.py): round-robin over hosts and ports, every worker taking
its turn; load_balance_hosts=disable keeps the host that works and moves on when one fails;
port lists must give one port per host."""
import psycopg
import pytest

from compat import admin
from conftest import wait_until


def server_port(n, db):
    with n.connect(db) as c:
        return c.execute("SELECT inet_server_port()").fetchone()[0]


@pytest.mark.parametrize("workers", [1, 2])
def test_round_robin_over_ports(pg_cluster, cluster_db, neki, workers):
    """New links take the hosts in turn. One worker: exactly alternating. Two workers share
    the turn, but a worker may close an idle link for a client waiting in the other one, so
    only the use of both hosts is certain there."""
    a, b = pg_cluster.port("shard-a"), pg_cluster.port("shard-b")
    n = neki(settings={"admin_users": "postgres", "pool_mode": "session", "workers": workers},
             databases=f"{cluster_db} = host=127.0.0.1,127.0.0.1 port={a},{b} "
                       "load_balance_hosts=round-robin")
    conns = [n.connect(cluster_db) for _ in range(6)]
    try:
        ports = [c.execute("SELECT inet_server_port()").fetchone()[0] for c in conns]
    finally:
        for c in conns:
            c.close()
    if workers == 1:
        assert ports == [a, b] * 3
    else:
        assert set(ports) == {a, b}
    row = next(r for r in admin(n, "SHOW DATABASES", dicts=True) if r["name"] == cluster_db)
    assert row["port"] == a and row["load_balance_hosts"] == "round-robin"


def test_disable_uses_the_first_host(pg_cluster, cluster_db, neki):
    a, b = pg_cluster.port("shard-a"), pg_cluster.port("shard-b")
    n = neki(settings={"pool_mode": "session"},
             databases=f"{cluster_db} = host=127.0.0.1,127.0.0.1 port={a},{b} "
                       "load_balance_hosts=disable")
    conns = [n.connect(cluster_db) for _ in range(4)]
    try:
        assert {c.execute("SELECT inet_server_port()").fetchone()[0] for c in conns} == {a}
    finally:
        for c in conns:
            c.close()


def test_disable_moves_past_a_bad_host(pg_cluster, cluster_db, neki):
    """The first host refuses connections: one failure is logged, then the good host is used
    and kept for the following clients."""
    port = pg_cluster.port("shard-a")
    n = neki(settings={"server_login_retry": 0.2, "workers": 1},
             databases=f"bad_first = host=127.0.0.3,127.0.0.1 port={port} "
                       f"dbname={cluster_db} load_balance_hosts=disable\n"
                       f"good_first = host=127.0.0.1,127.0.0.3 port={port} "
                       f"dbname={cluster_db} load_balance_hosts=disable")
    for _ in range(3):
        with n.connect("bad_first", connect_timeout=10) as c:
            c.execute("select 1")
    for _ in range(2):
        with n.connect("good_first") as c:
            c.execute("select 1")
    log = n.log()
    assert log.count("127.0.0.3:%d closing because: connect failed" % port) == 1, log
    assert len([ln for ln in log.splitlines() if "good_first" in ln and
                "new connection to server" in ln]) == 1


def test_unresolvable_first_host(pg_cluster, cluster_db, neki):
    """The name fails to resolve (a resolver on loopback that answers nothing: no query
    leaves the machine): the next host of the list serves the client."""
    port = pg_cluster.port("shard-a")
    n = neki(settings={"server_login_retry": 0.2, "workers": 1},
             databases=f"hl = host=unresolvable-hostname.invalid,127.0.0.1 port={port} "
                       f"dbname={cluster_db} load_balance_hosts=disable", start=False)
    resolv = n.dir / "resolv.conf"
    resolv.write_text("nameserver 127.0.0.1\noptions timeout:1 attempts:1\n")
    resolv.chmod(0o644)
    n.update({"resolv_conf": resolv})
    n.start()
    with n.connect("hl", connect_timeout=15) as c:
        assert c.execute("select 1").fetchone() == (1,)
    n.wait_log("closing because: server DNS lookup failed")


def test_load_balance_hosts_reload(pg_cluster, cluster_db, neki):
    port = pg_cluster.port("shard-a")
    n = neki(settings={"admin_users": "postgres"},
             databases=f"lbu = host=127.0.0.1,127.0.0.3 port={port} dbname={cluster_db} "
                       "load_balance_hosts=disable")

    def mode():
        return next(r for r in admin(n, "SHOW DATABASES", dicts=True)
                    if r["name"] == "lbu")["load_balance_hosts"]
    assert mode() == "disable"
    n.databases = n.databases.replace("=disable", "=round-robin")
    n.write_ini()
    admin(n, "RELOAD")
    assert mode() == "round-robin"


@pytest.mark.parametrize("hosts,ports", [("127.0.0.1", "5432,5433"),
                                         ("127.0.0.1,127.0.0.1,127.0.0.1", "5432,5433")])
def test_port_count_mismatch(neki, hosts, ports):
    n = neki(settings={"admin_users": "postgres"}, databases="ok = host=127.0.0.1")
    n.databases = f"ok = host=127.0.0.1\nbad = host={hosts} port={ports}"
    n.write_ini()
    with pytest.raises(psycopg.Error, match="RELOAD failed"):
        admin(n, "RELOAD")
    n.wait_log("invalid number of ports for database \"bad\"")
