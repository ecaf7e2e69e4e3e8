//! Secret values and where they come from (a plain variable locally, Secrets Manager or SSM in AWS).

use std::fmt;

use aws_config::SdkConfig;

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

#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("reading secret {id} from Secrets Manager failed: {message}")]
    SecretsManager { id: String, message: String },
    #[error(
        "secret {id} in Secrets Manager has no SecretString (binary secrets are not supported)"
    )]
    NotAString { id: String },
    #[error("reading SSM parameter {name} failed: {message}")]
    Ssm { name: String, message: String },
    #[error("SSM parameter {name} has no value")]
    EmptyParameter { name: String },
    #[error("secret {id} in Secrets Manager is empty or blank: set its value (an empty key is one anyone can sign with)")]
    Blank { id: String },
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

    /// Fetches the value. `Ok(None)` means nothing is configured.
    pub async fn resolve(&self, sdk: &SdkConfig) -> Result<Option<Secret>, SecretError> {
        match self {
            SecretSource::Unset => Ok(None),
            SecretSource::Plain(secret) => Ok(Some(secret.clone())),
            SecretSource::SecretsManager(id) => {
                let client = aws_sdk_secretsmanager::Client::new(sdk);
                let out = client
                    .get_secret_value()
                    .secret_id(id)
                    .send()
                    .await
                    .map_err(|e| SecretError::SecretsManager {
                        id: id.clone(),
                        message: crate::aws::error_message(&e),
                    })?;
                let value = out
                    .secret_string()
                    .ok_or_else(|| SecretError::NotAString { id: id.clone() })?;
                // Fail closed: a reference that holds nothing is an error, never a usable key.
                if value.trim().is_empty() {
                    return Err(SecretError::Blank { id: id.clone() });
                }
                Ok(Some(Secret::new(value)))
            }
            SecretSource::Ssm(name) => {
                let client = aws_sdk_ssm::Client::new(sdk);
                let out = client
                    .get_parameter()
                    .name(name)
                    .with_decryption(true)
                    .send()
                    .await
                    .map_err(|e| SecretError::Ssm {
                        name: name.clone(),
                        message: crate::aws::error_message(&e),
                    })?;
                let value = out
                    .parameter()
                    .and_then(|p| p.value())
                    .filter(|v| !v.trim().is_empty())
                    .ok_or_else(|| SecretError::EmptyParameter { name: name.clone() })?;
                Ok(Some(Secret::new(value)))
            }
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
