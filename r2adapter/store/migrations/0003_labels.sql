-- Router training labels (R²Adapter §3.2): suitability and preference per query and rule.
CREATE TABLE labels (
    dataset        text NOT NULL,
    query_id       text NOT NULL,
    rule           text NOT NULL,
    index_version  bigint REFERENCES index_versions (id) ON DELETE SET NULL,
    rank_dense     real NOT NULL,
    rank_graph     real NOT NULL,
    y_dense        boolean NOT NULL,
    y_graph        boolean NOT NULL,
    preference     text NOT NULL CHECK (preference IN ('dense', 'graph')),
    split          text NOT NULL CHECK (split IN ('train', 'val', 'test')),
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (dataset, rule, query_id),
    FOREIGN KEY (dataset, query_id) REFERENCES queries (dataset, id) ON DELETE CASCADE
);
