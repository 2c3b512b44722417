"""The `neki` fixture itself, exercised with test/harness/fake_neki (a test double of the
process interface: it listens and forks, but serves no protocol). The real neki is tested by
the process tests; these only prove the fixture starts, waits, reports and cleans up."""
import os
import signal
from pathlib import Path

import pytest

from conftest import IS_ROOT, NekiStartError, pid_alive, port_accepts, run_as_user, wait_until

FAKE = Path(__file__).resolve().parent / "fake_neki"


def uid_of(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("Uid:"):
            return int(line.split()[1])
    return None


def test_starts_waits_and_stops_cleanly(neki):
    n = neki(binary=FAKE, settings={"workers": 3})
    assert n.alive() and n.pid == n.proc.pid
    assert port_accepts(n.port) and port_accepts(n.admin_port)
    assert n.port != n.admin_port
    assert wait_until(lambda: len(n.children()) == 4, 5, what="3 workers + admin")
    assert n.read_pidfile() == n.pid
    assert f"listen_port = {n.port}" in n.ini_text()
    assert "[pgbouncer]" in n.ini_text()
    assert "fake neki started, 4 children" in n.wait_log("started").string
    if IS_ROOT:  # the fixture passed -u: the processes run unprivileged
        import pwd
        assert uid_of(n.children()[0]) == pwd.getpwnam(run_as_user()).pw_uid
    kids = n.children()
    assert n.stop() == []                      # SIGQUIT was enough
    assert n.leftovers() == []
    assert not any(pid_alive(p) for p in kids + [n.pid])
    assert not n.pidfile.exists()


def test_sections_and_settings(neki):
    n = neki(binary=FAKE, databases={"db1": "host=127.0.0.1 port=5432"},
             shards="shard-a = host=127.0.0.1 port=1", users="u1 = pool_mode=session",
             settings={"auth_type": None, "pool_mode": "transaction"}, section="neki",
             start=False)
    text = n.ini_text()
    assert "[databases]\ndb1 = host=127.0.0.1 port=5432\n" in text
    assert "[shards]\nshard-a = host=127.0.0.1 port=1\n" in text
    assert "[users]\nu1 = pool_mode=session\n" in text
    assert "[neki]\n" in text and "pool_mode = transaction" in text
    assert "auth_type" not in text
    n.update({"workers": 5})
    assert "workers = 5" in n.ini_text()
    n.start()
    assert wait_until(lambda: len(n.children()) == 6, 5, what="5 workers + admin")


def test_start_failure_shows_the_log(neki):
    with pytest.raises(NekiStartError, match="(?s)exited with 1.*bad setting fake_fail_start"):
        neki(binary=FAKE, settings={"fake_fail_start": 1})


def test_processes_that_ignore_sigquit_are_killed_and_reported(neki):
    n = neki(binary=FAKE, settings={"fake_ignore_sigquit": 1, "workers": 1})
    pids = [n.pid] + n.children()
    problems = n.cleanup()
    assert problems and "SIGKILLed" in problems[0]
    assert not any(pid_alive(p) for p in pids)
    assert n.leftovers() == []


def test_daemon_mode_reads_the_pidfile(neki):
    n = neki(binary=FAKE, daemon=True)
    assert n.pid == n.read_pidfile()
    assert n.pid != n.proc.pid
    assert n.proc.wait(5) == 0                 # the foreground process exited
    assert n.alive() and port_accepts(n.port)
    n.signal(signal.SIGQUIT)
    n.wait_exit(5)
    assert not n.pidfile.exists()


def test_leftover_children_are_found_after_the_master_dies(neki):
    n = neki(binary=FAKE, settings={"workers": 2})
    kids = wait_until(lambda: len(n.children()) == 3 and n.children(), 5, what="children")
    os.kill(n.pid, signal.SIGKILL)             # children die by PDEATHSIG in the fake
    n.wait_exit(5)
    wait_until(lambda: n.leftovers() == [], 5, what="children to follow the master")
    assert not any(pid_alive(p) for p in kids)


def test_real_neki_binary_is_the_default():
    from conftest import neki_binary, REPO
    if "NEKI_BIN" in os.environ:
        assert neki_binary() == Path(os.environ["NEKI_BIN"]).resolve()
    else:
        assert neki_binary() == REPO / "neki"
