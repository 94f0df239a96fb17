-- Checks the role set-up query_documents relies on.
--
-- The tool runs SQL written by users after SET LOCAL ROLE data_plane_query,
-- which needs the server's role to be a member of the query role. It is only
-- safe while the query role stays what the set-up and 0005 made it: no login,
-- no superuser or BYPASSRLS, and a member of no other role (membership in
-- data_plane_app would hand it the server's grants and the system policies,
-- which honour data_plane.system). Role memberships are cluster-wide and made
-- by the set-up (docker/initdb.sql), so, like 0001, this checks and explains
-- instead of granting.
DO $$
DECLARE
    query_role pg_roles%ROWTYPE;
    member_of text;
BEGIN
    SELECT * INTO query_role FROM pg_roles WHERE rolname = 'data_plane_query';
    IF query_role.rolsuper OR query_role.rolbypassrls OR query_role.rolcanlogin THEN
        RAISE EXCEPTION 'role data_plane_query must be NOLOGIN NOSUPERUSER NOBYPASSRLS '
            '(run make setup or docker/initdb.sql again)';
    END IF;
    SELECT string_agg(r.rolname, ', ') INTO member_of
    FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.roleid
    WHERE m.member = query_role.oid;
    IF member_of IS NOT NULL THEN
        RAISE EXCEPTION 'role data_plane_query must be a member of no other role, but is a member of %: '
            'REVOKE those memberships', member_of;
    END IF;
    IF NOT pg_has_role('data_plane_app', 'data_plane_query', 'MEMBER') THEN
        RAISE EXCEPTION 'role data_plane_app must be a member of data_plane_query so that '
            'query_documents can switch to it (GRANT data_plane_query TO data_plane_app, '
            'as docker/initdb.sql does)';
    END IF;
END
$$;
