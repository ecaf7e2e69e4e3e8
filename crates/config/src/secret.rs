//! Secret values and where they come from (a plain variable locally, Secrets Manager or SSM in
//! AWS). Reading them is `chronicle_aws::secret`'s.

use std::fmt;

/// A secret string whose `Debug`/`Display` never reveal it, so it cannot leak into logs by accident.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The secret itself; call sites are few and easy to audit.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// Where a secret is read from. Resolved once per cold start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SecretSource {
    /// Not configured at all.
    Unset,
    /// The value itself, from a plain environment variable (local development).
    Plain(Secret),
    /// A Secrets Manager secret id or ARN whose `SecretString` is the value.
    SecretsManager(String),
    /// An SSM parameter name (usually a `SecureString`), read with decryption.
    Ssm(String),
}

impl SecretSource {
    /// Picks the source from three variables: a plain value wins (local), then a Secrets
    /// Manager reference, then an SSM parameter name. Empty values count as unset.
    pub fn from_vars(
        plain: Option<String>,
        secrets_manager: Option<String>,
        ssm: Option<String>,
    ) -> Self {
        let non_empty = |v: Option<String>| v.filter(|s| !s.trim().is_empty());
        if let Some(v) = non_empty(plain) {
            SecretSource::Plain(Secret::new(v))
        } else if let Some(id) = non_empty(secrets_manager) {
            SecretSource::SecretsManager(id)
        } else if let Some(name) = non_empty(ssm) {
            SecretSource::Ssm(name)
        } else {
            SecretSource::Unset
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_value() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s:?}"), "Secret(<redacted>)");
        let src = SecretSource::Plain(s);
        assert!(!format!("{src:?}").contains("hunter2"));
    }

    #[test]
    fn plain_wins_then_secrets_manager_then_ssm() {
        let s = |v: &str| Some(v.to_string());
        assert_eq!(
            SecretSource::from_vars(s("a"), s("arn"), s("/p")),
            SecretSource::Plain(Secret::new("a"))
        );
        assert_eq!(
            SecretSource::from_vars(s(" "), s("arn"), s("/p")),
            SecretSource::SecretsManager("arn".into())
        );
        assert_eq!(
            SecretSource::from_vars(None, s(""), s("/p")),
            SecretSource::Ssm("/p".into())
        );
        assert_eq!(
            SecretSource::from_vars(None, None, None),
            SecretSource::Unset
        );
    }
}
