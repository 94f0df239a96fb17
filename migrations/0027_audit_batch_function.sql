-- The audit writer's batch in one statement: the records as one JSON array
-- (one bound parameter, whatever the batch's size), written under the system
-- scope that the function sets for its own transaction. The server sends it
-- as a single prepared statement, which PostgreSQL runs and commits as one
-- implicit transaction: one round trip instead of BEGIN, INSERT and COMMIT,
-- and the records' contents travel as a parameter, never in the SQL text
-- that logs show. Only the server's role may call it.

CREATE FUNCTION dp_write_audit(records jsonb) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    written bigint;
BEGIN
    PERFORM set_config('data_plane.user_id', '', true),
            set_config('data_plane.system', 'on', true);
    INSERT INTO tool_calls (call_id, ts, tool, duration_ms, user_id, space_id, request_id,
                            parent_call_id, success, error, args, annotations, side_effects,
                            gate, agent, module, attempts)
    SELECT r.call_id, r.ts, r.tool, least(r.duration_ms, 2147483647)::integer, r.user_id,
           r.space_id, r.request_id, r.parent_call_id, r.success, r.error,
           coalesce(r.args, 'null'), r.annotations, coalesce(r.side_effects, '{}'), r.gate,
           r.agent, r.module, least(r.attempts, 32767)::smallint
      FROM jsonb_to_recordset(records) AS r(call_id text, ts timestamptz, tool text,
           duration_ms numeric, user_id uuid, space_id uuid, request_id text,
           parent_call_id text, success boolean, error text, args jsonb, annotations jsonb,
           side_effects text[], gate text, agent text, module text, attempts numeric);
    GET DIAGNOSTICS written = ROW_COUNT;
    RETURN written;
END
$$;

REVOKE ALL ON FUNCTION dp_write_audit(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION dp_write_audit(jsonb) TO data_plane_app;
