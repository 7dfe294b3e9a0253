-- remuda schema, version 19: failures set aside so that they hold back nothing else.
--
-- A batched statement (the completer's general lane, rescue, expiry, the workflow duties)
-- works for many jobs and runs at once. When the extra work of one of them fails (a seam
-- hook's error for one job, a run the timer or repair duty cannot advance), that one is set
-- aside and the rest go on; what failed and why is kept here, one row per source and
-- subject (the latest error, and how many times), for operators and tests to read.
CREATE TABLE remuda.failures (
    -- what set it aside: a hook's name ('workflow', 'notify'), 'workflow_timers', …
    source    text NOT NULL,
    -- what it was about: 'job 42', 'run 7'
    subject   text NOT NULL,
    sqlstate  text NOT NULL,
    message   text NOT NULL,
    count     integer NOT NULL DEFAULT 1,
    first_at  timestamptz NOT NULL DEFAULT now(),
    last_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (source, subject)
);
