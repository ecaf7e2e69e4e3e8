//! Module tagging: which modules of a codebase a merged PR touched, so its narrative entry lands
//! on the right pages.
//!
//! Each changed file is tagged by the first source that has an answer for it:
//!
//! 1. the repository's entry in the **modules config** (actions/labeler v4 style, see
//!    [`ModulesConfig`]): every module with a matching glob (a file may belong to several);
//! 2. else, when the repository's `CODEOWNERS` was fetched, the **owner** of the last matching
//!    line (see [`Codeowners`]), its leading `@` removed;
//! 3. else the file's **top-level directory** (`src/a/b.rs` → `src`), [`ROOT_MODULE`] for files at
//!    the repository root.
//!
//! When no file is known at all (enrichment was skipped), the repository itself (`owner/name`) is
//! the one module. The result is sorted by name (byte order) and de-duplicated, so the same PR
//! always gets the same tags, whatever the order GitHub listed its files in.

use std::collections::{BTreeMap, BTreeSet};

use aws_config::SdkConfig;
use globset::{Glob, GlobBuilder, GlobSet, GlobSetBuilder};
use serde_yaml::Value;

use crate::context::RepoContext;
use crate::mapping::Described;
pub use crate::mapping::NOTES_MAX_CHARS;
use chronicle_domain::{ModuleName, RepoName};

/// Module of files at the repository root (the same name the enrich stage counts them under).
pub const ROOT_MODULE: &str = chronicle_domain::ROOT_DIRECTORY;

/// `config/modules.yaml` as it was when the binary was built: the deployment's bundled config.
pub const BUNDLED_MODULES_YAML: &str = include_str!("../../../config/modules.yaml");

pub use chronicle_config::{MODULES_CONFIG_FILE, MODULES_CONFIG_PARAM};

mod codeowners;
pub mod context;
mod mapping;
pub mod team;
pub mod workspaces;
pub use codeowners::*;

/// Key of the entry used for repositories that have none of their own.
pub const DEFAULT_REPO_KEY: &str = "*";

#[derive(Debug, thiserror::Error)]
pub enum TaggingError {
    #[error("{origin}: not valid YAML: {source}")]
    Yaml {
        origin: String,
        #[source]
        source: serde_yaml::Error,
    },
    #[error("{origin}: {location}: {message}")]
    Config {
        origin: String,
        /// Where in the config: `top level`, `repository X` or `repository X, module Y`.
        location: String,
        message: String,
    },
    #[error("{origin}: repository {repo}, module {module}: invalid glob {glob:?}: {}", source.kind())]
    Glob {
        origin: String,
        repo: String,
        module: String,
        glob: String,
        #[source]
        source: Box<globset::Error>,
    },
    #[error("reading modules config file {path} failed: {source}")]
    File {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("reading SSM parameter {name} failed: {message}")]
    Ssm { name: String, message: String },
    #[error("SSM parameter {name} has no value")]
    EmptyParameter { name: String },
}

// ---------------------------------------------------------------------------------------------
// Modules config
// ---------------------------------------------------------------------------------------------

/// The modules config of every repository, keyed by `owner/name` (matched ASCII
/// case-insensitively, as GitHub does), with an optional `"*"` entry for the others:
///
/// ```yaml
/// Codertocat/Hello-World:
///   docs: ["*.md", "docs/**"]
///   core: ["src/**", "!src/**/*_test.rs"]
/// "*":
///   docs: ["**/*.md"]
/// ```
///
/// Each module is a list of globs ([`globset`] syntax, `*` and `?` never cross `/`, `**` does,
/// dotfiles match like any other file). A glob starting with `!` is a negation: a file is in the
/// module when it matches at least one positive glob of the list and none of its negated ones.
/// A single string is accepted in place of a one-glob list.
///
/// actions/labeler v4's group entries are accepted too, evaluated for the one file at hand:
/// `- any: [..]` holds when the file matches at least one positive glob of the group and no
/// negated one (the same as a plain list); `- all: [..]` holds when it matches every positive
/// glob and no negated one; a group with both keys needs both. A module matches a file when its
/// plain globs or any of its groups do. (labeler v4 evaluates `all` over the whole set of changed
/// files; Chronicle tags file by file, so it is per file here.)
///
/// A repository entry with no modules (`owner/name:` with nothing after it) is an explicit empty
/// config: the `"*"` entry does not apply to that repository, and its files fall through to
/// CODEOWNERS and top-level directories.
#[derive(Debug, Clone, Default)]
pub struct ModulesConfig {
    /// Keyed by the lowercased `owner/name`.
    repos: BTreeMap<String, RepoModules>,
    default: Option<RepoModules>,
}

/// One repository's modules, sorted by name.
#[derive(Debug, Clone, Default)]
pub struct RepoModules {
    modules: Vec<Module>,
}

#[derive(Debug, Clone)]
struct Module {
    name: ModuleName,
    rules: Vec<Rule>,
    /// `description:` of the mapping form: what the module is, for its page.
    description: Option<String>,
    /// `notes:` of the mapping form: what the team wants a newcomer to know, shown as written.
    notes: Option<String>,
    /// `ignore:` of the mapping form: files never in the module, whatever its paths say.
    ignore: Option<GlobList>,
}

/// A plain glob list (`any` only) or a labeler v4 group (`any` and/or `all`).
#[derive(Debug, Clone)]
struct Rule {
    any: Option<GlobList>,
    all: Option<GlobList>,
}

#[derive(Debug, Clone)]
struct GlobList {
    positive: GlobSet,
    negative: GlobSet,
    /// The globs as written (`!` kept), for describing the module on its page.
    written: Vec<String>,
}

impl GlobList {
    /// At least one positive glob matches and no negated one does.
    fn matches_any(&self, path: &str) -> bool {
        self.positive.is_match(path) && !self.negative.is_match(path)
    }

    /// Every positive glob matches and no negated one does.
    fn matches_all(&self, path: &str) -> bool {
        self.positive.matches(path).len() == self.positive.len() && !self.negative.is_match(path)
    }
}

impl Rule {
    fn matches(&self, path: &str) -> bool {
        self.any.as_ref().is_none_or(|g| g.matches_any(path))
            && self.all.as_ref().is_none_or(|g| g.matches_all(path))
    }
}

impl ModulesConfig {
    /// No repository configured: every file falls through to CODEOWNERS / top-level directories.
    pub fn empty() -> Self {
        Self::default()
    }

    pub fn from_yaml(text: &str) -> Result<Self, TaggingError> {
        Self::parse(text, "modules config")
    }

    /// The repository's own entry, else the `"*"` entry, else `None`.
    pub fn for_repo(&self, repo: &RepoName) -> Option<&RepoModules> {
        self.repos
            .get(&repo.as_str().to_ascii_lowercase())
            .or(self.default.as_ref())
    }

    /// Whether the repository has an entry of its own (not only the `"*"` one).
    pub fn has_own_entry(&self, repo: &RepoName) -> bool {
        self.repos.contains_key(&repo.as_str().to_ascii_lowercase())
    }

    /// Number of repositories with an entry of their own (the `"*"` entry not counted).
    pub fn repo_count(&self) -> usize {
        self.repos.len()
    }

    /// [`ModulesConfig::load`] when a file or parameter is named, else the config/modules.yaml
    /// the binary was built with (`sam build` ships only the binary, so it is compiled in).
    pub async fn load_or_bundled(
        file: Option<&str>,
        ssm_param: Option<&str>,
        sdk: &SdkConfig,
    ) -> Result<Self, TaggingError> {
        match (file, ssm_param) {
            (None, None) => Self::from_yaml(BUNDLED_MODULES_YAML),
            (file, param) => Self::load(file, param, sdk).await,
        }
    }

    /// Loads the config named by [`MODULES_CONFIG_FILE`] (`file`, a YAML file bundled with the
    /// deployment) or [`MODULES_CONFIG_PARAM`] (`ssm_param`, an SSM parameter holding the YAML;
    /// a standard parameter holds 4 KB, an advanced one 8 KB). The file wins when both are set;
    /// blank values count as unset; neither set = [`ModulesConfig::empty`].
    pub async fn load(
        file: Option<&str>,
        ssm_param: Option<&str>,
        sdk: &SdkConfig,
    ) -> Result<Self, TaggingError> {
        let file = file.map(str::trim).filter(|s| !s.is_empty());
        let ssm_param = ssm_param.map(str::trim).filter(|s| !s.is_empty());
        let config = match (file, ssm_param) {
            (Some(path), other) => {
                if let Some(name) = other {
                    tracing::warn!(
                        file = path,
                        ssm_param = name,
                        "both {MODULES_CONFIG_FILE} and {MODULES_CONFIG_PARAM} are set; using the file"
                    );
                }
                // Read once per cold start, a few KB: a blocking read is fine here.
                let text = std::fs::read_to_string(path).map_err(|source| TaggingError::File {
                    path: path.to_string(),
                    source,
                })?;
                Self::parse(&text, &format!("modules config file {path}"))?
            }
            (None, Some(name)) => {
                let client = aws_sdk_ssm::Client::new(sdk);
                let out = client
                    .get_parameter()
                    .name(name)
                    .with_decryption(true)
                    .send()
                    .await
                    .map_err(|e| TaggingError::Ssm {
                        name: name.to_string(),
                        message: chronicle_aws::error_message(&e),
                    })?;
                let text = out.parameter().and_then(|p| p.value()).ok_or_else(|| {
                    TaggingError::EmptyParameter {
                        name: name.to_string(),
                    }
                })?;
                Self::parse(text, &format!("modules config SSM parameter {name}"))?
            }
            (None, None) => Self::empty(),
        };
        tracing::info!(
            repos = config.repo_count(),
            default = config.default.is_some(),
            "modules config loaded"
        );
        Ok(config)
    }

    fn parse(text: &str, origin: &str) -> Result<Self, TaggingError> {
        let value: Value = serde_yaml::from_str(text).map_err(|source| TaggingError::Yaml {
            origin: origin.to_string(),
            source,
        })?;
        let config_err = |location: String, message: String| TaggingError::Config {
            origin: origin.to_string(),
            location,
            message,
        };
        let top = match value {
            // An empty file (or one with only comments) configures nothing.
            Value::Null => return Ok(Self::empty()),
            Value::Mapping(m) => m,
            other => {
                return Err(config_err(
                    "top level".into(),
                    format!(
                        "expected a mapping of owner/name to modules, found {}",
                        kind(&other)
                    ),
                ))
            }
        };

        let mut config = Self::empty();
        // Lowercased key → key as written, to report two spellings of one repository.
        let mut seen: BTreeMap<String, String> = BTreeMap::new();
        for (key, modules) in top {
            let Some(repo) = key.as_str() else {
                return Err(config_err(
                    "top level".into(),
                    format!(
                        "a key is {}, expected a repository owner/name or \"*\"",
                        kind(&key)
                    ),
                ));
            };
            if repo != DEFAULT_REPO_KEY && RepoName::parse(repo).is_err() {
                return Err(config_err(
                    format!("repository {repo}"),
                    "not of the form owner/name (or \"*\" for the default)".into(),
                ));
            }
            let lower = repo.to_ascii_lowercase();
            if let Some(first) = seen.insert(lower.clone(), repo.to_string()) {
                return Err(config_err(
                    format!("repository {repo}"),
                    format!("configured twice (also as {first}; names are case-insensitive)"),
                ));
            }
            let parsed = parse_repo(repo, modules, origin)?;
            if repo == DEFAULT_REPO_KEY {
                config.default = Some(parsed);
            } else {
                config.repos.insert(lower, parsed);
            }
        }
        Ok(config)
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "empty",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Sequence(_) => "a list",
        Value::Mapping(_) => "a mapping",
        Value::Tagged(_) => "a tagged value",
    }
}

pub(crate) fn parse_repo(
    repo: &str,
    value: Value,
    origin: &str,
) -> Result<RepoModules, TaggingError> {
    let mapping = match value {
        Value::Null => return Ok(RepoModules::default()),
        Value::Mapping(m) => m,
        other => {
            return Err(TaggingError::Config {
                origin: origin.to_string(),
                location: format!("repository {repo}"),
                message: format!(
                    "expected a mapping of module to globs, found {}",
                    kind(&other)
                ),
            })
        }
    };
    let mut modules: BTreeMap<ModuleName, Module> = BTreeMap::new();
    for (key, entries) in mapping {
        let name = match &key {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            other => {
                return Err(TaggingError::Config {
                    origin: origin.to_string(),
                    location: format!("repository {repo}"),
                    message: format!("a module name is {}, expected a string", kind(other)),
                })
            }
        };
        let name = ModuleName::configured(&name).map_err(|e| TaggingError::Config {
            origin: origin.to_string(),
            location: format!(
                "repository {repo}, module {:?}",
                ModuleName::new(&name).as_str()
            ),
            message: e.to_string(),
        })?;
        let ctx = ModuleCtx {
            origin,
            repo,
            module: &name,
        };
        let Described {
            paths: entries,
            description,
            notes,
            ignore,
        } = ctx.described(entries)?;
        let rules = ctx.rules(entries)?;
        let ignore = match ignore {
            Some(globs) => Some(ctx.glob_list(&ctx.strings(globs)?)?),
            None => None,
        };
        if modules.contains_key(&name) {
            return Err(ctx.err(format!("module {name:?} is configured twice")));
        }
        modules.insert(
            name.clone(),
            Module {
                name,
                rules,
                description,
                notes,
                ignore,
            },
        );
    }
    Ok(RepoModules {
        modules: modules.into_values().collect(),
    })
}

/// Where a module's entries are being read, for error messages.
struct ModuleCtx<'a> {
    origin: &'a str,
    repo: &'a str,
    module: &'a str,
}

impl ModuleCtx<'_> {
    fn err(&self, message: String) -> TaggingError {
        TaggingError::Config {
            origin: self.origin.to_string(),
            location: format!("repository {}, module {}", self.repo, self.module),
            message,
        }
    }

    /// A module's value: a glob, or a list of globs and `any`/`all` groups.
    fn rules(&self, value: Value) -> Result<Vec<Rule>, TaggingError> {
        let entries = match value {
            Value::String(s) => vec![Value::String(s)],
            Value::Sequence(seq) => seq,
            other => {
                return Err(self.err(format!("expected a list of globs, found {}", kind(&other))))
            }
        };
        let mut plain = Vec::new();
        let mut rules = Vec::new();
        for entry in entries {
            match entry {
                Value::String(glob) => plain.push(glob),
                Value::Mapping(group) => rules.push(self.group(group)?),
                other => {
                    return Err(self.err(format!(
                        "an entry is {}, expected a glob or an any/all group",
                        kind(&other)
                    )))
                }
            }
        }
        if !plain.is_empty() {
            rules.insert(
                0,
                Rule {
                    any: Some(self.glob_list(&plain)?),
                    all: None,
                },
            );
        }
        Ok(rules)
    }

    fn group(&self, group: serde_yaml::Mapping) -> Result<Rule, TaggingError> {
        let mut rule = Rule {
            any: None,
            all: None,
        };
        for (key, value) in group {
            let globs = self.strings(value)?;
            match key.as_str() {
                Some("any") => rule.any = Some(self.glob_list(&globs)?),
                Some("all") => rule.all = Some(self.glob_list(&globs)?),
                _ => {
                    return Err(self.err(format!(
                        "unknown group key {}, expected any or all",
                        serde_yaml::to_string(&key).unwrap_or_default().trim_end()
                    )))
                }
            }
        }
        if rule.any.is_none() && rule.all.is_none() {
            return Err(self.err("an empty group, expected any or all".into()));
        }
        Ok(rule)
    }

    fn strings(&self, value: Value) -> Result<Vec<String>, TaggingError> {
        match value {
            Value::String(s) => Ok(vec![s]),
            Value::Sequence(seq) => seq
                .into_iter()
                .map(|v| match v {
                    Value::String(s) => Ok(s),
                    other => {
                        Err(self.err(format!("a glob is {}, expected a string", kind(&other))))
                    }
                })
                .collect(),
            other => Err(self.err(format!("expected a list of globs, found {}", kind(&other)))),
        }
    }

    fn glob_list(&self, globs: &[String]) -> Result<GlobList, TaggingError> {
        let mut positive = GlobSetBuilder::new();
        let mut negative = GlobSetBuilder::new();
        for glob in globs {
            let (negated, pattern) = match glob.strip_prefix('!') {
                Some(rest) => (true, rest),
                None => (false, glob.as_str()),
            };
            if pattern.is_empty() {
                return Err(self.err(format!("empty glob {glob:?}")));
            }
            let compiled = path_glob(pattern).map_err(|source| self.glob_err(glob, source))?;
            if negated {
                negative.add(compiled);
            } else {
                positive.add(compiled);
            }
        }
        let build = |b: GlobSetBuilder| {
            b.build()
                .map_err(|source| self.glob_err(&globs.join(", "), source))
        };
        Ok(GlobList {
            positive: build(positive)?,
            negative: build(negative)?,
            written: globs.to_vec(),
        })
    }

    fn glob_err(&self, glob: &str, source: globset::Error) -> TaggingError {
        TaggingError::Glob {
            origin: self.origin.to_string(),
            repo: self.repo.to_string(),
            module: self.module.to_string(),
            glob: glob.to_string(),
            source: Box::new(source),
        }
    }
}

/// A glob over repository paths: `*` and `?` stay within a path segment, `**` crosses them.
fn path_glob(pattern: &str) -> Result<Glob, globset::Error> {
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
}

impl RepoModules {
    /// Every module whose globs match `path`, sorted by name.
    pub fn modules_of(&self, path: &str) -> Vec<&ModuleName> {
        let path = path.trim_start_matches('/');
        self.modules
            .iter()
            .filter(|m| {
                m.rules.iter().any(|r| r.matches(path))
                    && !m.ignore.as_ref().is_some_and(|i| i.matches_any(path))
            })
            .map(|m| &m.name)
            .collect()
    }

    /// The globs of a configured module as written (`!` negations kept; the globs of an `all`
    /// group joined with ` & `), or `None` if the module is not configured.
    pub fn paths_of(&self, module: &str) -> Option<Vec<String>> {
        let module = self.modules.iter().find(|m| m.name == module)?;
        let mut paths = Vec::new();
        for rule in &module.rules {
            if let Some(any) = &rule.any {
                paths.extend(any.written.iter().cloned());
            }
            if let Some(all) = &rule.all {
                paths.push(all.written.join(" & "));
            }
        }
        if let Some(ignore) = &module.ignore {
            paths.extend(ignore.written.iter().map(|g| format!("!{g}")));
        }
        Some(paths)
    }

    /// A configured module's `notes:`, if it has any.
    pub fn notes_of(&self, module: &str) -> Option<&str> {
        self.modules
            .iter()
            .find(|m| m.name == module)?
            .notes
            .as_deref()
    }

    /// A configured module's `description:`, if it has one.
    pub fn description_of(&self, module: &str) -> Option<&str> {
        self.modules
            .iter()
            .find(|m| m.name == module)?
            .description
            .as_deref()
    }

    /// The configured module names, sorted.
    pub fn module_names(&self) -> impl Iterator<Item = &str> {
        self.modules.iter().map(|m| m.name.as_str())
    }

    pub fn is_empty(&self) -> bool {
        self.modules.is_empty()
    }
}

// CODEOWNERS is in `codeowners`.

// ---------------------------------------------------------------------------------------------
// Tagging
// ---------------------------------------------------------------------------------------------

/// What a repository's own files say about its layout, from its stored context: the packages
/// its workspace manifests declare (used only for a repository without a config entry of its
/// own) and its CODEOWNERS.
#[derive(Debug, Clone, Default)]
pub struct RepoLayout {
    /// (directory, module name), deepest directories first.
    packages: Vec<(String, ModuleName)>,
    codeowners: Option<Codeowners>,
}

impl RepoLayout {
    /// `use_packages`: whether workspace packages are modules (not when the repository has
    /// its own entry in the modules config: what it configured is what it wants). A package
    /// whose name is already a module (a configured one such as `docs`, or another top-level
    /// directory) is named by its directory instead, so two modules never merge.
    pub fn from_context(
        context: &RepoContext,
        use_packages: bool,
        config: Option<&RepoModules>,
    ) -> Self {
        let taken = |name: &str, dir: &str| {
            config.is_some_and(|c| c.module_names().any(|m| m == name))
                || (name != dir
                    && context
                        .top_level
                        .as_ref()
                        .is_some_and(|t| t.iter().any(|d| d == name)))
        };
        let mut packages: Vec<(String, ModuleName)> = if use_packages {
            context
                .packages
                .iter()
                .map(|p| {
                    let name = if taken(&p.name, &p.dir) {
                        &p.dir
                    } else {
                        &p.name
                    };
                    (p.dir.clone(), ModuleName::new(name))
                })
                .collect()
        } else {
            Vec::new()
        };
        packages.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.0.cmp(&b.0)));
        RepoLayout {
            packages,
            codeowners: context.codeowners.as_deref().map(Codeowners::parse),
        }
    }

    /// Only a CODEOWNERS file (tests, callers without a stored context).
    pub fn with_codeowners(codeowners: Codeowners) -> Self {
        RepoLayout {
            packages: Vec::new(),
            codeowners: Some(codeowners),
        }
    }

    /// The package holding `path` (the deepest).
    fn package_of(&self, path: &str) -> Option<&ModuleName> {
        self.packages
            .iter()
            .find(|(dir, _)| {
                path.len() > dir.len()
                    && path.starts_with(dir.as_str())
                    && path.as_bytes()[dir.len()] == b'/'
            })
            .map(|(_, name)| name)
    }

    /// The repository's CODEOWNERS, when it has one.
    pub fn codeowners(&self) -> Option<&Codeowners> {
        self.codeowners.as_ref()
    }

    /// The directory of the package that is the module `module`.
    pub fn package_dir(&self, module: &str) -> Option<&str> {
        self.packages
            .iter()
            .find(|(_, name)| name.as_str() == module)
            .map(|(dir, _)| dir.as_str())
    }
}

/// The modules a PR touched, from its changed files (see the module docs for the precedence):
/// sorted by name in byte order, without duplicates. No files → `[repo]`.
pub fn tag_modules(
    repo: &RepoName,
    files: &[&str],
    config: Option<&RepoModules>,
    layout: Option<&RepoLayout>,
) -> Vec<ModuleName> {
    if files.is_empty() {
        return vec![ModuleName::new(repo.as_str())];
    }
    let modules: BTreeSet<ModuleName> = files
        .iter()
        .flat_map(|file| file_modules(file, config, layout))
        .collect();
    modules.into_iter().collect()
}

/// The modules one changed file belongs to: the configured modules that match it, else the
/// workspace package that holds it, else its CODEOWNERS owner, else its top-level directory
/// (`(root)` at the root). Never empty.
pub fn file_modules(
    file: &str,
    config: Option<&RepoModules>,
    layout: Option<&RepoLayout>,
) -> Vec<ModuleName> {
    if let Some(config) = config {
        let configured = config.modules_of(file);
        if !configured.is_empty() {
            return configured.into_iter().cloned().collect();
        }
    }
    if let Some(package) = layout.and_then(|l| l.package_of(file)) {
        return vec![package.clone()];
    }
    if let Some(owner) = layout
        .and_then(|l| l.codeowners.as_ref())
        .and_then(|c| c.module_of(file))
    {
        return vec![owner.clone()];
    }
    vec![ModuleName::new(chronicle_domain::top_level_directory(file))]
}

/// What a module covers, as globs for its page header: the configured ones, else those of the
/// fallback that produced the name (`crates/x/**` for a workspace package, `src/**` for a
/// top-level directory, `*` for the files at the root); none when the module is the repository
/// itself (its PRs' files were not known).
pub fn module_paths(
    repo: &RepoName,
    module: &str,
    config: Option<&RepoModules>,
    layout: Option<&RepoLayout>,
) -> Vec<String> {
    if let Some(paths) = config.and_then(|c| c.paths_of(module)) {
        return paths;
    }
    if let Some(dir) = layout.and_then(|l| l.package_dir(module)) {
        return vec![format!("{dir}/**")];
    }
    if module == ROOT_MODULE {
        vec!["*".to_string()]
    } else if module == repo.as_str() {
        Vec::new()
    } else {
        vec![format!("{module}/**")]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURE_REPO: &str = "Codertocat/Hello-World";

    fn repo(name: &str) -> RepoName {
        RepoName::parse(name).unwrap()
    }

    fn modules(yaml: &str) -> RepoModules {
        let config = ModulesConfig::from_yaml(yaml).unwrap();
        config.for_repo(&repo(FIXTURE_REPO)).unwrap().clone()
    }

    fn sample() -> RepoModules {
        modules(
            r#"
Codertocat/Hello-World:
  docs: ["*.md", "docs/**"]
  core: ["src/**", "!src/**/*_test.rs"]
  tests: ["**/*_test.rs", "tests/**"]
  ci: [".github/**"]
"#,
        )
    }

    #[test]
    fn module_paths_say_what_a_module_covers() {
        let m = sample();
        let r = repo(FIXTURE_REPO);
        assert_eq!(
            module_paths(&r, "core", Some(&m), None),
            ["src/**", "!src/**/*_test.rs"]
        );
        let grouped = modules(
            "Codertocat/Hello-World:\n  gen:\n    - 'x/**'\n    - all: ['gen/**', '**/*.rs']\n",
        );
        assert_eq!(
            module_paths(&r, "gen", Some(&grouped), None),
            ["x/**", "gen/** & **/*.rs"]
        );
        assert_eq!(module_paths(&r, "lib", Some(&m), None), ["lib/**"]);
        assert_eq!(module_paths(&r, "lib", None, None), ["lib/**"]);
        assert_eq!(module_paths(&r, ROOT_MODULE, None, None), ["*"]);
        assert!(module_paths(&r, FIXTURE_REPO, None, None).is_empty());
    }

    /// The mapping form carries a description for the module's page; a bad one is named.
    #[test]
    fn a_module_mapping_gives_paths_and_a_description() {
        let m = modules(
            "Codertocat/Hello-World:\n  api:\n    description: The public HTTP API.\n    paths: ['api/**']\n  web: ['web/**']\n",
        );
        assert_eq!(m.modules_of("api/routes.rs"), ["api"]);
        assert_eq!(m.description_of("api"), Some("The public HTTP API."));
        assert_eq!(m.description_of("web"), None);
        assert_eq!(
            module_paths(&repo(FIXTURE_REPO), "api", Some(&m), None),
            ["api/**"]
        );
        for (yaml, says) in [
            ("x:\n    description: A thing.\n", "needs paths"),
            (
                "x:\n    paths: ['x/**']\n    owner: me\n",
                "unknown key owner",
            ),
            (
                "x:\n    paths: ['x/**']\n    description: ''\n",
                "non-empty string",
            ),
        ] {
            let err = ModulesConfig::from_yaml(&format!("Codertocat/Hello-World:\n  {yaml}"))
                .unwrap_err()
                .to_string();
            assert!(err.contains(says), "{yaml}: {err}");
        }
    }

    #[test]
    fn negated_globs_exclude_files() {
        let m = sample();
        assert_eq!(m.modules_of("src/lib.rs"), ["core"]);
        assert_eq!(m.modules_of("src/a/b/deep.rs"), ["core"]);
        assert_eq!(m.modules_of("src/a/parse_test.rs"), ["tests"]);
        assert_eq!(m.modules_of("src/parse_test.rs"), ["tests"]); // `**/` also matches zero dirs
                                                                  // A list of negations alone matches nothing: a positive glob is required.
        let only_negated = modules("Codertocat/Hello-World:\n  x: ['!docs/**']\n");
        assert!(only_negated.modules_of("src/lib.rs").is_empty());
    }

    #[test]
    fn star_stays_in_a_segment_and_double_star_crosses() {
        let m = sample();
        assert_eq!(m.modules_of("README.md"), ["docs"]);
        assert!(
            m.modules_of("guide/intro.md").is_empty(),
            "`*.md` is root-only"
        );
        assert_eq!(m.modules_of("docs/a/b/c.png"), ["docs"]);
        assert!(m.modules_of("docs").is_empty(), "`docs/**` is below docs");
        assert!(m.modules_of("other/docs/x").is_empty());
        // Dotfiles are ordinary files.
        assert_eq!(m.modules_of(".github/workflows/ci.yml"), ["ci"]);
        assert_eq!(m.modules_of(".hidden.md"), ["docs"]);
        let star = modules("Codertocat/Hello-World:\n  all: ['*', '*/*']\n");
        assert_eq!(star.modules_of(".env"), ["all"]);
        assert_eq!(star.modules_of("a/.env"), ["all"]);
        assert!(star.modules_of("a/b/.env").is_empty());
        let q = modules("Codertocat/Hello-World:\n  q: ['a?c']\n");
        assert_eq!(q.modules_of("abc"), ["q"]);
        assert!(q.modules_of("a/c").is_empty(), "`?` does not match /");
    }

    #[test]
    fn a_file_can_be_in_several_modules() {
        let m = sample();
        assert_eq!(m.modules_of("docs/api.md"), ["docs"]);
        let m = modules(
            r#"
Codertocat/Hello-World:
  zeta: ["src/**"]
  api: ["src/api/**"]
  rust: ["**/*.rs"]
"#,
        );
        assert_eq!(m.modules_of("src/api/v1.rs"), ["api", "rust", "zeta"]);
        assert_eq!(
            tag_modules(&repo(FIXTURE_REPO), &["src/api/v1.rs"], Some(&m), None),
            ["api", "rust", "zeta"]
        );
    }

    #[test]
    fn labeler_v4_groups_and_single_strings() {
        let m = modules(
            r#"
Codertocat/Hello-World:
  readme: "README.md"
  frontend:
    - any: ["web/**", "!web/**/*.snap"]
  generated-rust:
    - all: ["gen/**", "**/*.rs", "!gen/vendor/**"]
  both:
    - any: ["lib/**"]
      all: ["**/*.c"]
  mixed:
    - "tools/**"
    - any: "scripts/*"
"#,
        );
        assert_eq!(m.modules_of("README.md"), ["readme"]);
        assert_eq!(m.modules_of("web/app.ts"), ["frontend"]);
        assert!(m.modules_of("web/ui/app.snap").is_empty());
        assert_eq!(m.modules_of("gen/api.rs"), ["generated-rust"]);
        assert!(
            m.modules_of("gen/api.txt").is_empty(),
            "all needs every glob"
        );
        assert!(m.modules_of("gen/vendor/x.rs").is_empty());
        assert_eq!(m.modules_of("lib/x/y.c"), ["both"]);
        assert!(m.modules_of("lib/y.h").is_empty());
        assert_eq!(m.modules_of("tools/a/b"), ["mixed"]);
        assert_eq!(m.modules_of("scripts/run.sh"), ["mixed"]);
        assert_eq!(
            m.module_names().collect::<Vec<_>>(),
            ["both", "frontend", "generated-rust", "mixed", "readme"]
        );
    }

    const CODEOWNERS: &str = r#"
# Default owners for everything.
*                 @global-owner
*.js              @js-owner #This is an inline comment.
*.go              docs@example.com
/build/logs/      @doctocat
docs/*            @docs-team
apps/             @octocat
/api/             @octo-org/payments @someone-else
**/logs           @log-owner
/api/generated    
LICENSE
"#;

    #[test]
    fn codeowners_last_match_wins() {
        let c = Codeowners::parse(CODEOWNERS);
        assert_eq!(c.owner_of("README"), Some("global-owner"));
        assert_eq!(c.owner_of("deep/down/x.txt"), Some("global-owner"));
        // `*.js` comes after `*`, and has no slash: any depth.
        assert_eq!(c.owner_of("web/lib/app.js"), Some("js-owner"));
        assert_eq!(c.owner_of("main.go"), Some("docs@example.com"));
        // The first owner, `@` removed; an e-mail owner is kept as is.
        assert_eq!(c.owner_of("api/handler.rs"), Some("octo-org/payments"));
        // `/api/` is later than `*.js`, so it wins for JS files in api/ too.
        assert_eq!(c.owner_of("api/client.js"), Some("octo-org/payments"));
        // A later pattern without owners un-owns.
        assert_eq!(c.owner_of("api/generated/types.rs"), None);
        assert_eq!(c.owner_of("api/generated"), None);
        assert_eq!(c.owner_of("LICENSE"), None);
        assert_eq!(c.owner_of("sub/LICENSE"), None, "unanchored: any depth");
        // Last match wins over an earlier, more specific line.
        assert_eq!(c.owner_of("build/logs/today.txt"), Some("log-owner"));
    }

    #[test]
    fn codeowners_anchoring_and_directories() {
        let c = Codeowners::parse(CODEOWNERS);
        // `/build/logs/` is anchored (its `**/logs` successor is not): check with a fresh file.
        let anchored = Codeowners::parse("/build/logs/ @doctocat\nbuild/x @builder\n");
        assert_eq!(anchored.owner_of("build/logs/a/b.txt"), Some("doctocat"));
        assert_eq!(anchored.owner_of("src/build/logs/a.txt"), None);
        // A middle slash anchors too.
        assert_eq!(anchored.owner_of("build/x"), Some("builder"));
        assert_eq!(anchored.owner_of("build/x/y.txt"), Some("builder"));
        assert_eq!(anchored.owner_of("a/build/x"), None);
        // A leading `/` on the path is tolerated.
        assert_eq!(anchored.owner_of("/build/x"), Some("builder"));

        // `apps/`: a directory named apps at any depth, and everything below it.
        assert_eq!(c.owner_of("apps/a.txt"), Some("octocat"));
        assert_eq!(c.owner_of("x/y/apps/z/a.txt"), Some("octocat"));
        let dir_only = Codeowners::parse("apps/ @octocat\n");
        assert_eq!(
            dir_only.owner_of("apps"),
            None,
            "a file named apps is not the directory"
        );
        assert_eq!(dir_only.owner_of("x/apps/y"), Some("octocat"));
        // `docs/*`: files directly in docs, not nested ones (GitHub's documented example).
        assert_eq!(c.owner_of("docs/getting-started.md"), Some("docs-team"));
        assert_eq!(
            c.owner_of("docs/build-app/troubleshooting.md"),
            Some("global-owner")
        );
        // `**/logs` anywhere.
        assert_eq!(c.owner_of("deeply/nested/logs/x.log"), Some("log-owner"));
        assert_eq!(c.owner_of("logs/x.log"), Some("log-owner"));
        // A pattern without a trailing slash covers a directory of that name too.
        let plain = Codeowners::parse("src @core\n/lib/util.rs @util\n");
        assert_eq!(plain.owner_of("src/a/b.rs"), Some("core"));
        assert_eq!(plain.owner_of("pkg/src/a.rs"), Some("core"));
        assert_eq!(plain.owner_of("lib/util.rs"), Some("util"));
        assert_eq!(plain.owner_of("lib/util.rsx"), None);
    }

    #[test]
    fn codeowners_skips_what_github_rejects() {
        let c = Codeowners::parse(
            "* @all\n!secret.txt\n/ @nobody\n\\#notes @hash\nfile[1].txt @brackets\n{a,b} @braces\n   # indented comment\n",
        );
        assert_eq!(c.owner_of("secret.txt"), Some("all"), "negation is ignored");
        assert_eq!(
            c.owner_of("file[1].txt"),
            Some("brackets"),
            "brackets are literal"
        );
        assert_eq!(c.owner_of("file1.txt"), Some("all"));
        assert_eq!(c.owner_of("{a,b}"), Some("braces"));
        assert_eq!(c.owner_of("a"), Some("all"));
        assert_eq!(Codeowners::parse("").owner_of("a"), None);
        assert_eq!(Codeowners::parse("# only comments\n\n").owner_of("a"), None);
    }

    #[test]
    fn precedence_config_then_codeowners_then_top_level() {
        let r = repo(FIXTURE_REPO);
        let m = sample();
        let c = Codeowners::parse("/lib/ @octo-org/lib\n");
        let files = [
            "src/main.rs",       // config: core
            "lib/x.rs",          // codeowners: octo-org/lib
            "scripts/deploy.sh", // top level: scripts
            "Cargo.toml",        // root
            "README.md",         // config: docs
        ];
        assert_eq!(
            tag_modules(
                &r,
                &files,
                Some(&m),
                Some(&RepoLayout::with_codeowners(c.clone()))
            ),
            ["(root)", "core", "docs", "octo-org/lib", "scripts"]
        );
        // Without CODEOWNERS, lib falls back to its directory.
        assert_eq!(
            tag_modules(&r, &files, Some(&m), None),
            ["(root)", "core", "docs", "lib", "scripts"]
        );
        // Config wins over CODEOWNERS for the files it matches.
        let everything = Codeowners::parse("/src/ @owner\n/x/ @owner\n");
        assert_eq!(
            tag_modules(
                &r,
                &["src/a.rs", "x/y"],
                Some(&m),
                Some(&RepoLayout::with_codeowners(everything.clone()))
            ),
            ["core", "owner"]
        );
        // An un-owned file falls through to its top-level directory.
        let unowned = Codeowners::parse("* @owner\n/vendor/\n");
        assert_eq!(
            tag_modules(
                &r,
                &["vendor/lib/a.c"],
                None,
                Some(&RepoLayout::with_codeowners(unowned.clone()))
            ),
            ["vendor"]
        );
    }

    #[test]
    fn top_level_fallback_and_root_files() {
        let r = repo(FIXTURE_REPO);
        assert_eq!(
            tag_modules(
                &r,
                &["src/a/b.rs", "README", "docs/x.md", ".gitignore"],
                None,
                None
            ),
            [ROOT_MODULE, "docs", "src"]
        );
        assert_eq!(ROOT_MODULE, "(root)");
    }

    #[test]
    fn no_files_means_the_repo_itself() {
        let r = repo(FIXTURE_REPO);
        let m = sample();
        let c = Codeowners::parse("* @owner\n");
        assert_eq!(tag_modules(&r, &[], None, None), [FIXTURE_REPO]);
        assert_eq!(
            tag_modules(
                &r,
                &[],
                Some(&m),
                Some(&RepoLayout::with_codeowners(c.clone()))
            ),
            [FIXTURE_REPO]
        );
    }

    #[test]
    fn deterministic_and_deduplicated() {
        let r = repo(FIXTURE_REPO);
        let m = sample();
        let c = Codeowners::parse("/lib/ @lib-team\n");
        let mut files = vec![
            "src/b.rs",
            "zz/top.txt",
            "src/a.rs",
            "README.md",
            "lib/1",
            "lib/2",
            "docs/README.md",
            "Makefile",
            "src/x_test.rs",
            "Cargo.lock",
        ];
        let expected = tag_modules(
            &r,
            &files,
            Some(&m),
            Some(&RepoLayout::with_codeowners(c.clone())),
        );
        assert_eq!(
            expected,
            ["(root)", "core", "docs", "lib-team", "tests", "zz"]
        );
        for _ in 0..files.len() {
            files.rotate_left(3);
            files.reverse();
            assert_eq!(
                tag_modules(
                    &r,
                    &files,
                    Some(&m),
                    Some(&RepoLayout::with_codeowners(c.clone()))
                ),
                expected
            );
        }
        let mut doubled = files.clone();
        doubled.extend(files.iter().copied());
        assert_eq!(
            tag_modules(
                &r,
                &doubled,
                Some(&m),
                Some(&RepoLayout::with_codeowners(c.clone()))
            ),
            expected
        );
        // Byte order: uppercase before lowercase, `(` before letters.
        assert_eq!(
            tag_modules(&r, &["b/x", "B/x", "a/x", "root.txt"], None, None),
            ["(root)", "B", "a", "b"]
        );
    }

    #[test]
    fn config_is_keyed_by_repo_with_a_default() {
        let config = ModulesConfig::from_yaml(
            r#"
Codertocat/Hello-World:
  docs: ["*.md"]
octo-org/opted-out:
"*":
  everything: ["**"]
"#,
        )
        .unwrap();
        assert_eq!(config.repo_count(), 2);
        let own = config.for_repo(&repo(FIXTURE_REPO)).unwrap();
        assert_eq!(own.modules_of("README.md"), ["docs"]);
        assert!(own.modules_of("src/a.rs").is_empty());
        // Repository names are case-insensitive on GitHub.
        let shouty = config.for_repo(&repo("CODERTOCAT/hello-world")).unwrap();
        assert_eq!(shouty.modules_of("README.md"), ["docs"]);
        let other = config.for_repo(&repo("someone/else")).unwrap();
        assert_eq!(other.modules_of("src/a.rs"), ["everything"]);
        // An explicit empty entry shadows the default.
        let opted_out = config.for_repo(&repo("octo-org/opted-out")).unwrap();
        assert!(opted_out.is_empty());
        assert!(opted_out.modules_of("src/a.rs").is_empty());

        let no_default = ModulesConfig::from_yaml("Codertocat/Hello-World:\n  d: ['*']\n").unwrap();
        assert!(no_default.for_repo(&repo("someone/else")).is_none());
        assert!(ModulesConfig::empty()
            .for_repo(&repo(FIXTURE_REPO))
            .is_none());
        for empty in ["", "# nothing yet\n", "~"] {
            let c = ModulesConfig::from_yaml(empty).unwrap();
            assert!(c.for_repo(&repo(FIXTURE_REPO)).is_none(), "{empty:?}");
        }
    }

    #[test]
    fn bad_yaml_is_reported() {
        let err =
            ModulesConfig::from_yaml("Codertocat/Hello-World:\n  docs: [\"*.md\"\n").unwrap_err();
        assert!(matches!(err, TaggingError::Yaml { .. }), "{err:?}");
        assert!(err.to_string().contains("not valid YAML"), "{err}");
        // YAML duplicate keys are refused by the parser.
        let err = ModulesConfig::from_yaml("a/b:\n  x: ['*']\n  x: ['**']\n").unwrap_err();
        assert!(matches!(err, TaggingError::Yaml { .. }), "{err:?}");
    }

    #[test]
    fn bad_glob_names_the_module_and_the_glob() {
        let err = ModulesConfig::from_yaml(
            "Codertocat/Hello-World:\n  docs: ['*.md']\n  core: ['src/**', '!src/[a-']\n",
        )
        .unwrap_err();
        match &err {
            TaggingError::Glob {
                repo, module, glob, ..
            } => {
                assert_eq!(repo, FIXTURE_REPO);
                assert_eq!(module, "core");
                assert_eq!(glob, "!src/[a-");
            }
            other => panic!("unexpected {other:?}"),
        }
        let text = err.to_string();
        assert!(text.contains("module core"), "{text}");
        assert!(text.contains("!src/[a-"), "{text}");
        assert!(text.contains(FIXTURE_REPO), "{text}");

        let err = ModulesConfig::from_yaml("a/b:\n  x:\n    - any: ['{a,b']\n").unwrap_err();
        assert!(err.to_string().contains("module x"), "{err}");
        assert!(err.to_string().contains("{a,b"), "{err}");
    }

    #[test]
    fn bad_structure_is_reported_with_its_location() {
        let cases = [
            ("- a\n- b\n", "top level"),
            ("not-a-repo:\n  x: ['*']\n", "repository not-a-repo"),
            ("a/b: ['*']\n", "repository a/b"),
            ("a/b:\n  x: 3\n", "repository a/b, module x"),
            ("a/b:\n  x:\n", "repository a/b, module x"),
            ("a/b:\n  x: [3]\n", "repository a/b, module x"),
            ("a/b:\n  x: ['']\n", "repository a/b, module x"),
            ("a/b:\n  x: ['!']\n", "repository a/b, module x"),
            (
                "a/b:\n  x:\n    - changed-files: ['*']\n",
                "repository a/b, module x",
            ),
            ("a/b:\n  x:\n    - {}\n", "repository a/b, module x"),
            ("a/b:\n  x:\n    - any: [[1]]\n", "repository a/b, module x"),
            (
                "a/b:\n  1: ['*']\n  '1': ['**']\n",
                "repository a/b, module 1",
            ),
            ("a/b:\n  x: ['*']\nA/B:\n  y: ['*']\n", "repository A/B"),
        ];
        for (yaml, location) in cases {
            let err = ModulesConfig::from_yaml(yaml).unwrap_err();
            assert!(
                err.to_string().contains(location),
                "{yaml:?}: {err} should name {location}"
            );
        }
    }

    #[test]
    fn the_bundled_example_is_valid() {
        let text = include_str!("../../../config/modules.yaml");
        let config = ModulesConfig::from_yaml(text).unwrap();
        let m = config.for_repo(&repo(FIXTURE_REPO)).unwrap();
        assert_eq!(m.modules_of("README.md"), ["docs"]);
        assert_eq!(m.modules_of("docs/guide/intro.md"), ["docs"]);
        assert_eq!(m.modules_of("src/lib.rs"), ["core"]);
        assert!(!m
            .modules_of("src/a/parse_test.rs")
            .iter()
            .any(|n| *n == "core"));
    }

    #[tokio::test]
    async fn load_reads_a_file_or_nothing() {
        let sdk = SdkConfig::builder().build();
        let none = ModulesConfig::load(None, None, &sdk).await.unwrap();
        assert!(none.for_repo(&repo(FIXTURE_REPO)).is_none());
        let blank = ModulesConfig::load(Some("  "), Some(""), &sdk)
            .await
            .unwrap();
        assert!(blank.for_repo(&repo(FIXTURE_REPO)).is_none());

        let path = std::env::temp_dir().join(format!(
            "chronicle-modules-{}-{:?}.yaml",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::write(&path, "Codertocat/Hello-World:\n  docs: ['*.md']\n").unwrap();
        let path_str = path.to_str().unwrap();
        // The file wins over the parameter (no SSM call is made).
        let loaded = ModulesConfig::load(Some(path_str), Some("/never/read"), &sdk)
            .await
            .unwrap();
        assert_eq!(
            loaded
                .for_repo(&repo(FIXTURE_REPO))
                .unwrap()
                .modules_of("a.md"),
            ["docs"]
        );
        std::fs::write(&path, "Codertocat/Hello-World:\n  docs: ['[']\n").unwrap();
        let err = ModulesConfig::load(Some(path_str), None, &sdk)
            .await
            .unwrap_err();
        assert!(err.to_string().contains(path_str), "{err}");
        assert!(err.to_string().contains("module docs"), "{err}");
        std::fs::remove_file(&path).unwrap();

        let err = ModulesConfig::load(Some(path_str), None, &sdk)
            .await
            .unwrap_err();
        assert!(matches!(err, TaggingError::File { .. }), "{err:?}");
    }

    /// Names a repository controls (CODEOWNERS owners, package names, directories) never land
    /// on Chronicle's reserved keys, never exceed the name cap, never carry control characters,
    /// and stay distinct; a configured name is refused instead.
    #[test]
    fn hostile_names_from_a_repository_become_safe_module_names() {
        use crate::context::{Package, RepoContext};
        use chronicle_domain::MODULE_NAME_MAX_BYTES;
        let long_owner = format!("@acme/{}", "x".repeat(2_000));
        let context = RepoContext {
            packages: vec![Package {
                name: "#context".into(),
                dir: "pkg".into(),
                description: None,
                manifest: None,
            }],
            codeowners: Some(format!(
                "/owned/ @#index\n/long/ {long_owner}\n/bell/ @a{}b\n",
                '\u{7}'
            )),
            ..RepoContext::default()
        };
        let layout = RepoLayout::from_context(&context, true, None);
        let r = repo("acme/app");
        let files = [
            "owned/a.rs",
            "long/b.rs",
            "bell/c.rs",
            "pkg/src/lib.rs",
            "#index/d.rs",
            "#context/e.rs",
        ];
        let tagged = tag_modules(&r, &files, None, Some(&layout));
        // `#index` (an owner and a directory) and `#context` (a package and a directory) are
        // one name each; the other names stay apart.
        assert_eq!(tagged.len(), 4, "{tagged:?}");
        for name in &tagged {
            assert!(!name.starts_with('#'), "{name}");
            assert!(name.len() <= MODULE_NAME_MAX_BYTES, "{name}");
            assert!(!name.chars().any(char::is_control), "{name:?}");
        }
        let config = ModulesConfig::from_yaml("acme/app:\n  '#index': ['x/**']\n");
        assert!(
            config.unwrap_err().to_string().contains("reserved"),
            "a configured reserved name is refused"
        );
    }

    /// A Cargo/npm workspace without a config entry of its own: each package is a module named
    /// by its manifest, its README included; root Markdown is docs, `.github` is ci (the
    /// bundled default), CODEOWNERS names what no package holds, top-level directories the rest.
    #[test]
    fn workspace_packages_are_modules_by_their_names() {
        use crate::context::{Package, RepoContext};
        let package = |name: &str, dir: &str| Package {
            name: name.into(),
            dir: dir.into(),
            description: None,
            manifest: None,
        };
        let context = RepoContext {
            packages: vec![
                package("acme-api", "crates/api"),
                package("xtask", "tools/xtask"),
                package("@acme/ui", "packages/ui"),
            ],
            codeowners: Some("* @acme/maintainers\n/infra/ @acme/platform\n".into()),
            ..RepoContext::default()
        };
        let config = ModulesConfig::from_yaml(BUNDLED_MODULES_YAML).unwrap();
        let r = repo("acme/monorepo");
        assert!(!config.has_own_entry(&r));
        let layout =
            RepoLayout::from_context(&context, !config.has_own_entry(&r), config.for_repo(&r));
        let of = |path: &str| -> Vec<String> {
            file_modules(path, config.for_repo(&r), Some(&layout))
                .into_iter()
                .map(String::from)
                .collect()
        };
        assert_eq!(of("crates/api/src/lib.rs"), ["acme-api"]);
        assert_eq!(
            of("crates/api/README.md"),
            ["acme-api"],
            "its README is its own"
        );
        assert_eq!(of("packages/ui/src/button.tsx"), ["@acme/ui"]);
        assert_eq!(of("tools/xtask/src/main.rs"), ["xtask"]);
        assert_eq!(of("README.md"), ["docs"]);
        assert_eq!(of(".github/workflows/ci.yml"), ["ci"]);
        assert_eq!(of("infra/main.tf"), ["acme/platform"]);
        assert_eq!(
            of("scripts/run.sh"),
            ["scripts"],
            "a catch-all CODEOWNERS line is not a module"
        );
        // A package named like a configured module, or like another top-level directory, is
        // named by its directory: modules never merge.
        let clashing = RepoContext {
            packages: vec![
                package("docs", "apps/docs"),
                package("scripts", "tools/scripts"),
            ],
            top_level: Some(vec!["apps".into(), "scripts".into(), "tools".into()]),
            ..RepoContext::default()
        };
        let clash = RepoLayout::from_context(&clashing, true, config.for_repo(&r));
        assert_eq!(
            file_modules("apps/docs/index.md", config.for_repo(&r), Some(&clash)),
            ["apps/docs"]
        );
        assert_eq!(
            file_modules("tools/scripts/a.sh", config.for_repo(&r), Some(&clash)),
            ["tools/scripts"]
        );
        assert_eq!(
            file_modules("scripts/b.sh", config.for_repo(&r), Some(&clash)),
            ["scripts"]
        );
        assert_eq!(
            module_paths(&r, "acme-api", config.for_repo(&r), Some(&layout)),
            ["crates/api/**"]
        );
        // A repository with its own entry keeps what it configured: packages are not modules.
        let own = RepoLayout::from_context(&context, false, None);
        assert_eq!(
            file_modules("crates/api/src/lib.rs", None, Some(&own)),
            ["crates"]
        );
    }

    /// The deepest package holds a path; a sibling with a longer name or the directory itself
    /// is not inside it.
    #[test]
    fn the_deepest_package_holds_a_path() {
        use crate::context::{Package, RepoContext};
        let package = |name: &str, dir: &str| Package {
            name: name.into(),
            dir: dir.into(),
            description: None,
            manifest: None,
        };
        let context = RepoContext {
            packages: vec![package("tools", "tools"), package("xtask", "tools/xtask")],
            ..RepoContext::default()
        };
        let layout = RepoLayout::from_context(&context, true, None);
        assert_eq!(
            layout
                .package_of("tools/xtask/src/main.rs")
                .map(|n| n.as_str()),
            Some("xtask")
        );
        assert_eq!(
            layout.package_of("tools/run.sh").map(|n| n.as_str()),
            Some("tools")
        );
        assert_eq!(layout.package_of("toolsmith/a.rs"), None);
        assert_eq!(layout.package_of("tools"), None);
    }
}
