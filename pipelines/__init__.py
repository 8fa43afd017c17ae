"""Kubeflow pipelines: `retrain` (the graph, compiled to retrain.yaml) and `submit`."""
