//! `redeliver` from the command line: one run of the redelivery stage.

use super::*;
use stages::secret::Resolve;

/// `redeliver`: one run of the redelivery stage from the CLI, against a deployed stack (its
/// tables, its GitHub URL and token secret unless `GITHUB_TOKEN` is set) or the local stack.
/// Exit 0 when nothing needed attention, 1 when a hook could not be read or GitHub refused a
/// redelivery, 2 for bad usage (no stack, no token).
pub async fn run_redeliver(stack: Option<&str>, dry_run: bool, json: bool) -> u8 {
    let target = match crate::backfill::redelivery_target(stack).await {
        Ok(t) => t,
        Err(e) => {
            eprintln!("chronicle redeliver: {e}");
            return target_error_code(&e);
        }
    };
    let timeout = std::time::Duration::from_secs(10);
    let github = match &target.token {
        Some(token) => {
            match stages::github::GitHubClient::new(&target.api_url, token, timeout, 3) {
                Ok(g) => Some(g),
                Err(e) => {
                    eprintln!("chronicle redeliver: {e}");
                    return EXIT_FAILED;
                }
            }
        }
        None => None,
    };
    // A GitHub App's hook: GITHUB_APP_ID and GITHUB_APP_PRIVATE_KEY (or …_ARN, …_PARAM).
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    let app_key = stages::secret::SecretSource::from_vars(
        env(stages::config::GITHUB_APP_PRIVATE_KEY),
        env(stages::config::GITHUB_APP_PRIVATE_KEY_ARN),
        env(stages::config::GITHUB_APP_PRIVATE_KEY_PARAM),
    );
    let app = match (
        env(stages::config::GITHUB_APP_ID),
        app_key.resolve(&target.sdk).await,
    ) {
        (Some(id), Ok(Some(key))) => match stages::github::app::AppCredentials::new(&id, &key) {
            Ok(credentials) => Some(stages::redeliver::AppAccess {
                credentials,
                api_url: target.api_url.clone(),
                timeout,
                max_retries: 3,
            }),
            Err(e) => {
                eprintln!("chronicle redeliver: {e}");
                return EXIT_USAGE;
            }
        },
        (_, Err(e)) => {
            eprintln!("chronicle redeliver: {e}");
            return EXIT_FAILED;
        }
        _ => None,
    };
    if github.is_none() && app.is_none() {
        eprintln!(
            "chronicle redeliver: {}",
            stages::redeliver::RedeliverError::NoToken
        );
        return EXIT_USAGE;
    }
    let dynamo = aws_sdk_dynamodb::Client::new(&target.sdk);
    let mut redeliverer = stages::redeliver::Redeliverer::new(
        github,
        stages::store::HookStore::new(dynamo.clone(), &target.pages_table),
        PrStore::new(dynamo, target.table.clone()),
        REDELIVER_MAX,
    );
    if let Some(app) = app {
        redeliverer = redeliverer.with_app(app);
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(600);
    let report = match redeliverer
        .run(time::OffsetDateTime::now_utc(), deadline, dry_run)
        .await
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("chronicle redeliver: {e}");
            return EXIT_FAILED;
        }
    };
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).unwrap_or_default()
        );
    } else {
        print!("{}", render_redeliver(&report));
    }
    if report.problems.is_empty() {
        0
    } else {
        EXIT_FAILED
    }
}

/// Redeliveries one CLI run asks for at most.
const REDELIVER_MAX: usize = 500;

pub fn render_redeliver(report: &stages::redeliver::RedeliverReport) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let verb = if report.dry_run {
        "would redeliver"
    } else {
        "redelivered"
    };
    let _ = writeln!(
        out,
        "{} hooks, {} delivery attempts listed, {} failed pull_request deliveries in GitHub's 3-day window",
        report.hooks, report.listed, report.failed
    );
    let _ = writeln!(
        out,
        "  {} already stored, {} asked before, {} not merged; {verb} {}",
        report.already_stored,
        report.already_asked,
        report.not_merged,
        report.redelivered.len()
    );
    for r in &report.redelivered {
        let _ = writeln!(
            out,
            "  {verb} {}#{} (delivery {}, {}, {})",
            r.repo, r.pr, r.guid, r.delivered_at, r.hook
        );
    }
    for p in &report.problems {
        let _ = writeln!(out, "  problem: {}: {}", p.hook, p.message);
    }
    if let Some(why) = &report.stopped {
        let _ = writeln!(out, "  stopped early: {why}");
    }
    out
}
