-- Users, spaces and memberships.
CREATE TYPE permission_level AS ENUM ('guest', 'user', 'admin', 'owner');
CREATE TYPE membership_role AS ENUM ('viewer', 'editor', 'owner');

CREATE TABLE users (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    email        text NOT NULL UNIQUE CHECK (email = lower(email) AND email LIKE '%_@_%'),
    display_name text,
    permission   permission_level NOT NULL DEFAULT 'user',
    created_at   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE spaces (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name        text NOT NULL UNIQUE CHECK (length(name) BETWEEN 1 AND 200),
    description text NOT NULL DEFAULT '',
    created_by  uuid REFERENCES users (id) ON DELETE SET NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE memberships (
    space_id   uuid NOT NULL REFERENCES spaces (id) ON DELETE CASCADE,
    user_id    uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    role       membership_role NOT NULL DEFAULT 'editor',
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (space_id, user_id)
);
CREATE INDEX memberships_user ON memberships (user_id);
