-- Dense index and knowledge graph (HippoRAG 2 style). Every graph row belongs to one
-- index version, so a new build never touches the graph the service is reading.
CREATE TABLE index_versions (
    id           bigserial PRIMARY KEY,
    dataset      text NOT NULL REFERENCES datasets (name) ON DELETE CASCADE,
    encoder      text NOT NULL,
    dim          integer NOT NULL,
    openie       text NOT NULL,
    counts       jsonb NOT NULL DEFAULT '{}',
    timings      jsonb NOT NULL DEFAULT '{}',
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX index_versions_dataset ON index_versions (dataset, id DESC);

-- Embeddings keyed by encoder: a passage is embedded once per model, whatever the version.
CREATE TABLE passage_embeddings (
    dataset     text NOT NULL,
    passage_id  text NOT NULL,
    encoder     text NOT NULL,
    embedding   vector NOT NULL,
    PRIMARY KEY (dataset, encoder, passage_id),
    FOREIGN KEY (dataset, passage_id) REFERENCES passages (dataset, id) ON DELETE CASCADE
);

-- OpenIE results cached by backend and passage hash: re-indexing repeats no extraction.
CREATE TABLE openie_cache (
    backend       text NOT NULL,
    passage_hash  text NOT NULL,
    entities      jsonb NOT NULL,
    triples       jsonb NOT NULL,
    PRIMARY KEY (backend, passage_hash)
);

-- Phrase and fact embeddings cached by encoder and text.
CREATE TABLE text_embeddings (
    encoder    text NOT NULL,
    kind       text NOT NULL CHECK (kind IN ('entity', 'fact')),
    text       text NOT NULL,
    embedding  vector NOT NULL,
    PRIMARY KEY (encoder, kind, text)
);

CREATE TABLE entities (
    index_version  bigint NOT NULL REFERENCES index_versions (id) ON DELETE CASCADE,
    id             integer NOT NULL,
    name           text NOT NULL,
    PRIMARY KEY (index_version, id)
);

CREATE TABLE facts (
    index_version  bigint NOT NULL REFERENCES index_versions (id) ON DELETE CASCADE,
    id             integer NOT NULL,
    subject_id     integer NOT NULL,
    relation       text NOT NULL,
    object_id      integer NOT NULL,
    weight         real NOT NULL DEFAULT 1,   -- co-occurrence count of subject and object
    PRIMARY KEY (index_version, id)
);

CREATE TABLE passage_entities (
    index_version  bigint NOT NULL REFERENCES index_versions (id) ON DELETE CASCADE,
    passage_id     text NOT NULL,
    entity_id      integer NOT NULL,
    PRIMARY KEY (index_version, passage_id, entity_id)
);

CREATE TABLE fact_passages (
    index_version  bigint NOT NULL REFERENCES index_versions (id) ON DELETE CASCADE,
    fact_id        integer NOT NULL,
    passage_id     text NOT NULL,
    PRIMARY KEY (index_version, fact_id, passage_id)
);

CREATE TABLE synonym_edges (
    index_version  bigint NOT NULL REFERENCES index_versions (id) ON DELETE CASCADE,
    a              integer NOT NULL,
    b              integer NOT NULL,
    score          real NOT NULL,
    PRIMARY KEY (index_version, a, b)
);
