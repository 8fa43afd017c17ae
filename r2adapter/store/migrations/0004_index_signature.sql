-- What an index version was built from (encoder, OpenIE backend, passages, parameters):
-- a build with the same signature as the latest version is a no-op.
ALTER TABLE index_versions ADD COLUMN signature text NOT NULL DEFAULT '';
