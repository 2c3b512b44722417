"""
Starting neki on a pgbouncer-only configuration: the ini names no admin_listen_port, so the
default admin port may be held by another instance on the host; neki must start anyway
(the console stays on the main port), and only a port the file asks for is fatal.
"""
import socket

import pytest

from conftest import NekiStartError, port_accepts
from pgbcompat import Bouncer, bouncer, pgb_pg  # noqa: F401 (fixtures)

DEFAULT_ADMIN_PORT = 6433


@pytest.fixture
def held_default_admin_port():
    """Make sure something listens on 127.0.0.1:6433 for the test (ours, or whoever has it)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("127.0.0.1", DEFAULT_ADMIN_PORT))
        s.listen(1)
    except OSError:
        s.close()
        s = None
        assert port_accepts(DEFAULT_ADMIN_PORT), "6433 neither free nor listening"
    yield
    if s is not None:
        s.close()


def test_busy_default_admin_port_is_a_warning(neki, pgb_pg, held_default_admin_port):
    inst = neki(start=False)
    inst.admin_port = 0
    b = Bouncer(inst, pgb_pg)
    b.write_base()
    b.start()
    assert b.admin_value("SHOW VERSION").startswith("PgBouncer 1.25.2")
    assert b.test() == [(1,)]
    assert "could not listen on 127.0.0.1:6433" in b.log()
    assert "the admin console is served on the main port only" in b.log()


def test_busy_explicit_admin_port_is_fatal(neki, pgb_pg, held_default_admin_port):
    inst = neki(start=False)
    inst.admin_port = 0
    b = Bouncer(inst, pgb_pg)
    b.write_base()
    b.write_ini(f"admin_listen_port = {DEFAULT_ADMIN_PORT}")
    with pytest.raises(NekiStartError, match="could not listen on 127.0.0.1:6433"):
        b.start()
    assert inst.wait_exit(5) == 1
