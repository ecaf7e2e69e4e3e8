//! `reprocess` and `rebuild`: rows summarized again, pages built again in full.

use super::*;

/// One row `reprocess` names or found.
#[derive(Debug, Clone, serde::Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ReprocessLine {
    pub repo: String,
    pub number: u64,
    /// `pending` (done), `busy` (a worker holds it), or `wouldReprocess` (`--dry-run`).
    pub outcome: String,
}

/// `OWNER/REPO#N`.
pub fn parse_pr(arg: &str) -> Result<(RepoName, u64), UsageError> {
    let bad = || UsageError::Bad(format!("{arg:?} is not OWNER/REPO#NUMBER"));
    let (repo, number) = arg.rsplit_once('#').ok_or_else(bad)?;
    let number: u64 = number.parse().ok().filter(|n| *n > 0).ok_or_else(bad)?;
    let repo = RepoName::parse(repo).map_err(|_| bad())?;
    Ok((repo, number))
}

/// `reprocess`: the named PRs, or the given-up ones (`failed`, of `repo`, given up at or after
/// `since`). Every named PR is checked first: a malformed or unknown one is a usage error and
/// nothing is changed.
pub async fn reprocess(
    target: &OpsTarget,
    prs_named: &[String],
    failed: bool,
    repo: Option<&str>,
    since: Option<&str>,
    new_summary: bool,
    dry_run: bool,
) -> Result<Vec<ReprocessLine>, (u8, String)> {
    let usage = |e: UsageError| (EXIT_USAGE, e.to_string());
    if failed != prs_named.is_empty() {
        return Err((
            EXIT_USAGE,
            "name the PRs (OWNER/REPO#N …) or pass --failed, not both and not neither".into(),
        ));
    }
    if !failed && (repo.is_some() || since.is_some()) {
        return Err((
            EXIT_USAGE,
            "--repo and --since select given-up rows: use them with --failed".into(),
        ));
    }
    let since = since
        .map(|s| crate::backfill::parse_date(s, false))
        .transpose()
        .map_err(usage)?;
    let repo = repo_arg(repo).map_err(usage)?;
    let (prs, _, _) = target.stores();
    let mut chosen: Vec<(RepoName, u64)> = Vec::new();
    if failed {
        for row in prs
            .failed_rows(repo.as_ref().map(RepoName::as_str))
            .await
            .map_err(|e| (EXIT_FAILED, e.to_string()))?
        {
            let recent = since.is_none_or(|s| {
                stages::domain::parse_rfc3339(&row.failed_at).is_some_and(|t| t >= s)
            });
            if recent {
                let name = RepoName::parse(&row.repo).map_err(|e| (EXIT_FAILED, e.to_string()))?;
                chosen.push((name, row.number));
            }
        }
    } else {
        for arg in prs_named {
            chosen.push(parse_pr(arg).map_err(usage)?);
        }
        for (repo, number) in &chosen {
            if prs
                .get(repo, *number)
                .await
                .map_err(|e| (EXIT_FAILED, e.to_string()))?
                .is_none()
            {
                return Err((
                    EXIT_USAGE,
                    format!("{repo}#{number} is not in the table (nothing was changed)"),
                ));
            }
        }
    }
    if !dry_run {
        target
            .guard
            .check("reprocess", "PRs", chosen.len() as u64)?;
    }
    let mut lines = Vec::with_capacity(chosen.len());
    let bar = crate::progress::Bar::with_len(chosen.len() as u64, "PRs");
    for (repo, number) in chosen {
        bar.inc();
        let outcome = if dry_run {
            "wouldReprocess".to_string()
        } else {
            match prs
                .reprocess(&repo, number, new_summary, time::OffsetDateTime::now_utc())
                .await
                .map_err(|e| (EXIT_FAILED, e.to_string()))?
            {
                stages::store::Reprocessed::Pending => "pending".into(),
                stages::store::Reprocessed::Busy => "busy".into(),
                stages::store::Reprocessed::Missing => "missing".into(),
            }
        };
        lines.push(ReprocessLine {
            repo: repo.to_string(),
            number,
            outcome,
        });
    }
    bar.finish();
    Ok(lines)
}

/// `rebuild`: marks a repository's module pages (or one of them) for a full rebuild; the page
/// builder does the rest. Returns the pages marked (or that would be, with `dry_run`).
pub async fn rebuild(
    target: &OpsTarget,
    repo: &str,
    module: Option<&str>,
    dry_run: bool,
) -> Result<Vec<String>, (u8, String)> {
    let repo = repo_arg(Some(repo))
        .map_err(|e| (EXIT_USAGE, e.to_string()))?
        .expect("a repository was given");
    let (_, pages, _) = target.stores();
    let items = pages
        .repo_pages(repo.as_str())
        .await
        .map_err(|e| (EXIT_FAILED, e.to_string()))?;
    let modules: Vec<String> = items
        .into_iter()
        .map(|p| p.module)
        .filter(|m| !m.starts_with('#') && module.is_none_or(|wanted| wanted == m))
        .collect();
    if modules.is_empty() {
        return Err((
            EXIT_USAGE,
            match module {
                Some(m) => format!("{repo} has no page for module {m:?} (nothing was changed)"),
                None => format!("{repo} has no pages (nothing was changed)"),
            },
        ));
    }
    if !dry_run {
        target
            .guard
            .check("rebuild", "module pages", modules.len() as u64)?;
        let now = time::OffsetDateTime::now_utc();
        for m in &modules {
            pages
                .mark_full_rebuild(repo.as_str(), m, now)
                .await
                .map_err(|e| (EXIT_FAILED, e.to_string()))?;
        }
    }
    Ok(modules)
}

/// What `chronicle reprocess` was asked.
#[derive(Debug, Clone, Default)]
pub struct ReprocessArgs {
    pub prs: Vec<String>,
    pub failed: bool,
    pub repo: Option<String>,
    pub since: Option<String>,
    pub new_summary: bool,
    pub dry_run: bool,
    /// Go ahead on a deployed stack without asking.
    pub yes: bool,
}

/// The CLI's `reprocess`: prints, and returns the exit code (1 if a row was busy).
pub async fn run_reprocess(stack: Option<&str>, args: &ReprocessArgs, json: bool) -> u8 {
    let target = match resolve_confirmed("reprocess", stack, args.yes).await {
        Ok(t) => t,
        Err(code) => return code,
    };
    let result = reprocess(
        &target,
        &args.prs,
        args.failed,
        args.repo.as_deref(),
        args.since.as_deref(),
        args.new_summary,
        args.dry_run,
    )
    .await;
    match result {
        Ok(lines) => {
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&lines).unwrap_or_default()
                );
            } else if lines.is_empty() {
                println!("nothing to reprocess");
            } else {
                for l in &lines {
                    println!("{}#{}  {}", l.repo, l.number, l.outcome);
                }
            }
            u8::from(lines.iter().any(|l| l.outcome == "busy"))
        }
        Err((code, message)) => {
            eprintln!("chronicle reprocess: {message}");
            code
        }
    }
}

/// The CLI's `rebuild`: prints, and returns the exit code.
pub async fn run_rebuild(
    stack: Option<&str>,
    repo: &str,
    module: Option<&str>,
    dry_run: bool,
    yes: bool,
    json: bool,
) -> u8 {
    let target = match resolve_confirmed("rebuild", stack, yes).await {
        Ok(t) => t,
        Err(code) => return code,
    };
    match rebuild(&target, repo, module, dry_run).await {
        Ok(modules) => {
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&modules).unwrap_or_default()
                );
            } else {
                let verb = if dry_run {
                    "would rebuild"
                } else {
                    "marked for rebuild"
                };
                for m in &modules {
                    println!("{repo} · {m}  {verb}");
                }
            }
            0
        }
        Err((code, message)) => {
            eprintln!("chronicle rebuild: {message}");
            code
        }
    }
}
