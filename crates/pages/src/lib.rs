//! Module pages as views: each page is a pure function of stored entries, rebuilt and
//! replaced whole.
//!
//! - [`blocks`]: the one document model every publisher renders (headings, paragraphs, bullets,
//!   links to child pages), so Markdown, S3 and Notion carry the same content.
//! - [`content`]: what the pages say (a module page, its archive pages, the repository index).
//! - [`overview`]: the module overview (what it is, start here, who knows it, the story so far,
//!   recently, status) from per-year digests.
//! - [`layout`]: which entries go on the module page, within [`layout::MAX_PAGE_BYTES`] and
//!   Notion's limits; [`archive`]: how older ones are laid out in yearly pages and their parts.
//! - [`render`]: documents as CommonMark or as Notion's Markdown; [`wording`]: how figures and
//!   dates read.

pub mod archive;
pub mod blocks;
pub mod content;
pub mod decisions;
pub mod experts;
pub mod layout;
pub mod milestones;
pub mod org;
pub mod overview;
pub mod path;
pub mod plan;
pub mod recency;
pub mod render;
pub mod wording;

pub use blocks::{Block, Link, Span};

use path::path_segment;

/// Which page a document is: a repository's index, a module's page, or one of its archive
/// pages (`label` = `2019`, `2019-p2`, a half `2019-p2-a`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DocKey {
    Index {
        repo: String,
    },
    Module {
        repo: String,
        module: String,
    },
    Archive {
        repo: String,
        module: String,
        label: String,
    },
}

/// The label of a module's own page among its Notion pages (archives use their own labels).
pub const MAIN_LABEL: &str = "main";

impl DocKey {
    pub fn repo(&self) -> &str {
        match self {
            DocKey::Index { repo } | DocKey::Module { repo, .. } | DocKey::Archive { repo, .. } => {
                repo
            }
        }
    }

    /// The page item this page belongs to: its module, or the index item.
    pub fn item_module(&self) -> &str {
        match self {
            DocKey::Index { .. } => chronicle_store::INDEX_MODULE,
            DocKey::Module { module, .. } | DocKey::Archive { module, .. } => module,
        }
    }

    /// The page's label on its page item (`main`, or the archive label).
    pub fn label(&self) -> &str {
        match self {
            DocKey::Index { .. } | DocKey::Module { .. } => MAIN_LABEL,
            DocKey::Archive { label, .. } => label,
        }
    }

    /// Where the page lives as a file, relative to the output root: the index is
    /// `<owner>/<repo>.md`, a module `<owner>/<repo>/<module>.md`, an archive
    /// `<owner>/<repo>/<module>/<label>.md`. Every part is made path-safe.
    pub fn path(&self) -> String {
        let (owner, name) = self.repo().split_once('/').unwrap_or(("_", self.repo()));
        let (owner, name) = (path_segment(owner), path_segment(name));
        match self {
            DocKey::Index { .. } => format!("{owner}/{name}.md"),
            DocKey::Module { module, .. } => format!("{owner}/{name}/{}.md", path_segment(module)),
            DocKey::Archive { module, label, .. } => format!(
                "{owner}/{name}/{}/{}.md",
                path_segment(module),
                path_segment(label)
            ),
        }
    }

    /// Where an earlier version wrote this page, when that is not [`DocKey::path`] (a name
    /// that now takes a suffix to stay distinct): the publisher deletes that copy.
    pub fn legacy_path(&self) -> Option<String> {
        use path::legacy_path_segment as old;
        let (owner, name) = self.repo().split_once('/').unwrap_or(("_", self.repo()));
        let (owner, name) = (old(owner), old(name));
        let path = match self {
            DocKey::Index { .. } => format!("{owner}/{name}.md"),
            DocKey::Module { module, .. } => format!("{owner}/{name}/{}.md", old(module)),
            DocKey::Archive { module, label, .. } => {
                format!("{owner}/{name}/{}/{}.md", old(module), old(label))
            }
        };
        // The earlier name may be another page's current one (`a:b` was `a_b`, which a module
        // `a_b` still is): only a path no current page can have is deleted.
        let only_old = path
            .trim_end_matches(".md")
            .split('/')
            .any(|c| !path::could_be_current(c));
        (path != self.path() && only_old).then_some(path)
    }

    /// The relative link from this page's file to `to`'s.
    pub fn relative_link(&self, to: &DocKey) -> String {
        relative_path(&self.path(), &to.path())
    }
}

/// The relative path from the file `from` to the file `to` (both relative to one root).
pub fn relative_path(from: &str, to: &str) -> String {
    let from_dirs: Vec<&str> = from.split('/').collect::<Vec<_>>();
    let from_dirs = &from_dirs[..from_dirs.len().saturating_sub(1)];
    let to_parts: Vec<&str> = to.split('/').collect();
    let common = from_dirs
        .iter()
        .zip(to_parts.iter())
        .take_while(|(a, b)| a == b)
        .count()
        .min(to_parts.len().saturating_sub(1));
    let mut parts: Vec<&str> = vec![".."; from_dirs.len() - common];
    parts.extend(&to_parts[common..]);
    parts.join("/")
}

/// One page to publish: which page, its title, its parent page (Notion nests pages), and its
/// content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Document {
    pub key: DocKey,
    pub title: String,
    pub parent: Option<DocKey>,
    pub blocks: Vec<Block>,
}

impl Document {
    /// The pages this one links as its children (Notion's `<page>` blocks).
    pub fn children(&self) -> Vec<&DocKey> {
        self.blocks
            .iter()
            .filter_map(|b| match b {
                Block::Child { key, .. } => Some(key),
                _ => None,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_relative_links() {
        let index = DocKey::Index {
            repo: "acme/app".into(),
        };
        let module = DocKey::Module {
            repo: "acme/app".into(),
            module: "src/api".into(),
        };
        let archive = DocKey::Archive {
            repo: "acme/app".into(),
            module: "src/api".into(),
            label: "2019-Q1".into(),
        };
        assert_eq!(index.path(), "acme/app.md");
        assert_eq!(module.path(), "acme/app/src__api.md");
        assert_eq!(archive.path(), "acme/app/src__api/2019-Q1.md");
        assert_eq!(index.relative_link(&module), "app/src__api.md");
        assert_eq!(module.relative_link(&archive), "src__api/2019-Q1.md");
        assert_eq!(archive.relative_link(&module), "../src__api.md");
        assert_eq!(module.relative_link(&index), "../app.md");
        let year = DocKey::Archive {
            repo: "acme/app".into(),
            module: "src/api".into(),
            label: "2019".into(),
        };
        assert_eq!(year.relative_link(&archive), "2019-Q1.md");
    }
}
