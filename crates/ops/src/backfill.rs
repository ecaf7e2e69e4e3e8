//! `chronicle backfill OWNER/REPO`: the operator side of the backfill stage. Finds the tables
//! (a deployed stack's outputs with `--stack`, or the local stack through `AWS_ENDPOINT_URL`),
//! the token (`GITHUB_TOKEN`, or the stack's secret), shows progress, and prints a summary.
//!
//! Exit status: 0 done, 1 failed (run again to resume), 2 bad input found before any write.

use stages::secret::Resolve;
use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

use aws_config::SdkConfig;
use stages::backfill::{Backfill, BackfillError, BackfillOptions, BackfillReport, Progress};
use stages::config::TableConfig;
use stages::domain::RepoName;
use stages::github::graphql::GraphQlClient;
use stages::secret::{Secret, SecretSource};
use stages::store::{CheckpointStore, PrStore};
use time::OffsetDateTime;

use crate::stack::Stack;

pub const EXIT_FAILED: u8 = 1;
pub const EXIT_USAGE: u8 = 2;

/// What the command line asked for.
#[derive(Debug, Clone, Default)]
pub struct BackfillArgs {
    pub repo: String,
    pub since: Option<String>,
    pub until: Option<String>,
    pub limit: Option<u64>,
    pub stack: Option<String>,
    pub page_size: u32,
    pub reserve_points: u64,
    pub restart: bool,
    /// Every repository of the App's installation on this organisation or user account
    /// (instead of `repo`).
    pub org: Option<String>,
    /// Every repository of this installation of the App.
    pub installation: Option<u64>,
    /// With `org` or `installation`: only the repositories matching one of these globs.
    pub repos: Vec<String>,
}

/// Where the rows go and how GitHub is reached.
pub struct Target {
    pub sdk: SdkConfig,
    pub table: TableConfig,
    pub pages_table: String,
    pub api_url: String,
    pub token: Option<Secret>,
    /// A GitHub App's id and private key (PEM): installation tokens instead of `token`.
    pub app: Option<(String, Secret)>,
    pub max_paths: usize,
    /// Where linked issues may be (`LINKED_ISSUES_SCOPE`, or the stack's `LinkedIssuesScope`).
    pub issue_scope: stages::domain::IssueScope,
}

impl Target {
    /// `tables` on the stack at `sdk`, GitHub as the environment says: `GITHUB_API_URL`
    /// (default api.github.com), `GITHUB_TOKEN`, `ENRICH_MAX_PATHS` (default 500).
    pub fn from_env(sdk: SdkConfig, table: TableConfig, pages_table: String) -> Target {
        Target {
            sdk,
            table,
            pages_table,
            api_url: env(stages::config::GITHUB_API_URL)
                .unwrap_or_else(|| stages::github::DEFAULT_API_URL.to_string()),
            token: env(stages::config::GITHUB_TOKEN).map(Secret::new),
            app: env(stages::config::GITHUB_APP_ID)
                .zip(env(stages::config::GITHUB_APP_PRIVATE_KEY).map(Secret::new)),
            max_paths: env(stages::config::ENRICH_MAX_PATHS)
                .and_then(|v| v.parse().ok())
                .unwrap_or(500),
            // An invalid value is refused earlier, by `options`, with the same parser.
            issue_scope: stages::config::issue_scope(&env).unwrap_or_default(),
        }
    }
}

fn env(k: &str) -> Option<String> {
    std::env::var(k).ok().filter(|v| !v.is_empty())
}

#[derive(Debug, thiserror::Error)]
pub enum UsageError {
    #[error("{0}")]
    Bad(String),
    #[error(transparent)]
    Stack(#[from] crate::stack::StackError),
}

/// `2024-01-31` (a whole day: from its start for `--since`, to its end for `--until`) or RFC 3339.
pub fn parse_date(value: &str, end_of_day: bool) -> Result<OffsetDateTime, UsageError> {
    use time::format_description::well_known::Rfc3339;
    if let Ok(t) = OffsetDateTime::parse(value, &Rfc3339) {
        return Ok(t);
    }
    let format = time::macros::format_description!("[year]-[month]-[day]");
    let date = time::Date::parse(value, &format).map_err(|_| {
        UsageError::Bad(format!(
            "{value:?} is not a date: use YYYY-MM-DD or an RFC 3339 time such as 2024-01-31T12:00:00Z"
        ))
    })?;
    let time = if end_of_day {
        time::Time::from_hms(23, 59, 59).expect("a valid time")
    } else {
        time::Time::MIDNIGHT
    };
    Ok(date.with_time(time).assume_utc())
}

/// The options, checked before anything is fetched or written.
pub fn options(args: &BackfillArgs, max_paths: usize) -> Result<BackfillOptions, UsageError> {
    let repo = RepoName::parse(&args.repo)
        .map_err(|e| UsageError::Bad(format!("{:?} is not OWNER/REPO: {e}", args.repo)))?;
    let mut options = BackfillOptions::new(repo);
    options.since = args
        .since
        .as_deref()
        .map(|s| parse_date(s, false))
        .transpose()?;
    options.until = args
        .until
        .as_deref()
        .map(|s| parse_date(s, true))
        .transpose()?;
    options.limit = args.limit;
    options.page_size = args.page_size;
    options.reserve_points = args.reserve_points;
    options.restart = args.restart;
    options.max_paths = max_paths;
    // Checked here, before anything runs; the target reads it (or the stack's setting).
    stages::config::issue_scope(&env).map_err(|e| UsageError::Bad(e.to_string()))?;
    options
        .validate()
        .map_err(|e| UsageError::Bad(e.to_string()))?;
    Ok(options)
}

/// The local stack (`AWS_ENDPOINT_URL`), or a deployed one (`--stack`), with the token that
/// reads (`GitHubTokenSecretArn`).
pub async fn target(stack: Option<&str>) -> Result<Target, UsageError> {
    target_with(stack, &["GitHubTokenSecretArn"]).await
}

/// [`target`] with the token redelivery uses: the stack's `RedeliverTokenSecretArn` when set,
/// else the reading one.
pub async fn redelivery_target(stack: Option<&str>) -> Result<Target, UsageError> {
    target_with(stack, &["RedeliverTokenSecretArn", "GitHubTokenSecretArn"]).await
}

/// The target, its token from the first of `token_parameters` the stack sets (unless
/// `GITHUB_TOKEN` is set); its GitHub URL must be https (a token is never sent in clear text
/// off the loopback interface).
async fn target_with(stack: Option<&str>, token_parameters: &[&str]) -> Result<Target, UsageError> {
    let target = target_of(stack, token_parameters).await?;
    stages::http::check_secure(&target.api_url).map_err(|e| UsageError::Bad(e.to_string()))?;
    Ok(target)
}

async fn target_of(stack: Option<&str>, token_parameters: &[&str]) -> Result<Target, UsageError> {
    match stack {
        Some(name) => {
            let sdk = stages::aws::sdk_config().await;
            let stack = Stack::load(&sdk, name).await?;
            let (table, pages_table) = stack.tables()?;
            let mut target = Target::from_env(sdk, table, pages_table);
            if let Some(url) = stack.parameter("GitHubApiUrl") {
                target.api_url = url.to_string();
            }
            if let Some(scope) = stack
                .parameter("LinkedIssuesScope")
                .and_then(stages::domain::IssueScope::parse)
            {
                target.issue_scope = scope;
            }
            if let (None, Some(id), Some(arn)) = (
                &target.app,
                stack
                    .parameter("GitHubAppId")
                    .filter(|v| !v.trim().is_empty()),
                stack
                    .parameter("GitHubAppPrivateKeySecretArn")
                    .filter(|v| !v.trim().is_empty()),
            ) {
                let key = SecretSource::SecretsManager(arn.to_string())
                    .resolve(&target.sdk)
                    .await
                    .map_err(|e| UsageError::Bad(e.to_string()))?;
                target.app = key.map(|k| (id.to_string(), k));
            }
            if target.token.is_none() {
                let arn = token_parameters
                    .iter()
                    .find_map(|p| stack.parameter(p).filter(|v| !v.trim().is_empty()));
                if let Some(arn) = arn {
                    target.token = SecretSource::SecretsManager(arn.to_string())
                        .resolve(&target.sdk)
                        .await
                        .map_err(|e| UsageError::Bad(e.to_string()))?;
                }
            }
            Ok(target)
        }
        None => {
            let Some(endpoint) = env("AWS_ENDPOINT_URL") else {
                return Err(UsageError::Bad(
                    "no stack to write to: pass --stack NAME for a deployed stack, or set AWS_ENDPOINT_URL to the local stack's emulator (`chronicle dev` prints it; `chronicle dev --backfill OWNER/REPO` runs the backfill inside it)".into(),
                ));
            };
            let sdk = crate::stack::local_sdk_config(&endpoint).await;
            let (table, pages_table) = crate::stack::local_tables();
            Ok(Target::from_env(sdk, table, pages_table))
        }
    }
}

/// Runs the backfill against `target`, printing progress to stderr and the summary to stdout.
/// Refreshes the repository's stored context before an import; a failure is reported and the
/// import goes on (its PRs are then tagged without the context, by top-level directory).
pub(crate) async fn context_first(
    target: &Target,
    rest: &stages::github::GitHubClient,
    repo: &stages::domain::RepoName,
    client: aws_sdk_dynamodb::Client,
) {
    let contexts = stages::store::ContextStore::new(client, target.pages_table.clone());
    let deadline = std::time::Instant::now() + Duration::from_secs(300);
    match stages::enrich::refresh_repo_context(
        &contexts,
        rest,
        repo,
        time::OffsetDateTime::now_utc(),
        deadline,
    )
    .await
    {
        Ok(stages::enrich::ContextRefresh::Stored {
            packages,
            codeowners,
        }) => eprintln!(
            "repository context: {packages} workspace packages, CODEOWNERS {}",
            codeowners.as_deref().unwrap_or("none")
        ),
        Ok(_) => {}
        Err(e) => eprintln!(
            "repository context: not refreshed ({e}); PRs are tagged without it (by top-level directory)"
        ),
    }
}

pub async fn run_with(
    args: &BackfillArgs,
    target: &Target,
) -> Result<BackfillReport, (u8, String)> {
    let mut options = options(args, target.max_paths).map_err(|e| (EXIT_USAGE, e.to_string()))?;
    options.issue_scope = target.issue_scope;
    // A token when there is one (a trial, one repository); else the App's installation on the
    // repository, found with the App's JWT.
    let auth = match (&target.token, &target.app) {
        (Some(token), _) => stages::github::installation::Auth::Token(token.clone()),
        (None, Some((app_id, key))) => {
            let credentials = stages::github::app::AppCredentials::new(app_id, key)
                .map_err(|e| (EXIT_USAGE, e.to_string()))?;
            let app = Arc::new(
                stages::github::installation::AppClient::new(
                    &target.api_url,
                    credentials,
                    Duration::from_secs(30),
                )
                .map_err(|e| (EXIT_FAILED, format!("building the HTTP client failed: {e}")))?,
            );
            let id = app
                .installation_of(options.repo.as_str())
                .await
                .map_err(|e| (EXIT_FAILED, e.to_string()))?;
            stages::github::installation::Auth::Installation { app, id }
        }
        (None, None) => {
            return Err((
                EXIT_USAGE,
                "no GitHub credentials: set GITHUB_TOKEN (read-only Contents and Pull requests) or GITHUB_APP_ID and GITHUB_APP_PRIVATE_KEY, or deploy the stack with GitHubTokenSecretArn or the App".into(),
            ))
        }
    };
    let progress = Arc::new(Terminal::new(std::io::stderr().is_terminal()));
    let notice = progress.clone();
    let github = GraphQlClient::with_auth(&target.api_url, auth.clone(), Duration::from_secs(30))
        .map_err(|e| (EXIT_FAILED, format!("building the HTTP client failed: {e}")))?
        .with_wait_notice(Arc::new(move |wait, why| notice.waiting(wait, why)));
    let client = aws_sdk_dynamodb::Client::new(&target.sdk);
    let store = PrStore::new(client.clone(), target.table.clone());
    let checkpoints = CheckpointStore::new(client.clone(), target.pages_table.clone());
    // Found and readable, under GitHub's own spelling, before anything is written (the context
    // refresh below would store a context for a repository that does not exist).
    if let Err(e) = github.repository(&options.repo, None).await {
        return Err(backfill_error(BackfillError::GitHub(e)));
    }
    // The repository's context first (CODEOWNERS, workspace packages, READMEs): the imported
    // history is then tagged with it from its first PR, as new PRs will be.
    match stages::github::GitHubClient::with_auth(&target.api_url, auth, Duration::from_secs(30), 3)
    {
        Ok(rest) => context_first(target, &rest, &options.repo, client.clone()).await,
        Err(e) => eprintln!("repository context: not read (building the HTTP client failed: {e})"),
    }
    let backfill = Backfill {
        github: &github,
        store: &store,
        checkpoints: &checkpoints,
    };
    let result = backfill.run(&options, progress.as_ref()).await;
    progress.finish();
    result.map_err(backfill_error)
}

/// The exit code and message of a failed backfill.
fn backfill_error(e: BackfillError) -> (u8, String) {
    let code = if e.is_usage() {
        EXIT_USAGE
    } else {
        EXIT_FAILED
    };
    let hint = match &e {
        BackfillError::GitHub(stages::github::graphql::GraphQlError::RepositoryNotFound {
            ..
        }) => " (for a private repository the token needs read access to it)",
        _ => "",
    };
    (code, format!("{e}{hint}"))
}

/// The command: resolves the target, runs, prints; the exit status.
pub async fn run(args: BackfillArgs) -> u8 {
    // Bad dates or names are reported before the stack is even looked up.
    if let Err(e) = options(&args, 500) {
        eprintln!("chronicle backfill: {e}");
        return EXIT_USAGE;
    }
    let target = match target(args.stack.as_deref()).await {
        Ok(t) => t,
        Err(e) => {
            eprintln!("chronicle backfill: {e}");
            return EXIT_USAGE;
        }
    };
    match run_with(&args, &target).await {
        Ok(report) => {
            println!("{}", summary(&args.repo, &report));
            0
        }
        Err((code, message)) => {
            eprintln!("chronicle backfill: {message}");
            code
        }
    }
}

/// The closing lines.
pub fn summary(repo: &str, r: &BackfillReport) -> String {
    let per_thousand = |v: u64| {
        let prs = r.imported + r.updated + r.unchanged;
        if prs == 0 {
            0.0
        } else {
            v as f64 * 1000.0 / prs as f64
        }
    };
    format!(
        "backfill {repo}: {} imported, {} updated, {} already present (nothing written), {} outside the window{}\n\
         GitHub: {} points ({:.0} per 1,000 PRs), {} requests, {} pages{}; {:.1} s{}",
        r.imported,
        r.updated,
        r.unchanged,
        r.outside_window,
        if r.resumed { " (resumed from the checkpoint)" } else { "" },
        r.points,
        per_thousand(r.points),
        r.requests,
        r.pages,
        r.last_rate
            .as_ref()
            .map(|l| format!(", {} of {} points left this hour", l.remaining, l.limit))
            .unwrap_or_default(),
        r.elapsed.as_secs_f64(),
        if r.waited.is_zero() {
            String::new()
        } else {
            format!(" (of which {:.0} s waiting for rate limits)", r.waited.as_secs_f64())
        },
    )
}

/// A progress bar on a terminal, one line per page otherwise.
pub(crate) struct Terminal {
    bar: Option<indicatif::ProgressBar>,
}

impl Terminal {
    pub(crate) fn new(tty: bool) -> Self {
        Self::within(tty, None)
    }

    /// A bar drawn under the others of `multi` (an organisation's bar over its repositories).
    pub(crate) fn within(tty: bool, multi: Option<&indicatif::MultiProgress>) -> Self {
        let bar = tty.then(|| {
            let bar = indicatif::ProgressBar::new(0);
            let bar = match multi {
                Some(multi) => multi.add(bar),
                None => bar,
            };
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} PRs · {msg} · ETA {eta}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            bar
        });
        Terminal { bar }
    }

    pub(crate) fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

impl Progress for Terminal {
    fn page(&self, r: &BackfillReport) {
        let seen = r.imported + r.updated + r.unchanged + r.outside_window;
        let rate = r
            .last_rate
            .as_ref()
            .map(|l| format!("{} points left", l.remaining))
            .unwrap_or_default();
        match &self.bar {
            Some(bar) => {
                bar.set_length(r.total);
                bar.set_position(seen);
                bar.set_message(format!(
                    "{} imported, {} present, {} points spent, {rate}",
                    r.imported, r.unchanged, r.points
                ));
            }
            None => eprintln!(
                "page {}: {seen}/{} merged PRs seen, {} imported, {} updated, {} present; {} points spent, {rate}",
                r.pages, r.total, r.imported, r.updated, r.unchanged, r.points
            ),
        }
    }

    fn waiting(&self, wait: Duration, why: &str) {
        let line = format!("{why}: waiting {:.0} s", wait.as_secs_f64());
        match &self.bar {
            Some(bar) => bar.set_message(line),
            None => eprintln!("{line}"),
        }
    }
}
