-- Datasets, passages and queries in the canonical schema (r2adapter.data.schema).
CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE datasets (
    name            text PRIMARY KEY,
    corpus_format   text NOT NULL,
    query_format    text NOT NULL,
    n_passages      integer NOT NULL,
    n_queries       integer NOT NULL,
    content_sha256  text NOT NULL,
    loaded_at       timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE passages (
    dataset  text NOT NULL REFERENCES datasets (name) ON DELETE CASCADE,
    id       text NOT NULL,          -- "chunk-" + md5(title + "\n" + text)
    title    text NOT NULL,
    text     text NOT NULL,
    PRIMARY KEY (dataset, id)
);

CREATE TABLE queries (
    dataset           text NOT NULL REFERENCES datasets (name) ON DELETE CASCADE,
    id                text NOT NULL,
    question          text NOT NULL,
    answers           jsonb NOT NULL,
    gold_passage_ids  text[] NOT NULL,
    type              text NOT NULL,
    source            text NOT NULL,
    gold_complete     boolean NOT NULL,
    PRIMARY KEY (dataset, id)
);
