-- The level of log notifications a caller asked for with logging/setLevel.
-- The endpoint keeps no session, so the level is the caller's: a person
-- with their own token (service ''), or a service acting for them.
CREATE TABLE mcp_log_levels (
    user_id  uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    service  text NOT NULL DEFAULT '',
    level    text NOT NULL CHECK (level IN ('debug', 'info', 'notice', 'warning',
                                            'error', 'critical', 'alert', 'emergency')),
    set_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, service)
);
ALTER TABLE mcp_log_levels ENABLE ROW LEVEL SECURITY;
ALTER TABLE mcp_log_levels FORCE ROW LEVEL SECURITY;
CREATE POLICY mcp_log_levels_own ON mcp_log_levels FOR ALL TO data_plane_app
    USING (user_id = dp_current_user_id() OR dp_is_system())
    WITH CHECK (user_id = dp_current_user_id() OR dp_is_system());
GRANT SELECT, INSERT, UPDATE, DELETE ON mcp_log_levels TO data_plane_app;
