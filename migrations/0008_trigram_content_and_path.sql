-- Trigram indexes that let grep_documents and find_by_name skip documents
-- that cannot match, and the one way to use them under row-level security.
--
-- The tools turn the text every match must contain into regular expressions
-- (content ~ ..., lower(path) ~ ..., lower(name) ~ ...) that these indexes
-- answer. But PostgreSQL evaluates a row-level security policy before any
-- condition whose operator is not LEAKPROOF, and no trigram operator is, so
-- a query by the server's role can never use them: it would read and
-- regex-match every row of every readable space. dp_document_candidates
-- runs the index lookup as the owner, for the spaces the current user may
-- read (and only those), and returns document ids alone; the caller then
-- reads everything else through the member policies as before, so a wrong
-- id could not show it a row anyway.
CREATE INDEX documents_content_trgm ON documents USING gin (content gin_trgm_ops);
CREATE INDEX documents_path_trgm ON documents USING gin (lower(path) gin_trgm_ops);

-- What the owner may read inside dp_document_candidates. The documents policy
-- has to be the constant true: any other policy condition would block the
-- index again. The owner could lift FORCE on its own tables at any time, so
-- this grants it nothing new; the server never connects as the owner (it
-- refuses to start so).
CREATE POLICY documents_owner_read ON documents FOR SELECT TO data_plane_owner
    USING (true);
CREATE POLICY memberships_owner_read ON memberships FOR SELECT TO data_plane_owner
    USING (user_id = dp_current_user_id());

-- Ids of the documents in p_spaces, among those the current user may read,
-- that satisfy every condition: content ~ each of p_content, lower(path) ~
-- each of p_path, lower(name) ~ each of p_name. Run as EXECUTE so each call
-- is planned with its own patterns (the index needs to see them).
CREATE FUNCTION dp_document_candidates(
    p_spaces uuid[], p_content text[], p_path text[], p_name text[]
) RETURNS SETOF uuid
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public
AS $$
DECLARE
    q text := 'SELECT d.id FROM public.documents d
                WHERE d.space_id = ANY($1)
                  AND d.space_id IN (SELECT public.dp_readable_spaces())';
BEGIN
    FOR i IN 1 .. coalesce(array_length(p_content, 1), 0) LOOP
        q := q || format(' AND d.content ~ $2[%s]', i);
    END LOOP;
    FOR i IN 1 .. coalesce(array_length(p_path, 1), 0) LOOP
        q := q || format(' AND lower(d.path) ~ $3[%s]', i);
    END LOOP;
    FOR i IN 1 .. coalesce(array_length(p_name, 1), 0) LOOP
        q := q || format(' AND lower(d.name) ~ $4[%s]', i);
    END LOOP;
    RETURN QUERY EXECUTE q USING p_spaces, p_content, p_path, p_name;
END
$$;
REVOKE ALL ON FUNCTION dp_document_candidates(uuid[], text[], text[], text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION dp_document_candidates(uuid[], text[], text[], text[]) TO data_plane_app;
