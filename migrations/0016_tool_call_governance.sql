-- What the registry's governance adds to every audit record: the tool's
-- annotations (read_only, destructive, idempotent, open_world,
-- requires_confirmation), what the call did beyond answering (fetched:URL,
-- queried:TABLE, searched:web:QUERY), what the eval gate decided (allow,
-- deny, ask, fail_open; null when the tool does not pass the gate or none is
-- configured) and the agent profile the call ran under.
ALTER TABLE tool_calls
    ADD COLUMN annotations  jsonb,
    ADD COLUMN side_effects text[] NOT NULL DEFAULT '{}',
    ADD COLUMN gate         text CHECK (gate IN ('allow', 'deny', 'ask', 'fail_open')),
    ADD COLUMN agent        text;
