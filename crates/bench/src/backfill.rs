//! `chronicle bench backfill`: a generated history of merged PRs imported from the GraphQL
//! stand-in into the emulator. Prints the rate-limit points spent and the GitHub requests made
//! per 1,000 PRs, next to what the REST path would need for the same PRs (the list, each PR's
//! files, each closing issue), the wall time, and the time until every backfilled PR of a smaller
//! import is on a page through the local stack.

use std::time::{Duration, Instant};

use stages::backfill::{Backfill, BackfillOptions, Quiet};
use stages::domain::RepoName;
use stages::github::graphql::GraphQlClient;
use stages::secret::Secret;
use stages::store::{CheckpointStore, PrStore};

use devstack::dev::{DevOptions, DevStack};
use standins::github_standin::{history_pulls, GitHubStandIn};
use standins::synthetic::HistorySpec;

const TOKEN: &str = "ghp_bench_backfill";
const REPO: &str = "Codertocat/Hello-World";

pub struct BackfillBenchOptions {
    pub prs: usize,
    /// PRs put through the whole local stack, to time "backfilled → on a page".
    pub through_pages: usize,
}

fn spec(prs: usize) -> HistorySpec {
    HistorySpec {
        prs,
        modules: 30,
        per_day: 6.0,
        seed: 20_261_203,
        end: time::OffsetDateTime::now_utc() - time::Duration::days(1),
    }
}

pub async fn run(options: BackfillBenchOptions) -> anyhow::Result<()> {
    let (emulator, endpoint) = devstack::emulator::from_env_or_start().await?;
    let sdk = ops::stack::local_sdk_config(&endpoint).await;
    let client = aws_sdk_dynamodb::Client::new(&sdk);
    let stand_in = GitHubStandIn::start(TOKEN).await?;
    let pulls = history_pulls(REPO, &spec(options.prs));
    let merged: Vec<&serde_json::Value> = pulls.iter().filter(|p| p["merged"] == true).collect();
    // The REST path for the same PRs, as the enrich stage makes it: the list (100 a page), then
    // per PR the PR itself (totals), its files (100 a page) and each issue it closes.
    let rest: u64 = pulls.len().div_ceil(100) as u64
        + merged
            .iter()
            .map(|p| {
                let files = p["files"].as_array().map_or(0, Vec::len).max(1);
                1 + files.div_ceil(100) as u64
                    + p["closingIssuesReferences"].as_array().map_or(0, Vec::len) as u64
            })
            .sum::<u64>();
    stand_in.set_repo(REPO, pulls.clone());

    let id = uuid::Uuid::new_v4().simple().to_string();
    let table = format!("bench-backfill-{id}");
    let pages_table = format!("bench-backfill-pages-{id}");
    let template = devstack::template::Template::bundled()?;
    template
        .table(devstack::template::PR_TABLE)?
        .create(&client, &table)
        .await?;
    template
        .table(devstack::template::PAGES_TABLE_ID)?
        .create(&client, &pages_table)
        .await?;
    let store = PrStore::new(
        client.clone(),
        stages::config::TableConfig {
            table_name: table,
            pending_shards: 4,
        },
    );
    let meter = store.meter().clone();
    let checkpoints = CheckpointStore::new(client.clone(), pages_table);
    let github = GraphQlClient::new(stand_in.url(), &Secret::new(TOKEN), Duration::from_secs(30))?;
    let backfill_options = BackfillOptions::new(RepoName::parse(REPO)?);
    println!(
        "importing {} merged PRs ({} in the repository with the closed ones) from the GraphQL stand-in into {endpoint} …",
        merged.len(),
        pulls.len()
    );
    let started = Instant::now();
    let report = Backfill {
        github: &github,
        store: &store,
        checkpoints: &checkpoints,
    }
    .run(&backfill_options, &Quiet)
    .await?;
    let wall = started.elapsed();
    let stats = stand_in.stats();
    let n = merged.len() as f64 / 1000.0;
    let reading = meter.reading();
    println!();
    println!("    PRs | points  /1k PRs | GraphQL req  /1k PRs | REST path req  /1k PRs | write req/PR | wall s | PRs/s");
    println!(
        "  {:>5} | {:>6} {:>7.1} | {:>11} {:>7.1} | {:>13} {:>7.1} | {:>12.2} | {:>6.1} | {:>5.0}",
        merged.len(),
        stats.points,
        stats.points as f64 / n,
        stats.graphql_requests,
        stats.graphql_requests as f64 / n,
        rest,
        rest as f64 / n,
        reading.write_requests as f64 / merged.len().max(1) as f64,
        wall.as_secs_f64(),
        merged.len() as f64 / wall.as_secs_f64(),
    );
    println!(
        "target ≤ 60 points per 1,000 PRs: {}; GraphQL needs {:.1}× fewer requests than REST; REST calls made: {}",
        if stats.points as f64 / n <= 60.0 { "met" } else { "MISSED" },
        rest as f64 / stats.graphql_requests.max(1) as f64,
        stats.rest_requests
    );
    anyhow::ensure!(
        report.imported as usize == merged.len(),
        "imported {} of {}",
        report.imported,
        merged.len()
    );

    if options.through_pages > 0 {
        through_pages(&endpoint, &stand_in, options.through_pages).await?;
    }
    stand_in.stop().await;
    if let Some(e) = emulator {
        e.stop().await;
    }
    Ok(())
}

/// Backfills `count` PRs into a fresh local stack and waits until each is summarized and every
/// page is built.
async fn through_pages(
    endpoint: &str,
    stand_in: &GitHubStandIn,
    count: usize,
) -> anyhow::Result<()> {
    let mut dev = DevOptions::from_env(0, None);
    dev.endpoint = Some(endpoint.to_string());
    dev.table_name = Some(format!("bench-pages-{}", uuid::Uuid::new_v4().simple()));
    dev.sweep_interval = Duration::from_secs(1);
    dev.overrides = vec![
        ("GITHUB_API_URL".into(), stand_in.url().to_string()),
        ("GITHUB_TOKEN".into(), TOKEN.into()),
        (
            "OUTPUT_DIR".into(),
            std::env::temp_dir()
                .join(format!("chronicle-bench-{}", std::process::id()))
                .display()
                .to_string(),
        ),
    ];
    let stack = DevStack::start(dev).await?;
    let mut target = stack.backfill_target();
    target.api_url = stand_in.url().to_string();
    target.token = Some(Secret::new(TOKEN));
    let args = ops::backfill::BackfillArgs {
        repo: REPO.into(),
        limit: Some(count as u64),
        page_size: stages::backfill::DEFAULT_PAGE_SIZE,
        reserve_points: 500,
        ..Default::default()
    };
    let started = Instant::now();
    let result = async {
        let report = ops::backfill::run_with(&args, &target)
            .await
            .map_err(|(_, m)| anyhow::anyhow!(m))?;
        let imported = started.elapsed();
        loop {
            let mut pending = 0;
            for shard in 0..stack.table().pending_shards {
                pending += stack.store().pending_page(&shard.to_string(), None, 1).await?.rows.len();
            }
            if pending == 0 && stack.pages().stale_pages().await?.is_empty() {
                break;
            }
            anyhow::ensure!(started.elapsed() < Duration::from_secs(3_600), "pages not built within an hour");
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        println!(
            "through the local stack: {} PRs backfilled in {:.1} s, every one on a page after {:.1} s",
            report.imported,
            imported.as_secs_f64(),
            started.elapsed().as_secs_f64()
        );
        anyhow::Ok(())
    }
    .await;
    stack.shutdown().await;
    result
}
