//! The organisation index: every repository of an owner with its modules, the most recently
//! active first, where each module's page lives, and the people who know the most modules. It
//! is written from one small row per repository (`chronicle_domain::OrgRepo`), kept by each
//! repository's index build, so its cost grows with the repositories, never with their PRs.

use std::collections::BTreeMap;

use chronicle_domain::{OrgModule, OrgPerson, OrgRepo};

use crate::path::path_segment;
use crate::DocKey;

/// Modules named per repository (the most recently active first).
pub const MAX_MODULES_SHOWN: usize = 12;
/// People listed under "Who knows the most modules".
pub const MAX_PEOPLE: usize = 10;
/// People kept per repository's row: enough that the organisation's top ten are right unless
/// someone outside a repository's top fifty is in several repositories' tails.
pub const MAX_PEOPLE_KEPT: usize = 50;

/// A repository's row on its owner's index, bounded whatever the repository's size: its
/// [`MAX_MODULES_SHOWN`] most recently active modules, the totals, and its
/// [`MAX_PEOPLE_KEPT`] people who wrote in the most modules (recent authors, once per module).
pub fn org_row(repo: &str, modules: Vec<OrgModule>) -> OrgRepo {
    let mut known: BTreeMap<String, u64> = BTreeMap::new();
    for m in &modules {
        for login in &m.authors {
            *known.entry(login.clone()).or_default() += 1;
        }
    }
    let mut people: Vec<OrgPerson> = known
        .into_iter()
        .map(|(login, modules)| OrgPerson { login, modules })
        .collect();
    people.sort_by(|a, b| b.modules.cmp(&a.modules).then(a.login.cmp(&b.login)));
    people.truncate(MAX_PEOPLE_KEPT);
    let module_count = modules.len() as u64;
    let entry_count = modules.iter().map(|m| m.entry_count).sum();
    let mut modules = modules;
    modules.sort_by(|a, b| {
        b.latest_merged_at
            .cmp(&a.latest_merged_at)
            .then(a.module.cmp(&b.module))
    });
    let latest_merged_at = modules.first().and_then(|m| m.latest_merged_at.clone());
    modules.truncate(MAX_MODULES_SHOWN);
    OrgRepo {
        repo: repo.to_string(),
        latest_merged_at,
        modules,
        module_count,
        entry_count,
        people,
    }
}

/// Where the organisation's index lives, relative to the output root: `<owner>.md`.
pub fn org_path(owner: &str) -> String {
    format!("{}.md", path_segment(owner))
}

/// The organisation's index as CommonMark. Names come from GitHub and the repositories, so
/// every one is escaped; links are relative to the output root.
pub fn org_page(owner: &str, repos: &[OrgRepo]) -> String {
    let esc = |t: &str| escape(t);
    let mut repos: Vec<&OrgRepo> = repos.iter().collect();
    repos.sort_by(|a, b| {
        b.latest_merged_at
            .cmp(&a.latest_merged_at)
            .then(a.repo.cmp(&b.repo))
    });
    let mut out = format!("# {}\n\n", esc(owner));
    let modules: u64 = repos.iter().map(|r| module_count(r)).sum();
    out.push_str(&format!(
        "{} repositories, {modules} modules. The most recently active first; each module links to \
         its page.\n\n",
        repos.len()
    ));
    // Who knows the most modules: the recent authors of each module, counted once per module.
    let mut known: BTreeMap<&str, u64> = BTreeMap::new();
    for r in &repos {
        if r.people.is_empty() {
            // A row written before rows kept their people.
            for m in &r.modules {
                for login in &m.authors {
                    *known.entry(login.as_str()).or_default() += 1;
                }
            }
        }
        for p in &r.people {
            *known.entry(p.login.as_str()).or_default() += p.modules;
        }
    }
    let mut people: Vec<(&str, u64)> = known.into_iter().collect();
    people.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    if !people.is_empty() {
        out.push_str("## Who knows the most modules\n\n");
        for (login, n) in people.iter().take(MAX_PEOPLE) {
            out.push_str(&format!(
                "- @{}: {n} module{}\n",
                esc(login),
                if *n == 1 { "" } else { "s" }
            ));
        }
        out.push('\n');
    }
    out.push_str("## Repositories\n\n");
    for r in &repos {
        let index = DocKey::Index {
            repo: r.repo.clone(),
        }
        .path();
        out.push_str(&format!("### [{}](<{index}>)\n\n", esc(&r.repo)));
        let latest = r
            .latest_merged_at
            .as_deref()
            .and_then(|t| t.get(..10))
            .unwrap_or("never");
        out.push_str(&format!(
            "{} modules, {} merged pull requests, latest {latest}.\n\n",
            module_count(r),
            entry_count(r)
        ));
        let mut modules: Vec<_> = r.modules.iter().collect();
        modules.sort_by(|a, b| {
            b.latest_merged_at
                .cmp(&a.latest_merged_at)
                .then(a.module.cmp(&b.module))
        });
        for m in modules.iter().take(MAX_MODULES_SHOWN) {
            let page = DocKey::Module {
                repo: r.repo.clone(),
                module: m.module.clone(),
            }
            .path();
            out.push_str(&format!(
                "- [{}](<{page}>): {} pull requests, latest {}\n",
                esc(&m.module),
                m.entry_count,
                m.latest_merged_at
                    .as_deref()
                    .and_then(|t| t.get(..10))
                    .unwrap_or("never")
            ));
        }
        let shown = modules.len().min(MAX_MODULES_SHOWN) as u64;
        if module_count(r) > shown {
            out.push_str(&format!(
                "- … and {} more on [the repository's index](<{index}>)\n",
                module_count(r) - shown
            ));
        }
        out.push('\n');
    }
    out
}

/// A row's totals; a row written before rows kept them counts its modules.
fn module_count(r: &OrgRepo) -> u64 {
    r.module_count.max(r.modules.len() as u64)
}

fn entry_count(r: &OrgRepo) -> u64 {
    r.entry_count
        .max(r.modules.iter().map(|m| m.entry_count).sum::<u64>())
}

/// Backslash-escapes what CommonMark would read as markup, on one line.
fn escape(s: &str) -> String {
    const SPECIAL: &[char] = &[
        '\\', '`', '*', '_', '[', ']', '<', '>', '|', '~', '&', '#', '!',
    ];
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\n' | '\r' | '\t' => out.push(' '),
            c if SPECIAL.contains(&c) => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use chronicle_domain::OrgModule;

    fn module(name: &str, n: u64, latest: &str, authors: &[&str]) -> OrgModule {
        OrgModule {
            module: name.into(),
            entry_count: n,
            latest_merged_at: Some(latest.into()),
            authors: authors.iter().map(|a| a.to_string()).collect(),
        }
    }

    #[test]
    fn repositories_newest_first_with_their_modules_and_people() {
        let repos = vec![
            org_row(
                "acme/api",
                vec![module(
                    "router",
                    40,
                    "2024-01-01T00:00:00Z",
                    &["alice", "bob"],
                )],
            ),
            // A row written before rows kept their totals and people.
            OrgRepo {
                repo: "acme/web".into(),
                latest_merged_at: Some("2025-03-01T00:00:00Z".into()),
                modules: vec![
                    module("ui", 10, "2025-03-01T00:00:00Z", &["alice"]),
                    module("<script>", 2, "2023-01-01T00:00:00Z", &["eve"]),
                ],
                ..Default::default()
            },
        ];
        let page = org_page("acme", &repos);
        let web = page.find("### [acme/web]").unwrap();
        let api = page.find("### [acme/api]").unwrap();
        assert!(web < api, "newest first:\n{page}");
        assert!(
            page.contains("- [router](<acme/api/router.md>): 40 pull requests, latest 2024-01-01")
        );
        assert!(page.contains("- @alice: 2 modules\n"), "{page}");
        assert!(!page.contains("<script>"), "names are escaped:\n{page}");
        assert!(
            page.contains("2 modules, 12 merged pull requests"),
            "{page}"
        );
        assert!(
            page.contains("1 modules, 40 merged pull requests"),
            "{page}"
        );
        assert_eq!(org_path("acme"), "acme.md");
    }
}
