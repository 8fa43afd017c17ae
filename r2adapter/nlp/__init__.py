"""Shared NLP pieces (spaCy)."""
