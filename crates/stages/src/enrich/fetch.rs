//! Asking GitHub for one PR's files, linked issues and totals: GraphQL first, REST where
//! GraphQL cannot serve, and what the answers come to ([`Fetched`]).

use super::*;

/// How enrichment reaches GitHub: with one token for every repository, or as a GitHub App, each
/// repository through its installation's token (the clients of an installation made once).
pub enum GitHubAccess {
    Token(Arc<GitHubApis>),
    App(AppAccess),
}

pub struct AppAccess {
    /// The App's key in hand, or the token function's client (`stages::token`).
    pub app: Arc<dyn crate::github::installation::TokenSource>,
    pub api_url: String,
    pub timeout: Duration,
    pub max_retries: u32,
    pub issue_scope: IssueScope,
    clients: std::sync::Mutex<std::collections::HashMap<u64, Arc<GitHubApis>>>,
}

impl From<GitHubApis> for GitHubAccess {
    fn from(apis: GitHubApis) -> Self {
        GitHubAccess::Token(Arc::new(apis))
    }
}

impl GitHubAccess {
    pub fn app(
        app: Arc<dyn crate::github::installation::TokenSource>,
        api_url: &str,
        timeout: Duration,
        max_retries: u32,
        issue_scope: IssueScope,
    ) -> Self {
        GitHubAccess::App(AppAccess {
            app,
            api_url: api_url.to_string(),
            timeout,
            max_retries,
            issue_scope,
            clients: Default::default(),
        })
    }

    /// The clients that read `repo`: the token's, or its installation's (GitHub asked once
    /// which installation that is).
    pub async fn for_repo(
        &self,
        repo: &RepoName,
    ) -> Result<Arc<GitHubApis>, crate::github::installation::InstallationError> {
        let access = match self {
            GitHubAccess::Token(apis) => return Ok(apis.clone()),
            GitHubAccess::App(access) => access,
        };
        let id = access.app.installation_of(repo.as_str()).await?;
        let mut clients = access.clients.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(apis) = clients.get(&id) {
            return Ok(apis.clone());
        }
        let auth = crate::github::installation::Auth::Installation {
            app: access.app.clone(),
            id,
        };
        let apis = Arc::new(
            GitHubApis::with_auth(&access.api_url, auth, access.timeout, access.max_retries)
                .map_err(
                    |e| crate::github::installation::InstallationError::Transport {
                        what: "the HTTP client".into(),
                        message: e.to_string(),
                    },
                )?
                .with_issue_scope(access.issue_scope),
        );
        clients.insert(id, apis.clone());
        Ok(apis)
    }

    /// Takes `installation` (a delivery's) as `repo`'s, unless one is known: see
    /// [`crate::github::installation::TokenSource::remember`]. Nothing for a token.
    pub fn remember(&self, repo: &RepoName, installation: Option<u64>) {
        if let (GitHubAccess::App(access), Some(id)) = (self, installation) {
            access.app.remember(repo.as_str(), id);
        }
    }

    /// Forgets which installation `repo` has (see
    /// [`crate::github::installation::TokenSource::forget`]). `false` for a token: nothing to ask.
    pub fn forget(&self, repo: &RepoName) -> bool {
        match self {
            GitHubAccess::App(access) => {
                access.app.forget(repo.as_str());
                true
            }
            GitHubAccess::Token(_) => false,
        }
    }

    /// Every client's GraphQL requests so far.
    pub fn requests(&self) -> u64 {
        self.each(|a| a.graphql.requests()).into_iter().sum()
    }

    /// The fewest points any installation had left, as its last answer said.
    pub fn rate_remaining(&self) -> Option<u64> {
        self.each(|a| a.graphql.rate_remaining())
            .into_iter()
            .flatten()
            .min()
    }

    fn each<T>(&self, f: impl Fn(&GitHubApis) -> T) -> Vec<T> {
        match self {
            GitHubAccess::Token(apis) => vec![f(apis)],
            GitHubAccess::App(access) => access
                .clients
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .values()
                .map(|a| f(a))
                .collect(),
        }
    }
}

/// GitHub's two APIs with one token: GraphQL for everything it can serve, REST as the fallback.
#[derive(Clone)]
pub struct GitHubApis {
    pub graphql: GraphQlClient,
    pub rest: GitHubClient,
    /// Transient GraphQL failures (502s, timeouts) retried inside one call.
    pub max_retries: u32,
    /// Where linked issues may be looked up (`LINKED_ISSUES_SCOPE`).
    pub issue_scope: IssueScope,
}

impl GitHubApis {
    /// Both clients for `api_url` (GraphQL at `{api}/graphql`, or `/api/graphql` on GHES).
    pub fn new(
        api_url: &str,
        token: &Secret,
        timeout: Duration,
        max_retries: u32,
    ) -> Result<Self, reqwest::Error> {
        Ok(GitHubApis {
            graphql: GraphQlClient::new(api_url, token, timeout)?,
            rest: GitHubClient::new(api_url, token, timeout, max_retries)?,
            max_retries,
            issue_scope: IssueScope::default(),
        })
    }

    /// Both clients, authenticated by `auth` (an installation's token).
    pub fn with_auth(
        api_url: &str,
        auth: crate::github::installation::Auth,
        timeout: Duration,
        max_retries: u32,
    ) -> Result<Self, reqwest::Error> {
        Ok(GitHubApis {
            graphql: GraphQlClient::with_auth(api_url, auth.clone(), timeout)?,
            rest: GitHubClient::with_auth(api_url, auth, timeout, max_retries)?,
            max_retries,
            issue_scope: IssueScope::default(),
        })
    }

    pub fn with_issue_scope(mut self, scope: IssueScope) -> Self {
        self.issue_scope = scope;
        self
    }
}

/// What GitHub's answers come to for one PR.
pub(super) enum Fetched {
    Enriched(Enrichment),
    /// Never worth retrying; the reason is stored as `enrichSkippedReason`.
    Skip(String),
    /// The repository is not there for this token: skipped as [`Fetched::Skip`], unless it
    /// was moved off the installation the token is of (asked again).
    Unseen(String),
    /// GitHub's budget is spent until then.
    Defer(OffsetDateTime),
}

/// GraphQL first (one query, one more per further 100 files); REST where GraphQL cannot serve.
pub(super) async fn fetch(
    github: &GitHubApis,
    repo: &RepoName,
    number: u64,
    body: &str,
    deadline: Instant,
) -> Result<Fetched, EnrichError> {
    let error = match graphql_fetch(github, repo, number, deadline).await {
        Ok(Some(enrichment)) => return Ok(Fetched::Enriched(enrichment)),
        Ok(None) => {
            return Ok(Fetched::Skip(format!(
                "GitHub reports {repo}#{number} as not merged"
            )))
        }
        Err(e) => e,
    };
    match error {
        GraphQlError::RepositoryNotFound { .. } => Ok(Fetched::Unseen(error.to_string())),
        GraphQlError::PullRequestNotFound { .. } => Ok(Fetched::Skip(error.to_string())),
        GraphQlError::Unauthorized { .. } | GraphQlError::Refused { status: 403, .. } => {
            Ok(Fetched::Skip(format!("{error}. {TOKEN_ADVICE}")))
        }
        GraphQlError::RateLimited { wait, .. } => Ok(Fetched::Defer(now_utc() + wait)),
        // An Enterprise Server whose schema lacks a field refuses the whole query; a server (or
        // proxy) without the GraphQL endpoint answers 4xx for it.
        GraphQlError::Query { .. } | GraphQlError::Refused { .. } => {
            tracing::info!(repo = %repo, pr = number, error = %error, "GraphQL refused the query; using REST for this PR");
            rest_fetch(
                &github.rest,
                repo,
                number,
                body,
                github.issue_scope,
                deadline,
            )
            .await
        }
        other => Err(other.into()),
    }
}

pub(super) const TOKEN_ADVICE: &str = "Give the token read access to the repository's contents and pull requests (or replace it): later PRs are enriched, this one is summarized without enrichment";

/// The PR by number, then its further files, each call retried on transient failures.
pub(super) async fn graphql_fetch(
    github: &GitHubApis,
    repo: &RepoName,
    number: u64,
    deadline: Instant,
) -> Result<Option<Enrichment>, GraphQlError> {
    let mut attempt = 0;
    let mut pull = loop {
        match github.graphql.pull(repo, number, Some(deadline)).await {
            Ok((Some(pull), _)) => break pull,
            Ok((None, _)) => return Ok(None),
            Err(e) => transient_pause(e, &mut attempt, github.max_retries, deadline).await?,
        }
    };
    let mut attempt = 0;
    while pull.more_files.is_some() {
        match github
            .graphql
            .remaining_files(&mut pull, Some(deadline))
            .await
        {
            Ok(_) => break,
            Err(e) => transient_pause(e, &mut attempt, github.max_retries, deadline).await?,
        }
    }
    Ok(Some(Enrichment {
        totals: pull.totals,
        files: pull.files,
        linked_issues: issues_in_scope(github.issue_scope, repo, pull.linked_issues),
        reviewers: pull.reviewers,
    }))
}

/// Waits before retrying a transient failure (full jitter), or gives the error back when it is
/// not transient, the retries are spent or the wait would pass the deadline.
pub(super) async fn transient_pause(
    error: GraphQlError,
    attempt: &mut u32,
    retries: u32,
    deadline: Instant,
) -> Result<(), GraphQlError> {
    if !matches!(error, GraphQlError::Transient { .. }) || *attempt >= retries {
        return Err(error);
    }
    let wait = crate::backoff::full_jitter(Duration::from_millis(500), *attempt);
    if Instant::now() + wait + Duration::from_secs(1) >= deadline {
        return Err(error);
    }
    tracing::info!(error = %error, wait_ms = wait.as_millis() as u64, "GitHub GraphQL: retrying");
    tokio::time::sleep(wait).await;
    *attempt += 1;
    Ok(())
}

/// The REST requests for one PR, and what their failures mean.
pub(super) async fn rest_fetch(
    github: &GitHubClient,
    repo: &RepoName,
    number: u64,
    body: &str,
    scope: IssueScope,
    deadline: Instant,
) -> Result<Fetched, EnrichError> {
    match fetch_rest(github, repo, number, body, scope, deadline).await {
        Ok(enrichment) => Ok(Fetched::Enriched(enrichment)),
        Err(GitHubError::Gone { status, path }) if path.ends_with(&format!("/pulls/{number}")) => {
            Ok(Fetched::Skip(format!("GitHub answered {status} for {path}: the pull request is gone or the token lost access")))
        }
        Err(GitHubError::RateLimited { wait, .. }) => Ok(Fetched::Defer(now_utc() + wait)),
        Err(e @ GitHubError::Refused { status: 401 | 403, .. }) => {
            Ok(Fetched::Skip(format!("{e}. {TOKEN_ADVICE}")))
        }
        Err(e) => Err(e.into()),
    }
}

/// The REST requests for one PR: totals, files (paginated), each linked issue.
pub async fn fetch_rest(
    github: &GitHubClient,
    repo: &RepoName,
    number: u64,
    body: &str,
    scope: IssueScope,
    deadline: Instant,
) -> Result<Enrichment, GitHubError> {
    let totals = github.pull_totals(repo, number, deadline).await?;
    let files = github.pull_files(repo, number, deadline).await?;
    let mut linked_issues = Vec::new();
    for (issue_repo, issue_number) in closing_references(body, repo, scope, MAX_LINKED_ISSUES) {
        if let Some(issue) = github.issue(&issue_repo, issue_number, deadline).await? {
            linked_issues.push(issue);
        }
    }
    Ok(Enrichment {
        totals,
        files,
        linked_issues,
        reviewers: Vec::new(),
    })
}
