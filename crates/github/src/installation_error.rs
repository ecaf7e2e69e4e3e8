//! What asking GitHub for an App installation's token can come to, whoever asks (the App's key
//! in hand, or the token function): which answers are permanent, which are worth asking again
//! later, and when.

use std::time::Duration;

use crate::app::AppKeyError;

#[derive(Debug, thiserror::Error)]
pub enum InstallationError {
    #[error(transparent)]
    Key(#[from] AppKeyError),
    #[error("the GitHub App is not installed on {0} (or the installation cannot see it)")]
    NotInstalled(String),
    #[error("GitHub refused the App's JWT ({status}): check GitHubAppId and its private key (a key being rotated is retried later)")]
    Refused { status: u16 },
    #[error("installation {0} of the GitHub App is gone (uninstalled)")]
    Uninstalled(u64),
    #[error(
        "installation {0} is suspended: an organisation owner can unsuspend it in its settings"
    )]
    Suspended(u64),
    #[error("GitHub will not mint installation {installation} a token with Chronicle's permissions ({message}): give the App read access to contents, issues, metadata and pull requests")]
    Permissions { installation: u64, message: String },
    #[error("installation {installation} has not granted the App {permission}: read, which Chronicle needs: an organisation owner approves the App's permissions in the installation's settings")]
    MissingPermission {
        installation: u64,
        permission: &'static str,
    },
    #[error("GitHub's rate limit refused {what}: asked again in {}s", wait.as_secs())]
    RateLimited { what: String, wait: Duration },
    #[error("GitHub answered {status} for {what}: {message}")]
    Failed {
        what: String,
        status: u16,
        message: String,
    },
    #[error("no answer from GitHub for {what}: {message}")]
    Transport { what: String, message: String },
    /// What a [`TokenSource`] other than [`AppClient`] said when none of the above fits (the
    /// App's key unreadable, a refused request, a failed token function).
    #[error("no installation token: {message}")]
    Unavailable { message: String, permanent: bool },
}

/// How long a row waits after GitHub refused the App's JWT (401) before it is asked again.
///
/// The rule: a refused JWT is never permanent by itself. During a key rotation GitHub refuses
/// the old key as soon as it is deleted, while the secret (or a warm function's copy of it)
/// still holds it, or the new one before it is registered; both heal within minutes. So a 401
/// defers the row like a rate limit does, and the deferral is bounded as every deferral is:
/// once the row has waited `ENRICH_MAX_WAIT_SECONDS` it is summarized without enrichment (a
/// warning in the log says why), so a key that stays wrong costs no PR its summary.
pub const KEY_REFUSED_WAIT: Duration = Duration::from_secs(10 * 60);

impl InstallationError {
    /// The installation itself is gone (uninstalled), not just the repository.
    pub fn is_gone(&self) -> bool {
        matches!(self, InstallationError::Uninstalled(_))
    }

    /// The App or the installation is wrong: a person must act.
    pub fn is_permanent(&self) -> bool {
        matches!(
            self,
            InstallationError::Key(_)
                | InstallationError::NotInstalled(_)
                | InstallationError::Suspended(_)
                | InstallationError::Uninstalled(_)
                | InstallationError::Permissions { .. }
                | InstallationError::MissingPermission { .. }
                | InstallationError::Unavailable {
                    permanent: true,
                    ..
                }
        )
    }

    /// How long to wait before asking again, when GitHub's answer is temporary in a way that
    /// outlasts a retry now: a rate limit, or a refused JWT ([`KEY_REFUSED_WAIT`]).
    pub fn deferral(&self) -> Option<Duration> {
        match self {
            InstallationError::RateLimited { wait, .. } => Some(*wait),
            InstallationError::Refused { .. } => Some(KEY_REFUSED_WAIT),
            _ => None,
        }
    }
}
