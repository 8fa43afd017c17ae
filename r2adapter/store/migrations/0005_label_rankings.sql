-- Keep each labelled query's top passages from both retrievers, so routing can be
-- evaluated end to end (hybrid Recall@k) without re-running retrieval.
ALTER TABLE labels ADD COLUMN dense_top text[] NOT NULL DEFAULT '{}';
ALTER TABLE labels ADD COLUMN graph_top text[] NOT NULL DEFAULT '{}';
ALTER TABLE labels ADD COLUMN question text NOT NULL DEFAULT '';
ALTER TABLE labels ADD COLUMN qtype text NOT NULL DEFAULT '';
