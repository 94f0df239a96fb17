-- Remote tool modules: each configured module's manifest as last
-- discovered, shared by every replica (one row per module, keyed by the
-- name the deployment gives it), and the module that ran each audited call.
CREATE TABLE module_manifests (
    module       text PRIMARY KEY,
    -- The base URL the manifest was fetched from; a row for another URL
    -- than the configured one is not used.
    url          text NOT NULL,
    -- The manifest as the module answered it (null until one was read).
    manifest     jsonb,
    fetched_at   timestamptz,
    -- The last discovery attempt and, when it failed, why.
    attempted_at timestamptz NOT NULL DEFAULT now(),
    last_error   text
);

-- Deployment-wide like settings: every server reads; only the server
-- acting as itself writes (discovery, an admin's refresh).
ALTER TABLE module_manifests ENABLE ROW LEVEL SECURITY;
ALTER TABLE module_manifests FORCE ROW LEVEL SECURITY;
CREATE POLICY module_manifests_read ON module_manifests FOR SELECT TO data_plane_app USING (true);
CREATE POLICY module_manifests_system ON module_manifests FOR ALL TO data_plane_app
    USING (dp_is_system()) WITH CHECK (dp_is_system());
GRANT SELECT, INSERT, UPDATE, DELETE ON module_manifests TO data_plane_app;

-- Every replica reloads a module whose row changed (a refresh elsewhere).
CREATE FUNCTION dp_notify_module_manifest() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('data_plane_modules', NEW.module);
    RETURN NEW;
END;
$$;
REVOKE ALL ON FUNCTION dp_notify_module_manifest() FROM PUBLIC;
CREATE TRIGGER module_manifests_notify AFTER INSERT OR UPDATE ON module_manifests
    FOR EACH ROW EXECUTE FUNCTION dp_notify_module_manifest();

ALTER TABLE tool_calls ADD COLUMN module text;
