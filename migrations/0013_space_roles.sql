-- Space roles, enforced here as well as in the server:
--   viewer  reads the space
--   editor  also uploads, creates sources, deletes documents
--   owner   also deletes the space and manages its members
-- A guest (the permission level) never writes, whatever their role in a space,
-- and every space keeps at least one owner.
--
-- Managing members needs to read and write other users' memberships, which
-- the per-user policies (your own rows only) do not show. A policy on
-- memberships that read memberships would recurse, so that work is done by
-- the SECURITY DEFINER functions below: each runs as the schema's owner and
-- checks the caller (dp_current_user_id()) itself. The policies that follow
-- let the owner role, and only it, see past the per-user ones; the server's
-- role is never the owner (Db::check_role refuses it).
CREATE POLICY users_definer ON users FOR SELECT TO CURRENT_USER USING (true);
CREATE POLICY spaces_definer ON spaces FOR SELECT TO CURRENT_USER USING (true);
CREATE POLICY memberships_definer ON memberships FOR ALL TO CURRENT_USER
    USING (true) WITH CHECK (true);

-- True when the current user may write at all: a known user above guest.
CREATE FUNCTION dp_may_write() RETURNS boolean
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
    SELECT EXISTS (
        SELECT 1 FROM users WHERE id = dp_current_user_id() AND permission <> 'guest'
    )
$$;

-- The current user's role in a space; NULL when not a member.
CREATE FUNCTION dp_space_role(space uuid) RETURNS membership_role
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
    SELECT role FROM memberships WHERE space_id = space AND user_id = dp_current_user_id()
$$;

-- Editors and owners write, guests never.
CREATE OR REPLACE FUNCTION dp_writable_spaces() RETURNS SETOF uuid
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT m.space_id FROM memberships m JOIN users u ON u.id = m.user_id
    WHERE m.user_id = dp_current_user_id() AND m.role IN ('editor', 'owner')
      AND u.permission <> 'guest'
$$;

-- Owners delete their spaces (content and memberships go with it through
-- the foreign keys).
CREATE POLICY spaces_owner_delete ON spaces FOR DELETE TO data_plane_app
    USING (dp_space_role(id) = 'owner' AND dp_may_write());

-- The members of a space, for its members.
CREATE FUNCTION dp_space_members(space uuid)
RETURNS TABLE (user_id uuid, email text, display_name text, role membership_role, joined_at timestamptz)
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
    SELECT u.id, u.email, u.display_name, m.role, m.created_at
    FROM memberships m JOIN users u ON u.id = m.user_id
    WHERE m.space_id = space AND dp_space_role(space) IS NOT NULL
    ORDER BY u.email
$$;

-- A user's id by email, for an owner adding them to a space.
CREATE FUNCTION dp_user_id_by_email(address text) RETURNS uuid
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
    SELECT id FROM users
    WHERE email = lower(btrim(address)) AND dp_current_user_id() IS NOT NULL
$$;

-- Adds a member or changes their role: the space's owners only (not guests).
-- Answers the member's previous role, NULL when they were not one.
CREATE FUNCTION dp_set_member(space uuid, member uuid, new_role membership_role)
RETURNS membership_role
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
    previous membership_role;
BEGIN
    IF dp_space_role(space) IS DISTINCT FROM 'owner' OR NOT dp_may_write() THEN
        RAISE EXCEPTION 'only an owner of space % may manage its members', space
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    SELECT role INTO previous FROM memberships WHERE space_id = space AND user_id = member;
    INSERT INTO memberships (space_id, user_id, role) VALUES (space, member, new_role)
    ON CONFLICT (space_id, user_id) DO UPDATE SET role = excluded.role;
    RETURN previous;
END
$$;

-- Removes a member: the space's owners (not guests) remove anyone, and
-- everyone may leave. Answers whether there was such a member.
CREATE FUNCTION dp_remove_member(space uuid, member uuid) RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
    IF member IS DISTINCT FROM dp_current_user_id()
       AND (dp_space_role(space) IS DISTINCT FROM 'owner' OR NOT dp_may_write()) THEN
        RAISE EXCEPTION 'only an owner of space % may manage its members', space
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    DELETE FROM memberships WHERE space_id = space AND user_id = member;
    RETURN FOUND;
END
$$;

-- The last owner of a space can neither leave nor be demoted; the check
-- steps aside when the space or the user itself is being deleted. The lock
-- serialises concurrent changes to one space's owners, so two owners cannot
-- demote each other at once.
CREATE FUNCTION dp_keep_an_owner() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
    IF OLD.role = 'owner' AND (TG_OP = 'DELETE' OR NEW.role <> 'owner') THEN
        PERFORM pg_advisory_xact_lock(hashtextextended('dp_space_owners:' || OLD.space_id::text, 0));
        IF EXISTS (SELECT 1 FROM spaces WHERE id = OLD.space_id)
           AND EXISTS (SELECT 1 FROM users WHERE id = OLD.user_id)
           AND NOT EXISTS (
               SELECT 1 FROM memberships
               WHERE space_id = OLD.space_id AND role = 'owner' AND user_id <> OLD.user_id
           ) THEN
            RAISE EXCEPTION 'space % would have no owner left', OLD.space_id
                USING ERRCODE = 'DP409',
                      HINT = 'make another member an owner first';
        END IF;
    END IF;
    IF TG_OP = 'DELETE' THEN
        RETURN OLD;
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER memberships_keep_an_owner
    BEFORE UPDATE OF role OR DELETE ON memberships
    FOR EACH ROW EXECUTE FUNCTION dp_keep_an_owner();

REVOKE ALL ON FUNCTION dp_may_write(), dp_space_role(uuid), dp_space_members(uuid),
    dp_user_id_by_email(text), dp_set_member(uuid, uuid, membership_role),
    dp_remove_member(uuid, uuid), dp_keep_an_owner() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION dp_may_write(), dp_space_role(uuid), dp_space_members(uuid),
    dp_user_id_by_email(text), dp_set_member(uuid, uuid, membership_role),
    dp_remove_member(uuid, uuid) TO data_plane_app;
