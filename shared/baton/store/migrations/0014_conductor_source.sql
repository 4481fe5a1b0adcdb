-- The Conductor workflow definition as registered on /api (every field, in its order: json, not
-- jsonb), kept beside the Baton translation it runs, so GET /api/metadata/workflow reads it back
-- exactly. NULL for a definition registered on /v1.
ALTER TABLE definition ADD COLUMN IF NOT EXISTS conductor json;
