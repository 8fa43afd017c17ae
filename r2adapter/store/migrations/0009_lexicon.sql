-- The lexical (BM25) index of an index version's passages (r2adapter/index/lexicon.py):
-- each passage's length in terms and each (term, passage) count. Derived from the version's
-- passages and written in one transaction; a version indexed before this table existed
-- gets its lexicon the first time a lexical retriever opens it.
CREATE TABLE lexicon_builds (
    index_version  bigint PRIMARY KEY REFERENCES index_versions (id) ON DELETE CASCADE,
    n_docs         integer NOT NULL,
    avg_length     double precision NOT NULL,
    tokenizer      text NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE lexicon_postings (
    index_version  bigint NOT NULL REFERENCES lexicon_builds (index_version) ON DELETE CASCADE,
    term           text NOT NULL,
    passage_id     text NOT NULL,
    tf             integer NOT NULL,
    doc_length     integer NOT NULL,
    PRIMARY KEY (index_version, term, passage_id)
);
