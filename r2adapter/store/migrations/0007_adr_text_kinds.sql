-- ADR's insight and narrative texts are embedded once per encoder, like phrases and facts
-- (its own migration: 0006 was applied on some databases before this change was added).
ALTER TABLE text_embeddings DROP CONSTRAINT IF EXISTS text_embeddings_kind_check;
ALTER TABLE text_embeddings ADD CONSTRAINT text_embeddings_kind_check
    CHECK (kind IN ('entity', 'fact', 'insight', 'narrative'));
