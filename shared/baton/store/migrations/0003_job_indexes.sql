-- Every job update is non-HOT (status is in the partial-index predicates), so each index of the
-- job table costs a write per transition. Step lookups go through job_by_instance instead.
DROP INDEX IF EXISTS job_by_step_execution;
