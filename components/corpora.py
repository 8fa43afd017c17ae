"""corpora: the loop's `corpora` step (r2adapter/loop.py, `r2a index` then `r2a label` per
corpus): the development corpora of the run's `corpora` parameter (params.yaml
pipeline.corpora by default) indexed and labelled, their label files shipped as one
directory artifact to the trainers (and gates) of the families that label their own set
(components/train.py `train`, its `corpora_labels`), which put them in labels/ before
training, so that they train on the union (kway.train_corpora, adr.train_corpora) as the
local loop's champions do.
"""

from kfp.dsl import Dataset, Metrics, Output

from components._base import r2a_component


@r2a_component
def corpora(
    dataset: str,
    corpora: list,
    openie: str,
    data_fingerprint: str,
    labels: Output[Dataset],
    metrics: Output[Metrics],
) -> int:
    """For each name of `corpora` other than the run's `dataset`, in order and one after the
    other in this one task (no fan-out across corpora): the index build (`steps.index`,
    incremental: an unchanged corpus is found up to date) then the labelling
    (`steps.label`: the two-way labels, then each family's own set: the strategy labels
    and, when ADR's hypergraph is there, the ADR labels). The label files each corpus wrote
    (labels/<c>.jsonl, <c>.strategies.jsonl, <c>.adr.jsonl: each family's `label_path`)
    are copied into `labels`, a directory; its metadata
    names the corpora and each file's md5. `data_fingerprint` is not used by the step: it
    is there so that the task's cache key follows the run's data (see `validate`). An empty
    list gives an empty directory. Returns the number of queries labelled, all corpora
    together."""
    import hashlib
    import os
    import shutil

    from r2adapter import steps
    from r2adapter.data.adapters import dataset_name

    own = dataset_name(dataset)
    names = [c for c in dict.fromkeys(str(x) for x in corpora) if dataset_name(c) != own]
    os.makedirs(labels.path, exist_ok=True)
    md5s: dict[str, str] = {}
    total = 0
    for c in names:
        idx = steps.index(c, openie)
        lab = steps.label(c)
        files = [lab.path]
        for key, fam in steps.label_families().items():
            summary = lab.stats.get(key)
            if isinstance(summary, dict) and summary.get("skipped"):
                print(f"{c}: no {fam.name} labels: {summary['skipped']}")
            else:
                files.append(fam.label_path(lab.dataset))
        for path in files:
            shutil.copyfile(path, os.path.join(labels.path, path.name))
            md5s[path.name] = hashlib.md5(path.read_bytes()).hexdigest()
        n = len(lab.records)
        total += n
        metrics.log_metric(f"{lab.dataset}_queries", n)
        what = "new" if idx.created else "unchanged"
        print(f"{c}: index version {idx.version} ({what}), {n} queries labelled ({lab.rule})")
    labels.metadata.update({"corpora": names, "md5": md5s})
    metrics.log_metric("queries", total)
    if not names:
        print(f"corpora: none to index and label beside {own}: an empty labels directory")
    print(f"data fingerprint {data_fingerprint}")
    return total
