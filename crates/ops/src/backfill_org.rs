//! `chronicle backfill --org ORG` (or `--installation ID`): every repository a GitHub App
//! installation can see, imported one after another, oldest PRs first, through the App's
//! installation token. `ORG` is an organisation or a user account; with both, the
//! installation must be that account's.
//!
//! - One GraphQL client for the whole run: the installation's points are one budget, read from
//!   every answer, and no repository's import eats into the reserve.
//! - Each repository keeps its own checkpoint, so a stopped run resumes where each stood, and a
//!   second run writes nothing.
//! - Archived and empty repositories are skipped and reported; `--repos` filters by glob.
//! - The token is minted per installation, renewed before it expires and again when GitHub
//!   refuses it, so an import longer than the token's hour never fails a PR for it.

use std::sync::Arc;
use std::time::Duration;

use stages::backfill::{Backfill, BackfillReport};
use stages::github::graphql::GraphQlClient;
use stages::github::installation::{AppClient, Auth, InstallationError, InstalledRepo};
use stages::store::{CheckpointStore, PrStore};

use crate::backfill::Terminal;
use crate::backfill::{BackfillArgs, Target, EXIT_FAILED, EXIT_USAGE};

/// What an organisation's run did, per repository.
#[derive(Debug, Default)]
pub struct OrgReport {
    pub installation: u64,
    /// Imported (or already there), by repository, in the order they ran.
    pub done: Vec<(String, BackfillReport)>,
    /// Failed (resumable), with why.
    pub failed: Vec<(String, String)>,
    /// Not imported, with why (archived, not matched by `--repos`, or empty: no merged PR).
    pub skipped: Skipped,
    /// Installation tokens minted, and of those after GitHub refused one.
    pub tokens_minted: u64,
    pub tokens_refreshed: u64,
}

/// Repositories left out, each with why.
pub type Skipped = Vec<(String, String)>;

/// The repositories to import, and those left out with why.
pub fn choose(
    repos: Vec<InstalledRepo>,
    patterns: &[String],
) -> Result<(Vec<InstalledRepo>, Skipped), String> {
    let mut builder = globset::GlobSetBuilder::new();
    for p in patterns {
        builder.add(
            globset::GlobBuilder::new(p)
                .literal_separator(true)
                .build()
                .map_err(|e| format!("--repos {p:?}: {e}"))?,
        );
    }
    let globs = builder.build().map_err(|e| e.to_string())?;
    let mut chosen = Vec::new();
    let mut skipped = Vec::new();
    for r in repos {
        let name = r.full_name.clone();
        let short = name.split_once('/').map(|(_, n)| n).unwrap_or(&name);
        if !patterns.is_empty() && !globs.is_match(&name) && !globs.is_match(short) {
            skipped.push((name, "not matched by --repos".into()));
        } else if r.archived {
            skipped.push((name, "archived".into()));
        } else {
            chosen.push(r);
        }
    }
    chosen.sort_by(|a, b| a.full_name.cmp(&b.full_name));
    Ok((chosen, skipped))
}

/// The App's installation on `account`: an organisation's (`GET /orgs/{org}/installation`),
/// else, on GitHub's 404 there, a user's (`GET /users/{username}/installation`).
async fn account_installation(app: &AppClient, account: &str) -> Result<u64, (u8, String)> {
    match app.org_installation(account).await {
        Err(InstallationError::NotInstalled(_)) => app.user_installation(account).await,
        found => found,
    }
    .map_err(|e| (EXIT_FAILED, e.to_string()))
}

/// `--org` and `--installation` together must name one account: the installation's own
/// (GitHub's logins are case-insensitive). Otherwise it is a usage error, before anything is
/// read from the repositories or written.
async fn same_account(app: &AppClient, account: &str, id: u64) -> Result<(), (u8, String)> {
    let installations = app
        .installations()
        .await
        .map_err(|e| (EXIT_FAILED, e.to_string()))?;
    match installations.iter().find(|i| i.id == id) {
        Some(i) if i.account.login.eq_ignore_ascii_case(account) => Ok(()),
        Some(i) => Err((
            EXIT_USAGE,
            format!(
                "--installation {id} is the App's installation on {}, not on {account} (--org): name one of them, or both of one account",
                i.account.login
            ),
        )),
        None => Err((
            EXIT_USAGE,
            format!(
                "--installation {id} is not one of the App's installations, so not {account}'s (--org): name one of them, or both of one account"
            ),
        )),
    }
}

/// Runs the import of every repository the installation sees.
pub async fn run_org(args: &BackfillArgs, target: &Target) -> Result<OrgReport, (u8, String)> {
    let Some((app_id, key)) = &target.app else {
        return Err((
            EXIT_USAGE,
            "--org and --installation need the GitHub App: set GITHUB_APP_ID and GITHUB_APP_PRIVATE_KEY, or deploy the stack with GitHubAppId and GitHubAppPrivateKeySecretArn".into(),
        ));
    };
    let usage = |e: String| (EXIT_USAGE, e);
    let credentials =
        stages::github::app::AppCredentials::new(app_id, key).map_err(|e| usage(e.to_string()))?;
    let app = Arc::new(
        AppClient::new(&target.api_url, credentials, Duration::from_secs(30))
            .map_err(|e| (EXIT_FAILED, format!("building the HTTP client failed: {e}")))?,
    );
    let installation = match (&args.org, args.installation) {
        (None, Some(id)) => id,
        (Some(account), Some(id)) => {
            same_account(&app, account, id).await?;
            id
        }
        (Some(account), None) => account_installation(&app, account).await?,
        (None, None) => return Err(usage("--org ORG or --installation ID".into())),
    };
    let listed = app
        .repositories(installation)
        .await
        .map_err(|e| (EXIT_FAILED, e.to_string()))?;
    let (repos, skipped) = choose(listed, &args.repos).map_err(usage)?;
    let mut report = OrgReport {
        installation,
        skipped,
        ..Default::default()
    };
    let auth = Auth::Installation {
        app: app.clone(),
        id: installation,
    };
    let tty = std::io::IsTerminal::is_terminal(&std::io::stderr());
    // On a terminal, a bar over the repositories and, under it, the current one's over its
    // PRs (a line printed above them, not through them); otherwise a line per repository and
    // per page.
    let multi = indicatif::MultiProgress::new();
    let notices = multi.clone();
    let github = GraphQlClient::with_auth(&target.api_url, auth.clone(), Duration::from_secs(30))
        .map_err(|e| (EXIT_FAILED, format!("building the HTTP client failed: {e}")))?
        .with_wait_notice(Arc::new(move |wait, why| {
            let line = format!("waiting {:.0} s: {why}", wait.as_secs_f64());
            if !tty || notices.println(&line).is_err() {
                eprintln!("{line}");
            }
        }));
    let client = aws_sdk_dynamodb::Client::new(&target.sdk);
    let store = PrStore::new(client.clone(), target.table.clone());
    let checkpoints = CheckpointStore::new(client.clone(), target.pages_table.clone());
    let total = repos.len();
    let over_repos = tty.then(|| {
        let bar = multi.add(indicatif::ProgressBar::new(total as u64));
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "[{elapsed_precise}] {bar:30} {pos}/{len} repositories · {msg}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar
    });
    for (i, repo) in repos.iter().enumerate() {
        match &over_repos {
            Some(bar) => bar.set_message(repo.full_name.clone()),
            None => eprintln!("[{}/{total} repositories] {}", i + 1, repo.full_name),
        }
        let progress = Terminal::within(tty, Some(&multi));
        let mut one = args.clone();
        one.repo = repo.full_name.clone();
        let mut options = match crate::backfill::options(&one, target.max_paths) {
            Ok(o) => o,
            Err(e) => {
                report.failed.push((repo.full_name.clone(), e.to_string()));
                progress.finish();
                if let Some(bar) = &over_repos {
                    bar.inc(1);
                }
                continue;
            }
        };
        options.issue_scope = target.issue_scope;
        let rest = stages::github::GitHubClient::with_auth(
            &target.api_url,
            auth.clone(),
            Duration::from_secs(30),
            3,
        )
        .map_err(|e| (EXIT_FAILED, format!("building the HTTP client failed: {e}")))?;
        crate::backfill::context_first(target, &rest, &options.repo, client.clone()).await;
        let backfill = Backfill {
            github: &github,
            store: &store,
            checkpoints: &checkpoints,
        };
        let result = backfill.run(&options, &progress).await;
        progress.finish();
        match result {
            // GitHub computes `size` lazily (a new repository can show 0 with commits), so an
            // empty repository is one whose import found no merged pull request.
            Ok(r) if r.total == 0 && r.complete => report.skipped.push((
                repo.full_name.clone(),
                "empty: no merged pull requests".into(),
            )),
            Ok(r) => report.done.push((repo.full_name.clone(), r)),
            Err(e) => report.failed.push((repo.full_name.clone(), e.to_string())),
        }
        if let Some(bar) = &over_repos {
            bar.inc(1);
        }
    }
    if let Some(bar) = &over_repos {
        bar.finish_and_clear();
    }
    for h in app.health() {
        report.tokens_minted += h.minted;
        report.tokens_refreshed += h.refreshed_on_401;
    }
    Ok(report)
}

/// The command for a whole installation: checks the arguments, resolves the target, runs,
/// prints; the exit status.
pub async fn run(args: BackfillArgs) -> u8 {
    if !args.repo.is_empty() {
        eprintln!("chronicle backfill: name one OWNER/REPO, or --org ORG / --installation ID");
        return EXIT_USAGE;
    }
    // Bad dates are reported before the stack is even looked up.
    let probe = BackfillArgs {
        repo: "owner/each-repository".into(),
        ..args.clone()
    };
    if let Err(e) = crate::backfill::options(&probe, 500) {
        eprintln!("chronicle backfill: {e}");
        return EXIT_USAGE;
    }
    let target = match crate::backfill::target(args.stack.as_deref()).await {
        Ok(t) => t,
        Err(e) => {
            eprintln!("chronicle backfill: {e}");
            return EXIT_USAGE;
        }
    };
    match run_org(&args, &target).await {
        Ok(report) => {
            println!("{}", summary(&report));
            if report.failed.is_empty() {
                0
            } else {
                EXIT_FAILED
            }
        }
        Err((code, message)) => {
            eprintln!("chronicle backfill: {message}");
            code
        }
    }
}

/// The closing lines of an organisation's run.
pub fn summary(r: &OrgReport) -> String {
    let mut out = format!(
        "backfill of installation {}: {} repositories imported, {} failed, {} skipped; {} installation tokens ({} after a refusal)",
        r.installation,
        r.done.len(),
        r.failed.len(),
        r.skipped.len(),
        r.tokens_minted,
        r.tokens_refreshed
    );
    for (repo, report) in &r.done {
        out.push('\n');
        out.push_str(&crate::backfill::summary(repo, report));
    }
    for (repo, why) in &r.failed {
        out.push_str(&format!("\nfailed  {repo}: {why} (run again to resume)"));
    }
    for (repo, why) in &r.skipped {
        out.push_str(&format!("\nskipped {repo}: {why}"));
    }
    out
}
