//! `chronicle`: the local stack, the operator commands, the stand-in and the benchmarks: the
//! command line, dispatched to `devstack`, `ops`, `standins` and `bench`.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// Counted, so `bench history` can report the page builder's peak heap.
#[global_allocator]
static ALLOCATOR: bench::alloc::Counting = bench::alloc::Counting;
use devstack::dev::{DevOptions, DevStack};

#[derive(Parser)]
#[command(
    name = "chronicle",
    version,
    about = "Chronicle: merged pull requests -> onboarding narratives"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the local stack: emulator (unless AWS_ENDPOINT_URL is set), table, webhook on loopback.
    Dev {
        /// Port of POST /webhook on 127.0.0.1.
        #[arg(long, default_value_t = 3000)]
        port: u16,
        /// Port for the emulator this starts (default: a free one).
        #[arg(long)]
        emulator_port: Option<u16>,
        /// Send the recorded deliveries in DIR (signed) and print what was stored.
        #[arg(long, value_name = "DIR")]
        replay: Option<PathBuf>,
        /// Post a synthetic history of this many merged PRs (Codertocat/Hello-World, 30
        /// modules) through the webhook, their files written as enrichment would, and wait for
        /// their pages.
        #[arg(long, value_name = "N")]
        synthetic: Option<usize>,
        /// Import OWNER/REPO's merged history with `chronicle backfill` inside the stack
        /// (GITHUB_TOKEN; GITHUB_API_URL may point at GitHub Enterprise Server).
        #[arg(long, value_name = "OWNER/REPO")]
        backfill: Option<String>,
        /// Exit after the replay (or the synthetic history) instead of serving until Ctrl-C.
        #[arg(long)]
        once: bool,
        /// Seconds between sweeps (the deployed schedule runs every minute).
        #[arg(long, default_value_t = 5)]
        sweep_interval: u64,
    },
    /// The pipeline at a glance: pending backlog per shard and its oldest row, deferred and
    /// given-up rows, queue and DLQ depths, stale and failing pages (exit 1: needs attention).
    Status {
        /// A deployed stack (names from its CloudFormation outputs). Without it: the local
        /// stack at AWS_ENDPOINT_URL.
        #[arg(long)]
        stack: Option<String>,
        /// Also this repository's backfill checkpoint (OWNER/REPO).
        #[arg(long)]
        repo: Option<String>,
        /// JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// The given-up rows (failedReason, attempts, lastError, when), newest first, from the
    /// sparse failed index (never a Scan).
    Failed {
        /// A deployed stack (names from its CloudFormation outputs). Without it: the local
        /// stack at AWS_ENDPOINT_URL.
        #[arg(long)]
        stack: Option<String>,
        /// Only this repository's (OWNER/REPO).
        #[arg(long)]
        repo: Option<String>,
        /// Once after upgrading from a version without the failed index: give the rows given
        /// up before it its marker (one Scan of the PR table).
        #[arg(long)]
        index_old: bool,
        /// JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Summarize PRs again (OWNER/REPO#N …, or the given-up ones with --failed): their entries
    /// are rewritten in place and their pages rebuilt, never appended.
    Reprocess {
        /// OWNER/REPO#NUMBER, one or more.
        prs: Vec<String>,
        /// The given-up rows instead (of --repo, given up since --since).
        #[arg(long)]
        failed: bool,
        #[arg(long)]
        repo: Option<String>,
        /// With --failed: only rows given up at or after this date (YYYY-MM-DD or RFC 3339).
        #[arg(long)]
        since: Option<String>,
        /// Write the summary paragraph again too (else the stored one is kept).
        #[arg(long)]
        new_summary: bool,
        /// Show what would change; change nothing.
        #[arg(long)]
        dry_run: bool,
        /// On a deployed stack, change more than 10 rows without asking.
        #[arg(long)]
        yes: bool,
        #[arg(long)]
        stack: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Empty a DLQ: the summarize DLQ back to its queue (given-up rows are summarized again),
    /// or the schedule DLQ acknowledged.
    Redrive {
        #[arg(value_enum, default_value = "summarize")]
        queue: ops::commands::RedriveQueue,
        #[arg(long)]
        dry_run: bool,
        /// On a deployed stack, move more than 10 messages without asking.
        #[arg(long)]
        yes: bool,
        #[arg(long)]
        stack: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Ask GitHub to redeliver the failed pull_request deliveries of the last 3 days that were
    /// never stored, once each (what the hourly RedeliverFunction does). GITHUB_TOKEN, or the
    /// stack's token secret; it needs webhook read and write access.
    Redeliver {
        /// List what would be redelivered; ask nothing.
        #[arg(long)]
        dry_run: bool,
        #[arg(long)]
        stack: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Mark a repository's module pages (or one module's) for a full rebuild.
    Rebuild {
        /// OWNER/REPO.
        #[arg(long)]
        repo: String,
        #[arg(long)]
        module: Option<String>,
        #[arg(long)]
        dry_run: bool,
        /// On a deployed stack, mark more than 10 pages without asking.
        #[arg(long)]
        yes: bool,
        #[arg(long)]
        stack: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Import a repository's merged pull requests from before the install (GitHub GraphQL),
    /// through the webhook's own upsert, already enriched. Resumable: run it again after a stop.
    Backfill {
        /// OWNER/REPO (or --org / --installation for every repository of a GitHub App
        /// installation).
        #[arg(default_value = "")]
        repo: String,
        /// Every repository the GitHub App's installation on this organisation or user account
        /// can see (GITHUB_APP_ID and GITHUB_APP_PRIVATE_KEY, or the stack's App parameters).
        #[arg(long)]
        org: Option<String>,
        /// Every repository of this installation of the GitHub App (with --org: it must be
        /// that account's installation, else nothing runs).
        #[arg(long)]
        installation: Option<u64>,
        /// With --org or --installation: only repositories matching one of these globs
        /// (`api-*`, `acme/web`), comma-separated.
        #[arg(long, value_delimiter = ',')]
        repos: Vec<String>,
        /// Only PRs merged on or after this date (YYYY-MM-DD or RFC 3339).
        #[arg(long)]
        since: Option<String>,
        /// Only PRs merged on or before this date (YYYY-MM-DD: to the end of that day).
        #[arg(long)]
        until: Option<String>,
        /// At most this many PRs in this run.
        #[arg(long)]
        limit: Option<u64>,
        /// A deployed stack: tables from its CloudFormation outputs, the token from its secret
        /// unless GITHUB_TOKEN is set. Without it: the local stack at AWS_ENDPOINT_URL.
        #[arg(long)]
        stack: Option<String>,
        /// Pull requests per GraphQL query (1-100; smaller pages after a timeout).
        #[arg(long, default_value_t = stages::backfill::DEFAULT_PAGE_SIZE)]
        page_size: u32,
        /// Points per hour left to other users of the token: the run waits for the reset
        /// rather than spend them.
        #[arg(long, default_value_t = 500)]
        reserve_points: u64,
        /// Ignore the checkpoint and start again from the oldest PR (writes nothing already
        /// there).
        #[arg(long)]
        restart: bool,
    },
    /// Serve the GitHub stand-in (REST and GraphQL, each query validated against the vendored
    /// schema) on loopback with synthetic merged pull requests, until Ctrl-C or SIGTERM: for
    /// local runs of the enrich function (`cargo lambda watch`) without GitHub. Prints
    /// `GITHUB_API_URL=…` once it listens.
    Standin {
        /// The only token it accepts.
        #[arg(long, default_value = "ghp_local_standin")]
        token: String,
        /// OWNER/REPO#N to serve (repeatable).
        #[arg(long = "pull", required = true)]
        pulls: Vec<String>,
        /// Changed files of each pull request.
        #[arg(long, default_value_t = 5)]
        files: usize,
    },
    /// Print benchmark figures.
    Bench {
        #[command(subcommand)]
        target: BenchTarget,
    },
}

#[derive(Subcommand)]
enum BenchTarget {
    /// How readable a synthetic history's pages are: summaries that are the title or a trailer,
    /// key files outside their module, the share of docs, quiet modules, the largest page.
    /// Pure (no emulator).
    Quality {
        #[arg(long, default_value_t = 2_000)]
        prs: usize,
        #[arg(long, default_value_t = 30)]
        modules: usize,
        #[arg(long, default_value_t = 7)]
        seed: u64,
        /// Measure a real repository's history instead: the merged PRs of this git clone
        /// (squash and merge commits that name their PR), tagged with the bundled config.
        #[arg(long)]
        git: Option<PathBuf>,
        /// With --git: only its last this many PRs.
        #[arg(long)]
        limit: Option<usize>,
    },
    /// What the LLM texts cost: tokens per PR summary and per module story, calls per 1,000
    /// merged PRs (StoryMinNewEntries and the week rule), dollars at the stated prices, with and
    /// without Bedrock's prompt cache. Against the Converse stand-in (no emulator).
    Story {
        #[arg(long, default_value_t = 2_000)]
        prs: usize,
        #[arg(long, default_value_t = 30)]
        modules: usize,
        #[arg(long, default_value_t = 7)]
        seed: u64,
        #[arg(long, default_value_t = 20)]
        min_new_entries: u64,
        /// The story model's dollars per million input tokens (Claude Sonnet 4.5 on Bedrock).
        #[arg(long, default_value_t = 3.0)]
        story_input_price: f64,
        #[arg(long, default_value_t = 15.0)]
        story_output_price: f64,
        /// The summary model's dollars per million input tokens (Claude Haiku 4.5 on Bedrock).
        #[arg(long, default_value_t = 1.0)]
        summary_input_price: f64,
        #[arg(long, default_value_t = 5.0)]
        summary_output_price: f64,
    },
    /// Sweep time and DynamoDB items read for backlogs of pending rows in a large table.
    Sweep {
        #[arg(long, default_value_t = 100_000)]
        table_rows: usize,
        #[arg(long, value_delimiter = ',', default_value = "10,1000,10000")]
        backlogs: Vec<usize>,
    },
    /// Webhook-received to summarized latency through the local stack.
    Pipeline {
        #[arg(long, default_value_t = 200)]
        deliveries: usize,
        #[arg(long, default_value_t = 1000)]
        sweep_interval_ms: u64,
    },
    /// Items read per summarized PR and per page build, page builds per module during a burst,
    /// and the builder's peak heap, for histories of growing length.
    History {
        #[arg(long, value_delimiter = ',', default_value = "1000,5000,20000")]
        sizes: Vec<usize>,
        #[arg(long, default_value_t = 30)]
        modules: usize,
        /// PRs put through the pipeline at the end of each history.
        #[arg(long, default_value_t = 100)]
        measured: usize,
        /// The page builder's rebuild interval during the burst, in seconds.
        #[arg(long, default_value_t = 2)]
        rebuild_seconds: u64,
        /// How often the builder ticks during the burst, in milliseconds.
        #[arg(long, default_value_t = 250)]
        tick_ms: u64,
        /// The hot module: this many merged PRs in one year (0: skipped).
        #[arg(long, default_value_t = 5000)]
        hot: usize,
        /// New merges after the hot module's history, each followed by one build.
        #[arg(long, default_value_t = 30)]
        hot_merges: usize,
    },
    /// Points, GitHub requests and time to import a merged history with `chronicle backfill`,
    /// next to the REST path's request count; then a smaller import through the local stack
    /// until every PR is on a page.
    Backfill {
        #[arg(long, default_value_t = 5000)]
        prs: usize,
        #[arg(long, default_value_t = 300)]
        through_pages: usize,
    },
    /// A big import meeting slow summaries: DLQ messages, rows claimed twice and messages sent
    /// per row with the sweeper's queue bound (SWEEP_MAX_QUEUED), then without it.
    Backpressure {
        #[arg(long, default_value_t = 5000)]
        rows: usize,
        /// Added to each summary.
        #[arg(long, default_value_t = 20)]
        delay_ms: u64,
        /// The sweeper's claim (deployed: 900 s), compressed.
        #[arg(long, default_value_t = 10)]
        claim_ttl: u64,
        /// SWEEP_MAX_QUEUED, scaled to the compressed claim (deployed: 500 for 900 s).
        #[arg(long, default_value_t = 50)]
        max_queued: usize,
        /// Also run the same import without the bound.
        #[arg(long)]
        unbounded_too: bool,
    },
    /// Each function's release bootstrap: its size and its Lambda init time (spawn to the first
    /// `/runtime/invocation/next` poll of a fake Runtime API), median of `--runs`.
    Bootstrap {
        /// Where the binaries are: `target/release` (`cargo build --release`), or
        /// `<function>/bootstrap` as `cargo lambda build --release` lays them out (which must
        /// be built for this machine's architecture to run; the arm64 ones only on arm64).
        #[arg(long, default_value = "target/release")]
        dir: std::path::PathBuf,
        #[arg(long, default_value_t = 15)]
        runs: usize,
        /// Only these functions (default: all six).
        #[arg(long, value_delimiter = ',')]
        functions: Vec<String>,
    },
    /// Webhook handler time, HTTP round trip through the local stack, item sizes.
    Webhook {
        #[arg(long, default_value_t = 5000)]
        iterations: usize,
        #[arg(long, default_value_t = 300)]
        round_trips: usize,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    stages::telemetry::init_cli();
    match Cli::parse().command {
        Command::Dev {
            port,
            emulator_port,
            replay,
            synthetic,
            backfill,
            once,
            sweep_interval,
        } => {
            let mut options = DevOptions::from_env(port, emulator_port);
            options.sweep_interval = std::time::Duration::from_secs(sweep_interval.max(1));
            dev(options, replay, synthetic, backfill, once).await
        }
        Command::Standin {
            token,
            pulls,
            files,
        } => standin(token, pulls, files).await,
        Command::Reprocess {
            prs,
            failed,
            repo,
            since,
            new_summary,
            dry_run,
            yes,
            stack,
            json,
        } => {
            let args = ops::commands::ReprocessArgs {
                prs,
                failed,
                repo,
                since,
                new_summary,
                dry_run,
                yes,
            };
            let code = ops::commands::run_reprocess(stack.as_deref(), &args, json).await;
            std::process::exit(i32::from(code));
        }
        Command::Redrive {
            queue,
            dry_run,
            yes,
            stack,
            json,
        } => {
            let code =
                ops::commands::run_redrive(stack.as_deref(), queue, dry_run, yes, json).await;
            std::process::exit(i32::from(code));
        }
        Command::Redeliver {
            dry_run,
            stack,
            json,
        } => {
            let code = ops::commands::run_redeliver(stack.as_deref(), dry_run, json).await;
            std::process::exit(i32::from(code));
        }
        Command::Rebuild {
            repo,
            module,
            dry_run,
            yes,
            stack,
            json,
        } => {
            let code = ops::commands::run_rebuild(
                stack.as_deref(),
                &repo,
                module.as_deref(),
                dry_run,
                yes,
                json,
            )
            .await;
            std::process::exit(i32::from(code));
        }
        Command::Status { stack, repo, json } => {
            let code = ops::commands::run_status(stack.as_deref(), repo.as_deref(), json).await;
            std::process::exit(i32::from(code));
        }
        Command::Failed {
            stack,
            repo,
            index_old,
            json,
        } => {
            let code =
                ops::commands::run_failed(stack.as_deref(), repo.as_deref(), index_old, json).await;
            std::process::exit(i32::from(code));
        }
        Command::Backfill {
            repo,
            org,
            installation,
            repos,
            since,
            until,
            limit,
            stack,
            page_size,
            reserve_points,
            restart,
        } => {
            let whole = org.is_some() || installation.is_some();
            let args = ops::backfill::BackfillArgs {
                repo,
                since,
                until,
                limit,
                stack,
                page_size,
                reserve_points,
                restart,
                org,
                installation,
                repos,
            };
            let code = if whole {
                ops::backfill_org::run(args).await
            } else {
                ops::backfill::run(args).await
            };
            std::process::exit(i32::from(code));
        }
        Command::Bench { target } => bench(target).await,
    }
}

/// `chronicle standin`: the GitHub stand-in serving these pull requests until stopped.
async fn standin(token: String, pulls: Vec<String>, files: usize) -> anyhow::Result<()> {
    let mut served = Vec::new();
    for spec in &pulls {
        let parsed = spec
            .split_once('#')
            .and_then(|(repo, n)| Some((repo, n.parse::<u64>().ok()?)))
            .filter(|(repo, _)| stages::domain::RepoName::parse(repo).is_ok());
        match parsed {
            Some(p) => served.push(p),
            None => {
                eprintln!("chronicle standin: --pull {spec:?} is not OWNER/REPO#N");
                std::process::exit(2);
            }
        }
    }
    let standin = standins::github_standin::GitHubStandIn::start(&token).await?;
    for (repo, number) in served {
        standin.put_pull(
            repo,
            standins::github_standin::standin_pull(repo, number, files),
        );
    }
    println!("GITHUB_API_URL={}", standin.url());
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r?,
        _ = term.recv() => {}
    }
    Ok(())
}

/// `chronicle bench …`.
async fn bench(target: BenchTarget) -> anyhow::Result<()> {
    match target {
        BenchTarget::Quality {
            git: Some(dir),
            limit,
            ..
        } => bench::quality::run_bench_git(&dir, limit),
        BenchTarget::Quality {
            prs, modules, seed, ..
        } => bench::quality::run_bench(prs, modules, seed),
        BenchTarget::Story {
            prs,
            modules,
            seed,
            min_new_entries,
            story_input_price,
            story_output_price,
            summary_input_price,
            summary_output_price,
        } => {
            let price = |input, output| bench::story::Prices { input, output };
            bench::story::run(
                prs,
                modules,
                seed,
                min_new_entries,
                price(story_input_price, story_output_price),
                price(summary_input_price, summary_output_price),
            )
            .await
        }
        BenchTarget::Webhook {
            iterations,
            round_trips,
        } => bench::webhook::run_webhook(iterations, round_trips).await,
        BenchTarget::Bootstrap {
            dir,
            runs,
            functions,
        } => {
            bench::bootstrap::run(bench::bootstrap::BootstrapOptions {
                dir,
                runs,
                functions,
            })
            .await
        }
        BenchTarget::Backfill { prs, through_pages } => {
            bench::backfill::run(bench::backfill::BackfillBenchOptions { prs, through_pages }).await
        }
        BenchTarget::Backpressure {
            rows,
            delay_ms,
            claim_ttl,
            max_queued,
            unbounded_too,
        } => {
            bench::backpressure::run_bench(rows, delay_ms, claim_ttl, max_queued, unbounded_too)
                .await
        }
        BenchTarget::Sweep {
            table_rows,
            backlogs,
        } => bench::webhook::run_sweep(table_rows, &backlogs).await,
        BenchTarget::History {
            sizes,
            modules,
            measured,
            rebuild_seconds,
            tick_ms,
            hot,
            hot_merges,
        } => {
            bench::history::run_history(bench::history::HistoryOptions {
                sizes,
                modules,
                measured,
                rebuild: std::time::Duration::from_secs(rebuild_seconds),
                tick: std::time::Duration::from_millis(tick_ms),
                hot,
                hot_merges,
            })
            .await
        }
        BenchTarget::Pipeline {
            deliveries,
            sweep_interval_ms,
        } => {
            bench::webhook::run_pipeline(
                deliveries,
                std::time::Duration::from_millis(sweep_interval_ms),
            )
            .await
        }
    }
}

async fn dev(
    mut options: DevOptions,
    replay: Option<PathBuf>,
    synthetic: Option<usize>,
    backfill: Option<String>,
    once: bool,
) -> anyhow::Result<()> {
    let sweep_interval = options.sweep_interval;
    // Without a token, a replay's PRs are served with their recorded files by the built-in
    // stand-in: the first page shows a real module, not the repository with no paths.
    let no_token = std::env::var("GITHUB_TOKEN").map_or(true, |t| t.trim().is_empty())
        && !options.overrides.iter().any(|(k, _)| k == "GITHUB_TOKEN");
    let demo = match &replay {
        Some(dir) if no_token => devstack::demo::standin_for(dir).await?,
        _ => None,
    };
    if let Some(standin) = &demo {
        options
            .overrides
            .push(("GITHUB_API_URL".into(), standin.url().to_string()));
        options
            .overrides
            .push(("GITHUB_TOKEN".into(), devstack::demo::TOKEN.into()));
    }
    let stack = DevStack::start(options).await?;
    let origin = if stack.started_emulator() {
        "started by chronicle dev"
    } else {
        "from AWS_ENDPOINT_URL"
    };
    println!("chronicle dev");
    println!("  emulator  {} ({origin})", stack.endpoint());
    println!(
        "  table     {} (from template.yaml)",
        stack.table().table_name
    );
    println!("  webhook   POST {}", stack.webhook_url());
    println!(
        "  enrich    {} (stream events from the emulator, DLQ {})",
        if demo.is_some() {
            "calls the built-in GitHub stand-in (the replay's recorded files; set GITHUB_TOKEN for GitHub)"
        } else if stack.enrich_enabled() {
            "calls GitHub at GITHUB_API_URL"
        } else {
            "skipped: no GITHUB_TOKEN"
        },
        stack.stream_dlq_url()
    );
    println!(
        "  sweeper   every {}s -> {}",
        sweep_interval.as_secs(),
        stack.summarize_queue_url()
    );
    println!(
        "  summarize module entries, pages marked stale (DLQ {})",
        stack.summarize_dlq_url()
    );
    println!(
        "  pages     rebuilt every {}s from the entries -> {}/",
        sweep_interval.as_secs(),
        stack.output_dir()
    );
    match stack.secret() {
        Some(_) => println!(
            "  signature checked with GITHUB_WEBHOOK_SECRET (default: {:?})",
            devstack::dev::DEV_SECRET
        ),
        None => println!("  signature NOT checked (CHRONICLE_INSECURE_NO_SIGNATURE=1)"),
    }
    let replayed = replay.is_some();
    if let Some(dir) = replay {
        let lines =
            devstack::replay::replay(&dir, &stack.webhook_url(), stack.secret(), stack.store())
                .await;
        let followed = match lines {
            Ok(lines) => {
                devstack::replay::print(&lines);
                devstack::replay::follow_to_narratives(
                    &stack,
                    &lines,
                    std::time::Duration::from_secs(90),
                )
                .await
            }
            Err(e) => Err(e),
        };
        if let Err(e) = followed {
            stack.shutdown().await;
            return Err(e);
        }
    }
    if let Some(count) = synthetic {
        let loaded =
            devstack::synthetic_load::load(&stack, count, std::time::Duration::from_secs(1_800))
                .await;
        if let Err(e) = loaded {
            stack.shutdown().await;
            return Err(e);
        }
    }
    let backfilled = backfill.is_some();
    if let Some(repo) = backfill {
        let args = ops::backfill::BackfillArgs {
            repo: repo.clone(),
            page_size: stages::backfill::DEFAULT_PAGE_SIZE,
            reserve_points: 500,
            ..Default::default()
        };
        let target = stack.backfill_target();
        match ops::backfill::run_with(&args, &target).await {
            Ok(report) => println!("{}", ops::backfill::summary(&repo, &report)),
            Err((_, message)) => {
                stack.shutdown().await;
                anyhow::bail!("backfill: {message}");
            }
        }
    }
    if once && (replayed || synthetic.is_some() || backfilled) {
        stack.shutdown().await;
        return Ok(());
    }
    println!("Ctrl-C to stop.");
    tokio::signal::ctrl_c().await?;
    println!("stopping");
    stack.shutdown().await;
    Ok(())
}
