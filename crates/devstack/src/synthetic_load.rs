//! `chronicle dev --synthetic N`: a repository's history of N merged PRs through the local
//! stack. Each PR is posted to the local webhook over HTTP as a signed `pull_request` delivery
//! (built from the recorded merged example), and its changed files are written as the enrich
//! stage writes them (GitHub cannot be reached from here); sweeps wait meanwhile, as rows wait for
//! enrichment. Then the sweeper, the summarize worker and the page builder do the rest, and this
//! prints where the pages are.

use std::time::{Duration, Instant};

use serde_json::json;
use stages::domain::{rfc3339_seconds, RepoName};
use time::OffsetDateTime;

use crate::dev::DevStack;
use crate::replay::{self, RecordedDelivery};
use standins::synthetic::{history, HistorySpec, SyntheticPr};

/// The repository of the recorded example the deliveries are built from.
pub const REPO: &str = "Codertocat/Hello-World";

/// The signed delivery GitHub would send when `pr` merged.
pub fn delivery(pr: &SyntheticPr) -> RecordedDelivery {
    let mut payload = crate::samples::merged(crate::samples::webhook("pull_request.closed.1"));
    let at = rfc3339_seconds(pr.merged_at);
    let p = &mut payload["pull_request"];
    p["number"] = json!(pr.number);
    p["title"] = json!(pr.title);
    p["body"] = if pr.body.is_empty() {
        json!(null)
    } else {
        json!(pr.body)
    };
    p["user"]["login"] = json!(pr.author);
    p["labels"] = json!(pr
        .labels
        .iter()
        .map(|l| json!({"name": l}))
        .collect::<Vec<_>>());
    p["html_url"] = json!(format!("https://github.com/{REPO}/pull/{}", pr.number));
    for field in ["merged_at", "closed_at", "updated_at"] {
        p[field] = json!(at);
    }
    payload["number"] = json!(pr.number);
    RecordedDelivery {
        headers: [
            ("Content-Type", "application/json".to_string()),
            ("X-GitHub-Event", "pull_request".to_string()),
            ("X-GitHub-Delivery", uuid_for(pr.number)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect(),
        body: payload.to_string(),
    }
}

fn uuid_for(number: u64) -> String {
    format!("00000000-0000-4000-8000-{number:012}")
}

/// Loads `count` PRs, waits for their pages, and prints where the index, the busiest module's
/// page and one of its archive pages are.
pub async fn load(stack: &DevStack, count: usize, limit: Duration) -> anyhow::Result<()> {
    let spec = HistorySpec {
        prs: count,
        modules: 30,
        per_day: 6.0,
        seed: 20_261_203,
        end: OffsetDateTime::now_utc() - time::Duration::days(1),
    };
    let prs = history(&spec);
    let repo = RepoName::parse(REPO)?;
    let client = reqwest::Client::new();
    let started = Instant::now();
    println!(
        "posting {count} synthetic merged PRs to {} …",
        stack.webhook_url()
    );
    stack.pause_sweeps(true);
    let posted = async {
        for pr in &prs {
            let (status, answer) =
                replay::send(&client, &stack.webhook_url(), &delivery(pr), stack.secret()).await?;
            anyhow::ensure!(
                (200..300).contains(&status),
                "PR #{}: HTTP {status} {answer}",
                pr.number
            );
            standins::synthetic::enrich(stack.store(), &repo, pr).await?;
        }
        anyhow::Ok(())
    }
    .await;
    stack.pause_sweeps(false);
    posted?;
    println!(
        "stored and enriched in {:.0} s; waiting for the sweeper, the worker and the page builder …",
        started.elapsed().as_secs_f64()
    );
    let give_up = Instant::now() + limit;
    let last = prs.last().map(|p| p.number).unwrap_or_default();
    loop {
        let done = stack
            .store()
            .get(&repo, last)
            .await?
            .is_some_and(|row| row.contains_key(stages::store::attr::SUMMARIZED_AT));
        let pending = stack.store().pending_page("0", None, 1).await?.rows.len()
            + stack.store().pending_page("1", None, 1).await?.rows.len()
            + stack.store().pending_page("2", None, 1).await?.rows.len()
            + stack.store().pending_page("3", None, 1).await?.rows.len();
        if done && pending == 0 && stack.pages().stale_pages().await?.is_empty() {
            break;
        }
        anyhow::ensure!(
            Instant::now() < give_up,
            "the pipeline did not finish within {limit:?}"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    println!("done in {:.0} s", started.elapsed().as_secs_f64());
    let items = stack.pages().repo_pages(REPO).await?;
    let busiest = items
        .iter()
        .filter(|i| i.module != stages::store::INDEX_MODULE)
        .max_by_key(|i| i.entry_count);
    let index = stages::pages::DocKey::Index { repo: REPO.into() };
    println!("  index   {}/{}", stack.output_dir(), index.path());
    if let Some(module) = busiest {
        let key = stages::pages::DocKey::Module {
            repo: REPO.into(),
            module: module.module.clone(),
        };
        println!(
            "  busiest {}/{} ({} PRs)",
            stack.output_dir(),
            key.path(),
            module.entry_count
        );
        if let Some((_, year)) = module.years.iter().find(|(_, y)| !y.parts.is_empty()) {
            let archive = stages::pages::DocKey::Archive {
                repo: REPO.into(),
                module: module.module.clone(),
                label: year.parts[0].clone(),
            };
            println!("  archive {}/{}", stack.output_dir(), archive.path());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use stages::payload::{classify_pull_request, Classified};

    #[test]
    fn a_synthetic_delivery_is_a_merged_pull_request_event_of_its_pr() {
        let spec = HistorySpec {
            prs: 3,
            modules: 5,
            per_day: 6.0,
            seed: 1,
            end: time::macros::datetime!(2026-11-30 12:00 UTC),
        };
        let pr = &history(&spec)[2];
        let delivery = delivery(pr);
        assert_eq!(delivery.headers["X-GitHub-Event"], "pull_request");
        let Classified::Merged(merged) = classify_pull_request(delivery.body.as_bytes()).unwrap()
        else {
            panic!("not merged")
        };
        assert_eq!(merged.number, pr.number);
        assert_eq!(merged.title, pr.title);
        assert_eq!(merged.author, pr.author);
        assert_eq!(
            merged.merged_at,
            pr.merged_at.replace_nanosecond(0).unwrap()
        );
        assert_eq!(merged.repo.as_str(), REPO);
    }
}
