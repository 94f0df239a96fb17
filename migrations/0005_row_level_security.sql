-- Row-level security.
--
-- Each transaction of the server states who it acts for with
--   set_config('data_plane.user_id', <uuid>, true)      -- a person or service user
-- or, for trusted internal work (the keyword-index follower, the ingest CLI),
--   set_config('data_plane.system', 'on', true)
-- Both are transaction-local, so a pooled connection carries nothing to the next
-- request. The server's role (data_plane_app) neither owns these tables nor has
-- BYPASSRLS, FORCE makes the owner obey the policies too, and the role that runs
-- user-written SQL (data_plane_query) gets the member policies only, never the
-- system one.

CREATE FUNCTION dp_current_user_id() RETURNS uuid
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT nullif(current_setting('data_plane.user_id', true), '')::uuid
$$;

CREATE FUNCTION dp_is_system() RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT coalesce(current_setting('data_plane.system', true), '') = 'on'
$$;

-- Spaces the current user may read / write. memberships' own policy lets a user
-- see exactly their own rows, so these need no elevated rights.
CREATE FUNCTION dp_readable_spaces() RETURNS SETOF uuid
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT space_id FROM memberships WHERE user_id = dp_current_user_id()
$$;

CREATE FUNCTION dp_writable_spaces() RETURNS SETOF uuid
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT space_id FROM memberships
    WHERE user_id = dp_current_user_id() AND role IN ('editor', 'owner')
$$;

-- users: yourself; the system sees everyone.
ALTER TABLE users ENABLE ROW LEVEL SECURITY;
ALTER TABLE users FORCE ROW LEVEL SECURITY;
CREATE POLICY users_self ON users FOR SELECT TO data_plane_app, data_plane_query
    USING (id = dp_current_user_id());
CREATE POLICY users_system ON users FOR ALL TO data_plane_app
    USING (dp_is_system()) WITH CHECK (dp_is_system());

-- spaces: the ones you belong to.
ALTER TABLE spaces ENABLE ROW LEVEL SECURITY;
ALTER TABLE spaces FORCE ROW LEVEL SECURITY;
CREATE POLICY spaces_member_read ON spaces FOR SELECT TO data_plane_app, data_plane_query
    USING (id IN (SELECT dp_readable_spaces()));
CREATE POLICY spaces_owner_write ON spaces FOR UPDATE TO data_plane_app
    USING (id IN (SELECT space_id FROM memberships WHERE user_id = dp_current_user_id() AND role = 'owner'));
CREATE POLICY spaces_system ON spaces FOR ALL TO data_plane_app
    USING (dp_is_system()) WITH CHECK (dp_is_system());

-- memberships: your own.
ALTER TABLE memberships ENABLE ROW LEVEL SECURITY;
ALTER TABLE memberships FORCE ROW LEVEL SECURITY;
CREATE POLICY memberships_self ON memberships FOR SELECT TO data_plane_app, data_plane_query
    USING (user_id = dp_current_user_id());
CREATE POLICY memberships_system ON memberships FOR ALL TO data_plane_app
    USING (dp_is_system()) WITH CHECK (dp_is_system());

-- Content tables: members read, editors and owners write, the system does all.
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['sources', 'folders', 'documents', 'chunks', 'doc_tables', 'table_rows'] LOOP
        EXECUTE format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE %I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format(
            'CREATE POLICY %I ON %I FOR SELECT TO data_plane_app, data_plane_query
                 USING (space_id IN (SELECT dp_readable_spaces()))', t || '_member_read', t);
        EXECUTE format(
            'CREATE POLICY %I ON %I FOR ALL TO data_plane_app
                 USING (space_id IN (SELECT dp_writable_spaces()))
                 WITH CHECK (space_id IN (SELECT dp_writable_spaces()))', t || '_editor_write', t);
        EXECUTE format(
            'CREATE POLICY %I ON %I FOR ALL TO data_plane_app
                 USING (dp_is_system()) WITH CHECK (dp_is_system())', t || '_system', t);
    END LOOP;
END
$$;

-- tool_calls and rate_limits: a user's own rows.
ALTER TABLE tool_calls ENABLE ROW LEVEL SECURITY;
ALTER TABLE tool_calls FORCE ROW LEVEL SECURITY;
CREATE POLICY tool_calls_self ON tool_calls FOR ALL TO data_plane_app
    USING (user_id = dp_current_user_id())
    WITH CHECK (user_id = dp_current_user_id()
                AND (space_id IS NULL OR space_id IN (SELECT dp_readable_spaces())));
CREATE POLICY tool_calls_system ON tool_calls FOR ALL TO data_plane_app
    USING (dp_is_system()) WITH CHECK (dp_is_system());

ALTER TABLE rate_limits ENABLE ROW LEVEL SECURITY;
ALTER TABLE rate_limits FORCE ROW LEVEL SECURITY;
CREATE POLICY rate_limits_self ON rate_limits FOR ALL TO data_plane_app
    USING (user_id = dp_current_user_id()) WITH CHECK (user_id = dp_current_user_id());
CREATE POLICY rate_limits_system ON rate_limits FOR ALL TO data_plane_app
    USING (dp_is_system()) WITH CHECK (dp_is_system());

-- index_log: written only by the trigger (running as the owner), read only by
-- the system.
ALTER TABLE index_log ENABLE ROW LEVEL SECURITY;
ALTER TABLE index_log FORCE ROW LEVEL SECURITY;
CREATE POLICY index_log_append ON index_log FOR INSERT TO CURRENT_USER WITH CHECK (true);
CREATE POLICY index_log_system ON index_log FOR SELECT TO data_plane_app USING (dp_is_system());

-- settings are deployment-wide, not space-scoped: everyone reads, the server
-- checks the admin permission before it writes.
ALTER TABLE settings ENABLE ROW LEVEL SECURITY;
ALTER TABLE settings FORCE ROW LEVEL SECURITY;
CREATE POLICY settings_read ON settings FOR SELECT TO data_plane_app USING (true);
CREATE POLICY settings_write ON settings FOR ALL TO data_plane_app
    USING (dp_current_user_id() IS NOT NULL OR dp_is_system())
    WITH CHECK (dp_current_user_id() IS NOT NULL OR dp_is_system());

-- Privileges. The query role reads tabular data only (plus what the policies
-- above consult); it never writes.
GRANT USAGE ON SCHEMA public TO data_plane_app, data_plane_query;
GRANT SELECT, INSERT, UPDATE, DELETE ON
    users, spaces, memberships, sources, folders, documents, chunks, doc_tables,
    table_rows, settings, tool_calls, rate_limits
    TO data_plane_app;
GRANT SELECT ON index_log TO data_plane_app;
GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO data_plane_app;
GRANT SELECT ON doc_tables, table_rows, memberships TO data_plane_query;
REVOKE ALL ON FUNCTION dp_log_document_change() FROM PUBLIC;
