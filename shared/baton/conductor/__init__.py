"""Conductor compatibility: Conductor's JSON (workflow and task definitions, tasks, workflows,
errors) translated to and from Baton's, one pure module per direction."""
