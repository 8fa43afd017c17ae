"""Indexing: OpenIE backends, knowledge-graph construction, index builds."""
