-- ADR's dual hypergraph (issue 16; r2adapter/adr). Every row belongs to one index version
-- and one build of it: H_K's higher-order factual hyperedges and their member entities,
-- H_D's insight vertices (π: one per higher-order hyperedge) and deep insight edges with
-- their members, and the entity embeddings the simple operator anchors on. A build is
-- written in one transaction (with the version's graph when both are new).
CREATE TABLE adr_builds (
    index_version  bigint PRIMARY KEY REFERENCES index_versions (id) ON DELETE CASCADE,
    signature      text NOT NULL,
    counts         jsonb NOT NULL DEFAULT '{}',
    timings        jsonb NOT NULL DEFAULT '{}',
    created_at     timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE adr_hyperedges (
    index_version  bigint NOT NULL REFERENCES adr_builds (index_version) ON DELETE CASCADE,
    id             integer NOT NULL,
    passage_id     text NOT NULL,
    sentence       text NOT NULL,   -- the source sentence: the extractive atomic insight
    PRIMARY KEY (index_version, id)
);

CREATE TABLE adr_hyperedge_members (
    index_version  bigint NOT NULL,
    hyperedge_id   integer NOT NULL,
    entity_id      integer NOT NULL,
    PRIMARY KEY (index_version, hyperedge_id, entity_id),
    FOREIGN KEY (index_version, hyperedge_id)
        REFERENCES adr_hyperedges (index_version, id) ON DELETE CASCADE
);

-- π maps hyperedge i to insight vertex i (one to one), so the vertex keeps its hyperedge id
CREATE TABLE adr_insight_vertices (
    index_version  bigint NOT NULL,
    id             integer NOT NULL,
    hyperedge_id   integer NOT NULL,
    text           text NOT NULL,
    tokens         integer NOT NULL,
    embedding      vector NOT NULL,
    PRIMARY KEY (index_version, id),
    FOREIGN KEY (index_version, hyperedge_id)
        REFERENCES adr_hyperedges (index_version, id) ON DELETE CASCADE
);

CREATE TABLE adr_insight_edges (
    index_version  bigint NOT NULL REFERENCES adr_builds (index_version) ON DELETE CASCADE,
    id             integer NOT NULL,
    narrative      text NOT NULL,
    tokens         integer NOT NULL,
    embedding      vector NOT NULL,
    PRIMARY KEY (index_version, id)
);

CREATE TABLE adr_insight_edge_members (
    index_version  bigint NOT NULL,
    edge_id        integer NOT NULL,
    vertex_id      integer NOT NULL,
    centrality     real NOT NULL,
    PRIMARY KEY (index_version, edge_id, vertex_id),
    FOREIGN KEY (index_version, edge_id)
        REFERENCES adr_insight_edges (index_version, id) ON DELETE CASCADE
);

CREATE TABLE adr_entity_embeddings (
    index_version  bigint NOT NULL REFERENCES adr_builds (index_version) ON DELETE CASCADE,
    entity_id      integer NOT NULL,
    embedding      vector NOT NULL,
    PRIMARY KEY (index_version, entity_id)
);

