"""The cost-aware router over every retrieval strategy (issue 17): the strategy table, its
per-strategy labels, the suitability heads, the cost-ordered cascade and its evaluation."""
