//! A module with no entries: its PRs all moved to other modules (a PR summarized before its
//! files arrived sits on the module named after the repository, then moves to its own once
//! they do). Its page would say "No merged pull requests yet" forever, so it has none: the
//! build removes every page it had and publishes nothing. A PR that lands on it again makes the
//! next build publish it anew. A module that no longer exists in the repository but still has
//! entries is another case: it keeps its page, as history.

use crate::domain::PageItem;
use crate::pages::{DocKey, MAIN_LABEL};

/// The pages an empty module's build removes: those the plan found gone, every archive page of
/// the years the item held and every page Notion recorded for it, children before their parents
/// (parts, then years, then the module page), so none is asked to move a page whose parent is
/// already in the trash.
pub(super) fn withdrawn(item: &PageItem, planned: Vec<DocKey>) -> Vec<DocKey> {
    let archive = |label: &str| DocKey::Archive {
        repo: item.repo.clone(),
        module: item.module.clone(),
        label: label.to_string(),
    };
    let mut labels: Vec<String> = item
        .years
        .iter()
        .flat_map(|(year, stats)| std::iter::once(year.clone()).chain(stats.parts.clone()))
        .chain(item.notion.keys().filter(|l| *l != MAIN_LABEL).cloned())
        .collect();
    labels.extend(planned.iter().filter_map(|k| match k {
        DocKey::Archive { label, .. } => Some(label.clone()),
        _ => None,
    }));
    labels.sort();
    labels.dedup();
    // A part's label is its year's and more (`2019-p2`): the longer ones first.
    labels.sort_by_key(|l| std::cmp::Reverse(l.len()));
    let mut keys: Vec<DocKey> = labels.iter().map(|l| archive(l)).collect();
    keys.push(DocKey::Module {
        repo: item.repo.clone(),
        module: item.module.clone(),
    });
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn children_go_before_their_parents_and_the_module_page_last() {
        let mut item = PageItem {
            repo: "acme/app".into(),
            module: "acme/app".into(),
            ..Default::default()
        };
        item.years.insert(
            "2019".into(),
            crate::domain::YearStats {
                parts: vec!["2019-p1".into(), "2019-p2".into()],
                ..Default::default()
            },
        );
        item.notion.insert("2018".into(), Default::default());
        item.notion.insert(MAIN_LABEL.into(), Default::default());
        let keys = withdrawn(&item, vec![]);
        let labels: Vec<&str> = keys
            .iter()
            .map(|k| match k {
                DocKey::Archive { label, .. } => label.as_str(),
                _ => "module",
            })
            .collect();
        assert_eq!(labels, ["2019-p1", "2019-p2", "2018", "2019", "module"]);
    }
}
