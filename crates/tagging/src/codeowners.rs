//! CODEOWNERS read as GitHub reads it: the last matching pattern wins, and its owners own the
//! file. Owners are who to ask about a module.

use super::*;

/// A parsed `CODEOWNERS` file, with GitHub's rules: gitignore-like patterns, a leading `/`
/// anchors to the repository root, a pattern without any other `/` matches at any depth, a
/// pattern matches a file or a directory and everything below it (a trailing `/` = directories
/// only), except that a final `*` segment (`docs/*`) matches only the files directly inside;
/// `*` and `?` stay within a segment, `**` crosses them. The **last** matching line wins, and a
/// line with a pattern and no owners un-owns what it matches.
///
/// What GitHub rejects is skipped, as GitHub skips it: `!` negations and patterns that cannot
/// be compiled. `[`, `]`, `{`, `}` are literal characters (no ranges or alternations). Text from
/// a `#` that starts a word is a comment.
#[derive(Debug, Clone)]
pub struct Codeowners {
    /// Every glob of every kept line, matched at once.
    set: GlobSet,
    /// For each glob of `set`, the index of its line in `lines`.
    line_of_glob: Vec<usize>,
    /// The module of each kept line, in file order: its first owner without the leading `@`;
    /// `None` for an un-owning line.
    lines: Vec<Option<ModuleName>>,
    /// Whether each kept line matches everything (`* @org/maintainers`).
    catch_all: Vec<bool>,
    /// Every owner of each kept line, as written (`@octo-org/payments`, `docs@example.com`).
    all_owners: Vec<Vec<String>>,
}

impl Codeowners {
    pub fn parse(text: &str) -> Self {
        let mut builder = GlobSetBuilder::new();
        let mut line_of_glob = Vec::new();
        let mut lines = Vec::new();
        let mut catch_all = Vec::new();
        let mut all_owners: Vec<Vec<String>> = Vec::new();
        for (number, raw) in text.lines().enumerate() {
            let mut words = raw.split_whitespace().take_while(|w| !w.starts_with('#'));
            let Some(pattern) = words.next() else {
                continue; // blank or comment
            };
            let owner = match words.next() {
                None => None,
                Some(first) => match first.strip_prefix('@').unwrap_or(first) {
                    "" => {
                        tracing::debug!(line = number + 1, "CODEOWNERS line skipped: bare @");
                        continue;
                    }
                    name => Some(ModuleName::new(name)),
                },
            };
            let Some(globs) = codeowners_globs(pattern) else {
                tracing::debug!(line = number + 1, pattern, "CODEOWNERS line skipped");
                continue;
            };
            let compiled: Result<Vec<Glob>, _> = globs.iter().map(|g| path_glob(g)).collect();
            let Ok(compiled) = compiled else {
                tracing::debug!(line = number + 1, pattern, "CODEOWNERS pattern is invalid");
                continue;
            };
            for glob in compiled {
                builder.add(glob);
                line_of_glob.push(lines.len());
            }
            lines.push(owner);
            all_owners.push(
                raw.split_whitespace()
                    .take_while(|w| !w.starts_with('#'))
                    .skip(1)
                    .map(str::to_string)
                    .collect(),
            );
            catch_all.push(matches!(
                pattern.trim_start_matches('/'),
                "*" | "**" | "**/*" | "*/**"
            ));
        }
        // Each glob compiled on its own; a set of valid globs builds. Keep the empty set otherwise.
        let set = builder.build().unwrap_or_else(|e| {
            tracing::warn!(error = %e, "CODEOWNERS patterns could not be combined; ignoring them");
            line_of_glob.clear();
            GlobSet::empty()
        });
        Codeowners {
            set,
            line_of_glob,
            lines,
            catch_all,
            all_owners,
        }
    }

    /// The module of `path`: the first owner of the last matching line with its leading `@`
    /// removed (`@octo-org/payments` → `octo-org/payments`, `docs@example.com` as is). `None`
    /// when no line matches or the last match has no owners.
    pub fn owner_of(&self, path: &str) -> Option<&str> {
        let path = path.trim_start_matches('/');
        let last = self
            .set
            .matches(path)
            .into_iter()
            .map(|g| self.line_of_glob[g])
            .max()?;
        self.lines[last].as_ref().map(ModuleName::as_str)
    }

    /// Every owner of `path`, as written, by GitHub's rule (the last matching line's).
    pub fn owners_of(&self, path: &str) -> &[String] {
        let path = path.trim_start_matches('/');
        self.set
            .matches(path)
            .into_iter()
            .map(|g| self.line_of_glob[g])
            .max()
            .map_or(&[], |line| self.all_owners[line].as_slice())
    }

    /// The module CODEOWNERS gives `path`: [`Codeowners::owner_of`] without the catch-all
    /// lines (`* @org/maintainers` reviews everything; as a module it would swallow every file
    /// outside a package).
    pub fn module_of(&self, path: &str) -> Option<&ModuleName> {
        let path = path.trim_start_matches('/');
        let last = self
            .set
            .matches(path)
            .into_iter()
            .map(|g| self.line_of_glob[g])
            .filter(|&line| !self.catch_all[line])
            .max()?;
        self.lines[last].as_ref()
    }
}

/// The globset globs equivalent to one CODEOWNERS pattern, or `None` for a line GitHub ignores.
pub(super) fn codeowners_globs(pattern: &str) -> Option<Vec<String>> {
    if pattern.starts_with('!') {
        return None; // negation is not supported by CODEOWNERS
    }
    let dir_only = pattern.ends_with('/');
    let body = pattern.trim_end_matches('/');
    let anchored = body.contains('/'); // leading or middle slash
    let body = body.trim_start_matches('/');
    if body.is_empty() {
        return None; // "/" matches nothing
    }
    let mut escaped = String::with_capacity(body.len());
    for c in body.chars() {
        if matches!(c, '[' | ']' | '{' | '}') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    let base = if anchored || escaped.starts_with("**") {
        escaped
    } else {
        format!("**/{escaped}")
    };
    let last_segment = body.rsplit('/').next().unwrap_or(body);
    let mut globs = Vec::with_capacity(2);
    if !dir_only {
        globs.push(base.clone());
    }
    // A match is also a directory whose contents it covers, except for a final lone `*`
    // (`docs/*` owns docs' files, not the files of its subdirectories).
    if dir_only || last_segment != "*" {
        globs.push(format!("{base}/**"));
    }
    Some(globs)
}
