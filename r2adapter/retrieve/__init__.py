"""Retrievers behind one protocol: dense (pgvector) and graph (Personalized PageRank)."""
