//! Sign-in with an OpenID Connect provider (`DATA_PLANE_OIDC_*`,
//! docs/auth.md): off until an issuer is named.

use std::time::Duration;

use clap::Args;
use data_plane_store::identity::Permission;

use crate::auth::oidc::{OidcSettings, PageToken, parse_roles};

#[derive(Debug, Clone, Args)]
pub struct OidcArgs {
    /// The provider's issuer URL, exactly as its tokens' `iss` says
    /// (`https://`; `http://` only on loopback). Unset: only the server's
    /// own tokens are accepted.
    #[arg(long, env = "DATA_PLANE_OIDC_ISSUER", global = true)]
    pub oidc_issuer: Option<String>,

    /// The audience a token's `aud` must contain: the identifier this
    /// server (the API) has at the provider.
    #[arg(long, env = "DATA_PLANE_OIDC_AUDIENCE", global = true)]
    pub oidc_audience: Option<String>,

    /// The claim whose values map to permissions: a name, or a dotted path
    /// into nested claims (`realm_access.roles`); a string or a list.
    #[arg(
        long,
        env = "DATA_PLANE_OIDC_ROLE_CLAIM",
        global = true,
        default_value = "roles"
    )]
    pub oidc_role_claim: String,

    /// Role values and the permissions they give, `value=permission,…`;
    /// the highest one a token carries counts.
    #[arg(
        long,
        env = "DATA_PLANE_OIDC_ROLES",
        global = true,
        default_value = "guest=guest,user=user,admin=admin,owner=owner"
    )]
    pub oidc_roles: String,

    /// The permission of a person whose roles map to none.
    #[arg(
        long,
        env = "DATA_PLANE_OIDC_DEFAULT_PERMISSION",
        global = true,
        default_value = "user"
    )]
    pub oidc_default_permission: String,

    /// The highest permission the provider may grant; a token whose roles
    /// map higher is refused. Raise it to let the provider name admins.
    #[arg(
        long,
        env = "DATA_PLANE_OIDC_MAX_PERMISSION",
        global = true,
        default_value = "user"
    )]
    pub oidc_max_permission: String,

    /// The claim holding the person's email address.
    #[arg(
        long,
        env = "DATA_PLANE_OIDC_EMAIL_CLAIM",
        global = true,
        default_value = "email"
    )]
    pub oidc_email_claim: String,

    /// Take the email claim as vouched for when tokens say nothing of it
    /// (no `email_verified`): for providers whose administrators set every
    /// address. Tokens saying `email_verified: false` stay unverified.
    #[arg(
        long,
        env = "DATA_PLANE_OIDC_TRUST_EMAIL",
        global = true,
        default_value_t = false
    )]
    pub oidc_trust_email: bool,

    /// The chat page's client at the provider (public, authorization code
    /// with PKCE). Unset: the page offers no "Sign in".
    #[arg(long, env = "DATA_PLANE_OIDC_CLIENT_ID", global = true)]
    pub oidc_client_id: Option<String>,

    /// The scopes the chat page asks for and the protected-resource
    /// metadata lists, space- or comma-separated.
    #[arg(
        long,
        env = "DATA_PLANE_OIDC_SCOPES",
        global = true,
        default_value = "openid profile email offline_access"
    )]
    pub oidc_scopes: String,

    /// Which token the chat page sends: `access_token`, or `id_token` for
    /// providers whose access tokens are not meant for other servers
    /// (Google; set the audience to the client id then).
    #[arg(
        long,
        env = "DATA_PLANE_OIDC_PAGE_TOKEN",
        global = true,
        default_value = "access_token"
    )]
    pub oidc_page_token: String,

    /// The least seconds between two reads of the provider's keys for a
    /// token naming a key the server does not hold (at least 1).
    #[arg(
        long,
        env = "DATA_PLANE_OIDC_REFETCH_SECS",
        global = true,
        default_value_t = 5
    )]
    pub oidc_refetch_secs: u64,
}

impl OidcArgs {
    /// The provider's settings, `None` when no issuer is named; anything
    /// malformed stops start-up, naming the variable.
    pub fn settings(&self) -> anyhow::Result<Option<OidcSettings>> {
        let Some(issuer) = self.oidc_issuer.as_deref().filter(|i| !i.trim().is_empty()) else {
            anyhow::ensure!(
                self.oidc_client_id.is_none(),
                "DATA_PLANE_OIDC_CLIENT_ID is set but DATA_PLANE_OIDC_ISSUER is not"
            );
            return Ok(None);
        };
        let audience = self.oidc_audience.as_deref().unwrap_or("");
        let mut settings = OidcSettings::new(issuer, audience)?;
        let permission = |name: &str, value: &str| -> anyhow::Result<Permission> {
            value
                .trim()
                .parse()
                .map_err(|e| anyhow::anyhow!("{name}: {e}"))
        };
        settings.role_claim = nonempty("DATA_PLANE_OIDC_ROLE_CLAIM", &self.oidc_role_claim)?;
        settings.email_claim = nonempty("DATA_PLANE_OIDC_EMAIL_CLAIM", &self.oidc_email_claim)?;
        settings.roles = parse_roles(&self.oidc_roles)
            .map_err(|e| anyhow::anyhow!("DATA_PLANE_OIDC_ROLES: {e}"))?;
        settings.default_permission = permission(
            "DATA_PLANE_OIDC_DEFAULT_PERMISSION",
            &self.oidc_default_permission,
        )?;
        settings.max_permission =
            permission("DATA_PLANE_OIDC_MAX_PERMISSION", &self.oidc_max_permission)?;
        anyhow::ensure!(
            settings.default_permission <= settings.max_permission,
            "DATA_PLANE_OIDC_DEFAULT_PERMISSION ({}) is above DATA_PLANE_OIDC_MAX_PERMISSION ({})",
            settings.default_permission,
            settings.max_permission
        );
        settings.client_id = self
            .oidc_client_id
            .as_deref()
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .map(str::to_string);
        settings.scopes = self
            .oidc_scopes
            .split([' ', ','])
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        settings.page_token = match self.oidc_page_token.trim() {
            "access_token" => PageToken::Access,
            "id_token" => PageToken::Id,
            other => anyhow::bail!(
                "DATA_PLANE_OIDC_PAGE_TOKEN is {other:?}; expected access_token or id_token"
            ),
        };
        // Never 0: the interval is what keeps tokens naming made-up keys
        // from turning into a read of the provider each.
        settings.refetch_interval = Duration::from_secs(self.oidc_refetch_secs.max(1));
        settings.trust_email = self.oidc_trust_email;
        Ok(Some(settings))
    }
}

fn nonempty(name: &str, value: &str) -> anyhow::Result<String> {
    let value = value.trim();
    anyhow::ensure!(!value.is_empty(), "{name} is empty");
    Ok(value.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        oidc: OidcArgs,
    }

    fn settings(args: &[&str]) -> anyhow::Result<Option<OidcSettings>> {
        let cli = Cli::try_parse_from(std::iter::once("data-plane").chain(args.iter().copied()))?;
        cli.oidc.settings()
    }

    #[test]
    fn no_issuer_no_provider() {
        assert!(settings(&[]).unwrap().is_none());
        let orphan = settings(&["--oidc-client-id", "page"]).unwrap_err();
        assert!(
            orphan.to_string().contains("DATA_PLANE_OIDC_ISSUER"),
            "{orphan}"
        );
    }

    #[test]
    fn every_setting_is_read_and_checked() {
        let s = settings(&[
            "--oidc-issuer",
            "https://id.example.com/realms/work",
            "--oidc-audience",
            "data-plane",
            "--oidc-role-claim",
            "realm_access.roles",
            "--oidc-roles",
            "dp-admin=admin,staff=user",
            "--oidc-max-permission",
            "admin",
            "--oidc-default-permission",
            "guest",
            "--oidc-client-id",
            "page",
            "--oidc-scopes",
            "openid, email api://x/access",
            "--oidc-page-token",
            "id_token",
        ])
        .unwrap()
        .unwrap();
        assert_eq!(s.issuer, "https://id.example.com/realms/work");
        assert_eq!(s.role_claim, "realm_access.roles");
        assert_eq!(s.roles.len(), 2);
        assert_eq!(s.max_permission, Permission::Admin);
        assert_eq!(s.default_permission, Permission::Guest);
        assert_eq!(s.client_id.as_deref(), Some("page"));
        assert_eq!(s.scopes, ["openid", "email", "api://x/access"]);
        assert_eq!(s.page_token, PageToken::Id);

        let base = [
            "--oidc-issuer",
            "https://id.example.com",
            "--oidc-audience",
            "api",
        ];
        let with = |extra: &[&str]| {
            let mut args = base.to_vec();
            args.extend_from_slice(extra);
            settings(&args).unwrap_err().to_string()
        };
        assert!(with(&["--oidc-max-permission", "root"]).contains("MAX_PERMISSION"));
        assert!(with(&["--oidc-default-permission", "admin"]).contains("above"));
        assert!(with(&["--oidc-roles", "x"]).contains("DATA_PLANE_OIDC_ROLES"));
        assert!(with(&["--oidc-page-token", "refresh"]).contains("PAGE_TOKEN"));
        let no_audience = settings(&["--oidc-issuer", "https://id.example.com"]).unwrap_err();
        assert!(
            no_audience.to_string().contains("AUDIENCE"),
            "{no_audience}"
        );
        let plain = settings(&[
            "--oidc-issuer",
            "http://id.example.com",
            "--oidc-audience",
            "a",
        ])
        .unwrap_err();
        assert!(plain.to_string().contains("https://"), "{plain}");
    }
}
