//! Reading a secret from where its [`SecretSource`] says: the value itself locally, Secrets
//! Manager or SSM in AWS.

use aws_config::SdkConfig;
pub use chronicle_config::secret::{Secret, SecretSource};

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

/// Reads a [`SecretSource`]: a trait because the source is configuration (no AWS in it) and the
/// reading is AWS's.
pub trait Resolve {
    /// Fetches the value. `Ok(None)` means nothing is configured.
    fn resolve(
        &self,
        sdk: &SdkConfig,
    ) -> impl std::future::Future<Output = Result<Option<Secret>, SecretError>> + Send;
}

impl Resolve for SecretSource {
    async fn resolve(&self, sdk: &SdkConfig) -> Result<Option<Secret>, SecretError> {
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
                        message: crate::error_message(&e),
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
                        message: crate::error_message(&e),
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
