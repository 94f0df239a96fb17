-- People who sign in with an OpenID Connect provider (docs/auth.md). The
-- provider's issuer and subject (`iss`, `sub`) name a person for good; their
-- email may change at the provider, so it is only how the person is found
-- the first time (and, when the provider vouches for the address, how an
-- account made earlier by `data-plane token --user` is joined to them).
-- `made_account`: the account was made for this person at their first
-- sign-in (its permission follows the provider's roles), rather than an
-- account made here before and joined (whose permission stays this
-- server's to set).
CREATE TABLE oidc_identities (
    issuer       text NOT NULL CHECK (length(issuer) BETWEEN 1 AND 2000),
    subject      text NOT NULL CHECK (length(subject) BETWEEN 1 AND 255),
    user_id      uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    made_account boolean NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (issuer, subject)
);
CREATE INDEX oidc_identities_user ON oidc_identities (user_id);

ALTER TABLE oidc_identities ENABLE ROW LEVEL SECURITY;
ALTER TABLE oidc_identities FORCE ROW LEVEL SECURITY;
CREATE POLICY oidc_identities_system ON oidc_identities FOR ALL TO data_plane_app
    USING (dp_is_system()) WITH CHECK (dp_is_system());
GRANT SELECT, INSERT, DELETE ON oidc_identities TO data_plane_app;
