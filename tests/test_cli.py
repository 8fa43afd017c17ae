"""The `r2a` command as a user runs it: exit codes and one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from r2adapter.processes import free_port
from tests.conftest import run_cli

pytestmark = pytest.mark.integration  # the embedded Postgres


def test_validate_2wiki_reports_complete_gold(pg_env: dict[str, str]) -> None:
    r = run_cli(["data", "validate", "--dataset", "2wikimultihopqa"], pg_env)
    assert r.returncode == 0, r.stderr
    assert "1000 queries, 860 with complete gold" in r.stdout
    assert r.stdout.count("PASS ") == 16 and "FAIL" not in r.stdout


def test_bad_files_give_one_line(pg_env: dict[str, str], tmp_path: Path) -> None:
    folder = tmp_path / "x"
    folder.mkdir()
    (folder / "x_corpus.json").write_text('[{"title": "T", "text": "t"}]')
    r = run_cli(["data", "validate", "--dataset", str(folder)], pg_env)
    assert r.returncode == 1 and "x.json: file not found" in r.stderr
    (folder / "x.json").write_text("{bad")
    r = run_cli(["data", "load", "--dataset", str(folder)], pg_env)
    assert r.returncode == 1
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert "malformed JSON" in r.stderr
    (folder / "x.json").write_text('[{"question": "q"}]')
    r = run_cli(["data", "validate", "--dataset", str(folder)], pg_env)
    assert r.returncode == 1 and "unknown query format" in r.stderr


def test_db_status_and_load_twice(pg_env: dict[str, str]) -> None:
    r = run_cli(["db", "status"], pg_env)
    assert r.returncode == 0 and r.stdout.startswith("running")
    assert run_cli(["data", "load", "--dataset", "hotpotqa"], pg_env).returncode == 0
    r = run_cli(["data", "load", "--dataset", "hotpotqa"], pg_env)
    assert r.returncode == 0 and "nothing changed" in r.stdout


def test_db_down_stops_and_up_restarts(pg_env: dict[str, str], tmp_path: Path) -> None:
    env = {
        **pg_env,
        "R2A_PGDATA": str(tmp_path / "pg2"),
        # a port of its own: the main server's port + 1 may be some client's ephemeral port
        "R2A_PG_PORT": str(free_port()),
    }
    assert run_cli(["db", "up"], env).returncode == 0
    assert run_cli(["db", "status"], env).stdout.startswith("running")
    url = run_cli(["db", "url"], env).stdout.strip()
    assert url.endswith(f"127.0.0.1:{env['R2A_PG_PORT']}/r2adapter")
    assert run_cli(["db", "down"], env).returncode == 0
    assert run_cli(["db", "status"], env).stdout.startswith("stopped")
    r = run_cli(["data", "load", "--dataset", "sample"], env)
    assert r.returncode == 1 and "database unreachable" in r.stderr


def test_state_says_what_this_machine_lacks(pg_env: dict[str, str], tmp_path: Path) -> None:
    env = {**pg_env, "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}"}
    r = run_cli(["state", "--dataset", "no_such_dataset"], env)
    assert r.returncode == 1, r.stderr
    assert "index no_such_dataset: missing" in r.stdout
    assert "champion r2a: missing" in r.stdout and "missing on this machine" in r.stdout
    # every family's champion, not only the two-way routers' (issue 42; ADR's when the
    # parameters enable it: this test's home has no params.yaml, so it is off)
    assert "champion kway: missing" in r.stdout and "champion adr" not in r.stdout
