//! `chronicle bench story`: what the LLM texts cost, replayed over a synthetic history against
//! the Converse stand-in with a recorded answer. Every merged PR is summarized once. Stories are
//! replayed twice: a backfill builds each module page once, back to back; the steady state
//! builds a page after each of its PRs at the PR's merge time, and asks for its story whenever
//! the stored one is no longer current (`StoryMinNewEntries` new entries, or a week with a
//! changed input). Prints the tokens per call, the calls per 1,000 merged PRs and the dollars at
//! the stated prices, with Bedrock's prompt cache on the fixed system prompt (five minutes after
//! its last use, on the stand-in's clock) and without it. Tokens are counted as the stand-in
//! counts them, one per four characters.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use stages::domain::{ModuleEntry, YearStats};
use stages::story::{story_for, StoredStory};
use stages::summary::{Summarizer, SummaryInput};

use standins::converse_standin::{ConverseReply, ConverseStub};
use standins::synthetic::HistorySpec;

/// Prices in dollars per million tokens (input, output), as stated on the command line.
#[derive(Clone, Copy, Debug)]
pub struct Prices {
    pub input: f64,
    pub output: f64,
}

impl Prices {
    /// Bedrock's cache: a write costs 1.25 times input, a read a tenth.
    fn dollars(&self, t: &Tokens) -> f64 {
        (t.input as f64 * self.input
            + t.cache_write as f64 * self.input * 1.25
            + t.cache_read as f64 * self.input * 0.1
            + t.output as f64 * self.output)
            / 1e6
    }
}

/// Tokens summed over calls.
#[derive(Clone, Copy, Debug, Default)]
struct Tokens {
    calls: u64,
    input: u64,
    output: u64,
    cache_read: u64,
    cache_write: u64,
}

impl Tokens {
    fn add(&mut self, u: &chronicle_llm::Usage) {
        self.calls += 1;
        self.input += u.input;
        self.output += u.output;
        self.cache_read += u.cache_read;
        self.cache_write += u.cache_write;
    }

    fn per_call(&self, n: u64) -> f64 {
        n as f64 / self.calls.max(1) as f64
    }
}

const STORY_MODEL: &str = "us.anthropic.claude-sonnet-4-5-20250929-v1:0";

/// A story the stand-in answers (its grounding does not change what a call costs).
/// Its length is a real story's (some 250 tokens).
const RECORDED_STORY: &str = "The module began as a small set of handlers for the public API, \
and its first pull request laid out the request and response types that every later change \
builds on (#1). Over the next year contributors added validation of request bodies, paging for \
the list endpoints and a cursor that survives concurrent writes (#2).\n\nThe largest change \
moved the storage calls behind a trait, so that tests run against an in-memory store and the \
production store can be swapped without touching the handlers (#3). A later fix retried the \
writes that timed out, because a lost write left a half-updated record behind (#3).\n\nMost \
recently the work has been smaller: error messages that name the field at fault, a faster path \
for the common read, and documentation of the module's configuration for newcomers (#2).";

/// A summary the stand-in answers, as long as a real one (some 110 tokens).
const RECORDED_SUMMARY: &str = "The change moves the retry of a timed-out payment capture from \
the browser into the worker, because a closed tab would otherwise lose the order. Captures are \
retried with exponential backoff before the order is marked failed, and the worker logs each \
attempt with the gateway's error code. A new test drives the timeout path against the in-memory \
gateway, and the checkout documentation now says how long an order may stay pending.";

pub async fn run(
    prs: usize,
    modules: usize,
    seed: u64,
    min_new_entries: u64,
    story_prices: Prices,
    summary_prices: Prices,
) -> anyhow::Result<()> {
    const SUMMARY_MODEL: &str = "us.anthropic.claude-haiku-4-5-20251001-v1:0";
    let started = Instant::now();
    let spec = HistorySpec {
        prs,
        modules,
        per_day: 1.0,
        seed,
        end: time::macros::datetime!(2026-11-30 12:00 UTC),
    };
    let repo = stages::domain::RepoName::parse("acme/widgets")?;
    let history = standins::synthetic::history(&spec);
    let config = stages::tagging::ModulesConfig::from_yaml(stages::tagging::BUNDLED_MODULES_YAML)?;
    let entries = crate::quality::entries(&repo, &history, config.for_repo(&repo));
    let sdk = ops::stack::local_sdk_config("http://127.0.0.1:9").await;

    // Summaries: one call per merged PR, the prompt of the summarize worker.
    let summary_stub = ConverseStub::start(SUMMARY_MODEL).await;
    summary_stub.script((0..history.len()).map(|_| ConverseReply::Text(RECORDED_SUMMARY.into())));
    let summarizer = chronicle_llm::WriterSummarizer::new(chronicle_llm::Writer::bedrock_with(
        summary_stub.client(&sdk),
        SUMMARY_MODEL,
    ));
    let far = || Instant::now() + Duration::from_secs(600);
    for pr in &history {
        let files: Vec<String> = pr.files.iter().map(|f| f.path.clone()).collect();
        let input = SummaryInput {
            title: &pr.title,
            body: Some(pr.body.as_str()),
            labels: &pr.labels,
            files: &files,
            issues: &[],
            modules: &[],
        };
        summarizer.summarize(&input, far()).await;
    }
    let mut summaries = Tokens::default();
    for r in summary_stub.requests() {
        summaries.add(&usage_of(&r.usage));
    }

    // Stories, twice: a backfill builds each module's page once, back to back (the cache is
    // warm); afterwards each page is built when one of its PRs merges, at its merge time.
    let backfill = stories(&repo, &entries, min_new_entries, Pace::Backfill).await;
    let steady = stories(&repo, &entries, min_new_entries, Pace::AsMerged).await;
    let per_thousand = |calls: u64| 1000.0 * calls as f64 / history.len().max(1) as f64;
    println!(
        "LLM cost of a synthetic history: {} merged PRs, {} module entries over {} modules, \
         StoryMinNewEntries {min_new_entries} and the week rule; {:.1} s",
        history.len(),
        entries.len(),
        entries
            .iter()
            .map(|e| e.module.as_str())
            .collect::<std::collections::BTreeSet<_>>()
            .len(),
        started.elapsed().as_secs_f64()
    );
    println!("  tokens: the stand-in counts one per four characters, as the prompt is sent");
    println!(
        "  PR summary ({SUMMARY_MODEL}, ${}/${} per M in/out)",
        summary_prices.input, summary_prices.output
    );
    println!(
        "    calls per 1,000 PRs          {:.0}",
        per_thousand(summaries.calls)
    );
    println!(
        "    input / output per call      {:.0} / {:.0} tokens (cached {:.0})",
        summaries.per_call(summaries.input + summaries.cache_read + summaries.cache_write),
        summaries.per_call(summaries.output),
        summaries.per_call(summaries.cache_read)
    );
    println!(
        "    dollars per 1,000 PRs        {:.3}",
        summary_prices.dollars(&summaries) * 1000.0 / history.len().max(1) as f64
    );
    println!(
        "  module story ({STORY_MODEL}, ${}/${} per M in/out; Bedrock's cache lives {} s after \
         its last use, on the stand-in's clock)",
        story_prices.input,
        story_prices.output,
        standins::converse_standin::CACHE_TTL_SECONDS
    );
    for (name, run) in [
        ("backfill: each page once, back to back", &backfill),
        ("steady state: a page per merge, at 1 PR a day", &steady),
    ] {
        let s = &run.tokens;
        println!("    {name}");
        println!(
            "      calls                      {} ({:.1} per 1,000 PRs)",
            s.calls,
            per_thousand(s.calls)
        );
        println!(
            "      input / output per call    {:.0} / {:.0} tokens, of which the fixed prompt {:.0}",
            s.per_call(s.input + s.cache_read + s.cache_write),
            s.per_call(s.output),
            s.per_call(s.cache_read + s.cache_write)
        );
        println!(
            "      fixed prompt               written to the cache {} times, read {} times",
            run.writes, run.reads
        );
        let (with, without) = (story_prices.dollars(s), story_prices.dollars(&run.uncached));
        println!(
            "      dollars per 1,000 PRs      {:.3} with the prompt cache, {:.3} without ({:+.0}%)",
            with * 1000.0 / history.len().max(1) as f64,
            without * 1000.0 / history.len().max(1) as f64,
            100.0 * (with / without.max(f64::MIN_POSITIVE) - 1.0)
        );
    }
    Ok(())
}

#[derive(Clone, Copy, PartialEq)]
enum Pace {
    /// Every module's page once, a call every 20 seconds.
    Backfill,
    /// A module's page after each of its PRs, at the PR's merge time.
    AsMerged,
}

struct StoryRun {
    tokens: Tokens,
    /// The same calls without the cache: every input token at the full price.
    uncached: Tokens,
    writes: usize,
    reads: usize,
}

async fn stories(
    repo: &stages::domain::RepoName,
    entries: &[ModuleEntry],
    min_new_entries: u64,
    pace: Pace,
) -> StoryRun {
    let sdk = ops::stack::local_sdk_config("http://127.0.0.1:9").await;
    let stub = ConverseStub::start(STORY_MODEL).await;
    let writer = chronicle_llm::Writer::bedrock_with(stub.client(&sdk), STORY_MODEL);
    let far = || Instant::now() + Duration::from_secs(600);
    let mut ordered: Vec<&ModuleEntry> = entries.iter().collect();
    ordered.sort_by_key(|e| e.order_key());
    let start = ordered
        .last()
        .and_then(|e| stages::domain::parse_rfc3339(&e.merged_at))
        .map_or(0, |t| t.unix_timestamp());
    let mut by_module: BTreeMap<String, Vec<ModuleEntry>> = BTreeMap::new();
    let mut stored: BTreeMap<String, StoredStory> = BTreeMap::new();
    // The builds: (module, entries so far, when).
    let mut builds: Vec<(String, usize, i64)> = Vec::new();
    for e in &ordered {
        let list = by_module.entry(e.module.to_string()).or_default();
        list.push((*e).clone());
        let at = stages::domain::parse_rfc3339(&e.merged_at).map_or(start, |t| t.unix_timestamp());
        if pace == Pace::AsMerged {
            builds.push((e.module.to_string(), list.len(), at));
        }
    }
    if pace == Pace::Backfill {
        for (i, (module, list)) in by_module.iter().enumerate() {
            builds.push((module.clone(), list.len(), start + 20 * i as i64));
        }
    }
    // Marked for the cache as the page builder marks it: within the cache's life of the last
    // call (see `CachePolicy`).
    let policy = stages::story::CachePolicy::default();
    for (module, upto, at) in builds {
        let list = &by_module[&module][..upto];
        let now = time::OffsetDateTime::from_unix_timestamp(at)
            .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
        let recent: Vec<ModuleEntry> = list.iter().rev().take(100).cloned().collect();
        let mut prompt =
            stages::story::prompt(repo.as_str(), &module, None, &years_of(list), &recent);
        let count = list.len() as u64;
        let previous = stored.get(&module);
        if previous
            .is_some_and(|s| stages::story::is_current(s, &prompt, count, min_new_entries, now))
        {
            continue;
        }
        prompt.cache = policy.mark(now);
        stub.set_clock(at);
        stub.script([ConverseReply::Text(RECORDED_STORY.into())]);
        if let Some(story) = story_for(
            &writer,
            previous,
            &prompt,
            count,
            min_new_entries,
            now,
            far(),
        )
        .await
        {
            stored.insert(module, story);
        }
    }
    let mut run = StoryRun {
        tokens: Tokens::default(),
        uncached: Tokens::default(),
        writes: 0,
        reads: 0,
    };
    for r in stub.requests() {
        let u = usage_of(&r.usage);
        run.tokens.add(&u);
        run.uncached.add(&chronicle_llm::Usage {
            input: u.input + u.cache_read + u.cache_write,
            cache_read: 0,
            cache_write: 0,
            ..u
        });
        run.writes += usize::from(u.cache_write > 0);
        run.reads += usize::from(u.cache_read > 0);
    }
    run
}

fn usage_of(u: &(u64, u64, u64, u64)) -> chronicle_llm::Usage {
    chronicle_llm::Usage {
        input: u.0,
        cache_read: u.1,
        cache_write: u.2,
        output: u.3,
    }
}

fn years_of(entries: &[ModuleEntry]) -> BTreeMap<String, YearStats> {
    let mut by_year: BTreeMap<String, Vec<ModuleEntry>> = BTreeMap::new();
    for e in entries {
        by_year
            .entry(format!("{:04}", e.year()))
            .or_default()
            .push(e.clone());
    }
    by_year
        .into_iter()
        .map(|(year, of_year)| {
            let stats = YearStats {
                count: of_year.len() as u64,
                first: of_year
                    .first()
                    .map(|e| e.merged_at.clone())
                    .unwrap_or_default(),
                last: of_year
                    .last()
                    .map(|e| e.merged_at.clone())
                    .unwrap_or_default(),
                digest: stages::pages::overview::digest(&of_year),
                ..Default::default()
            };
            (year, stats)
        })
        .collect()
}
