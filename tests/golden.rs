//! Golden files: pages rendered from entries, byte for byte. They were read by eye when written;
//! a change to the pages shows up here as a diff to read again.
//! `UPDATE_GOLDEN=1 cargo test -p chronicle-tests --test publishing golden::` rewrites them.
//!
//! - `fixture-root.md`: the recorded webhook delivery (PR #2, made merged as the fixtures README
//!   says) enriched with the recorded REST answers (its files, a linked issue).
//! - `core-module.md`: HAND-WRITTEN rows (titles, bodies, files, authors made up to look like a
//!   real repository: a PR template, an HTML comment, Dependabot and Renovate bodies, an empty
//!   body, more than five files), rendered with a real modules config.
//! - `history-*.md`: a GENERATED history of one module over three years (deterministic): its
//!   module page, a year that fits one archive page, a year in parts and one of those parts,
//!   and the repository's index of modules.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use stages::domain::{rfc3339_seconds, AuthorCount, Delivery, FileChange, ModuleEntry, RepoName};
use stages::entries::module_entries;
use stages::pages::content::{self, IndexRow, ModuleFacts};
use stages::pages::render::commonmark;
use stages::pages::{archive, layout};
use stages::payload::{classify_pull_request, Classified};
use stages::store::{attr, new_item, Item, PrRow};
use stages::summary::{extractive, SummaryInput};
use stages::tagging::{module_paths, tag_modules, ModulesConfig};
use time::macros::datetime;

fn s(v: &str) -> AttributeValue {
    AttributeValue::S(v.to_string())
}

fn files(list: &[(&str, u64, u64)]) -> AttributeValue {
    AttributeValue::L(
        list.iter()
            .map(|(p, a, d)| {
                AttributeValue::M(HashMap::from([
                    ("path".to_string(), s(p)),
                    ("additions".to_string(), AttributeValue::N(a.to_string())),
                    ("deletions".to_string(), AttributeValue::N(d.to_string())),
                ]))
            })
            .collect(),
    )
}

fn issue(number: u64, title: &str, state: &str, url: &str) -> AttributeValue {
    AttributeValue::M(HashMap::from([
        ("number".to_string(), AttributeValue::N(number.to_string())),
        ("title".to_string(), s(title)),
        ("state".to_string(), s(state)),
        ("url".to_string(), s(url)),
    ]))
}

/// The entries the summarize worker writes for a row: its summary written from the row once
/// (extractive), one entry per module.
fn summarized(
    repo: &RepoName,
    row: &Item,
    config: Option<&stages::tagging::RepoModules>,
) -> Vec<ModuleEntry> {
    let row = PrRow::from_item(row).unwrap();
    let paths: Vec<&str> = row.files.iter().map(|f| f.path.as_str()).collect();
    let modules = tag_modules(repo, &paths, config, None);
    let summary = extractive(&SummaryInput {
        title: &row.title,
        body: row.body.as_deref(),
        labels: &row.labels,
        files: &paths.iter().map(|p| p.to_string()).collect::<Vec<_>>(),
        issues: &[],
        modules: &modules,
    });
    module_entries(repo, &row, &modules, &summary.text, config, None)
}

/// The module page of these entries, as the builder lays it out (all on one page here).
fn module_page(
    repo: &RepoName,
    module: &str,
    mut entries: Vec<ModuleEntry>,
    config: Option<&stages::tagging::RepoModules>,
) -> String {
    entries.sort_by_key(|e| std::cmp::Reverse(e.order_key()));
    let facts = ModuleFacts {
        story_dropped: 0,
        story_withheld: false,
        repo: repo.to_string(),
        module: module.to_string(),
        paths: module_paths(repo, module, config, None),
        entry_count: entries.len() as u64,
        first_merged_at: entries.last().map(|e| e.merged_at.clone()),
        latest_merged_at: entries.first().map(|e| e.merged_at.clone()),
        recent_authors: content::recent_authors(&entries),
        archive_years: vec![],
        years: years_of(&entries),
        now: entries
            .first()
            .and_then(|e| stages::domain::parse_rfc3339(&e.merged_at))
            .map(|t| t + time::Duration::days(10)),
        description: None,
        gone: None,
        owners: vec![],
        story: None,
        notes: config.and_then(|c| c.notes_of(module)).map(str::to_string),
    };
    commonmark(&content::module_page(&facts, &entries))
}

/// Each year's figures and overview digest, as the builder stores them.
fn years_of(
    entries: &[ModuleEntry],
) -> std::collections::BTreeMap<String, stages::domain::YearStats> {
    let mut by_year: std::collections::BTreeMap<String, Vec<ModuleEntry>> = Default::default();
    for e in entries {
        by_year
            .entry(format!("{:04}", e.year()))
            .or_default()
            .push(e.clone());
    }
    by_year
        .into_iter()
        .map(|(year, mut of_year)| {
            of_year.sort_by_key(|e| e.order_key());
            let stats = stages::domain::YearStats {
                count: of_year.len() as u64,
                first: of_year.first().unwrap().merged_at.clone(),
                last: of_year.last().unwrap().merged_at.clone(),
                digest: stages::pages::overview::digest(&of_year),
                ..Default::default()
            };
            (year, stats)
        })
        .collect()
}

fn check(name: &str, rendered: &str) {
    let path = devstack::emulator::repo_root()
        .join("tests/golden")
        .join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, rendered).unwrap();
    }
    let golden = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_GOLDEN=1 writes it)", path.display()));
    assert_eq!(
        rendered, golden,
        "{name} changed; read the diff, then UPDATE_GOLDEN=1"
    );
}

#[test]
fn the_recorded_pr_as_its_root_module_page() {
    let Classified::Merged(pr) =
        classify_pull_request(support::merged_payload().to_string().as_bytes()).unwrap()
    else {
        panic!("the derived payload is merged")
    };
    let delivery = Delivery {
        id: "72d3162e-cc78-11e3-81ab-4c9367dc0958".into(),
        received_at: datetime!(2019-05-15 15:21:20 UTC),
    };
    let mut row: Item = new_item(&pr, &delivery, 4);
    let root = devstack::emulator::repo_root().join("tests/fixtures/github/rest");
    let read = |f: &str| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(root.join(f)).unwrap()).unwrap()
    };
    let listed: Vec<(String, u64, u64)> = read("pulls.list-files.json")
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["filename"].as_str().unwrap().to_string(),
                f["additions"].as_u64().unwrap(),
                f["deletions"].as_u64().unwrap(),
            )
        })
        .collect();
    let refs: Vec<(&str, u64, u64)> = listed
        .iter()
        .map(|(p, a, d)| (p.as_str(), *a, *d))
        .collect();
    row.insert(attr::FILES.into(), files(&refs));
    let linked = read("issues.get.json");
    row.insert(
        attr::LINKED_ISSUES.into(),
        AttributeValue::L(vec![issue(
            linked["number"].as_u64().unwrap(),
            linked["title"].as_str().unwrap(),
            linked["state"].as_str().unwrap(),
            // As GitHub answers for this repository: the recorded example is octocat's, whose
            // issue a Codertocat PR's entry would not carry.
            &linked["html_url"]
                .as_str()
                .unwrap()
                .replace("/octocat/", "/Codertocat/"),
        )]),
    );
    let repo = RepoName::parse(&pr.repo.to_string()).unwrap();
    let entries = summarized(&repo, &row, None);
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].module, "(root)");
    check(
        "fixture-root.md",
        &module_page(&repo, "(root)", entries, None),
    );
}

const MODULES: &str = r#"
acme/ledger:
  core:
    paths: ["src/**", "Cargo.toml", "Cargo.lock", "!src/**/*_test.rs"]
    notes: |
      Statements are parsed as a stream on purpose: imports run to 2 GB. Talk to
      @ledger-core before changing `Reader`.

      Written by the team, shown as text: <b>not HTML</b>, [not a link](javascript:x).
  docs: ["docs/**", "*.md"]
"#;

/// HAND-WRITTEN: a PR template as people fill it in.
const TEMPLATE_BODY: &str = "<!-- Thanks for the pull request! Fill in the sections below. -->\r\n\
## Description\r\n\
\r\n\
Large statements are now parsed as a stream: the reader hands the parser one record at a \
time instead of loading the whole file, so memory stays flat on 2 GB imports.\r\n\
\r\n\
The old `read_all` entry point is kept for small files and now calls the stream.\r\n\
\r\n\
## Type of change\r\n\
- [ ] Bug fix\r\n\
- [x] New feature\r\n\
\r\n\
## Checklist\r\n\
- [x] Tests added\r\n\
- [x] Docs updated\r\n";

/// HAND-WRITTEN, in Dependabot's shape.
const DEPENDABOT_BODY: &str = "Bumps [serde](https://github.com/serde-rs/serde) from 1.0.210 to 1.0.215.\n\
<details>\n<summary>Release notes</summary>\n<p>Sourced from serde's releases.</p>\n</details>\n\
<details>\n<summary>Commits</summary>\n<ul><li>Release 1.0.215</li></ul>\n</details>\n\
<br />\n\n\
[![Dependabot compatibility score](https://dependabot-badges.githubapp.com/badges/compatibility_score?dependency-name=serde&package-manager=cargo&previous-version=1.0.210&new-version=1.0.215)](https://docs.github.com/en/github/managing-security-vulnerabilities/about-dependabot-security-updates#about-compatibility-scores)\n\n\
Dependabot will resolve any conflicts with this PR as long as you don't alter it yourself.\n\n\
---\n\n\
<details>\n<summary>Dependabot commands and options</summary>\n<br />\n\n\
You can trigger Dependabot actions by commenting on this PR:\n\
- `@dependabot rebase` will rebase this PR\n\
</details>\n";

/// HAND-WRITTEN, in Renovate's shape.
const RENOVATE_BODY: &str = "[![Mend Renovate](https://app.renovatebot.com/images/banner.svg)](https://renovatebot.com)\n\n\
This PR contains the following updates:\n\n\
| Package | Type | Update | Change |\n|---|---|---|---|\n\
| [tokio](https://tokio.rs) ([source](https://github.com/tokio-rs/tokio)) | dependencies | minor | `1.47.1` -> `1.48.0` |\n\n\
---\n\n### Release Notes\n\n<details>\n<summary>tokio-rs/tokio (tokio)</summary>\n\n\
### [`v1.48.0`](https://github.com/tokio-rs/tokio/releases/tag/tokio-1.48.0)\n\n</details>\n\n\
---\n\n### Configuration\n\n📅 **Schedule**: Branch creation - At any time.\n\n\
---\n\nThis PR was generated by [Mend Renovate](https://mend.io/renovate/).\n";

struct Hand {
    number: u64,
    title: &'static str,
    author: &'static str,
    merged_at: &'static str,
    labels: &'static [&'static str],
    body: &'static str,
    files: &'static [(&'static str, u64, u64)],
    issues: &'static [(&'static str, &'static str, u64)],
}

/// The row as the summarize worker leaves it: its summary written from the row once.
fn hand_row(h: &Hand, modules: &[stages::domain::ModuleName]) -> Item {
    let url = format!("https://github.com/acme/ledger/pull/{}", h.number);
    let mut row = HashMap::from([
        (attr::REPO.to_string(), s("acme/ledger")),
        (
            attr::PR_NUMBER.to_string(),
            AttributeValue::N(h.number.to_string()),
        ),
        (attr::TITLE.to_string(), s(h.title)),
        (attr::BODY.to_string(), s(h.body)),
        (attr::AUTHOR.to_string(), s(h.author)),
        (attr::URL.to_string(), s(&url)),
        (attr::MERGED_AT.to_string(), s(h.merged_at)),
        (
            attr::LABELS.to_string(),
            AttributeValue::L(h.labels.iter().map(|l| s(l)).collect()),
        ),
        (attr::FILES.to_string(), files(h.files)),
    ]);
    let files: Vec<String> = h.files.iter().map(|f| f.0.to_string()).collect();
    let labels: Vec<String> = h.labels.iter().map(|l| l.to_string()).collect();
    let summary = extractive(&SummaryInput {
        title: h.title,
        body: Some(h.body),
        labels: &labels,
        files: &files,
        issues: &[],
        modules,
    });
    row.insert(attr::SUMMARY.to_string(), s(&summary.text));
    row.insert(
        attr::ADDITIONS.to_string(),
        AttributeValue::N(h.files.iter().map(|f| f.1).sum::<u64>().to_string()),
    );
    row.insert(
        attr::DELETIONS.to_string(),
        AttributeValue::N(h.files.iter().map(|f| f.2).sum::<u64>().to_string()),
    );
    row.insert(
        attr::LINKED_ISSUES.to_string(),
        AttributeValue::L(
            h.issues
                .iter()
                .map(|(t, st, n)| {
                    issue(
                        *n,
                        t,
                        st,
                        &format!("https://github.com/acme/ledger/issues/{n}"),
                    )
                })
                .collect(),
        ),
    );
    row
}

#[test]
fn a_hand_written_core_module_page() {
    let rows = [
        Hand {
            number: 41,
            title: "feat(parser): stream large statements instead of loading them",
            author: "alice",
            merged_at: "2026-10-14T09:12:00Z",
            labels: &["enhancement", "performance"],
            body: TEMPLATE_BODY,
            files: &[
                ("src/parser/stream.rs", 240, 0),
                ("src/parser/mod.rs", 35, 80),
                ("src/reader.rs", 60, 12),
                ("src/parser/record.rs", 18, 4),
                ("src/lib.rs", 3, 1),
                ("src/parser/stream_test.rs", 150, 0),
                ("docs/parsing.md", 40, 2),
            ],
            issues: &[(
                "Import of a 2 GB statement runs out of memory",
                "closed",
                37,
            )],
        },
        Hand {
            number: 44,
            title: "fix: accept CRLF line endings in CSV headers",
            author: "bob",
            merged_at: "2026-11-03T16:40:00Z",
            labels: &["bug"],
            body: "<!-- What does this fix? -->\nHeaders written by Excel end in `\\r\\n`; the \
                   header parser now trims the carriage return, so the first column is no \
                   longer named `date\\r`.",
            files: &[
                ("src/parser/header.rs", 9, 2),
                ("src/parser/header_test.rs", 25, 0),
            ],
            issues: &[("First column is named \"date\\r\"", "closed", 43)],
        },
        Hand {
            number: 45,
            title: "chore(deps): bump serde from 1.0.210 to 1.0.215",
            author: "dependabot[bot]",
            merged_at: "2026-11-05T07:02:00Z",
            labels: &["dependencies"],
            body: DEPENDABOT_BODY,
            files: &[("Cargo.toml", 1, 1), ("Cargo.lock", 4, 4)],
            issues: &[],
        },
        Hand {
            number: 47,
            title: "Update Rust crate tokio to v1.48.0",
            author: "renovate[bot]",
            merged_at: "2026-11-12T03:15:00Z",
            labels: &["dependencies"],
            body: RENOVATE_BODY,
            files: &[("Cargo.toml", 1, 1), ("Cargo.lock", 12, 10)],
            issues: &[],
        },
        Hand {
            number: 50,
            title: "Refactor the reader into a buffered source",
            author: "alice",
            merged_at: "2026-11-20T11:30:00Z",
            labels: &[],
            body: "",
            files: &[("src/reader.rs", 70, 95), ("src/source.rs", 88, 0)],
            issues: &[],
        },
    ];
    let config = ModulesConfig::from_yaml(MODULES).unwrap();
    let repo = RepoName::parse("acme/ledger").unwrap();
    let mut entries = Vec::new();
    for h in &rows {
        let paths: Vec<&str> = h.files.iter().map(|f| f.0).collect();
        let modules = tag_modules(&repo, &paths, config.for_repo(&repo), None);
        assert!(
            modules.iter().any(|m| *m == "core"),
            "#{}: {modules:?}",
            h.number
        );
        let row = hand_row(h, &modules);
        entries.extend(
            summarized(&repo, &row, config.for_repo(&repo))
                .into_iter()
                .filter(|e| e.module == "core"),
        );
    }
    check(
        "core-module.md",
        &module_page(&repo, "core", entries, config.for_repo(&repo)),
    );
}

/// A deterministic stream of numbers (a linear congruential generator): the same history on
/// every run.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, below: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % below
    }
}

const VERBS: &[&str] = &[
    "Add", "Fix", "Refactor", "Speed up", "Document", "Simplify", "Harden",
];
const THINGS: &[&str] = &[
    "the ledger reconciler",
    "CSV import",
    "currency rounding",
    "the statement parser",
    "account merging",
    "the audit trail",
    "exchange-rate caching",
];
const AUTHORS: &[&str] = &["alice", "bob", "carol", "dmitri", "eve"];

/// Three years of one module, denser in 2024 (where the archive is in parts).
fn generated_history() -> Vec<ModuleEntry> {
    let mut rng = Lcg(2024);
    let mut entries = Vec::new();
    let mut add = |number: u64, at: time::OffsetDateTime, rng: &mut Lcg| {
        let verb = VERBS[rng.next(VERBS.len() as u64) as usize];
        let thing = THINGS[rng.next(THINGS.len() as u64) as usize];
        let kind = match verb {
            "Fix" | "Harden" => "fix",
            "Document" => "docs",
            "Refactor" | "Simplify" => "refactor",
            _ => "feat",
        };
        let files: Vec<FileChange> = (0..1 + rng.next(4))
            .map(|i| FileChange {
                path: format!(
                    "core/src/{}/{}.rs",
                    thing.split(' ').next_back().unwrap(),
                    ["mod", "engine", "tests", "types"][i as usize]
                ),
                additions: 1 + rng.next(120),
                deletions: rng.next(40),
                status: None,
            })
            .collect();
        entries.push(ModuleEntry {
            repo: "acme/ledger".into(),
            module: "core".into(),
            number,
            title: format!("{kind}: {} {thing}", verb.to_lowercase()),
            url: format!("https://github.com/acme/ledger/pull/{number}"),
            author: AUTHORS[rng.next(AUTHORS.len() as u64) as usize].into(),
            merged_at: rfc3339_seconds(at),
            kind: Some(kind.into()),
            breaking: false,
            labels: if kind == "fix" { vec!["bug".into()] } else { vec![] },
            summary: format!(
                "{verb} {thing}, so that month-end closes finish on time. The change keeps the public \
                 API as it was; callers of `Ledger::post` see no difference, and the new path is \
                 covered by tests that replay last quarter's statements. Review notes asked for \
                 smaller commits, which this PR follows."
            ),
            linked_issues: vec![],
            additions: files.iter().map(|f| f.additions).sum(),
            deletions: files.iter().map(|f| f.deletions).sum(),
            files_here: files.len() as u64,
            lines_here: files.iter().map(|f| f.additions + f.deletions).sum(),
            files,
            elsewhere: vec![],
            files_elsewhere: 0,
            why: None,
            reviewers: vec![],
            discussion: 0,
        });
    };
    let mut number = 1;
    // 2024: about 290 merges (every 30 hours or so); 2025: 25; 2026: 40 up to November.
    let mut at = datetime!(2024-01-03 10:00 UTC);
    while at < datetime!(2025-01-01 00:00 UTC) {
        add(number, at, &mut rng);
        number += 1;
        at += time::Duration::hours(24 + rng.next(12) as i64);
    }
    let mut at = datetime!(2025-01-20 10:00 UTC);
    while at < datetime!(2025-12-31 00:00 UTC) {
        add(number, at, &mut rng);
        number += 1;
        at += time::Duration::days(10 + rng.next(8) as i64);
    }
    let mut at = datetime!(2026-01-05 10:00 UTC);
    while at < datetime!(2026-11-15 00:00 UTC) {
        add(number, at, &mut rng);
        number += 1;
        at += time::Duration::days(6 + rng.next(5) as i64);
    }
    entries
}

#[test]
fn a_generated_history_on_its_module_page_its_archives_and_the_index() {
    let mut entries = generated_history();
    entries.sort_by_key(|e| std::cmp::Reverse(e.order_key()));
    let total = entries.len() as u64;
    let mut facts = ModuleFacts {
        repo: "acme/ledger".into(),
        module: "core".into(),
        paths: vec!["core/**".into()],
        entry_count: total,
        first_merged_at: entries.last().map(|e| e.merged_at.clone()),
        latest_merged_at: entries.first().map(|e| e.merged_at.clone()),
        ..Default::default()
    };
    let shown = layout::main_count(&facts, &entries);
    let main = &entries[..shown];
    let cutoff = main.last().unwrap().order_key();
    let archived: Vec<ModuleEntry> = entries
        .iter()
        .filter(|e| e.order_key() < cutoff)
        .cloned()
        .collect();
    let mut docs = Vec::new();
    for year in [2024, 2025] {
        let mut of_year: Vec<ModuleEntry> = archived
            .iter()
            .filter(|e| e.year() == year)
            .cloned()
            .collect();
        of_year.reverse();
        let total = entries.iter().filter(|e| e.year() == year).count() as u64;
        facts
            .archive_years
            .push((year.to_string(), of_year.len() as u64));
        docs.extend(archive::year_docs("acme/ledger", "core", year, &of_year, total).docs);
    }
    facts.recent_authors = content::recent_authors(main);
    let page = content::module_page(&facts, main);
    assert!(layout::fits(&page));
    check("history-module.md", &commonmark(&page));
    let labels: Vec<&str> = docs.iter().map(|d| d.key.label()).collect();
    assert_eq!(
        labels,
        ["2024", "2024-p1", "2024-p2", "2024-p3", "2025"],
        "2024 is in parts of a hundred"
    );
    for doc in &docs {
        assert!(layout::fits(doc), "{}", doc.title);
        match doc.key.label() {
            "2024" => check("history-2024.md", &commonmark(doc)),
            "2024-p2" => check("history-2024-p2.md", &commonmark(doc)),
            "2025" => check("history-2025.md", &commonmark(doc)),
            _ => {}
        }
    }
    let rows = vec![
        IndexRow {
            module: "core".into(),
            entry_count: total,
            latest_merged_at: facts.latest_merged_at.clone(),
            recent_authors: facts.recent_authors.clone(),
        },
        IndexRow {
            module: "docs".into(),
            entry_count: 12,
            latest_merged_at: Some("2026-09-01T08:00:00Z".into()),
            recent_authors: vec![AuthorCount {
                login: "eve".into(),
                count: 7,
            }],
        },
        IndexRow {
            module: "ci".into(),
            entry_count: 30,
            latest_merged_at: Some("2026-11-10T12:00:00Z".into()),
            recent_authors: vec![
                AuthorCount {
                    login: "bob".into(),
                    count: 9,
                },
                AuthorCount {
                    login: "dependabot[bot]".into(),
                    count: 8,
                },
            ],
        },
    ];
    check(
        "history-index.md",
        &commonmark(&content::index_page(
            "acme/ledger",
            &rows,
            content::INDEX_MAX_NOTES,
        )),
    );
}

/// Three module pages of a synthetic history (four years, squash-merge bodies with trailers,
/// Dependabot and Renovate bodies, releases, a module removed 60% of the way through), built as
/// `chronicle bench quality` builds them: read them by eye.
#[test]
fn a_synthetic_history_a_busy_module_a_removed_one_and_a_dependency_heavy_one() {
    use bench::quality::{entries, module_page};
    let spec = standins::synthetic::HistorySpec {
        prs: 600,
        modules: 8,
        per_day: 0.4,
        seed: 11,
        end: datetime!(2026-11-30 12:00 UTC),
    };
    let repo = RepoName::parse("acme/platform").unwrap();
    let config = ModulesConfig::from_yaml(stages::tagging::BUNDLED_MODULES_YAML).unwrap();
    let all = entries(
        &repo,
        &standins::synthetic::history(&spec),
        config.for_repo(&repo),
    );
    let now = spec.end + time::Duration::days(1);
    // What enrichment would have read of the repository: READMEs, the removed directory gone.
    let context = standins::synthetic::context(&spec);
    for (module, golden) in [
        ("api", "synthetic-busy-module.md"),
        ("core", "synthetic-removed-module.md"),
        ("(root)", "synthetic-dependencies-module.md"),
    ] {
        let of_module: Vec<&ModuleEntry> = all.iter().filter(|e| e.module == module).collect();
        assert!(!of_module.is_empty(), "{module}");
        check(
            golden,
            &module_page(
                &repo,
                module,
                &of_module,
                config.for_repo(&repo),
                Some(&context),
                now,
            ),
        );
    }
}
