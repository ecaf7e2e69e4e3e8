//! Synthetic repository histories for benchmarks and tests: deterministic (a seeded generator),
//! shaped like real ones. A few hot modules take most PRs (Zipf weights), some PRs span several
//! modules, bodies are the kinds real repositories have (filled-in templates, squash-merge
//! lists with trailers, Dependabot and Renovate bodies, one-liners, empty ones), and merges come
//! at a steady rate, so a longer history is an older one (as in life), not a denser one.

use stages::domain::FileChange;
use time::{Duration, OffsetDateTime};

/// What to generate.
#[derive(Debug, Clone)]
pub struct HistorySpec {
    pub prs: usize,
    pub modules: usize,
    /// Merges per day.
    pub per_day: f64,
    pub seed: u64,
    /// When the newest PR merged.
    pub end: OffsetDateTime,
}

/// One generated merged PR.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntheticPr {
    pub number: u64,
    pub title: String,
    pub body: String,
    pub author: String,
    pub labels: Vec<String>,
    pub merged_at: OffsetDateTime,
    pub files: Vec<FileChange>,
    /// Who approved it or asked for changes, and how many comments it drew.
    pub reviewers: Vec<String>,
    pub comments: u64,
}

/// A small deterministic generator (a 64-bit LCG): the same spec gives the same history.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n.max(1)
    }

    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// An index in `0..n`, low ones far likelier (weights 1, 1/2, 1/3, …).
    pub fn zipf(&mut self, n: usize) -> usize {
        let total: f64 = (1..=n).map(|i| 1.0 / i as f64).sum();
        let mut x = (self.below(1_000_000) as f64 / 1_000_000.0) * total;
        for i in 0..n {
            x -= 1.0 / (i + 1) as f64;
            if x <= 0.0 {
                return i;
            }
        }
        n - 1
    }

    pub fn pick<'a>(&mut self, items: &'a [&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
}

const MODULE_NAMES: &[&str] = &[
    "api",
    "web",
    "core",
    "cli",
    "auth",
    "billing",
    "search",
    "storage",
    "worker",
    "sdk",
    "gateway",
    "admin",
    "mobile",
    "analytics",
    "notifications",
    "payments",
    "scheduler",
    "importer",
    "exporter",
    "reports",
    "config",
    "telemetry",
    "cache",
    "queue",
    "ledger",
    "identity",
    "media",
    "i18n",
    "plugins",
    "migrations",
    "docs",
    "tools",
    "bench",
    "infra",
];
const VERBS: &[&str] = &[
    "add", "fix", "refactor", "speed up", "document", "simplify", "remove", "rename", "harden",
    "support",
];
const OBJECTS: &[&str] = &[
    "retry handling",
    "the connection pool",
    "pagination",
    "error messages",
    "the config loader",
    "timeouts",
    "the cache key",
    "batch writes",
    "input validation",
    "the CLI flags",
    "logging",
    "the schema",
    "rate limiting",
    "date parsing",
];
const DEPS: &[&str] = &[
    "serde", "tokio", "reqwest", "clap", "axum", "tracing", "hyper",
];

/// What the synthetic repository's files say of it at the end of its history, as enrichment
/// would have fetched it: its top-level directories (the removed module's is gone) and each
/// module directory's README lead.
pub fn context(spec: &HistorySpec) -> stages::context::RepoContext {
    use stages::context::{About, RepoContext};
    let modules: Vec<String> = (0..spec.modules)
        .map(|i| match MODULE_NAMES.get(i) {
            Some(name) => name.to_string(),
            None => format!("module{i}"),
        })
        .collect();
    let live: Vec<String> = modules
        .iter()
        .enumerate()
        .filter(|(i, _)| !(*i == 2 && modules.len() > 5))
        .map(|(_, m)| m.clone())
        .collect();
    let mut top_level: Vec<String> = live.clone();
    top_level.extend([".github".to_string(), "docs".to_string()]);
    top_level.sort();
    top_level.dedup();
    let about = live
        .iter()
        .map(|m| {
            (
                m.clone(),
                About {
                    text: format!(
                        "The `{m}` crate of the platform: what it serves, how its requests are \
                         validated and retried, and the errors it returns."
                    ),
                    source: format!("{m}/README.md"),
                },
            )
        })
        .collect();
    RepoContext {
        checked_at: stages::domain::rfc3339_seconds(spec.end),
        codeowners: Some("* @acme/maintainers\n/api/ @acme/api-team @dev00\n".into()),
        codeowners_path: Some(".github/CODEOWNERS".into()),
        top_level: Some(top_level),
        about,
        ..RepoContext::default()
    }
}

/// A history of `spec.prs` merged PRs, oldest first, numbered from 1.
pub fn history(spec: &HistorySpec) -> Vec<SyntheticPr> {
    let mut rng = Rng::new(spec.seed);
    let modules: Vec<String> = (0..spec.modules)
        .map(|i| match MODULE_NAMES.get(i) {
            Some(name) => name.to_string(),
            None => format!("module{i}"),
        })
        .collect();
    let after_removal: Vec<String> = modules
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 2)
        .map(|(_, m)| m.clone())
        .collect();
    let humans: Vec<String> = (0..40).map(|i| format!("dev{i:02}")).collect();
    let step = Duration::seconds_f64(86_400.0 / spec.per_day.max(0.01));
    let start = spec.end - step * (spec.prs.saturating_sub(1) as f64);
    let mut out = Vec::with_capacity(spec.prs);
    for i in 0..spec.prs {
        let number = i as u64 + 1;
        // Merges are irregular around the steady rate.
        let jitter = Duration::seconds(rng.below((step.whole_seconds().max(2) / 2) as u64) as i64);
        let merged_at = start + step * (i as f64) + jitter;
        let kind = rng.below(100);
        // The third busiest module is removed 60% of the way through: later PRs go elsewhere.
        let live: &[String] = if i * 10 >= spec.prs * 6 && modules.len() > 5 {
            &after_removal
        } else {
            &modules
        };
        let pr = if i == spec.prs / 3 {
            // One move of the busiest module's files (a rename GitHub reports file by file).
            moved(number, merged_at, &modules[0], &humans)
        } else if kind < 8 {
            dependency_bump(&mut rng, number, merged_at)
        } else if kind < 10 {
            release(&mut rng, number, merged_at, &humans)
        } else {
            change(&mut rng, number, merged_at, live, &humans, kind)
        };
        out.push(pr);
    }
    out
}

fn moved(number: u64, merged_at: OffsetDateTime, module: &str, humans: &[String]) -> SyntheticPr {
    let mut files: Vec<FileChange> = ["routes", "auth", "paging", "errors", "health", "users"]
        .iter()
        .map(|name| FileChange {
            path: format!("{module}/src/handlers/{name}.rs"),
            additions: 2,
            deletions: 2,
            status: Some("renamed".into()),
        })
        .collect();
    files.push(FileChange {
        path: format!("{module}/src/lib.rs"),
        additions: 6,
        deletions: 6,
        status: Some("modified".into()),
    });
    SyntheticPr {
        number,
        title: format!("refactor({module}): move the request handlers into src/handlers"),
        body: format!(
            "Moves the handlers out of `src/` into `src/handlers/`, one file each; no behaviour \
             change.\n\nSigned-off-by: {} <dev@example.com>\n",
            humans[1]
        ),
        author: humans[1].clone(),
        labels: vec!["refactor".into()],
        merged_at,
        files,
        reviewers: Vec::new(),
        comments: 0,
    }
}

fn dependency_bump(rng: &mut Rng, number: u64, merged_at: OffsetDateTime) -> SyntheticPr {
    let dep = rng.pick(DEPS);
    let (major, minor) = (1 + rng.below(3), rng.below(40));
    let from = format!("{major}.{minor}.{}", rng.below(9));
    let to = format!("{major}.{}.0", minor + 1);
    let bot = rng.chance(60);
    let (title, body, author) = if bot {
        (
            format!("chore(deps): bump {dep} from {from} to {to}"),
            format!(
                "Bumps [{dep}](https://github.com/example/{dep}) from {from} to {to}.\n<details>\n<summary>Release notes</summary>\n<p>Sourced from {dep}'s releases.</p>\n</details>\n\nDependabot will resolve any conflicts with this PR as long as you don't alter it yourself.\n\n---\n\n<details>\n<summary>Dependabot commands and options</summary>\n\n- `@dependabot rebase` will rebase this PR\n</details>\n"
            ),
            "dependabot[bot]",
        )
    } else {
        (
            format!("Update Rust crate {dep} to v{to}"),
            format!(
                "[![Mend Renovate](https://app.renovatebot.com/images/banner.svg)](https://renovatebot.com)\n\nThis PR contains the following updates:\n\n| Package | Change |\n|---|---|\n| {dep} | `{from}` -> `{to}` |\n\n---\n\nThis PR was generated by [Mend Renovate](https://mend.io/renovate/).\n"
            ),
            "renovate[bot]",
        )
    };
    SyntheticPr {
        number,
        title,
        body,
        author: author.to_string(),
        labels: vec!["dependencies".into()],
        merged_at,
        files: vec![
            FileChange {
                path: "Cargo.toml".into(),
                additions: 1,
                deletions: 1,
                status: None,
            },
            FileChange {
                path: "Cargo.lock".into(),
                additions: 4 + rng.below(20),
                deletions: 4 + rng.below(20),
                status: None,
            },
        ],
        reviewers: Vec::new(),
        comments: 0,
    }
}

fn release(
    rng: &mut Rng,
    number: u64,
    merged_at: OffsetDateTime,
    humans: &[String],
) -> SyntheticPr {
    let version = format!("{}.{}.0", 1 + number / 400, (number / 20) % 20);
    SyntheticPr {
        number,
        title: format!("chore(release): v{version}"),
        body: format!(
            "Release v{version}.\n\nSigned-off-by: {} <dev@example.com>\n",
            humans[0]
        ),
        author: humans[rng.below(3) as usize].clone(),
        labels: vec![],
        merged_at,
        files: vec![
            FileChange {
                path: "CHANGELOG.md".into(),
                additions: 5 + rng.below(30),
                deletions: 0,
                status: None,
            },
            FileChange {
                path: "Cargo.toml".into(),
                additions: 1,
                deletions: 1,
                status: None,
            },
        ],
        reviewers: Vec::new(),
        comments: 0,
    }
}

fn change(
    rng: &mut Rng,
    number: u64,
    merged_at: OffsetDateTime,
    modules: &[String],
    humans: &[String],
    kind: u64,
) -> SyntheticPr {
    let home = modules[rng.zipf(modules.len())].clone();
    let mut touched = vec![home.clone()];
    if rng.chance(25) {
        let other = modules[rng.zipf(modules.len())].clone();
        if other != home {
            touched.push(other);
        }
    }
    let verb = rng.pick(VERBS);
    let object = rng.pick(OBJECTS);
    let conventional = match verb {
        "fix" | "harden" => "fix",
        "document" => "docs",
        "refactor" | "simplify" | "rename" | "remove" => "refactor",
        _ => "feat",
    };
    let title = if rng.chance(60) {
        format!("{conventional}({home}): {verb} {object}")
    } else {
        let mut t = format!("{verb} {object} in {home}");
        t[..1].make_ascii_uppercase();
        t
    };
    let mut files = Vec::new();
    for module in &touched {
        let count = if rng.chance(3) {
            40 + rng.below(80)
        } else {
            1 + rng.below(6)
        };
        for f in 0..count {
            files.push(FileChange {
                path: format!(
                    "{module}/src/{}/{}.rs",
                    object.split(' ').next_back().unwrap_or("x"),
                    f
                ),
                additions: rng.below(200),
                deletions: rng.below(60),
                status: None,
            });
        }
    }
    if rng.chance(10) {
        files.push(FileChange {
            path: "README.md".into(),
            additions: 1 + rng.below(10),
            deletions: rng.below(5),
            status: None,
        });
    }
    // A module's own README and docs: they belong to the module, not to `docs`.
    if rng.chance(8) {
        files.push(FileChange {
            path: format!("{home}/README.md"),
            additions: 1 + rng.below(20),
            deletions: rng.below(5),
            status: None,
        });
    }
    if rng.chance(3) {
        files.push(FileChange {
            path: ".github/workflows/ci.yml".into(),
            additions: 1 + rng.below(8),
            deletions: rng.below(4),
            status: None,
        });
    }
    let body = match kind {
        8..=40 => format!(
            "<!-- Please describe your change and link the issue it fixes. -->\r\n## What\r\n\r\nThis PR makes {home} {verb} {object}: callers no longer see stale results when the upstream answers slowly.\r\n\r\n## Why\r\n\r\nReported in #{}; the old behaviour hid the real error.\r\n\r\n## Checklist\r\n- [x] Tests added\r\n- [ ] Docs updated\r\n",
            number.saturating_sub(1 + rng.below(50))
        ),
        41..=60 => format!(
            "* {verb} {object}\r\n\r\n* address review comments\r\n\r\n* fix tests\r\n\r\n---------\r\n\r\nSigned-off-by: {} <dev@example.com>\r\nCo-authored-by: {} <other@example.com>\r\n",
            humans[0], humans[1]
        ),
        // Prose with a reason, as real descriptions give it when they do.
        61..=85 => match number % 3 {
            0 => format!(
                "The old code for {object} in {home} retried forever, so one slow upstream \
                 blocked every caller. This PR bounds the retries and reports the last error."
            ),
            1 => format!(
                "We chose a bounded queue for {object} instead of a task per request, to avoid \
                 unbounded memory when {home} is under load."
            ),
            _ => format!(
                "Moving {object} behind a trait keeps {home} independent of the storage layer, \
                 which means its tests no longer need a database."
            ),
        },
        _ => String::new(),
    };
    let author = humans[rng.zipf(humans.len())].clone();
    let mut labels = Vec::new();
    if conventional == "fix" && rng.chance(50) {
        labels.push("bug".to_string());
    }
    if rng.chance(20) {
        labels.push(format!("area/{home}"));
    }
    let (reviewers, comments) = reviews(number, &author, humans);
    SyntheticPr {
        number,
        title,
        body,
        author,
        labels,
        merged_at,
        files,
        reviewers,
        comments,
    }
}

/// A PR's reviewers and comment count, from their own generator so the rest of the history
/// stays as it was: most PRs get one or two approvals from the module's regulars, some a long
/// discussion.
fn reviews(number: u64, author: &str, humans: &[String]) -> (Vec<String>, u64) {
    let mut rng = Rng::new(number ^ 0x5eed_0f4e_71e3);
    let mut reviewers: Vec<String> = Vec::new();
    for _ in 0..rng.below(3) {
        let reviewer = &humans[rng.zipf(humans.len())];
        if reviewer != author && !reviewers.contains(reviewer) {
            reviewers.push(reviewer.clone());
        }
    }
    let comments = if rng.chance(10) {
        10 + rng.below(30)
    } else {
        rng.below(4)
    };
    (reviewers, comments)
}

/// The merged PR as a webhook would deliver it (an empty body is no body, as GitHub sends it).
pub fn merged_pr(
    repo: &stages::domain::RepoName,
    pr: &SyntheticPr,
) -> stages::domain::MergedPullRequest {
    stages::domain::MergedPullRequest {
        repo: repo.clone(),
        number: pr.number,
        title: pr.title.clone(),
        body: Some(pr.body.clone()).filter(|b| !b.is_empty()),
        author: pr.author.clone(),
        labels: pr.labels.clone(),
        url: format!("https://github.com/{repo}/pull/{}", pr.number),
        base_ref: "main".into(),
        merge_commit_sha: format!("{:040x}", pr.number),
        merged_at: pr.merged_at,
        source_updated_at: pr.merged_at,
        installation: None,
    }
}

/// What the enrich stage would have fetched from GitHub for this PR.
pub fn enrichment(pr: &SyntheticPr) -> stages::enrich::Enrichment {
    stages::enrich::Enrichment {
        totals: stages::github::PullTotals {
            commits: 1,
            additions: pr.files.iter().map(|f| f.additions).sum(),
            deletions: pr.files.iter().map(|f| f.deletions).sum(),
            changed_files: pr.files.len() as u64,
            comments: pr.comments,
            reviews: pr.reviewers.len() as u64,
        },
        files: pr
            .files
            .iter()
            .map(|f| stages::github::ChangedFile {
                path: f.path.clone(),
                status: f.status.clone().unwrap_or_else(|| "modified".into()),
                additions: f.additions,
                deletions: f.deletions,
            })
            .collect(),
        linked_issues: Vec::new(),
        reviewers: pr.reviewers.clone(),
    }
}

/// Writes the enrichment as the enrich stage does: its lease, then the conditional write-back.
pub async fn enrich(
    prs: &stages::store::PrStore,
    repo: &stages::domain::RepoName,
    pr: &SyntheticPr,
) -> anyhow::Result<()> {
    let now = OffsetDateTime::now_utc();
    let owner = format!("synthetic-enrich-{}", pr.number);
    prs.claim_enrichment(repo, pr.number, &owner, now, now + Duration::minutes(1))
        .await?;
    prs.complete_enrichment(repo, pr.number, &owner, enrichment(pr).attributes(500), now)
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(prs: usize) -> HistorySpec {
        HistorySpec {
            prs,
            modules: 30,
            per_day: 6.0,
            seed: 7,
            end: time::macros::datetime!(2026-11-30 12:00 UTC),
        }
    }

    #[test]
    fn histories_are_deterministic_steady_and_skewed() {
        let a = history(&spec(2_000));
        assert_eq!(a, history(&spec(2_000)));
        assert_eq!(a.len(), 2_000);
        assert!(a.windows(2).all(|w| w[0].merged_at <= w[1].merged_at));
        let days = (a[1_999].merged_at - a[0].merged_at).whole_days();
        assert!(
            (320..=340).contains(&days),
            "{days} days for 2,000 PRs at 6 a day"
        );
        // A few hot modules take most PRs.
        let hot = a
            .iter()
            .filter(|p| p.files.iter().any(|f| f.path.starts_with("api/")))
            .count();
        assert!(hot > 300, "{hot}");
        assert!(a.iter().any(|p| p.author == "dependabot[bot]"));
        assert!(a.iter().any(|p| p.body.contains("Signed-off-by")));
        assert!(a.iter().any(|p| p.files.len() > 40));
    }
}
