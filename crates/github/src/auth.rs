//! What a GitHub client authenticates with ([`Auth`]): a fixed token, or an App installation's,
//! from a [`TokenSource`]: `installation::AppClient` (the App's key in hand: the operator CLI,
//! backfill, the local stack), or a client of a function that holds the key for it (enrich in
//! AWS, `stages::token`).

use std::sync::Arc;

use crate::installation_error::InstallationError;
use chronicle_config::secret::Secret;

/// A boxed future, for [`TokenSource`]'s methods (a trait object's async methods).
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// Where an App's installation tokens come from: `AppClient`, the key in hand, or a client of
/// a function that holds the key for it. Each keeps what it learnt (tokens until shortly before
/// they expire, which installation a repository has) and answers with [`InstallationError`].
pub trait TokenSource: Send + Sync + std::fmt::Debug {
    /// The installation that can see `repo` (`owner/name`).
    fn installation_of<'a>(
        &'a self,
        repo: &'a str,
    ) -> BoxFuture<'a, Result<u64, InstallationError>>;
    /// The installation's token: the one in hand until shortly before it expires, else a new one.
    fn token(&self, installation: u64) -> BoxFuture<'_, Result<Secret, InstallationError>>;
    /// GitHub refused `used` (401): the next [`TokenSource::token`] gets a new one.
    fn refused(&self, installation: u64, used: &Secret);
    /// Takes `installation` as `repo`'s (a delivery named it) unless one is known already.
    fn remember(&self, repo: &str, installation: u64);
    /// Forgets which installation `repo` has, so the next request asks again.
    fn forget(&self, repo: &str);
}

/// What a client authenticates with.
#[derive(Clone, Debug)]
pub enum Auth {
    /// A token (a personal access token, or a fixed one in tests).
    Token(Secret),
    /// An installation of a GitHub App: its current token, from the source as needed.
    Installation { app: Arc<dyn TokenSource>, id: u64 },
}

impl Auth {
    /// The token for the next request.
    pub async fn bearer(&self) -> Result<Secret, InstallationError> {
        match self {
            Auth::Token(t) => Ok(t.clone()),
            Auth::Installation { app, id } => app.token(*id).await,
        }
    }

    /// GitHub answered 401 to `used`: whether asking again with a new token may help (an
    /// installation token expired or was revoked; a fixed token will not change).
    pub fn refused(&self, used: &Secret) -> bool {
        match self {
            Auth::Token(_) => false,
            Auth::Installation { app, id } => {
                app.refused(*id, used);
                true
            }
        }
    }
}
