"""
The configuration file as pgbouncer's test_config.py checks it (pgbcompat.py's test bed): a
repeated [pgbouncer] section adds to the earlier one, an %include file with its own
sections adds to the including file (at start and on RELOAD, the section it ends in going
on after it), a setting removed from the file goes back to its default on RELOAD, and
[databases], [users] and [peers] may each come in several blocks.
"""
from pgbcompat import bouncer, pgb_pg  # noqa: F401 (fixtures)


def test_repeated_pgbouncer_section_adds(bouncer):
    bouncer.write_ini("[pgbouncer]")
    bouncer.write_ini("max_client_conn = 77")
    bouncer.write_ini("[pgbouncer]")
    bouncer.write_ini("default_pool_size = 42")
    bouncer.admin("RELOAD")
    assert bouncer.config_value("max_client_conn") == "77"
    assert bouncer.config_value("default_pool_size") == "42"
    assert bouncer.config_value("listen_addr") == "127.0.0.1"   # the first block's
    bouncer.test()


def test_included_sections_add_at_start_and_reload(bouncer):
    included = bouncer.config_dir / "included.ini"
    included.write_text("[pgbouncer]\nmax_client_conn = 77\n\n[databases]\n")
    bouncer.write_ini("[pgbouncer]")
    bouncer.write_ini(f"%include {included}")
    # the include ended in [databases]: this line is a database, not a setting
    bouncer.write_ini(f"leaked_db = host=127.0.0.1 port={bouncer.pg.port('shard-a')} "
                      "dbname=p0")
    bouncer.write_ini("[pgbouncer]")
    bouncer.write_ini("default_pool_size = 42")
    bouncer.admin("RELOAD")

    def check():
        assert bouncer.config_value("max_client_conn") == "77"
        assert bouncer.config_value("default_pool_size") == "42"
        assert "leaked_db" in [r[0] for r in bouncer.admin("SHOW DATABASES")]
    check()
    bouncer.restart()
    check()
    bouncer.test()
    bouncer.test(dbname="leaked_db")


def test_removed_setting_goes_back_to_its_default(bouncer):
    default = bouncer.config_value("max_db_connections")
    assert default != "7"
    base = bouncer.config_text()
    bouncer.write_ini("[pgbouncer]")
    bouncer.write_ini("max_db_connections = 7")
    bouncer.admin("RELOAD")
    assert bouncer.config_value("max_db_connections") == "7"
    bouncer.write_config(base)
    bouncer.admin("RELOAD")
    assert bouncer.config_value("max_db_connections") == default
    bouncer.test()


def test_repeated_databases_users_and_peers_sections(bouncer):
    pg = f"host=127.0.0.1 port={bouncer.pg.port('shard-a')}"
    for line in ("[peers]", f"1 = host={bouncer.admin_host} port={bouncer.port}",
                 "[databases]", f"extra_db = {pg} dbname=p0",
                 "[users]", "extra_user = pool_size=3",
                 "[peers]", f"2 = host={bouncer.admin_host} port={bouncer.port}"):
        bouncer.write_ini(line)
    bouncer.admin("RELOAD")
    databases = [r[0] for r in bouncer.admin("SHOW DATABASES")]
    assert "p0" in databases and "extra_db" in databases
    assert "extra_user" in [r[0] for r in bouncer.admin("SHOW USERS")]
    assert [r[0] for r in bouncer.admin("SHOW PEERS")] == [1, 2]
    bouncer.test()
