-- User-written SQL runs as data_plane_query. If that role could call
-- set_config it could forge data_plane.user_id (whose rows row-level security
-- shows) or set its role back. Revoking it needs a superuser, so set-up does
-- it (docker/initdb.sql, run by scripts/setup.sh); this migration refuses to
-- go on until it is done.
DO $$
BEGIN
    IF has_function_privilege('data_plane_query', 'pg_catalog.set_config(text, text, boolean)', 'EXECUTE') THEN
        RAISE EXCEPTION 'data_plane_query may call set_config'
            USING HINT = 'run docker/initdb.sql as a superuser (scripts/setup.sh does): it revokes EXECUTE on pg_catalog.set_config from PUBLIC and grants it to data_plane_app and data_plane_owner';
    END IF;
    IF NOT has_function_privilege('data_plane_app', 'pg_catalog.set_config(text, text, boolean)', 'EXECUTE') THEN
        RAISE EXCEPTION 'data_plane_app may not call set_config, which it needs to say whom each transaction acts for'
            USING HINT = 'GRANT EXECUTE ON FUNCTION pg_catalog.set_config(text, text, boolean) TO data_plane_app';
    END IF;
END
$$;
