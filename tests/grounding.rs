//! The claim check measured on corpora of written stories (`tests/fixtures/grounding/*.json`,
//! each one module's facts and stories written from them): faithful ones, and ones with a plausible claim its cited PR never made, an
//! invented number, person, PR, link or domain, a sentence without a citation, or an injection
//! carried over from a PR body. Every sentence is labelled; the test prints the confusion table
//! and holds the check to it: every faithful sentence kept, every unsupported one dropped.

use std::collections::BTreeMap;

use serde::Deserialize;
use stages::domain::{IssueRef, ModuleEntry, Quote, YearStats};
use stages::story::{check_sentences, ground, prompt};

#[derive(Deserialize)]
struct Corpus {
    repo: String,
    module: String,
    description: String,
    prs: Vec<Pr>,
    answers: Vec<Answer>,
}

#[derive(Deserialize)]
struct Pr {
    number: u64,
    merged_at: String,
    author: String,
    title: String,
    summary: String,
    why: Option<String>,
    #[serde(default)]
    issues: Vec<String>,
    kind: String,
    additions: u64,
    deletions: u64,
}

#[derive(Deserialize)]
struct Answer {
    name: String,
    paragraphs: Vec<Vec<Sentence>>,
}

#[derive(Deserialize)]
struct Sentence {
    text: String,
    label: String,
    why: String,
}

fn entry(corpus: &Corpus, pr: &Pr) -> ModuleEntry {
    ModuleEntry {
        repo: corpus.repo.clone(),
        module: corpus.module.as_str().into(),
        number: pr.number,
        title: pr.title.clone(),
        url: format!("https://github.com/{}/pull/{}", corpus.repo, pr.number),
        author: pr.author.clone(),
        merged_at: pr.merged_at.clone(),
        kind: Some(pr.kind.clone()),
        breaking: pr.kind == "breaking",
        labels: vec![],
        summary: pr.summary.clone(),
        linked_issues: pr
            .issues
            .iter()
            .enumerate()
            .map(|(i, title)| IssueRef {
                number: pr.number * 10 + i as u64,
                title: title.clone(),
                state: "closed".into(),
                url: String::new(),
            })
            .collect(),
        additions: pr.additions,
        deletions: pr.deletions,
        files: vec![],
        files_here: 1,
        lines_here: pr.additions + pr.deletions,
        elsewhere: vec![],
        files_elsewhere: 0,
        why: pr.why.as_ref().map(|text| Quote {
            text: text.clone(),
            reason: true,
        }),
        reviewers: vec![],
        discussion: 0,
    }
}

#[test]
fn every_faithful_sentence_is_kept_and_every_unsupported_one_dropped() {
    let dir = devstack::emulator::repo_root().join("tests/fixtures/grounding");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    assert!(!paths.is_empty());
    for path in paths {
        let corpus: Corpus =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        println!("{}:", path.file_name().unwrap().to_string_lossy());
        check_corpus(&corpus);
    }
}

fn check_corpus(corpus: &Corpus) {
    let mut entries: Vec<ModuleEntry> = corpus.prs.iter().map(|p| entry(corpus, p)).collect();
    entries.sort_by_key(|e| std::cmp::Reverse(e.order_key()));
    let mut by_year: BTreeMap<String, Vec<ModuleEntry>> = BTreeMap::new();
    for e in &entries {
        by_year
            .entry(e.merged_at[..4].to_string())
            .or_default()
            .push(e.clone());
    }
    let years: BTreeMap<String, YearStats> = by_year
        .into_iter()
        .map(|(year, mut of_year)| {
            of_year.sort_by_key(|e| e.order_key());
            let stats = YearStats {
                count: of_year.len() as u64,
                first: of_year[0].merged_at.clone(),
                last: of_year.last().unwrap().merged_at.clone(),
                digest: stages::pages::overview::digest(&of_year),
                ..Default::default()
            };
            (year, stats)
        })
        .collect();
    let p = prompt(
        &corpus.repo,
        &corpus.module,
        Some(&corpus.description),
        &years,
        &entries,
    );

    // (label, category) → (kept, dropped), over every sentence and over distinct ones.
    let mut table: BTreeMap<(String, String), (usize, usize)> = BTreeMap::new();
    let mut distinct: BTreeMap<String, (String, bool)> = BTreeMap::new();
    let mut wrong = Vec::new();
    let (mut stories_kept, mut stories_refused) = (0, 0);
    for answer in &corpus.answers {
        let text = answer
            .paragraphs
            .iter()
            .map(|p| {
                p.iter()
                    .map(|s| s.text.as_str())
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect::<Vec<_>>()
            .join("\n\n");
        let checked = check_sentences(&text, &p).unwrap_or_else(|e| panic!("{}: {e}", answer.name));
        let labelled: Vec<&Sentence> = answer.paragraphs.iter().flatten().collect();
        assert_eq!(
            checked.len(),
            labelled.len(),
            "{}: the check split it into {:?}",
            answer.name,
            checked.iter().map(|c| &c.text).collect::<Vec<_>>()
        );
        for (c, s) in checked.iter().zip(&labelled) {
            let cell = table.entry((s.label.clone(), s.why.clone())).or_default();
            match &c.verdict {
                Ok(()) => cell.0 += 1,
                Err(_) => cell.1 += 1,
            }
            distinct.insert(s.text.clone(), (s.label.clone(), c.verdict.is_ok()));
            let faithful = s.label == "faithful";
            if faithful != c.verdict.is_ok() {
                wrong.push(format!(
                    "{} [{}/{}] {:?}: {:?}",
                    answer.name, s.label, s.why, s.text, c.verdict
                ));
            }
        }
        match ground(&text, &p) {
            Ok(_) => stories_kept += 1,
            Err(_) => stories_refused += 1,
        }
    }
    println!("claim check on {} stories:", corpus.answers.len());
    println!(
        "  {:<12} {:<20} {:>5} {:>8}",
        "label", "category", "kept", "dropped"
    );
    let (mut fk, mut fd, mut uk, mut ud) = (0, 0, 0, 0);
    for ((label, why), (kept, dropped)) in &table {
        println!("  {label:<12} {why:<20} {kept:>5} {dropped:>8}");
        if label == "faithful" {
            (fk, fd) = (fk + kept, fd + dropped);
        } else {
            (uk, ud) = (uk + kept, ud + dropped);
        }
    }
    println!("  {:<33} {fk:>5} {fd:>8}", "faithful, all");
    println!("  {:<33} {uk:>5} {ud:>8}", "unsupported, all");
    let count = |label: &str, kept: bool| {
        distinct
            .values()
            .filter(|(l, k)| (l == "faithful") == (label == "faithful") && *k == kept)
            .count()
    };
    println!(
        "  distinct sentences: faithful {} kept, {} dropped; unsupported {} kept, {} dropped",
        count("faithful", true),
        count("faithful", false),
        count("unsupported", true),
        count("unsupported", false)
    );
    println!(
        "  stories published with their unsupported sentences dropped: {stories_kept}; \
         refused whole (too little left): {stories_refused}"
    );
    assert!(
        wrong.is_empty(),
        "{} sentences misjudged:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    assert!(corpus.answers.len() >= 30 && fk >= 60 && ud >= 30);
    assert_eq!(
        stories_refused, 0,
        "every story keeps its faithful sentences"
    );
}
