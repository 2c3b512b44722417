"""
ORMs' nested transactions over a sharded database (issue 17): SQLAlchemy's begin_nested()
and Django's nested transaction.atomic() blocks (savepoints, psycopg2) through neki, rows on
several shards, inner blocks rolled back by an error or on purpose: the rows left are those
one Postgres (the reference server) holds after the same code.
"""
import pytest

try:
    import psycopg
except ImportError:
    psycopg = None

from test_routing import Store, create_schema, routing_neki, sharded_database, topology
from test_savepoints import ids_on_shards
from test_txn import no_idle_in_transaction


@pytest.fixture(scope="module")
def store(pg_cluster):
    with sharded_database(pg_cluster, "orm") as db, \
            routing_neki(pg_cluster, db, topology(db), Store) as st:
        create_schema(st)
        st.both("INSERT INTO countries VALUES ('FR', 'France'), ('DE', 'Germany')")
        yield st


def targets(store):
    """(name, host, port) of neki and of the reference server."""
    return [("neki", "127.0.0.1", store.neki.port),
            ("reference", "127.0.0.1", store.cluster.ports["reference"])]


def rows_of(store, ids):
    sql = f"SELECT id, name FROM customers WHERE id IN ({', '.join(map(str, ids))}) ORDER BY id"
    with store.ref() as conn:
        want = conn.execute(sql).fetchall()
    return store.run(sql), want


def cleanup(store, ids):
    store.both(f"DELETE FROM customers WHERE id IN ({', '.join(map(str, ids))})")


def test_sqlalchemy_begin_nested(store):
    sa = pytest.importorskip("sqlalchemy")
    orm = pytest.importorskip("sqlalchemy.orm")
    exc = pytest.importorskip("sqlalchemy.exc")

    class Base(orm.declarative_base()):
        __abstract__ = True

    class Customer(Base):
        __tablename__ = "customers"
        id = sa.Column(sa.BigInteger, primary_key=True, autoincrement=False)
        name = sa.Column(sa.Text, nullable=False)
        country = sa.Column(sa.Text)

    ids = ids_on_shards(store, 4, 3000)
    try:
        for _, host, port in targets(store):
            engine = sa.create_engine(f"postgresql+psycopg2://postgres@{host}:{port}/{store.db}",
                                      use_native_hstore=False, future=True)
            with orm.Session(engine) as s, s.begin():
                s.add(Customer(id=ids[0], name="outer", country="FR"))
                s.flush()
                with pytest.raises(exc.IntegrityError):
                    with s.begin_nested():
                        s.add(Customer(id=ids[1], name="undone", country="FR"))
                        s.flush()
                        s.add(Customer(id=ids[0] + 0, name="duplicate", country="FR"))
                        s.flush()
                s.expunge_all()
                with s.begin_nested():
                    s.add(Customer(id=ids[2], name="kept", country="DE"))
                    s.flush()
                    inner = s.begin_nested()
                    s.add(Customer(id=ids[3], name="rolled back", country="DE"))
                    s.flush()
                    inner.rollback()
                s.execute(sa.text(f"UPDATE customers SET name = 'updated' WHERE id = {ids[2]}"))
            engine.dispose()
        got, want = rows_of(store, ids)
        assert got == want
        assert [r[1] for r in got] == ["outer", "updated"]
        no_idle_in_transaction(store)
    finally:
        cleanup(store, ids)


def test_django_nested_atomic(store):
    django = pytest.importorskip("django")
    from django.conf import settings
    ids = ids_on_shards(store, 4, 3100)
    aliases = {name: {"ENGINE": "django.db.backends.postgresql", "NAME": store.db,
                      "USER": "postgres", "HOST": host, "PORT": str(port)}
               for name, host, port in targets(store)}
    if not settings.configured:
        settings.configure(DATABASES={"default": aliases["neki"], **aliases},
                           INSTALLED_APPS=[], USE_TZ=True, TIME_ZONE="UTC")
        django.setup()
    from django.db import IntegrityError, connections, models, transaction

    class Customer(models.Model):
        id = models.BigIntegerField(primary_key=True)
        name = models.TextField()
        country = models.TextField()

        class Meta:
            app_label = "neki_orm_test"
            db_table = "customers"
            managed = False

    try:
        for alias in aliases:
            objs = Customer.objects.using(alias)
            with transaction.atomic(using=alias):
                objs.create(id=ids[0], name="outer", country="FR")
                with transaction.atomic(using=alias):
                    objs.create(id=ids[1], name="kept", country="FR")
                try:
                    with transaction.atomic(using=alias):
                        objs.create(id=ids[2], name="undone", country="DE")
                        with transaction.atomic(using=alias):
                            objs.create(id=ids[3], name="undone too", country="DE")
                        objs.create(id=ids[0], name="duplicate", country="FR")
                except IntegrityError:
                    pass
                with transaction.atomic(using=alias):
                    objs.filter(id=ids[1]).update(name="renamed")
                    transaction.set_rollback(True, using=alias)
                objs.create(id=ids[3], name="after", country="DE")
            connections[alias].close()
        got, want = rows_of(store, ids)
        assert got == want
        assert [r[1] for r in got] == ["outer", "kept", "after"]
        no_idle_in_transaction(store)
    finally:
        cleanup(store, ids)
