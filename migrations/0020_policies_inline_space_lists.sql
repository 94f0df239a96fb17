-- Row-level security at the cost of a plain subquery.
--
-- 1. The member and editor policies read `space_id IN (SELECT
--    dp_readable_spaces())`. A set-returning function in a select list is
--    never inlined: every query that touched a protected table called the
--    SQL function, and PostgreSQL parsed and planned its body afresh on each
--    execution, once per policy and per table. Called from FROM instead, the
--    same functions are inlined as subqueries on memberships: the planner
--    sees through them and a prepared statement keeps its plan. The
--    functions themselves are not touched.
-- 2. The editors' policy was FOR ALL, so every SELECT was also checked
--    against it: a second subquery (memberships joined to users) in every
--    read's plan, for rows the member policy already lets through (a space
--    one may write is a space one belongs to). It becomes three policies,
--    for INSERT, UPDATE and DELETE, with the same conditions; reads answer
--    to the member policy alone, as before.
--
-- Measured on one document_info call (documents, sources, chunks): six
-- function bodies parsed and planned per call before, none now.
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['sources', 'folders', 'documents', 'chunks', 'doc_tables', 'table_rows'] LOOP
        EXECUTE format(
            'ALTER POLICY %I ON %I
                 USING (space_id IN (SELECT s FROM dp_readable_spaces() s))', t || '_member_read', t);
        EXECUTE format('DROP POLICY %I ON %I', t || '_editor_write', t);
        EXECUTE format(
            'CREATE POLICY %I ON %I FOR INSERT TO data_plane_app
                 WITH CHECK (space_id IN (SELECT s FROM dp_writable_spaces() s))', t || '_editor_insert', t);
        EXECUTE format(
            'CREATE POLICY %I ON %I FOR UPDATE TO data_plane_app
                 USING (space_id IN (SELECT s FROM dp_writable_spaces() s))
                 WITH CHECK (space_id IN (SELECT s FROM dp_writable_spaces() s))', t || '_editor_update', t);
        EXECUTE format(
            'CREATE POLICY %I ON %I FOR DELETE TO data_plane_app
                 USING (space_id IN (SELECT s FROM dp_writable_spaces() s))', t || '_editor_delete', t);
    END LOOP;
END
$$;

ALTER POLICY spaces_member_read ON spaces
    USING (id IN (SELECT s FROM dp_readable_spaces() s));

ALTER POLICY tool_calls_self ON tool_calls
    USING (user_id = dp_current_user_id())
    WITH CHECK (user_id = dp_current_user_id()
                AND (space_id IS NULL OR space_id IN (SELECT s FROM dp_readable_spaces() s)));

ALTER POLICY runs_owner ON runs
    USING ((user_id = dp_current_user_id()
            AND (space_id IS NULL OR space_id IN (SELECT s FROM dp_readable_spaces() s)))
        OR dp_is_admin() OR dp_is_system());
