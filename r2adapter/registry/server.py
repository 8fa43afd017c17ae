"""`r2a mlflow up | down | status | webhook`: an MLflow tracking server on the embedded Postgres.

`up` starts `mlflow server` in the background on 127.0.0.1:R2A_MLFLOW_PORT (5055) with its
backend store in the Postgres of `r2a db up` (its own database, `mlflow`, created when
missing; with R2A_DATABASE_URL set, a database `mlflow` on that server) and its artifacts
served through the server (`--artifacts-destination`), so a client needs only HTTP: a
pipeline step in a container, the serving container. Where the artifacts go is
R2A_MLFLOW_ARTIFACTS: a folder (default `artifacts/` in the state folder) or
`s3://bucket[/prefix]` (S3 or an S3-compatible store: MLFLOW_S3_ENDPOINT_URL and the
AWS_* keys come from the environment, reach the server process through its environment
and are never printed; `up` checks that the bucket answers before it starts the server).
Everything else it keeps lives in R2A_MLFLOW_DIR (default `mlruns/server/`, git-ignored):
`server.pid`, `server.log` and `webhook.key`, the Fernet key MLflow encrypts webhook
secrets with (one key for every worker and every restart; without it each worker would
make its own and could not read the others' secrets). The connection URL, password
included, reaches the server through its environment (MLFLOW_BACKEND_STORE_URI), never its
command line.

Clients select it with `MLFLOW_TRACKING_URI=http://127.0.0.1:5055` (`url()`); the local
sqlite store stays the default.

Registry webhooks: `register_webhook(url)` subscribes a URL to `model_version_alias.created`
with the HMAC secret R2A_WEBHOOK_SECRET (serving/webhook.py checks it). MLflow refuses
plain http and private addresses by default; a server bound to loopback is a local one, so
`up` allows both there (MLFLOW_WEBHOOK_ALLOWED_SCHEMES=http,https,
MLFLOW_WEBHOOK_ALLOW_PRIVATE_IPS=true) unless the environment says otherwise, and lowers
MLflow's webhook-list cache to 2 s (MLFLOW_WEBHOOK_CACHE_TTL; 60 s by default, which
delays a webhook registered after the first alias event by up to a minute).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit, urlunsplit

from r2adapter.config import settings
from r2adapter.errors import R2AError

DB_NAME = "mlflow"  # R2A_MLFLOW_DB: another registry on the same Postgres
DEFAULT_PORT = 5055
ALIAS_EVENT: Final = "model_version_alias.created"
WEBHOOK_NAME = "r2a-serving-reload"
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def host() -> str:
    return os.environ.get("R2A_MLFLOW_HOST", "127.0.0.1")


def port() -> int:
    return int(os.environ.get("R2A_MLFLOW_PORT", str(DEFAULT_PORT)))


def db_name() -> str:
    """R2A_MLFLOW_DB (`mlflow`): the server's database; a second server with a database of its
    own is a second registry (a staging registry, or a test's clean one)."""
    name = os.environ.get("R2A_MLFLOW_DB", DB_NAME)
    if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", name):
        raise R2AError(f"R2A_MLFLOW_DB={name!r}: a database name is [a-z_][a-z0-9_]* (63 at most)")
    return name


def state_dir() -> Path:
    return Path(os.environ.get("R2A_MLFLOW_DIR", settings().root / "mlruns" / "server"))


# a bucket name as S3 allows it (3-63 of a-z 0-9 . -, a letter or digit at either end): no
# `user:key@` can hide in the value, so the destination is safe to show
_S3_DESTINATION = re.compile(r"s3://([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(/\S*)?")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")


def artifacts_destination() -> str:
    """R2A_MLFLOW_ARTIFACTS: the server's `--artifacts-destination`, a folder (absolute;
    default `artifacts/` in the state folder) or `s3://bucket[/prefix]`; anything else is a
    one-line error."""
    value = os.environ.get("R2A_MLFLOW_ARTIFACTS", "").strip()
    if not value:
        return str((state_dir() / "artifacts").resolve())
    if _S3_DESTINATION.fullmatch(value):
        return value.rstrip("/")
    folder = Path(value).expanduser()
    if _SCHEME.match(value) or (folder.exists() and not folder.is_dir()):
        shown = re.sub(r"//[^/@\s]*@", "//***@", value)  # a key written into the URL stays out
        raise R2AError(
            f"R2A_MLFLOW_ARTIFACTS={shown!r}: the MLflow server's artifacts go to a folder "
            "or to s3://bucket[/prefix] (a bucket name is 3-63 of a-z 0-9 . -)"
        )
    return str(folder.resolve())


def _check_s3(destination: str) -> None:
    """The bucket answers with the environment's endpoint and keys: otherwise the server
    would start healthy and fail every upload with a bare 500."""
    try:
        import boto3
        from botocore.config import Config
        from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError
    except ImportError:
        raise R2AError(
            f"R2A_MLFLOW_ARTIFACTS={destination} needs boto3: run `make install`"
        ) from None

    bucket = urlsplit(destination).netloc
    endpoint = os.environ.get("MLFLOW_S3_ENDPOINT_URL") or None
    where = endpoint or "AWS S3"
    config = Config(connect_timeout=5, read_timeout=10, retries={"max_attempts": 1})
    try:
        # a session of its own: boto3's default one keeps the credentials it first found
        s3 = boto3.session.Session().client("s3", endpoint_url=endpoint, config=config)
        s3.head_bucket(Bucket=bucket)
    except NoCredentialsError:
        raise R2AError(
            f"R2A_MLFLOW_ARTIFACTS={destination}: no S3 credentials: set AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY (and MLFLOW_S3_ENDPOINT_URL for a store other than AWS S3)"
        ) from None
    except (BotoCoreError, ClientError) as e:
        why = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
        raise R2AError(
            f"R2A_MLFLOW_ARTIFACTS={destination}: bucket {bucket} at {where} cannot be used: "
            f"{why} (MLFLOW_S3_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)"
        ) from None


def url() -> str:
    """The tracking URI that selects this server (MLFLOW_TRACKING_URI)."""
    h = host()
    return f"http://{'127.0.0.1' if h in ('0.0.0.0', '::') else h}:{port()}"


def _pidfile() -> Path:
    return state_dir() / "server.pid"


def log_file() -> Path:
    return state_dir() / "server.log"


@dataclass(frozen=True)
class Status:
    running: bool
    healthy: bool
    pid: int | None
    url: str
    rss_mb: float | None = None

    def line(self) -> str:
        if not self.running:
            return f"stopped (state {state_dir()})"
        health = "healthy" if self.healthy else "not answering /health"
        mem = f", {self.rss_mb:.0f} MB" if self.rss_mb is not None else ""
        return f"running: pid {self.pid}, {self.url} ({health}{mem}), log {log_file()}"


def _pid() -> int | None:
    try:
        pid = int(_pidfile().read_text().split()[0])
        os.kill(pid, 0)
    except (OSError, ValueError, IndexError):
        return None
    return pid


def _healthy(timeout: float = 2.0) -> bool:
    import httpx

    try:
        return httpx.get(f"{url()}/health", timeout=timeout).status_code == 200
    except httpx.HTTPError:
        return False


def _group_rss_mb(pid: int) -> float | None:
    """Resident memory of the server and every process of its session (the workers)."""
    total = 0
    try:
        sid = os.getsid(pid)
    except OSError:
        return None
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.getsid(int(entry.name)) != sid:
                continue
            for line in (entry / "status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except (OSError, ValueError):
            continue
    return total / 1024


def status() -> Status:
    pid = _pid()
    if pid is None:
        return Status(False, False, None, url())
    return Status(True, _healthy(), pid, url(), _group_rss_mb(pid))


def backend_uri() -> str:
    """SQLAlchemy URL of the server's database (`db_name()`) on the project's Postgres."""
    from r2adapter.store.db import database_url

    parts = urlsplit(database_url())
    return urlunsplit(("postgresql+psycopg", parts.netloc, f"/{db_name()}", parts.query, ""))


def _ensure_database() -> None:
    import psycopg

    from r2adapter.store.db import database_url

    name = db_name()
    parts = urlsplit(database_url())
    admin = urlunsplit((parts.scheme, parts.netloc, "/postgres", parts.query, ""))
    try:
        with psycopg.connect(admin, autocommit=True, connect_timeout=10) as conn:
            if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
                conn.execute(f'CREATE DATABASE "{name}"')
    except psycopg.Error as e:
        raise R2AError(
            f"cannot create the database '{name}' for the MLflow server: "
            f"{str(e).strip().splitlines()[0][:200]} (is `r2a db up` running?)"
        ) from None


def _encryption_key() -> str:
    """The Fernet key for webhook secrets, made once (0600) and kept across restarts."""
    path = state_dir() / "webhook.key"
    if not path.is_file():
        from cryptography.fernet import Fernet

        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(Fernet.generate_key().decode() + "\n")
    return path.read_text().strip()


def _port_free(h: str, p: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1" if h in ("0.0.0.0", "::") else h, p)) != 0


def server_env() -> dict[str, str]:
    env = dict(os.environ)
    env["MLFLOW_BACKEND_STORE_URI"] = backend_uri()  # the password stays out of argv
    env.setdefault("MLFLOW_WEBHOOK_SECRET_ENCRYPTION_KEY", _encryption_key())
    env.setdefault("MLFLOW_WEBHOOK_CACHE_TTL", "2")
    if host() in LOOPBACK:  # a local server: its webhooks go to local services
        env.setdefault("MLFLOW_WEBHOOK_ALLOWED_SCHEMES", "http,https")
        env.setdefault("MLFLOW_WEBHOOK_ALLOW_PRIVATE_IPS", "true")
    # the GenAI job runner (scorers, trace roll-ups: a runner and seven huey consumers,
    # ~500 MB) serves nothing here: the registry and tracking need none of it
    env.setdefault("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "false")
    env.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    env.setdefault("DO_NOT_TRACK", "1")
    env.pop("MLFLOW_TRACKING_URI", None)
    return env


def _mlflow_bin() -> str:
    exe = Path(sys.executable).with_name("mlflow")
    if not exe.exists():
        raise R2AError("mlflow is not installed in this environment: run `make install`")
    return str(exe)


def _last_error(log: Path) -> str:
    lines = log.read_text(errors="replace").strip().splitlines() if log.is_file() else []
    errors = [x for x in lines if "Error" in x or "error" in x or "FATAL" in x]
    return (errors or lines or ["no output"])[-1].strip()[:300]


def server_command(destination: str) -> list[str]:
    """`mlflow server`'s argv: no secret in it (the store URL and the S3 keys travel in the
    environment, `server_env()`)."""
    return [
        _mlflow_bin(),
        "server",
        "--host",
        host(),
        "--port",
        str(port()),
        "--artifacts-destination",
        destination,
        "--workers",
        os.environ.get("R2A_MLFLOW_WORKERS", "1"),
    ]


def up(timeout_s: float | None = None) -> tuple[Status, float]:
    """Start the server unless it runs; (status, seconds until /health answered)."""
    st = status()
    if st.running:
        if not st.healthy and not _wait_healthy(st.pid or 0, 30):
            raise R2AError(
                f"the MLflow server (pid {st.pid}) runs but {st.url}/health does not "
                f"answer: see {log_file()}"
            )
        return status(), 0.0
    destination = artifacts_destination()
    if not _port_free(host(), port()):
        raise R2AError(f"port {host()}:{port()} is taken by another process; set R2A_MLFLOW_PORT")
    if destination.startswith("s3://"):
        _check_s3(destination)
    else:
        Path(destination).mkdir(parents=True, exist_ok=True)
    if settings().embedded:
        from r2adapter.store import embedded

        embedded.up()  # idempotent: the backend store lives in it
    _ensure_database()
    d = state_dir()
    d.mkdir(parents=True, exist_ok=True)
    env = server_env()
    cmd = server_command(destination)
    t0 = time.perf_counter()
    with open(log_file(), "ab") as log:
        proc = subprocess.Popen(  # its own session: `down` stops it and its workers together
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=d,
            start_new_session=True,
        )
    _pidfile().write_text(f"{proc.pid}\n")
    limit = (
        timeout_s if timeout_s is not None else float(os.environ.get("R2A_MLFLOW_START_S", "120"))
    )
    if not _wait_healthy(proc.pid, limit, proc):
        code = proc.poll()
        if code is None:
            _stop(proc.pid)
        _pidfile().unlink(missing_ok=True)
        why = f"exited with {code}" if code is not None else f"no /health within {limit:.0f} s"
        raise R2AError(
            f"the MLflow server did not start ({why}): {_last_error(log_file())} (log {log_file()})"
        )
    return status(), time.perf_counter() - t0


def _wait_healthy(pid: int, limit: float, proc: subprocess.Popen[bytes] | None = None) -> bool:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            return False
        if proc is None and _pid() != pid:
            return False
        if _healthy(timeout=1.0):
            return True
        time.sleep(0.25)
    return False


def _stop(pid: int, grace_s: float = 15.0) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pid, 0)
        except (ProcessLookupError, PermissionError):
            break
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        time.sleep(0.1)
    else:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)


def down() -> Status:
    pid = _pid()
    if pid is not None:
        _stop(pid)
    _pidfile().unlink(missing_ok=True)
    return status()


# ---- registry webhooks ------------------------------------------------------------------


def webhook_secret() -> str:
    secret = os.environ.get("R2A_WEBHOOK_SECRET", "")
    if len(secret) < 16:
        raise R2AError(
            "set R2A_WEBHOOK_SECRET (at least 16 characters, e.g. `openssl rand -hex 32`): "
            "the service verifies the webhook's signature with the same value"
        )
    return secret


def register_webhook(
    target: str,
    tracking_uri: str | None = None,
    name: str = WEBHOOK_NAME,
    secret: str | None = None,
) -> str:
    """Subscribe `target` (the service's /webhooks/mlflow) to alias changes, signed with
    `secret` (default R2A_WEBHOOK_SECRET); a webhook of the same name is updated, not
    duplicated. Returns its id."""
    from mlflow import MlflowClient

    secret = secret or webhook_secret()
    client = MlflowClient(tracking_uri=tracking_uri or url(), registry_uri=tracking_uri or url())
    try:
        existing = [w for w in client.list_webhooks(max_results=1000) if w.name == name]
        if existing:
            w = client.update_webhook(
                existing[0].webhook_id,
                url=target,
                events=[ALIAS_EVENT],
                secret=secret,
                status="ACTIVE",
            )
        else:
            w = client.create_webhook(name=name, url=target, events=[ALIAS_EVENT], secret=secret)
    except Exception as e:
        raise R2AError(
            f"could not register the webhook at {tracking_uri or url()}: "
            f"{str(e).strip().splitlines()[0][:300]}"
        ) from None
    return str(w.webhook_id)
