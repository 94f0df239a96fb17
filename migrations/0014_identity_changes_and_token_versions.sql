-- A person's permission and space roles come from here on every request
-- (each replica caches them for at most a second), so a change must reach
-- every replica at once; tokens can be revoked; only admins change settings.

-- A token carries the version its user had when it was issued; bumping the
-- version (`data-plane token revoke`) makes every older token invalid.
ALTER TABLE users ADD COLUMN token_version integer NOT NULL DEFAULT 0;

-- Each change to a user's permission, token version or memberships notifies
-- `data_plane_identity` with the user's id; every replica listens and drops
-- what it cached about that user. Notifications are sent at commit, so a
-- replica never re-reads a change that is not visible yet.
CREATE FUNCTION dp_notify_identity_change() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    row_data record;
BEGIN
    IF TG_OP = 'DELETE' THEN
        row_data := OLD;
    ELSE
        row_data := NEW;
    END IF;
    IF TG_TABLE_NAME = 'users' THEN
        PERFORM pg_notify('data_plane_identity', row_data.id::text);
    ELSE
        PERFORM pg_notify('data_plane_identity', row_data.user_id::text);
    END IF;
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION dp_notify_identity_change() FROM PUBLIC;

CREATE TRIGGER users_notify_identity_change
    AFTER UPDATE OF permission, token_version OR DELETE ON users
    FOR EACH ROW EXECUTE FUNCTION dp_notify_identity_change();
CREATE TRIGGER memberships_notify_identity_change
    AFTER INSERT OR UPDATE OR DELETE ON memberships
    FOR EACH ROW EXECUTE FUNCTION dp_notify_identity_change();

-- True when the current user is an admin (or the deployment's owner).
CREATE FUNCTION dp_is_admin() RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT EXISTS (
        SELECT 1 FROM users WHERE id = dp_current_user_id() AND permission >= 'admin'
    )
$$;

-- Settings: everyone reads (settings_read); only admins and the system write.
DROP POLICY settings_write ON settings;
CREATE POLICY settings_admin_write ON settings FOR ALL TO data_plane_app
    USING (dp_is_admin() OR dp_is_system())
    WITH CHECK (dp_is_admin() OR dp_is_system());
