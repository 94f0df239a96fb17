-- Chat turns as runs: each /v1/chat turn, the events it sent (replayed to a
-- client that reattaches, on any replica), and the approvals it asked for.
CREATE TYPE run_status AS ENUM ('running', 'done', 'error', 'stopped', 'abandoned', 'lost');

CREATE TABLE runs (
    id              uuid PRIMARY KEY,
    user_id         uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    space_id        uuid REFERENCES spaces (id) ON DELETE SET NULL,
    -- Turns of one conversation share it: an approval given with
    -- "remember" holds for the conversation's later turns.
    conversation_id uuid NOT NULL,
    status          run_status NOT NULL DEFAULT 'running',
    created_at      timestamptz NOT NULL DEFAULT now(),
    -- Touched by the replica running it; a running run whose replica
    -- stopped touching it is lost.
    alive_at        timestamptz NOT NULL DEFAULT now(),
    finished_at     timestamptz,
    -- The last event's number once the run ended.
    last_seq        bigint
);
CREATE INDEX runs_user ON runs (user_id, created_at DESC);
CREATE INDEX runs_conversation ON runs (conversation_id);
CREATE INDEX runs_finished ON runs (finished_at) WHERE finished_at IS NOT NULL;
CREATE INDEX runs_running ON runs (alive_at) WHERE status = 'running';

CREATE TABLE run_events (
    run_id  uuid NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    -- The SSE id: 1, 2, 3... within the run.
    seq     bigint NOT NULL CHECK (seq > 0),
    kind    text NOT NULL,
    data    jsonb NOT NULL,
    PRIMARY KEY (run_id, seq)
);

CREATE TYPE approval_status AS ENUM ('pending', 'approved', 'denied', 'expired');

CREATE TABLE run_approvals (
    run_id         uuid NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    call_id        text NOT NULL,
    tool           text NOT NULL,
    arguments      jsonb NOT NULL,
    annotations    jsonb NOT NULL,
    -- Why the call asks (the setting or policy that says so).
    why            text NOT NULL,
    -- The sub-agent's parent call, for a call made inside one.
    parent_call_id text,
    status         approval_status NOT NULL DEFAULT 'pending',
    -- The person's reason for a denial, or why it expired.
    reason         text,
    remember       boolean NOT NULL DEFAULT false,
    created_at     timestamptz NOT NULL DEFAULT now(),
    expires_at     timestamptz NOT NULL,
    answered_at    timestamptz,
    answered_by    uuid,
    PRIMARY KEY (run_id, call_id)
);

-- A run is its user's while they still read its space (and readable by
-- admins); the server writes events and settles approvals acting as itself.
-- The policies of events and approvals go through the run's, so the three
-- stay alike.
ALTER TABLE runs ENABLE ROW LEVEL SECURITY;
ALTER TABLE runs FORCE ROW LEVEL SECURITY;
CREATE POLICY runs_owner ON runs FOR SELECT TO data_plane_app
    USING ((user_id = dp_current_user_id()
            AND (space_id IS NULL OR space_id IN (SELECT dp_readable_spaces())))
        OR dp_is_admin() OR dp_is_system());
CREATE POLICY runs_system ON runs FOR ALL TO data_plane_app
    USING (dp_is_system()) WITH CHECK (dp_is_system());
GRANT SELECT, INSERT, UPDATE, DELETE ON runs TO data_plane_app;

ALTER TABLE run_events ENABLE ROW LEVEL SECURITY;
ALTER TABLE run_events FORCE ROW LEVEL SECURITY;
CREATE POLICY run_events_owner ON run_events FOR SELECT TO data_plane_app
    USING (EXISTS (SELECT 1 FROM runs r WHERE r.id = run_id));
CREATE POLICY run_events_system ON run_events FOR ALL TO data_plane_app
    USING (dp_is_system()) WITH CHECK (dp_is_system());
GRANT SELECT, INSERT, DELETE ON run_events TO data_plane_app;

-- The run's user (or an admin) answers its approvals; the server creates
-- and expires them.
ALTER TABLE run_approvals ENABLE ROW LEVEL SECURITY;
ALTER TABLE run_approvals FORCE ROW LEVEL SECURITY;
CREATE POLICY run_approvals_owner ON run_approvals FOR SELECT TO data_plane_app
    USING (EXISTS (SELECT 1 FROM runs r WHERE r.id = run_id));
CREATE POLICY run_approvals_answer ON run_approvals FOR UPDATE TO data_plane_app
    USING (EXISTS (SELECT 1 FROM runs r WHERE r.id = run_id))
    WITH CHECK (EXISTS (SELECT 1 FROM runs r WHERE r.id = run_id));
CREATE POLICY run_approvals_system ON run_approvals FOR ALL TO data_plane_app
    USING (dp_is_system()) WITH CHECK (dp_is_system());
GRANT SELECT, INSERT, UPDATE, DELETE ON run_approvals TO data_plane_app;
