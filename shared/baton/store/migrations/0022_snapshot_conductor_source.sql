-- The Conductor WorkflowDef an instance started with an inline workflowDef on /api was translated
-- from (json, as given), kept with the snapshot it runs, so its tasks read back their
-- workflowTask as a registered definition's do. NULL for every other snapshot; the first source
-- given for a snapshot is kept (two WorkflowDefs that translate alike run one snapshot).
ALTER TABLE definition_snapshot ADD COLUMN IF NOT EXISTS conductor json;
