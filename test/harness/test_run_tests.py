"""test/run-tests counts what each runner reports: it is fed stand-in runners (scripts that
print a known summary and exit with a known status) through its NEKI_RT_* variables."""
import os
import subprocess

import pytest

from conftest import REPO

RUN_TESTS = REPO / "test" / "run-tests"


def script(path, output, rc=0, accept_c=False):
    lines = ["#!/bin/bash"]
    if accept_c:  # the stand-in python answers `python -c 'import pytest'`
        lines.append('[ "$1" = -c ] && exit 0')
    lines.append(f"cat <<'OUT'\n{output}\nOUT")
    lines.append(f"exit {rc}")
    path.write_text("\n".join(lines) + "\n")
    path.chmod(0o755)
    return str(path)


FUZZ_OK = ("client           10 execs  cov   217  ft    326  corpus     9  findings 0\n"
           "fuzz: 1 targets, 10 executions, no findings", 0)


def run(tmp_path, unit, asan, pytest_out, regress, lint=(), suites=(), fuzz=FUZZ_OK):
    lint_dir = tmp_path / "lint"
    lint_dir.mkdir()
    for i, rc in enumerate(lint):
        script(lint_dir / f"l{i}", f"lint {i}", rc)
    env = dict(os.environ,
               NEKI_RT_UNIT_BIN=script(tmp_path / "unit", *unit),
               NEKI_RT_ASAN_BIN=script(tmp_path / "asan", *asan),
               NEKI_RT_PYTHON=script(tmp_path / "python", *pytest_out, accept_c=True),
               NEKI_RT_REGRESS_RUN=script(tmp_path / "regress", *regress),
               NEKI_RT_FUZZ_RUN=script(tmp_path / "fuzz", *fuzz),
               NEKI_RT_ASAN_NEKI="/bin/true",
               NEKI_RT_PG_REGRESS="/bin/true",
               NEKI_RT_LINT_DIR=str(lint_dir))
    res = subprocess.run([str(RUN_TESTS), "--no-install", *suites], capture_output=True,
                         text=True, env=env, stdin=subprocess.DEVNULL, timeout=60)
    return res, res.stdout.rstrip("\n").splitlines()


def test_all_passing(tmp_path):
    res, lines = run(tmp_path,
                     unit=("100%: Checks: 5, Failures: 0, Errors: 0", 0),
                     asan=("Running suite(s): a\n100%: Checks: 5, Failures: 0, Errors: 0", 0),
                     pytest_out=("....s\n12 passed, 2 skipped in 1.03s", 0),
                     regress=("=====\n All 3 tests passed. \n=====", 0),
                     lint=(0,))
    assert res.returncode == 0, res.stdout
    # pytest's 12 twice: the whole suite, and asan-pytest's files against the ASan build
    assert lines[-1] == "39 passed, 0 failed"
    # each runner's own summary line, unchanged
    for own in ["100%: Checks: 5, Failures: 0, Errors: 0", "12 passed, 2 skipped in 1.03s",
                " All 3 tests passed. ", "lint: 1 passed, 0 failed"]:
        assert own in lines


def test_failures_are_counted_and_fail_the_run(tmp_path):
    res, lines = run(tmp_path,
                     unit=("x.c:1:F:s:t:0: Assertion failed\n"
                           "60%: Checks: 5, Failures: 1, Errors: 1", 1),
                     asan=("AddressSanitizer: SEGV on unknown address", 139),
                     pytest_out=("FAILED test_a.py::t1\n2 failed, 10 passed, 1 error in 3.2s", 1),
                     regress=(" 1 of 3 tests failed. ", 1),
                     lint=(1,),
                     fuzz=("a  1 execs  cov 1  ft 1  corpus 1  findings 0\n"
                           "b  1 execs  cov 1  ft 1  corpus 1  findings 2\n"
                           "fuzz: findings (kept in /tmp/x)", 1))
    assert res.returncode != 0
    # unit 3/2, asan crashed 0/1, pytest 10/3 (and asan-pytest), regress 2/1, lint 0/1,
    # fuzz 1/1
    assert lines[-1] == "26 passed, 12 failed"
    assert "x.c:1:F:s:t:0: Assertion failed" in lines
    assert "run-tests: asan: no Check summary line (exit status 139)" in lines


def test_fuzz_that_did_not_run_is_a_failure(tmp_path):
    res, lines = run(tmp_path, unit=("", 0), asan=("", 0), pytest_out=("", 0),
                     regress=("", 0), suites=("fuzz",),
                     fuzz=("fuzz: clang is missing (apt-get install clang libclang-rt-14-dev)",
                           2))
    assert res.returncode != 0
    assert lines[-1] == "0 passed, 1 failed"


def test_pytest_exit_5_means_no_tests_not_a_failure(tmp_path):
    res, lines = run(tmp_path, unit=("100%: Checks: 1, Failures: 0, Errors: 0", 0),
                     asan=("", 0), pytest_out=("no tests ran in 0.01s", 5),
                     regress=("", 0), suites=("unit", "pytest"))
    assert res.returncode == 0, res.stdout
    assert lines[-1] == "1 passed, 0 failed"


def test_non_zero_exit_without_a_counted_failure_is_a_failure(tmp_path):
    res, lines = run(tmp_path, unit=("", 0), asan=("", 0),
                     pytest_out=("5 passed in 0.5s", 3), regress=("", 0), suites=("pytest",))
    assert res.returncode != 0
    assert lines[-1] == "5 passed, 1 failed"


@pytest.mark.parametrize("summary,rc,expect", [
    (" 3 of 4 tests passed, 1 failed test(s) ignored. ", 0, "3 passed, 0 failed"),
    (" 2 of 5 tests failed, 1 of these failures ignored. ", 1, "3 passed, 1 failed"),
    (" 1 of 3 tests failed. ", 1, "2 passed, 1 failed"),
    ("could not connect to server", 2, "0 passed, 1 failed"),
])
def test_regress_summaries(tmp_path, summary, rc, expect):
    res, lines = run(tmp_path, unit=("", 0), asan=("", 0), pytest_out=("", 0),
                     regress=(summary, rc), suites=("regress",))
    assert lines[-1] == expect
    assert (res.returncode == 0) == expect.endswith(" 0 failed")
