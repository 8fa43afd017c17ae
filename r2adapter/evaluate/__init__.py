"""Metrics and reports."""
