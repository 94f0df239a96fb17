-- Run-time settings cached per replica, with the guarantee of reading them
-- per request: a change is answered only once every live replica holds it.
--
-- settings_version counts changes: every statement that writes settings
-- bumps it and notifies `data_plane_settings` with the new number (sent at
-- commit). Each replica keeps a lease in settings_replicas: the version it
-- holds (`heard`) and until when it may serve from its cache
-- (`alive_until`, renewed every few seconds). A replica that cannot renew
-- stops using its cache before its lease ends; the server that wrote a
-- change waits until no live lease holds an older version.

CREATE TABLE settings_version (
    id boolean PRIMARY KEY DEFAULT true CHECK (id),
    version bigint NOT NULL
);
INSERT INTO settings_version (id, version) VALUES (true, 1);

CREATE TABLE settings_replicas (
    replica uuid PRIMARY KEY,
    heard bigint NOT NULL,
    alive_until timestamptz NOT NULL
);

-- Runs as the owner: the server's role reads the version but never sets it.
CREATE FUNCTION dp_settings_changed() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
    v bigint;
BEGIN
    UPDATE settings_version SET version = version + 1 RETURNING version INTO v;
    PERFORM pg_notify('data_plane_settings', v::text);
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION dp_settings_changed() FROM PUBLIC;

CREATE TRIGGER settings_changed
    AFTER INSERT OR UPDATE OR DELETE ON settings
    FOR EACH STATEMENT EXECUTE FUNCTION dp_settings_changed();

-- Everyone reads the version (as everyone reads settings); only the trigger
-- above, running as the owner, writes it. Leases are the server's own
-- bookkeeping: system transactions only.
ALTER TABLE settings_version ENABLE ROW LEVEL SECURITY;
CREATE POLICY settings_version_read ON settings_version FOR SELECT TO data_plane_app
    USING (true);
ALTER TABLE settings_replicas ENABLE ROW LEVEL SECURITY;
ALTER TABLE settings_replicas FORCE ROW LEVEL SECURITY;
CREATE POLICY settings_replicas_system ON settings_replicas FOR ALL TO data_plane_app
    USING (dp_is_system()) WITH CHECK (dp_is_system());

GRANT SELECT ON settings_version TO data_plane_app;
GRANT SELECT, INSERT, UPDATE, DELETE ON settings_replicas TO data_plane_app;
