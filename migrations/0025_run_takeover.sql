-- A run whose replica died is taken over by another (docs/runs.md,
-- "Takeover"). The replica running a run holds it as its owner, renewing
-- `alive_at` every few seconds; another replica that finds the lease
-- expired claims the run in one UPDATE (only one can) and continues it from
-- its recorded events, for which it needs what the turn was asked: the
-- request and the caller's context, as the server that began it saved them.
ALTER TABLE runs ADD COLUMN owner uuid;
ALTER TABLE runs ADD COLUMN request jsonb;
ALTER TABLE runs ADD COLUMN takeovers integer NOT NULL DEFAULT 0;

-- Where each run's agent stood, step by step (docs/runs.md, "Takeover"):
-- written by the recorder in the same transaction as the events around it,
-- placed after the event numbered `after_seq`. Never sent to a reader; read
-- only by the replica that takes the run over.
CREATE TABLE run_checkpoints (
    run_id    uuid NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    id        bigserial,
    after_seq bigint NOT NULL CHECK (after_seq >= 0),
    data      jsonb NOT NULL,
    PRIMARY KEY (run_id, id)
);

ALTER TABLE run_checkpoints ENABLE ROW LEVEL SECURITY;
ALTER TABLE run_checkpoints FORCE ROW LEVEL SECURITY;
CREATE POLICY run_checkpoints_system ON run_checkpoints FOR ALL TO data_plane_app
    USING (dp_is_system()) WITH CHECK (dp_is_system());
GRANT SELECT, INSERT, DELETE ON run_checkpoints TO data_plane_app;
GRANT USAGE ON SEQUENCE run_checkpoints_id_seq TO data_plane_app;
