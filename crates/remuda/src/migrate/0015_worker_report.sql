-- remuda schema, version 15: what each worker reports with its heartbeat besides being
-- alive, for `remuda workers`, the dashboard and the list of running jobs.
--
-- running_ids: the jobs it runs (the list of running jobs reads these and then the jobs by
-- primary key: the job table has no index on running jobs, which would be one more entry
-- written at every claim and read by every completion); completed and failed: its attempts
-- since it started; cpu_percent: its processor use over the last heartbeat interval (100 is
-- one core); rss_bytes: its resident memory. A worker of an older version leaves them at their
-- defaults.
ALTER TABLE remuda.workers
    ADD COLUMN running_ids bigint[] NOT NULL DEFAULT '{}',
    ADD COLUMN completed bigint NOT NULL DEFAULT 0,
    ADD COLUMN failed bigint NOT NULL DEFAULT 0,
    ADD COLUMN cpu_percent real,
    ADD COLUMN rss_bytes bigint;
