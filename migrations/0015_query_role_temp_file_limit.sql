-- query_documents caps the temporary disk space of the SQL users write with
-- SET LOCAL temp_file_limit, set by the server's role before it switches to
-- data_plane_query. The setting belongs to superusers unless granted, and
-- granting it needs a superuser, so set-up does it (docker/initdb.sql, run
-- by scripts/setup.sh); this migration refuses to go on until it is done.
DO $$
BEGIN
    IF NOT has_parameter_privilege('data_plane_app', 'temp_file_limit', 'SET') THEN
        RAISE EXCEPTION 'data_plane_app may not set temp_file_limit, which query_documents needs to cap the disk space of user-written sql'
            USING HINT = 'run docker/initdb.sql as a superuser (scripts/setup.sh does): GRANT SET ON PARAMETER temp_file_limit TO data_plane_app';
    END IF;
    IF has_parameter_privilege('data_plane_query', 'temp_file_limit', 'SET') THEN
        RAISE EXCEPTION 'data_plane_query may set temp_file_limit, so user-written sql could lift its own cap'
            USING HINT = 'REVOKE SET ON PARAMETER temp_file_limit FROM data_plane_query';
    END IF;
END
$$;
