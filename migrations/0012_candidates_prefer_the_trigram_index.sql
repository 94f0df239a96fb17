-- dp_document_candidates exists to answer from the trigram indexes, but the
-- planner prices a regex as a cheap filter: it reads every document of the
-- caller's spaces through documents_space (or a sequential scan) and runs the
-- regex over each one's whole TOASTed content. Over 2,111 documents (64 MB)
-- in one space that took 420 ms for a phrase no document holds; the trigram
-- index answers the same in 3 ms.
--
-- The function now decides itself. A few documents (fewer than 500 in the
-- spaces asked for) are still matched directly: that is cheap and never
-- rechecks other spaces' documents. Otherwise the space conditions are
-- written as `(...) IS TRUE`, which no index can serve, and sequential scans
-- are off, so the trigram conditions drive the scan and the spaces filter
-- what they find.
CREATE OR REPLACE FUNCTION dp_document_candidates(
    p_spaces uuid[], p_content text[], p_path text[], p_name text[]
) RETURNS SETOF uuid
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, public
SET enable_seqscan = off
AS $$
DECLARE
    few boolean;
    q text;
BEGIN
    SELECT count(*) < 500 INTO few
      FROM (SELECT 1 FROM public.documents d
             WHERE d.space_id = ANY(p_spaces)
               AND d.space_id IN (SELECT public.dp_readable_spaces())
             LIMIT 500) s;
    IF few THEN
        q := 'SELECT d.id FROM public.documents d
               WHERE d.space_id = ANY($1)
                 AND d.space_id IN (SELECT public.dp_readable_spaces())';
    ELSE
        q := 'SELECT d.id FROM public.documents d
               WHERE (d.space_id = ANY($1)) IS TRUE
                 AND (d.space_id IN (SELECT public.dp_readable_spaces())) IS TRUE';
    END IF;
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
