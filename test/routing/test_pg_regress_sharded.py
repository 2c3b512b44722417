"""
The short form of test/regress/sharded (Postgres 15's own regression SQL through neki
against a sharded database, compared statement by statement with the same SQL on the
reference server): the set-up and SHORT_FILES run, and every file's list of differences
(statement hash, class, reason, in statement order) must be the committed one in
test/regress/sharded/expected/. A new difference (a regression, or a bug), one that went
away (update the list and DIFFERENCES.md) and one whose reason changed all fail; statement
numbers are not compared (a newer 15.x may add statements elsewhere). The SQL is fetched
from Debian's archive at the first run (pg15_source.py); the test skips, saying why, when
it cannot be. The long form: test/regress/sharded/sharded_regress.py.
"""
import sys
from collections import Counter
from pathlib import Path

import pytest

from conftest import make_private_dir

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "regress" / "sharded"))
import pg15_source  # noqa: E402
import sharded_regress as sr  # noqa: E402


def rows(path):
    """[(hash, class, reason)] of a list (number, hash, class, reason per line)."""
    return [tuple(line.split("\t")[1:4]) for line in path.read_text().splitlines() if line]


def numbers(path):
    return {tuple(line.split("\t")[1:4]): line.split("\t")[0]
            for line in path.read_text().splitlines() if line}


@pytest.fixture(scope="module")
def run(pg_cluster):
    try:
        sr.pg15()
    except pg15_source.Unavailable as e:
        pytest.skip(f"Postgres 15's regression files cannot be fetched: {e}")
    results = make_private_dir("sharded-regress.")
    inst, _ = sr.setup_cluster_and_neki(pg_cluster, sr.SHORT_FILES)
    try:
        figures = sr.run_all(sr.SHORT_FILES, results, pg_cluster, inst)
    finally:
        problems = inst.cleanup()
        for server in pg_cluster.servers:
            pg_cluster.sql(server, f"DROP DATABASE IF EXISTS {sr.DB} WITH (FORCE)")
    assert not problems, problems
    print(sr.summary(figures))
    return results, figures


@pytest.mark.parametrize("name", ["test_setup"] + sr.SHORT_FILES)
def test_differences_are_the_known_ones(run, name):
    results, figures = run
    path = results / f"{name}.tsv"
    got, want = rows(path), rows(sr.EXPECTED / f"{name}.tsv")
    at = numbers(path)
    new, gone = Counter(got) - Counter(want), Counter(want) - Counter(got)
    assert got == want, (f"{name}: differences changed (see {results}/{name}.diff):\n"
                         f"new: {[(at[r], *r) for r in new.elements()]}\n"
                         f"gone: {list(gone.elements())}")
    assert figures[name][0] > 0
