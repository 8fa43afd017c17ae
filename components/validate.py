"""validate: the Great Expectations suites over corpus and queries (`r2a data validate`),
run as one checkpoint; its Data Docs reach the Kubeflow UI as an HTML artifact."""

from typing import NamedTuple

from kfp.dsl import HTML, Metrics, Output

from components._base import r2a_component


@r2a_component
def validate(dataset: str, metrics: Output[Metrics], data_docs: Output[HTML]) -> NamedTuple(
    "Outputs", [("name", str), ("fingerprint", str)]
):
    """Fails the run when an expectation fails. `fingerprint` (md5 over the dataset's JSON
    files) is passed on to `index` so that its cache key changes whenever the data does:
    a recurring run over unchanged data is served from the cache, changed data is not.
    `data_docs`: the checkpoint's Data Docs as one self-contained page, every suite's result
    (the site's validation.html; the UI shows an HTML artifact from a single file)."""
    import hashlib
    import shutil
    import tempfile
    from collections import namedtuple
    from pathlib import Path

    from r2adapter import steps
    from r2adapter.data.adapters import resolve_dataset_dir
    from r2adapter.data.data_docs import PAGE

    with tempfile.TemporaryDirectory() as site:
        report = steps.validate(dataset, Path(site))
        shutil.copyfile(Path(site) / PAGE, data_docs.path)
    for check in report.checks:
        print(check.line())
    failed = report.failed
    name, folder = resolve_dataset_dir(dataset)
    digest = hashlib.md5()
    for path in sorted(folder.glob("*.json")):
        digest.update(path.name.encode() + b"\0")
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    fingerprint = digest.hexdigest()

    for key, value in report.metrics().items():
        metrics.log_metric(key, value)
    metrics.metadata["dataset_fingerprint"] = fingerprint
    if failed:
        raise RuntimeError(
            f"{name}: validation failed: {len(failed)} of {len(report.checks)} expectations"
            f" ({'; '.join(c.line() for c in failed[:3])})"
        )
    print(f"{name}: validation passed: {len(report.checks)} expectations; data md5 {fingerprint}")
    return namedtuple("Outputs", ["name", "fingerprint"])(name, fingerprint)
