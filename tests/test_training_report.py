"""The one training report every family's `fit` returns (r2adapter/registry/training.py):
its JSON keeps each family's fields in order between the run and the test figures, its
headline metrics are Kubeflow-safe, and a family's own field reads as an attribute."""

from __future__ import annotations

import pytest

from r2adapter.registry.training import TrainingReport

pytestmark = pytest.mark.unit


def _report() -> TrainingReport:
    return TrainingReport(
        "r2a",
        "r2a-router-minilm",
        "3",
        "abc123",
        12.34,
        {"recall@5": 0.75, "f1_graph": 0.7},
        {"tau": 0.26, "best_step": 80, "steps": 140},
        {"tau_star": 0.26, "best_step": 80, "steps": 140},
        curve=[{"tau": 0.0, "score": 0.5}],
    )


def test_the_report_keeps_the_familys_fields_between_the_run_and_the_test_figures() -> None:
    rep = _report().to_report()
    assert list(rep) == [
        "router",
        "version",
        "run_id",
        "tau",
        "best_step",
        "steps",
        "seconds",
        "test_recall@5",
        "test_f1_graph",
    ]
    assert rep["tau"] == 0.26 and rep["test_recall@5"] == 0.75


def test_headline_metrics_have_no_at_sign_and_fields_read_as_attributes() -> None:
    r = _report()
    m = r.metrics()
    assert m["test_recall_at_5"] == 0.75 and m["tau_star"] == 0.26
    assert m["train_seconds"] == 12.3
    assert not any("@" in k for k in m)
    assert (r.tau, r.best_step, r.kind) == (0.26, 80, "r2a")
    with pytest.raises(AttributeError):
        _ = r.gamma
