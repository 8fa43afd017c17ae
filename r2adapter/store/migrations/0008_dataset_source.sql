-- where each dataset was loaded from (`data/<name>` for a shipped one, else the folder's
-- absolute path): a folder of the same name elsewhere cannot replace it unnoticed (issue 44)
ALTER TABLE datasets ADD COLUMN IF NOT EXISTS source text;
