-- Leave room in each page so updates that change no indexed column (a step's output, an
-- instance's variables mid-run) stay HOT: no new index entries, less WAL.
ALTER TABLE step_execution SET (fillfactor = 80);
ALTER TABLE instance SET (fillfactor = 80);
ALTER TABLE job SET (fillfactor = 85);
