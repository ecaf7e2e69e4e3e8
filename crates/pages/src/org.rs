//! The organisation index: every repository of an owner with its modules, the most recently
//! active first, where each module's page lives, and the people who know the most modules. It
//! is written from one small row per repository (`chronicle_domain::OrgRepo`), kept by each
//! repository's index build, so its cost grows with the repositories, never with their PRs.

use std::collections::{BTreeMap, BTreeSet};

use chronicle_domain::{OrgModule, OrgPerson, OrgRepo};

use crate::path::path_segment;
use crate::render::{self, Flavor};
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
        notion_index: None,
    }
}

/// Where the organisation's index lives, relative to the output root: `<owner>.md`.
pub fn org_path(owner: &str) -> String {
    format!("{}.md", path_segment(owner))
}

/// Where the organisation index's links point.
#[derive(Clone, Copy, Debug)]
pub enum OrgLinks<'a> {
    /// Files, relative to the output root (CommonMark).
    Files,
    /// Notion pages, by the URLs the rows recorded (Notion's Markdown). `children`: the index
    /// pages (normalized ids) that are the organisation page's own child pages, named with
    /// `<page>` tags as Notion requires to keep them; any other is a plain link.
    Notion { children: &'a BTreeSet<String> },
}

/// The organisation's index as CommonMark. Names come from GitHub and the repositories, so
/// every one is escaped; links are relative to the output root.
pub fn org_page(owner: &str, repos: &[OrgRepo]) -> String {
    fitted(|detail| write_org(owner, repos, OrgLinks::Files, detail))
}

/// The organisation's index as Notion's Markdown: its repositories' index pages are its child
/// pages ([`OrgLinks::Notion`]), its modules link to their Notion pages.
pub fn org_page_notion(owner: &str, repos: &[OrgRepo], children: &BTreeSet<String>) -> String {
    fitted(|detail| write_org(owner, repos, OrgLinks::Notion { children }, detail))
}

/// How much a repository shows on the organisation's index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Detail {
    /// Its heading, its figures and up to this many modules.
    Modules(usize),
    /// Its index and figures on one line (two in Notion: the index is a child page's block).
    Compact,
}

/// Blocks kept for what the publisher adds (pages a person put under the organisation page).
const BLOCKS_KEPT: usize = 60;

/// The most detailed page within the page limits ([`crate::layout::MAX_PAGE_BYTES`] less
/// its margin, [`crate::layout::MAX_PAGE_BLOCKS`] less [`BLOCKS_KEPT`]): fewer modules per
/// repository, then one line each. Every repository is listed whatever its size (in Notion
/// each index page must be named to stay its child), so past about 400 repositories the
/// page is over the limits, and Notion says so on the build.
fn fitted(write: impl Fn(Detail) -> String) -> String {
    let levels = [6, 3, 1, 0]
        .map(Detail::Modules)
        .into_iter()
        .chain([Detail::Compact]);
    let mut page = write(Detail::Modules(MAX_MODULES_SHOWN));
    for detail in levels {
        if fits(&page) {
            break;
        }
        page = write(detail);
    }
    page
}

fn fits(page: &str) -> bool {
    // Each line of the page is a paragraph, heading, list item or page block.
    let blocks = page.lines().filter(|l| !l.trim().is_empty()).count();
    page.len() + crate::layout::BYTES_MARGIN <= crate::layout::MAX_PAGE_BYTES
        && blocks + BLOCKS_KEPT <= crate::layout::MAX_PAGE_BLOCKS
}

/// Notion ids with or without dashes, compared alike.
pub fn normalize_id(id: &str) -> String {
    id.replace('-', "").to_ascii_lowercase()
}

fn write_org(owner: &str, repos: &[OrgRepo], links: OrgLinks<'_>, detail: Detail) -> String {
    let notion = matches!(links, OrgLinks::Notion { .. });
    let esc = |t: &str| {
        if notion {
            render::escape(Flavor::Notion, t)
        } else {
            escape(t)
        }
    };
    let mut repos: Vec<&OrgRepo> = repos.iter().collect();
    repos.sort_by(|a, b| {
        b.latest_merged_at
            .cmp(&a.latest_merged_at)
            .then(a.repo.cmp(&b.repo))
    });
    // Notion takes the title as the page's property; a file carries it as its heading.
    let mut out = if notion {
        String::new()
    } else {
        format!("# {}\n\n", esc(owner))
    };
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
    let shown = match detail {
        Detail::Modules(n) => n,
        Detail::Compact => {
            for r in &repos {
                compact_repo(&mut out, r, links, &esc);
            }
            return out;
        }
    };
    for r in &repos {
        let index = DocKey::Index {
            repo: r.repo.clone(),
        }
        .path();
        // The repository's heading, and where its index is.
        let index_url = match links {
            OrgLinks::Files => {
                out.push_str(&format!("### [{}](<{index}>)\n\n", esc(&r.repo)));
                Some(format!("<{index}>"))
            }
            OrgLinks::Notion { children } => {
                out.push_str(&format!("### {}\n\n", esc(&r.repo)));
                match &r.notion_index {
                    Some(page) if children.contains(&normalize_id(&page.id)) => {
                        out.push_str(&format!(
                            "<page url=\"{}\">{} · modules</page>\n\n",
                            render::attribute(&page.url),
                            esc(&r.repo)
                        ));
                        Some(render::escape_url(&page.url))
                    }
                    Some(page) => {
                        let url = render::escape_url(&page.url);
                        out.push_str(&format!("[Its modules]({url})\n\n"));
                        Some(url)
                    }
                    None => None,
                }
            }
        };
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
        for m in modules.iter().take(shown) {
            let page = match links {
                OrgLinks::Files => Some(format!(
                    "<{}>",
                    DocKey::Module {
                        repo: r.repo.clone(),
                        module: m.module.clone(),
                    }
                    .path()
                )),
                OrgLinks::Notion { .. } => m.notion_url.as_deref().map(render::escape_url),
            };
            let name = match page {
                Some(page) => format!("[{}]({page})", esc(&m.module)),
                None => esc(&m.module),
            };
            out.push_str(&format!(
                "- {name}: {} pull requests, latest {}\n",
                m.entry_count,
                m.latest_merged_at
                    .as_deref()
                    .and_then(|t| t.get(..10))
                    .unwrap_or("never")
            ));
        }
        let listed = modules.len().min(shown) as u64;
        if module_count(r) > listed {
            let more = module_count(r) - listed;
            out.push_str(&match &index_url {
                Some(url) => format!("- … and {more} more on [the repository's index]({url})\n"),
                None => format!("- … and {more} more on the repository's index\n"),
            });
        }
        out.push('\n');
    }
    out
}

/// One repository on one line: its index (a child page's block in Notion) and its figures.
fn compact_repo(out: &mut String, r: &OrgRepo, links: OrgLinks<'_>, esc: &dyn Fn(&str) -> String) {
    let figures = format!(
        "{} modules, {} merged pull requests, latest {}",
        module_count(r),
        entry_count(r),
        r.latest_merged_at
            .as_deref()
            .and_then(|t| t.get(..10))
            .unwrap_or("never")
    );
    match links {
        OrgLinks::Files => {
            let index = DocKey::Index {
                repo: r.repo.clone(),
            }
            .path();
            out.push_str(&format!("- [{}](<{index}>): {figures}\n", esc(&r.repo)));
        }
        OrgLinks::Notion { children } => match &r.notion_index {
            Some(page) if children.contains(&normalize_id(&page.id)) => out.push_str(&format!(
                "<page url=\"{}\">{} · modules</page>\n{figures}.\n",
                render::attribute(&page.url),
                esc(&r.repo)
            )),
            Some(page) => out.push_str(&format!(
                "- [{}]({}): {figures}\n",
                esc(&r.repo),
                render::escape_url(&page.url)
            )),
            None => out.push_str(&format!("- {}: {figures}\n", esc(&r.repo))),
        },
    }
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
            notion_url: None,
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

    #[test]
    fn in_notion_the_index_pages_are_child_pages_and_modules_link_their_pages() {
        use chronicle_domain::NotionLink;
        let mut api = org_row(
            "acme/api",
            vec![OrgModule {
                notion_url: Some("https://www.notion.so/router-aa11".into()),
                ..module("router", 4, "2024-01-01T00:00:00Z", &["alice"])
            }],
        );
        api.notion_index = Some(NotionLink {
            id: "0000aaaa-0000-4000-8000-00000000000a".into(),
            url: "https://www.notion.so/acme-api-modules-0000aaaa000040008000000000000000a".into(),
        });
        let mut web = org_row(
            "acme/web",
            vec![module(
                "<page url=\"https://www.notion.so/x\">x</page>",
                1,
                "2025-01-01T00:00:00Z",
                &["eve"],
            )],
        );
        web.notion_index = Some(NotionLink {
            id: "0000bbbb-0000-4000-8000-00000000000b".into(),
            url: "https://www.notion.so/web-0000bbbb00004000800000000000000b".into(),
        });
        let unlisted = org_row("acme/new", vec![]);
        let children: BTreeSet<String> = [normalize_id("0000aaaa-0000-4000-8000-00000000000a")]
            .into_iter()
            .collect();
        let page = org_page_notion("acme", &[api, web, unlisted], &children);
        assert!(
            !page.starts_with('#'),
            "the title is Notion's property:\n{page}"
        );
        assert!(page.contains(
            "<page url=\"https://www.notion.so/acme-api-modules-0000aaaa000040008000000000000000a\">acme/api · modules</page>"
        ), "{page}");
        assert!(
            page.contains(
                "[Its modules](https://www.notion.so/web-0000bbbb00004000800000000000000b)"
            ),
            "an index page that is not a child is a link:\n{page}"
        );
        assert!(page.contains("- [router](https://www.notion.so/router-aa11): 4 pull requests"));
        let tags = page
            .lines()
            .filter(|l| l.trim_start().starts_with("<page"))
            .count();
        assert_eq!(tags, 1, "a hostile module name makes no tag:\n{page}");
        assert!(page.contains("### acme/new\n\n0 modules"), "{page}");
    }

    #[test]
    fn a_large_organisation_fits_the_page_limits_and_names_every_index_page() {
        use chronicle_domain::NotionLink;
        let rows = |n: usize| -> Vec<OrgRepo> {
            (0..n)
                .map(|i| {
                    let modules = (0..40)
                        .map(|m| {
                            module(
                                &format!("module-{m}"),
                                3,
                                &format!("2025-01-{:02}T00:00:00Z", m % 28 + 1),
                                &["alice"],
                            )
                        })
                        .collect();
                    let mut row = org_row(&format!("acme/repo-{i}"), modules);
                    row.notion_index = Some(NotionLink {
                        id: format!("{i:032x}"),
                        url: format!("https://www.notion.so/repo-{i}-{i:032x}"),
                    });
                    row
                })
                .collect()
        };
        let blocks = |page: &str| page.lines().filter(|l| !l.trim().is_empty()).count();
        for n in [5, 60, 300] {
            let repos = rows(n);
            let children: BTreeSet<String> = repos
                .iter()
                .map(|r| normalize_id(&r.notion_index.as_ref().unwrap().id))
                .collect();
            for page in [
                org_page("acme", &repos),
                org_page_notion("acme", &repos, &children),
            ] {
                assert!(fits(&page), "{n} repositories: {} blocks", blocks(&page));
                for r in &repos {
                    assert!(
                        page.contains(&format!("{}]", r.repo))
                            || page.contains(&format!("{} · modules", r.repo)),
                        "{} is listed",
                        r.repo
                    );
                }
            }
            let notion = org_page_notion("acme", &repos, &children);
            assert_eq!(
                notion
                    .lines()
                    .filter(|l| l.starts_with("<page url="))
                    .count(),
                n,
                "every index page is named as a child"
            );
        }
        // A small organisation shows its modules, a large one fewer or none.
        let small = org_page("acme", &rows(5));
        assert!(small.contains("[module-27]"), "{small}");
        assert!(!org_page("acme", &rows(300)).contains("[module-27]"));
    }
}
