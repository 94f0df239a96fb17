-- Run-time settings, the tool-call audit log, rate-limit counters and the
-- ordered change log the keyword index follows.

-- Deployment-wide settings (web search on/off, provider, ...), read on every
-- request so a change reaches every replica at once.
CREATE TABLE settings (
    key        text PRIMARY KEY,
    value      jsonb NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    updated_by uuid REFERENCES users (id) ON DELETE SET NULL
);

CREATE TABLE tool_calls (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    ts             timestamptz NOT NULL DEFAULT now(),
    tool           text NOT NULL,
    duration_ms    integer NOT NULL,
    user_id        uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    space_id       uuid REFERENCES spaces (id) ON DELETE CASCADE,
    request_id     text NOT NULL,
    parent_call_id text,
    success        boolean NOT NULL,
    error          text,
    args           jsonb
);
CREATE INDEX tool_calls_user_ts ON tool_calls (user_id, ts);

CREATE TABLE rate_limits (
    user_id      uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    tool         text NOT NULL,
    day          date NOT NULL,
    count        integer NOT NULL DEFAULT 0,
    last_call_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, tool, day)
);

-- Every change to a document appends here, in commit order (see
-- dp_log_document_change), so a follower that reads seq > last_applied never
-- misses a change.
CREATE TABLE index_log (
    seq         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    document_id uuid NOT NULL,
    space_id    uuid NOT NULL,
    op          text NOT NULL CHECK (op IN ('upsert', 'delete')),
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- Appends a change-log entry for the document. The transaction-level advisory
-- lock makes writers of the log take their sequence numbers one transaction at
-- a time and hold them until commit, so sequence order is commit order: a
-- reader that sees seq N also sees every committed entry below N.
CREATE FUNCTION dp_log_document_change() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(7265646);
    IF TG_OP = 'DELETE' THEN
        INSERT INTO index_log (document_id, space_id, op) VALUES (OLD.id, OLD.space_id, 'delete');
        PERFORM pg_notify('data_plane_index', OLD.id::text);
        RETURN OLD;
    END IF;
    INSERT INTO index_log (document_id, space_id, op) VALUES (NEW.id, NEW.space_id, 'upsert');
    PERFORM pg_notify('data_plane_index', NEW.id::text);
    RETURN NEW;
END
$$;

CREATE TRIGGER documents_log_change
AFTER INSERT OR UPDATE OR DELETE ON documents
FOR EACH ROW EXECUTE FUNCTION dp_log_document_change();
