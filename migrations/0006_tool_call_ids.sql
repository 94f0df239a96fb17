-- The id of each tool call (the model's tool-call id, or one the registry
-- made up), so an audit row can be matched with the stream that showed it,
-- and a sub-agent's calls with the call that started it (parent_call_id).
ALTER TABLE tool_calls ADD COLUMN call_id text NOT NULL DEFAULT '';
CREATE INDEX tool_calls_call_id ON tool_calls (call_id) WHERE call_id <> '';
