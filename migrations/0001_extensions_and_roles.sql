-- Extensions and the roles the schema grants to.
--
-- The roles are cluster-wide and created by the set-up (scripts/setup.sh, or
-- docker/initdb.sql); a migration only checks they exist so that a missing set-up
-- step fails here with a clear message instead of at the first GRANT.
CREATE EXTENSION IF NOT EXISTS vector;
CREATE EXTENSION IF NOT EXISTS pg_trgm;

DO $$
DECLARE
    missing text;
BEGIN
    SELECT string_agg(r, ', ') INTO missing
    FROM unnest(ARRAY['data_plane_app', 'data_plane_query']) AS r
    WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r);
    IF missing IS NOT NULL THEN
        RAISE EXCEPTION 'roles missing: % (run make setup or docker/initdb.sql first)', missing;
    END IF;
END
$$;
