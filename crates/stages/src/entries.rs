//! What one summarized PR puts on each module page it touched: a [`ModuleEntry`] per module,
//! holding only that module's files (for "key files") and a count of the rest. Pure.

use std::collections::BTreeMap;

use crate::domain::{
    FileChange, ModuleCount, ModuleEntry, ModuleName, RepoName, ENTRY_MAX_ELSEWHERE,
    ENTRY_MAX_FILES, ENTRY_MAX_REVIEWERS,
};
use crate::store::PrRow;
use crate::tagging::{file_modules, RepoLayout, RepoModules};

/// Linked issues kept on one entry.
pub const ENTRY_MAX_ISSUES: usize = 10;
/// Labels kept on one entry.
pub const ENTRY_MAX_LABELS: usize = 10;

/// The PR's entry for each of `modules` (the modules [`crate::tagging::tag_modules`] gave).
pub fn module_entries(
    repo: &RepoName,
    row: &PrRow,
    modules: &[ModuleName],
    summary: &str,
    config: Option<&RepoModules>,
    layout: Option<&RepoLayout>,
) -> Vec<ModuleEntry> {
    // Each known file's modules, once.
    let tagged: Vec<(&FileChange, Vec<ModuleName>)> = row
        .files
        .iter()
        .map(|f| (f, file_modules(&f.path, config, layout)))
        .collect();
    let mut per_module: BTreeMap<&ModuleName, u64> = BTreeMap::new();
    for (_, of_file) in &tagged {
        for m in of_file {
            *per_module.entry(m).or_default() += 1;
        }
    }
    let paths: Vec<&str> = row.files.iter().map(|f| f.path.as_str()).collect();
    let kind = crate::kind::classify(&row.title, &row.author, &row.labels, &paths);
    // A summary that only names the PR's files names each module's own on its entry (the
    // others are its "Also touched").
    let all_paths: Vec<String> = row.files.iter().map(|f| f.path.clone()).collect();
    let from_files = !all_paths.is_empty() && summary == crate::summary::files_summary(&all_paths);
    let why = row
        .body
        .as_deref()
        .and_then(|body| crate::summary::decision::key_sentence(body, &row.title));
    let breaking = crate::kind::is_breaking(&row.title, &row.labels);
    modules
        .iter()
        .map(|module| {
            let mut here: Vec<FileChange> = tagged
                .iter()
                .filter(|(_, of_file)| of_file.contains(module))
                .map(|(f, _)| (*f).clone())
                .collect();
            let own: Vec<String> = here.iter().map(|f| f.path.clone()).collect();
            let summary = if from_files && !own.is_empty() {
                crate::summary::files_summary(&own)
            } else {
                summary.to_string()
            };
            let files_here = here.len() as u64;
            let lines_here = here.iter().map(FileChange::churn).sum();
            here.sort_by(|a, b| b.churn().cmp(&a.churn()).then(a.path.cmp(&b.path)));
            here.truncate(ENTRY_MAX_FILES);
            let files_elsewhere = tagged
                .iter()
                .filter(|(_, of_file)| !of_file.contains(module))
                .count() as u64;
            let mut elsewhere: Vec<ModuleCount> = per_module
                .iter()
                .filter(|(m, _)| **m != module)
                .map(|(m, n)| ModuleCount {
                    module: (*m).clone(),
                    files: *n,
                })
                .collect();
            elsewhere.sort_by(|a, b| b.files.cmp(&a.files).then(a.module.cmp(&b.module)));
            elsewhere.truncate(ENTRY_MAX_ELSEWHERE);
            ModuleEntry {
                repo: repo.to_string(),
                module: module.clone(),
                number: row.pr_number,
                title: row.title.clone(),
                url: row.url.clone(),
                author: row.author.clone(),
                merged_at: row.merged_at.clone(),
                kind: kind.clone(),
                breaking,
                labels: row.labels.iter().take(ENTRY_MAX_LABELS).cloned().collect(),
                summary,
                linked_issues: row.own_issues().take(ENTRY_MAX_ISSUES).cloned().collect(),
                additions: row.additions,
                deletions: row.deletions,
                files: here,
                files_here,
                lines_here,
                elsewhere,
                files_elsewhere,
                why: why.clone(),
                reviewers: row
                    .reviewers
                    .iter()
                    .take(ENTRY_MAX_REVIEWERS)
                    .cloned()
                    .collect(),
                discussion: row.discussion,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tagging::ModulesConfig;

    fn row(files: &[(&str, u64, u64)]) -> PrRow {
        PrRow {
            repo: "acme/app".into(),
            pr_number: 7,
            title: "feat(api): add paging".into(),
            body: None,
            author: "alice".into(),
            labels: vec!["enhancement".into()],
            url: "https://github.com/acme/app/pull/7".into(),
            merged_at: "2024-03-01T10:00:00Z".into(),
            files: files
                .iter()
                .map(|(p, a, d)| FileChange {
                    path: p.to_string(),
                    additions: *a,
                    deletions: *d,
                    status: None,
                })
                .collect(),
            changed_files: files.len() as u64,
            linked_issues: vec![],
            reviewers: vec![],
            discussion: 0,
            additions: 30,
            deletions: 3,
            summary: None,
            summary_withheld: None,
            attempts: 1,
            generation: 1,
            enriched_at: None,
            entry_hash: None,
            entry_modules: Default::default(),
            last_error: None,
        }
    }

    #[test]
    fn each_module_gets_its_own_files_and_a_count_of_the_rest() {
        let config = ModulesConfig::from_yaml(
            "acme/app:\n  api: ['api/**']\n  docs: ['**/*.md']\n  web: ['web/**']\n",
        )
        .unwrap();
        let repo = RepoName::parse("acme/app").unwrap();
        let r = row(&[
            ("api/a.rs", 1, 0),
            ("api/b.rs", 20, 2),
            ("api/README.md", 3, 0),
            ("web/x.ts", 5, 1),
            ("tools/gen.sh", 1, 1),
        ]);
        let modules = crate::tagging::tag_modules(
            &repo,
            &r.files.iter().map(|f| f.path.as_str()).collect::<Vec<_>>(),
            config.for_repo(&repo),
            None,
        );
        assert_eq!(modules, ["api", "docs", "tools", "web"]);
        let entries = module_entries(
            &repo,
            &r,
            &modules,
            "Adds paging.",
            config.for_repo(&repo),
            None,
        );
        let api = &entries[0];
        assert_eq!(api.module, "api");
        let paths: Vec<&str> = api.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(
            paths,
            ["api/b.rs", "api/README.md", "api/a.rs"],
            "most changed first"
        );
        assert_eq!((api.files_here, api.files_elsewhere), (3, 2));
        assert_eq!(
            api.elsewhere,
            vec![
                ModuleCount {
                    module: "docs".into(),
                    files: 1
                },
                ModuleCount {
                    module: "tools".into(),
                    files: 1
                },
                ModuleCount {
                    module: "web".into(),
                    files: 1
                },
            ]
        );
        assert_eq!(api.kind.as_deref(), Some("feat"));
        let docs = &entries[1];
        assert_eq!(docs.files.len(), 1);
        assert_eq!(docs.files_elsewhere, 4);
        assert_eq!(
            docs.elsewhere[0],
            ModuleCount {
                module: "api".into(),
                files: 3
            }
        );
    }

    /// A summary that only names the PR's files names each module's own files on its entry,
    /// and each entry measures the PR's changed lines in its module.
    #[test]
    fn a_files_summary_and_the_size_are_the_modules_own() {
        let config =
            ModulesConfig::from_yaml("acme/app:\n  api: ['api/**']\n  web: ['web/**']\n").unwrap();
        let repo = RepoName::parse("acme/app").unwrap();
        let r = row(&[("web/x.ts", 50, 10), ("web/y.ts", 5, 0), ("api/a.rs", 1, 1)]);
        let paths: Vec<String> = r.files.iter().map(|f| f.path.clone()).collect();
        let whole = crate::summary::files_summary(&paths);
        let modules = [ModuleName::new("api"), ModuleName::new("web")];
        let entries = module_entries(&repo, &r, &modules, &whole, config.for_repo(&repo), None);
        assert_eq!(entries[0].summary, "Changes `api/a.rs`.");
        assert_eq!(entries[1].summary, "Changes `web/x.ts` and `web/y.ts`.");
        assert_eq!((entries[0].lines_here, entries[1].lines_here), (2, 65));
        // A summary from the body is the PR's, on every entry.
        let entries = module_entries(&repo, &r, &modules, "Adds paging.", None, None);
        assert!(entries.iter().all(|e| e.summary == "Adds paging."));
    }

    #[test]
    fn a_pr_without_known_files_is_one_entry_of_the_repository() {
        let repo = RepoName::parse("acme/app").unwrap();
        let r = row(&[]);
        let entries = module_entries(&repo, &r, &[ModuleName::new("acme/app")], "S.", None, None);
        assert_eq!(entries.len(), 1);
        assert_eq!((entries[0].files_here, entries[0].files_elsewhere), (0, 0));
        assert!(entries[0].files.is_empty() && entries[0].elsewhere.is_empty());
    }

    /// A row stored before linked issues were scoped may name another owner's issue: the entry
    /// never carries it.
    #[test]
    fn another_owners_stored_issue_never_reaches_an_entry() {
        let repo = RepoName::parse("acme/app").unwrap();
        let mut r = row(&[]);
        let issue = |url: &str| crate::domain::IssueRef {
            number: 1,
            title: url.into(),
            state: "closed".into(),
            url: url.into(),
        };
        r.linked_issues = vec![
            issue("https://github.com/acme/app/issues/1"),
            issue("https://github.com/ACME/tracker/issues/2"),
            issue("https://github.com/other-org/private/issues/42"),
            issue("not a url"),
        ];
        let entries = module_entries(&repo, &r, &[ModuleName::new("acme/app")], "S.", None, None);
        let urls: Vec<&str> = entries[0]
            .linked_issues
            .iter()
            .map(|i| i.url.as_str())
            .collect();
        assert_eq!(
            urls,
            [
                "https://github.com/acme/app/issues/1",
                "https://github.com/ACME/tracker/issues/2"
            ]
        );
    }

    #[test]
    fn entries_are_bounded() {
        let repo = RepoName::parse("acme/app").unwrap();
        let files: Vec<(String, u64, u64)> = (0..300)
            .map(|i| (format!("src/f{i:03}.rs"), i, 0))
            .collect();
        let refs: Vec<(&str, u64, u64)> =
            files.iter().map(|(p, a, d)| (p.as_str(), *a, *d)).collect();
        let r = row(&refs);
        let entries = module_entries(&repo, &r, &[ModuleName::new("src")], "S.", None, None);
        assert_eq!(entries[0].files.len(), ENTRY_MAX_FILES);
        assert_eq!(entries[0].files_here, 300);
        assert_eq!(entries[0].files[0].path, "src/f299.rs");
    }
}
