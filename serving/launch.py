"""`bentoml serve` with a Prometheus multiprocess folder of this instance's own.

BentoML points every server on a host at one folder, `<BENTOML_HOME>/prometheus_multiproc_dir`,
and empties it when a server starts: a second `r2a serve` emptied the first one's /metrics
(issue 27, item 7). BentoML hands its workers the folder through PROMETHEUS_MULTIPROC_DIR in
their environment, before any metric series exists in them, so the folder is chosen here, in
the arbiter, before BentoML runs: `<BENTOML_HOME>/r2a-metrics/<pid>`. The pid is the server's
(`r2a serve` execs this module, and this module runs BentoML's CLI in the same process); the
folders of servers that are gone are removed when the next one starts, and this one's when it
exits. A container runs one server, so the image keeps BentoML's own `bentoml serve`.

    python -m serving.launch serve serving.service:R2AService --port 3000
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
from pathlib import Path

FOLDER = "r2a-metrics"


def instance_metrics_dir(home: Path, pid: int) -> Path:
    """This server's folder under `home`, made empty; the folders of dead servers removed."""
    base = home / FOLDER
    base.mkdir(parents=True, exist_ok=True)
    for old in base.iterdir():
        if old.name.isdigit() and int(old.name) != pid and not Path(f"/proc/{old.name}").exists():
            shutil.rmtree(old, ignore_errors=True)
    own = base / str(pid)
    shutil.rmtree(own, ignore_errors=True)
    own.mkdir()
    return own


def main(argv: list[str]) -> None:
    from bentoml._internal.configuration.containers import BentoMLContainer

    own = instance_metrics_dir(Path(BentoMLContainer.bentoml_home.get()), os.getpid())
    BentoMLContainer.prometheus_multiproc_dir.set(str(own))
    atexit.register(shutil.rmtree, own, ignore_errors=True)
    from bentoml_cli.cli import cli

    sys.argv = ["bentoml", *argv]
    cli()


if __name__ == "__main__":
    main(sys.argv[1:])
