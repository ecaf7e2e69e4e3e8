//! A real repository's merged PRs, read from a git clone (`chronicle bench quality --git DIR`):
//! the replay corpus for measuring pages on histories Chronicle never saw, without GitHub.
//!
//! Each first-parent commit that names its PR is one merged PR: a squash merge ("Title (#12)")
//! or a merge commit ("Merge pull request #12 from …", the title on the body's first line). Its
//! files and changed lines are the commit's diff against its first parent; the author's name
//! stands in for a login. Commits pushed without a PR are left out, as the webhook never sees them.

use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context};
use stages::domain::FileChange;
use time::OffsetDateTime;

use standins::synthetic::SyntheticPr;

const RECORD: char = '\u{1e}';
const FIELD: char = '\u{1f}';

/// A repository's history as PRs, oldest first, and the directories at the root of HEAD.
pub struct GitHistory {
    pub prs: Vec<SyntheticPr>,
    pub top_level: Vec<String>,
    pub end: OffsetDateTime,
}

fn git(dir: &Path, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new("git")
        .arg("--git-dir")
        .arg(dir)
        .args(args)
        .output()
        .context("running git")?;
    if !out.status.success() {
        bail!(
            "git {} in {}: {}",
            args.join(" "),
            dir.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The git directory of a clone: `DIR/.git` for a working tree, `DIR` for a bare one or a mirror.
fn git_dir(dir: &Path) -> std::path::PathBuf {
    let dot_git = dir.join(".git");
    if dot_git.exists() {
        dot_git
    } else {
        dir.to_path_buf()
    }
}

/// Reads the merged PRs of the clone at `dir` (at most the last `limit`).
pub fn read(dir: &Path, limit: Option<usize>) -> anyhow::Result<GitHistory> {
    let dir = git_dir(dir);
    let log = git(
        &dir,
        &[
            "log",
            "--first-parent",
            "--diff-merges=first-parent",
            "--reverse",
            "--numstat",
            "--no-renames",
            "--format=%x1e%an%x1f%aI%x1f%s%x1f%b%x1f",
            "HEAD",
        ],
    )?;
    let mut prs: Vec<SyntheticPr> = log.split(RECORD).filter_map(parse_commit).collect();
    if let Some(limit) = limit {
        let skip = prs.len().saturating_sub(limit);
        prs.drain(..skip);
    }
    let tree = git(&dir, &["ls-tree", "--name-only", "-d", "HEAD"])?;
    let top_level = tree.lines().map(str::to_string).collect();
    let end = prs
        .last()
        .map(|p| p.merged_at)
        .context("no commit of this history names a PR")?;
    Ok(GitHistory {
        prs,
        top_level,
        end,
    })
}

fn squash_number(subject: &str) -> Option<(u64, String)> {
    let open = subject.rfind("(#")?;
    let number = subject[open + 2..].strip_suffix(')')?.parse().ok()?;
    Some((number, subject[..open].trim_end().to_string()))
}

fn merge_number(subject: &str) -> Option<u64> {
    let rest = subject.strip_prefix("Merge pull request #")?;
    rest.split_whitespace().next()?.parse().ok()
}

/// One commit of the log as a PR, when it names one.
fn parse_commit(record: &str) -> Option<SyntheticPr> {
    let mut fields = record.splitn(5, FIELD);
    let (author, date, subject, body, stat) = (
        fields.next()?,
        fields.next()?,
        fields.next()?,
        fields.next()?,
        fields.next().unwrap_or(""),
    );
    let merged_at =
        OffsetDateTime::parse(date, &time::format_description::well_known::Rfc3339).ok()?;
    let (number, title, body) = if let Some(n) = merge_number(subject) {
        let mut lines = body.lines();
        let title = lines.next().unwrap_or_default().trim().to_string();
        (n, title, lines.collect::<Vec<_>>().join("\n"))
    } else {
        let (n, title) = squash_number(subject)?;
        (n, title, body.to_string())
    };
    let files = stat
        .lines()
        .filter_map(|line| {
            let mut parts = line.split('\t');
            let (added, deleted, path) = (parts.next()?, parts.next()?, parts.next()?);
            Some(FileChange {
                path: path.to_string(),
                // Binary files count no lines ("-").
                additions: added.parse().unwrap_or(0),
                deletions: deleted.parse().unwrap_or(0),
                status: None,
            })
        })
        .collect();
    Some(SyntheticPr {
        number,
        title,
        body: body.trim().to_string(),
        author: author.split_whitespace().collect::<Vec<_>>().join("-"),
        labels: Vec::new(),
        merged_at,
        files,
        reviewers: Vec::new(),
        comments: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn squash_and_merge_commits_name_their_prs() {
        let squash = format!(
            "Jane Doe{FIELD}2024-03-01T10:00:00+01:00{FIELD}Avoid shared waiter contention (#3867){FIELD}The waiter was shared.\n{FIELD}\n12\t3\taxum/src/serve.rs\n-\t-\tdocs/logo.png\n"
        );
        let pr = parse_commit(&squash).expect("a squash merge is a PR");
        assert_eq!(pr.number, 3867);
        assert_eq!(pr.title, "Avoid shared waiter contention");
        assert_eq!(pr.author, "Jane-Doe");
        assert_eq!(pr.files.len(), 2);
        assert_eq!((pr.files[0].additions, pr.files[0].deletions), (12, 3));
        assert_eq!(pr.files[1].additions, 0);
        let merge = format!(
            "bors{FIELD}2020-01-01T00:00:00Z{FIELD}Merge pull request #12 from a/b{FIELD}Add a router\n\nBecause.\n{FIELD}\n1\t0\tsrc/lib.rs\n"
        );
        let pr = parse_commit(&merge).expect("a merge commit is a PR");
        assert_eq!((pr.number, pr.title.as_str()), (12, "Add a router"));
        assert_eq!(pr.body, "Because.");
        let direct = format!("x{FIELD}2020-01-01T00:00:00Z{FIELD}Bump version{FIELD}{FIELD}\n");
        assert!(parse_commit(&direct).is_none());
    }
}
