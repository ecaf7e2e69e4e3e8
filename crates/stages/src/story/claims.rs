//! Claims checked against their sources: each sentence of a written story must cite the pull
//! requests it speaks of, and say only what their facts say.
//!
//! The rule (measured on `tests/fixtures/grounding/router.json`, whose confusion table the test
//! prints):
//! 1. The sentence cites at least one PR (`#N`), and every PR it cites is one the prompt gave.
//! 2. Every `@login` it names wrote one of the PRs it cites, or is among the years' most active;
//!    every number (digits joined by `,` `.` `_` read as one) is one the cited PRs' facts hold
//!    (their titles, summaries, decisions and issues, not their dates), a year of the module,
//!    or a count of what the module's figures count ("3 fixes", "12 pull requests"; see
//!    [`super::figures`]); it holds no digit of another script, and no link, URL, e-mail
//!    address or domain name.
//! 3. Its distinctive terms occur in its sources (the cited PRs' facts, and the module's own):
//!    each code span's words, each capitalised word after the sentence's first, and the first
//!    when it looks like a name (`GraphQL`, `OAuth2`).
//! 4. At least [`MIN_SUPPORT`] of its content words occur in its sources. Content words are the
//!    sentence's words of three letters or more beyond [`STOP_WORDS`] (function words, and the
//!    words any story of a module uses: "module", "added", "later"…), compared by their Snowball
//!    English stems, so "validation" is supported by "Validate"; and at most [`MAX_MISSING`]
//!    are missing, however long the sentence.
//!
//! A PR's facts are its prompt line: number, date, author, kind, title, summary, key decision
//! and closed issues; a PR named only as a year's milestone has its title.

use std::collections::{BTreeMap, BTreeSet};

use unicode_segmentation::UnicodeSegmentation;

/// The share of a sentence's content words its sources must hold.
pub const MIN_SUPPORT: f64 = 0.6;
/// The most content words a sentence may hold that its sources do not, however long it is (a
/// long sentence would otherwise carry a claim in its 40%).
pub const MAX_MISSING: usize = 3;

/// Words a sentence may use without a source: function words, and the vocabulary of any story.
pub const STOP_WORDS: &[&str] = &[
    // Function words.
    "the",
    "and",
    "for",
    "with",
    "from",
    "into",
    "onto",
    "that",
    "this",
    "these",
    "those",
    "its",
    "their",
    "there",
    "then",
    "than",
    "which",
    "who",
    "whom",
    "whose",
    "what",
    "when",
    "where",
    "while",
    "was",
    "were",
    "are",
    "been",
    "being",
    "has",
    "have",
    "had",
    "not",
    "but",
    "also",
    "all",
    "any",
    "both",
    "each",
    "more",
    "most",
    "other",
    "some",
    "such",
    "only",
    "own",
    "same",
    "very",
    "can",
    "could",
    "will",
    "would",
    "should",
    "may",
    "might",
    "must",
    "does",
    "did",
    "doing",
    "done",
    "about",
    "above",
    "after",
    "again",
    "against",
    "before",
    "below",
    "between",
    "during",
    "over",
    "under",
    "until",
    "upon",
    "via",
    "within",
    "without",
    "through",
    "across",
    "along",
    "around",
    "because",
    "since",
    "instead",
    "rather",
    "so",
    "thus",
    "too",
    "yet",
    "one",
    "two",
    "three",
    "first",
    "second",
    "third",
    "last",
    "next",
    "they",
    "them",
    "his",
    "her",
    "she",
    "him",
    "our",
    "out",
    "off",
    "now",
    "just",
    "even",
    "still",
    "well",
    "how",
    "why",
    "it's",
    "whether",
    "per",
    "own",
    "several",
    "many",
    "much",
    "few",
    "less",
    "lot",
    "way",
    "ways",
    "part",
    "parts",
    "thing",
    "things",
    "like",
    // The vocabulary of any module's story.
    "module",
    "modules",
    "repository",
    "project",
    "codebase",
    "code",
    "pull",
    "request",
    "requests",
    "change",
    "changes",
    "changed",
    "changing",
    "add",
    "added",
    "adding",
    "adds",
    "introduce",
    "introduced",
    "introduces",
    "introducing",
    "create",
    "created",
    "creates",
    "make",
    "made",
    "makes",
    "making",
    "bring",
    "brought",
    "give",
    "gave",
    "given",
    "get",
    "got",
    "become",
    "became",
    "grow",
    "grew",
    "grown",
    "start",
    "started",
    "began",
    "begin",
    "begun",
    "follow",
    "followed",
    "following",
    "continue",
    "continued",
    "land",
    "landed",
    "merge",
    "merged",
    "ship",
    "shipped",
    "work",
    "worked",
    "works",
    "later",
    "recent",
    "recently",
    "early",
    "earlier",
    "latest",
    "new",
    "newer",
    "newest",
    "old",
    "older",
    "today",
    "year",
    "years",
    "time",
    "since",
    "story",
    "history",
    "newcomer",
    "newcomers",
    "contributor",
    "contributors",
    "maintainer",
    "maintainers",
    "author",
    "authors",
    "support",
    "supported",
    "supports",
    "help",
    "helped",
    "helps",
    "use",
    "used",
    "uses",
    "using",
    "let",
    "lets",
    "allow",
    "allowed",
    "allows",
    "now",
    "today",
    "step",
    "steps",
    "since",
    "place",
    "along",
    "took",
    "take",
    "takes",
    "came",
    "come",
    "comes",
    "went",
    "move",
    "moved",
    "set",
    "see",
];

/// What a sentence citing a PR may say: the words of the facts it stands on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Source {
    /// Snowball stems of its words.
    stems: BTreeSet<String>,
    /// Its words, lowercased and unstemmed (for code spans and names).
    words: BTreeSet<String>,
    /// Its numbers.
    numbers: BTreeSet<u64>,
}

impl Source {
    pub fn add(&mut self, text: &str) {
        self.add_words(text);
        self.numbers.extend(super::figures::numbers(text));
    }

    /// Its words only: a prompt line's head, whose numbers (the PR's own, its date) are not
    /// figures a sentence may state.
    pub fn add_words(&mut self, text: &str) {
        for word in words(text) {
            self.stems.insert(stem(&word));
            self.words.insert(word);
        }
    }

    fn holds(&self, word: &str) -> bool {
        self.words.contains(word) || self.stems.contains(&stem(word))
    }
}

/// The sources of a story: each PR's, and the module's own (its name, description, years).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sources {
    pub prs: BTreeMap<u64, Source>,
    pub module: Source,
    /// Each PR's author (lowercased login).
    pub authors: BTreeMap<u64, String>,
    /// The years' most active authors: people any sentence may name.
    pub active: BTreeSet<String>,
}

impl Sources {
    pub fn add_pr(&mut self, number: u64, text: &str) {
        self.prs.entry(number).or_default().add(text);
    }

    /// A PR's prompt line: `head` (its number, date, author, kind) gives words, `body` (its
    /// title, summary, decision, issues) words and numbers.
    pub fn add_pr_line(&mut self, number: u64, head: &str, body: &str) {
        let source = self.prs.entry(number).or_default();
        source.add_words(head);
        source.add(body);
    }

    /// Whether any of the facts hold `n` (a number written inside a name: a term).
    fn holds_number_anywhere(&self, n: u64) -> bool {
        self.module.numbers.contains(&n) || self.prs.values().any(|s| s.numbers.contains(&n))
    }

    /// Whether `n` is among the numbers of the PRs `cited`, or the module's.
    fn holds_number(&self, cited: &BTreeSet<u64>, n: u64) -> bool {
        self.module.numbers.contains(&n)
            || cited
                .iter()
                .filter_map(|c| self.prs.get(c))
                .any(|s| s.numbers.contains(&n))
    }

    /// Whether `login` wrote one of the PRs `cited`, or is among the years' most active.
    fn knows(&self, cited: &BTreeSet<u64>, login: &str) -> bool {
        self.active.contains(login)
            || cited
                .iter()
                .any(|n| self.authors.get(n).is_some_and(|a| a == login))
    }

    /// Whether `word` occurs in the facts of the PRs `cited`, or the module's.
    fn supports(&self, cited: &BTreeSet<u64>, word: &str) -> bool {
        self.module.holds(word)
            || cited
                .iter()
                .filter_map(|n| self.prs.get(n))
                .any(|s| s.holds(word))
    }
}

/// Why one sentence is not kept.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unsupported {
    #[error("it cites no pull request")]
    NoCitation,
    #[error("it cites #{0}, which is not one of the pull requests it was given")]
    UnknownPr(u64),
    #[error("it names @{0}, who wrote none of the PRs it cites and is not among the module's most active")]
    UnknownPerson(String),
    #[error("it states {0}, a number the facts do not hold")]
    UnknownNumber(u64),
    #[error("it holds a link or a domain ({0:?}); the page links the PRs itself")]
    Link(String),
    #[error("it names {0:?}, which the PRs it cites do not")]
    UnknownTerm(String),
    #[error("the PRs it cites hold {supported} of its {total} content words (missing: {missing})")]
    Unsupported {
        supported: usize,
        total: usize,
        missing: String,
    },
}

/// The PR numbers a text cites (`#N`, "PR N", "pull request N").
pub fn citations(text: &str) -> Vec<u64> {
    static PR: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    PR.get_or_init(|| {
        regex::Regex::new(r"(?i)(?:#|\bPRs?\s*#?|\bpull requests?\s*#?|\bpull/)(\d+)")
            .expect("a valid pattern")
    })
    .captures_iter(text)
    .filter_map(|c| c[1].parse().ok())
    .collect()
}

/// The logins a text names (`@login`).
pub fn people(text: &str) -> Vec<String> {
    static PERSON: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    PERSON
        .get_or_init(|| {
            regex::Regex::new(r"(?:^|[^\w@/.])@([A-Za-z0-9][A-Za-z0-9-]{0,38}(?:\[bot\])?)")
                .expect("a valid pattern")
        })
        .captures_iter(text)
        .map(|c| c[1].to_string())
        .collect()
}

/// What the check needs of the prompt.
pub struct Facts<'a> {
    pub prs: &'a BTreeSet<u64>,
    pub people: &'a BTreeSet<String>,
    pub figures: &'a super::figures::Figures,
    pub sources: &'a Sources,
}

/// Checks one sentence (as the page shows it) against the facts.
pub fn check(sentence: &str, facts: &Facts) -> Result<(), Unsupported> {
    let spans = crate::pages::blocks::inline_spans(sentence);
    let shown: String = spans.iter().map(|s| s.text.as_str()).collect();
    if let Some(link) = super::link_in(sentence, &spans) {
        return Err(Unsupported::Link(link));
    }
    let cited: BTreeSet<u64> = citations(&shown).into_iter().collect();
    if let Some(n) = cited.iter().find(|n| !facts.prs.contains(n)) {
        return Err(Unsupported::UnknownPr(*n));
    }
    if cited.is_empty() {
        return Err(Unsupported::NoCitation);
    }
    let sources = facts.sources;
    if let Some(login) = people(&shown).into_iter().find(|l| {
        let l = l.to_ascii_lowercase();
        !facts.people.contains(&l) || !sources.knows(&cited, &l)
    }) {
        return Err(Unsupported::UnknownPerson(login));
    }
    // Digits of other scripts (`٣`, `３`) are not read as numbers, so none is allowed.
    if let Some(c) = shown
        .chars()
        .find(|c| c.is_numeric() && !c.is_ascii_digit())
    {
        return Err(Unsupported::UnknownTerm(c.to_string()));
    }
    let figures = facts.figures;
    let numbers = super::figures::stated(&strip_references(&shown));
    // Counts of a year the sentence names are that year's.
    let named: Vec<u64> = numbers
        .iter()
        .filter(|s| !s.in_name && figures.is_year(s.n))
        .map(|s| s.n)
        .collect();
    if let Some(n) = numbers
        .into_iter()
        .find(|s| {
            let allowed = if s.in_name {
                sources.holds_number_anywhere(s.n)
            } else {
                sources.holds_number(&cited, s.n)
                    || figures.is_year(s.n)
                    || s.unit
                        .is_some_and(|unit| figures.counts(s.n, unit, cited.len(), &named))
            };
            !allowed
        })
        .map(|s| s.n)
    {
        return Err(Unsupported::UnknownNumber(n));
    }
    // Distinctive terms: every word of a code span, every capitalised word after the first.
    for span in spans.iter().filter(|s| s.code) {
        if words(&span.text)
            .iter()
            .any(|w| !sources.supports(&cited, w))
        {
            return Err(Unsupported::UnknownTerm(span.text.clone()));
        }
    }
    let prose: String = spans
        .iter()
        .map(|s| if s.code { " " } else { s.text.as_str() })
        .collect();
    let prose = strip_references(&prose);
    for name in capitalised(&prose) {
        if !sources.supports(&cited, &name.to_lowercase()) {
            return Err(Unsupported::UnknownTerm(name));
        }
    }
    let content: BTreeSet<String> = words(&prose)
        .into_iter()
        .filter(|w| !is_stop_word(w))
        .collect();
    let missing: Vec<&String> = content
        .iter()
        .filter(|w| !sources.supports(&cited, w))
        .collect();
    let supported = content.len() - missing.len();
    if !content.is_empty()
        && ((supported as f64) < MIN_SUPPORT * content.len() as f64 || missing.len() > MAX_MISSING)
    {
        return Err(Unsupported::Unsupported {
            supported,
            total: content.len(),
            missing: missing
                .iter()
                .map(|w| w.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    Ok(())
}

/// A text's sentences, each with what follows it up to the next (so they join back into the
/// text). A piece with no letters ("(#12).") belongs to the sentence before it.
pub fn sentences(paragraph: &str) -> Vec<String> {
    // UAX #29 keeps a sentence going when the next word is lowercase ("e.g. foo"); a login or a
    // code span opening the next sentence ("… (#3). @bob added …") is a new sentence.
    static OPENER: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let opener = OPENER
        .get_or_init(|| regex::Regex::new(r"[.!?][)\]\x22']*\s+[@`]").expect("a valid pattern"));
    let mut pieces: Vec<&str> = Vec::new();
    for piece in paragraph.split_sentence_bounds() {
        let mut start = 0;
        for m in opener.find_iter(piece) {
            let cut = m.end() - 1;
            pieces.push(&piece[start..cut]);
            start = cut;
        }
        pieces.push(&piece[start..]);
    }
    let mut out: Vec<String> = Vec::new();
    for piece in pieces {
        match out.last_mut() {
            Some(last) if !piece.chars().any(char::is_alphabetic) => last.push_str(piece),
            _ => out.push(piece.to_string()),
        }
    }
    out
}

/// Words that open a sentence by pointing back at the one before it.
pub fn leans_back(sentence: &str) -> bool {
    let first = sentence
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .trim_matches(|c: char| !c.is_alphabetic())
        .to_lowercase();
    [
        "it", "this", "that", "these", "those", "they", "its", "their", "he", "she", "there",
        "such",
    ]
    .contains(&first.as_str())
}

fn is_stop_word(word: &str) -> bool {
    static STOP: std::sync::OnceLock<BTreeSet<String>> = std::sync::OnceLock::new();
    STOP.get_or_init(|| {
        STOP_WORDS
            .iter()
            .flat_map(|w| [w.to_string(), stem(w)])
            .collect()
    })
    .contains(word)
        || word.len() < 3
        || word.chars().all(|c| c.is_ascii_digit())
}

/// `#N`, `PR N` and `@login` taken out of the words.
fn strip_references(text: &str) -> String {
    static REFS: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    REFS.get_or_init(|| {
        regex::Regex::new(
            r"(?i)(?:#|\bPRs?\s*#?|\bpull requests?\s*#?|\bpull/)\d+|@[A-Za-z0-9][A-Za-z0-9-]*(?:\[bot\])?",
        )
        .expect("a valid pattern")
    })
    .replace_all(text, " ")
    .into_owned()
}

/// Lowercased words (letters and digits), split at everything else.
fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// Capitalised words after the sentence's first word (and not opening a clause after a colon),
/// each piece of a hyphenated or dotted token on its own (`UTF-8` is `UTF`).
fn capitalised(prose: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut first = true;
    for token in prose.split_whitespace() {
        if !token.chars().any(char::is_alphanumeric) {
            continue;
        }
        for word in token.split(|c: char| !c.is_alphanumeric()) {
            let capital = word.chars().next().is_some_and(char::is_uppercase);
            // The first word is capitalised anyway: a name only when it looks like one
            // (`GraphQL`, `OAuth2`).
            let named = !first
                || word
                    .chars()
                    .skip(1)
                    .any(|c| c.is_uppercase() || c.is_ascii_digit());
            if capital && named && !is_stop_word(&word.to_lowercase()) {
                out.push(word.to_string());
            }
        }
        first = token.ends_with(':');
    }
    out
}

fn stem(word: &str) -> String {
    static STEMMER: std::sync::OnceLock<rust_stemmers::Stemmer> = std::sync::OnceLock::new();
    STEMMER
        .get_or_init(|| rust_stemmers::Stemmer::create(rust_stemmers::Algorithm::English))
        .stem(word)
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts_of(
        sources: &Sources,
    ) -> (
        BTreeSet<u64>,
        BTreeSet<String>,
        crate::story::figures::Figures,
    ) {
        let mut figures = crate::story::figures::Figures::default();
        figures.add_year(2024, 2, &Default::default());
        (
            sources.prs.keys().copied().collect(),
            ["alice".to_string(), "bob".to_string()].into(),
            figures,
        )
    }

    #[test]
    fn a_sentence_says_only_what_the_prs_it_cites_say() {
        let mut sources = Sources::default();
        sources.add_pr(
            2,
            "Validate request bodies. Request bodies are checked against the schema before the \
             handler runs.",
        );
        sources.add_pr(
            3,
            "Add paging to the list endpoint with a `cursor` parameter.",
        );
        sources.module.add("acme/widgets api The public HTTP API.");
        sources.authors.insert(2, "bob".into());
        sources.authors.insert(3, "alice".into());
        let (prs, people, figures) = facts_of(&sources);
        let facts = Facts {
            prs: &prs,
            people: &people,
            figures: &figures,
            sources: &sources,
        };
        assert_eq!(
            check("@bob added validation of request bodies (#2).", &facts),
            Ok(())
        );
        assert_eq!(
            check(
                "The list endpoint gained paging with a `cursor` (#3).",
                &facts
            ),
            Ok(())
        );
        // A real PR cited for what it never said.
        assert!(matches!(
            check("@bob rewrote the handler in Rust for speed (#2).", &facts),
            Err(Unsupported::UnknownTerm(_))
        ));
        assert!(matches!(
            check(
                "Request bodies got cached to cut memory use sharply (#2).",
                &facts
            ),
            Err(Unsupported::Unsupported { .. })
        ));
        // Another PR's change under this number.
        assert!(matches!(
            check("Paging of the list endpoint came in #2.", &facts),
            Err(Unsupported::Unsupported { .. })
        ));
        assert_eq!(
            check("Request bodies are validated.", &facts),
            Err(Unsupported::NoCitation)
        );
        assert!(matches!(
            check("@mallory reviewed the paging (#3).", &facts),
            Err(Unsupported::UnknownPerson(_))
        ));
        assert!(matches!(
            check("Paging of the list endpoint is 40% faster (#3).", &facts),
            Err(Unsupported::UnknownNumber(40))
        ));
        assert!(matches!(
            check("Read about paging at evil.example (#3).", &facts),
            Err(Unsupported::Link(_))
        ));
        assert!(matches!(
            check("Read about paging at the campus site uni.edu (#3).", &facts),
            Err(Unsupported::Link(_))
        ));
        // A module author, but not the author of the PR cited.
        assert!(matches!(
            check("@bob added paging to the list endpoint (#3).", &facts),
            Err(Unsupported::UnknownPerson(_))
        ));
        // A grouped or decimal figure is one number; digits of another script are refused.
        assert!(matches!(
            check(
                "Paging of the list endpoint serves 1,000 rows (#3).",
                &facts
            ),
            Err(Unsupported::UnknownNumber(1000))
        ));
        assert!(matches!(
            check("Paging of the list endpoint is 9.5 faster (#3).", &facts),
            Err(Unsupported::UnknownNumber(95))
        ));
        assert!(matches!(
            check("Paging of the list endpoint is ٤٠ faster (#3).", &facts),
            Err(Unsupported::UnknownTerm(_))
        ));
        // A name as the first word is checked like any other.
        assert!(matches!(
            check("GraphQL paging came to the list endpoint (#3).", &facts),
            Err(Unsupported::UnknownTerm(_))
        ));
        // A long sentence cannot carry a claim in its unsupported 40%.
        assert!(matches!(
            check(
                "Request bodies are checked against the schema before the handler runs, \
                 validated, checked, and also encrypted, signed, compressed, audited (#2).",
                &facts
            ),
            Err(Unsupported::Unsupported { .. })
        ));
    }

    #[test]
    fn sentences_keep_their_citations_and_join_back() {
        let text = "The api began in #1. It grew paging (#3). (#2). @bob added checks (#2). \
                    `list` came in #3.";
        let s = sentences(text);
        assert_eq!(s.concat(), text);
        assert_eq!(s.len(), 4, "{s:?}");
        assert!(
            s[2].starts_with("@bob") && s[3].starts_with("`list`"),
            "{s:?}"
        );
        assert!(s[1].contains("(#2)"));
        assert!(leans_back(&s[1]));
        assert!(!leans_back(&s[0]));
    }
}
