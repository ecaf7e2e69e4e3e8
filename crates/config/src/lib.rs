//! Configuration from environment variables. SAM sets them from `template.yaml`; the local stack
//! sets them itself. Every variable is listed in docs/CONFIGURATION.md.

use crate::secret::SecretSource;

pub mod secret;
pub mod url;

/// GitHub's API (GitHub Enterprise Server: `https://HOST/api/v3`).
pub const DEFAULT_GITHUB_API_URL: &str = "https://api.github.com";
/// Notion's API.
pub const DEFAULT_NOTION_API_URL: &str = "https://api.notion.com";
/// Anthropic's API.
pub const DEFAULT_ANTHROPIC_API_URL: &str = "https://api.anthropic.com";

pub const TABLE_NAME: &str = "TABLE_NAME";
pub const PENDING_SHARDS: &str = "PENDING_SHARDS";
pub const MAX_BODY_BYTES: &str = "MAX_BODY_BYTES";
pub const GITHUB_WEBHOOK_SECRET: &str = "GITHUB_WEBHOOK_SECRET";
pub const GITHUB_WEBHOOK_SECRET_ARN: &str = "GITHUB_WEBHOOK_SECRET_ARN";
pub const GITHUB_WEBHOOK_SECRET_PARAM: &str = "GITHUB_WEBHOOK_SECRET_PARAM";
pub const INSECURE_NO_SIGNATURE: &str = "CHRONICLE_INSECURE_NO_SIGNATURE";
pub const GITHUB_API_URL: &str = "GITHUB_API_URL";
pub const GITHUB_TOKEN: &str = "GITHUB_TOKEN";
pub const GITHUB_TOKEN_ARN: &str = "GITHUB_TOKEN_ARN";
pub const GITHUB_TOKEN_PARAM: &str = "GITHUB_TOKEN_PARAM";
pub const GITHUB_TIMEOUT_SECONDS: &str = "GITHUB_TIMEOUT_SECONDS";
pub const GITHUB_MAX_RETRIES: &str = "GITHUB_MAX_RETRIES";
pub const ENRICH_CONCURRENCY: &str = "ENRICH_CONCURRENCY";
pub const ENRICH_MAX_PATHS: &str = "ENRICH_MAX_PATHS";
/// How long a row whose enrichment was deferred by GitHub's rate limit may wait before it is
/// summarized without enrichment (from `receivedAt`).
pub const ENRICH_MAX_WAIT_SECONDS: &str = "ENRICH_MAX_WAIT_SECONDS";
/// Path of a modules config YAML file bundled with the deployment (relative paths are relative
/// to the working directory, `/var/task` in Lambda).
pub const MODULES_CONFIG_FILE: &str = "MODULES_CONFIG_FILE";
/// Name of an SSM parameter whose value is the modules config YAML.
pub const MODULES_CONFIG_PARAM: &str = "MODULES_CONFIG_PARAM";
/// Where linked issues are looked up: `repository` (the default) or `owner`.
pub const LINKED_ISSUES_SCOPE: &str = "LINKED_ISSUES_SCOPE";
pub const SUMMARIZE_QUEUE_URL: &str = "SUMMARIZE_QUEUE_URL";
pub const ENRICH_GRACE_SECONDS: &str = "ENRICH_GRACE_SECONDS";
pub const CLAIM_TTL_SECONDS: &str = "CLAIM_TTL_SECONDS";
/// The most messages the sweeper lets the summarize queue hold (visible, in flight, delayed): what
/// the consumers finish well within a claim TTL, so a claim never expires on a queued message.
pub const SWEEP_MAX_QUEUED: &str = "SWEEP_MAX_QUEUED";
pub const ENRICH_ENABLED: &str = "ENRICH_ENABLED";
pub const MAX_ATTEMPTS: &str = "MAX_ATTEMPTS";
pub const OUTPUT_DIR: &str = "OUTPUT_DIR";
pub const SUMMARIZE_DLQ_URL: &str = "SUMMARIZE_DLQ_URL";
pub const OUTPUT_S3_URI: &str = "OUTPUT_S3_URI";
pub const NOTION_TOKEN: &str = "NOTION_TOKEN";
pub const NOTION_TOKEN_ARN: &str = "NOTION_TOKEN_ARN";
pub const NOTION_TOKEN_PARAM: &str = "NOTION_TOKEN_PARAM";
pub const NOTION_PARENT_PAGE_ID: &str = "NOTION_PARENT_PAGE_ID";
pub const NOTION_API_URL: &str = "NOTION_API_URL";
/// The entries table: one item per (PR, module).
pub const ENTRIES_TABLE: &str = "ENTRIES_TABLE";
/// The pages table: one item per module page (stale marker, build lease, Notion page ids).
pub const PAGES_TABLE: &str = "PAGES_TABLE";
/// The shortest time between two builds of one page.
pub const PAGE_REBUILD_SECONDS: &str = "PAGE_REBUILD_SECONDS";
/// Pages built at once by one builder invocation.
pub const PAGE_BUILD_CONCURRENCY: &str = "PAGE_BUILD_CONCURRENCY";
/// `1`: publish Markdown too when Notion is configured (without Notion, Markdown is the default).
pub const PUBLISH_MARKDOWN: &str = "PUBLISH_MARKDOWN";
/// Who writes the optional LLM texts (the PR summaries and the module stories): `bedrock` (the
/// function's role, no key), `anthropic` or `openai` (an OpenAI-compatible endpoint: Ollama,
/// vLLM). Unset: no LLM; the texts are extractive and deterministic.
pub const LLM_PROVIDER: &str = "LLM_PROVIDER";
/// The provider's base URL (Anthropic: its default; OpenAI-compatible: required).
pub const LLM_API_URL: &str = "LLM_API_URL";
/// The provider's key (Anthropic: required; OpenAI-compatible: optional; Bedrock: none).
pub const LLM_API_KEY: &str = "LLM_API_KEY";
pub const LLM_API_KEY_ARN: &str = "LLM_API_KEY_ARN";
pub const LLM_API_KEY_PARAM: &str = "LLM_API_KEY_PARAM";
/// The model of each PR's summary paragraph (unset: the extractive summary). On Bedrock a
/// foundation model id, an inference profile id or a profile ARN.
pub const SUMMARY_MODEL: &str = "SUMMARY_MODEL";
/// The model of each module's story (unset: the deterministic story only).
pub const STORY_MODEL: &str = "STORY_MODEL";
pub const STORY_MIN_NEW_ENTRIES: &str = "STORY_MIN_NEW_ENTRIES";
/// A GitHub App's id, and its private key (PEM), for the app's own webhook deliveries.
pub const GITHUB_APP_ID: &str = "GITHUB_APP_ID";
pub const GITHUB_APP_PRIVATE_KEY: &str = "GITHUB_APP_PRIVATE_KEY";
pub const GITHUB_APP_PRIVATE_KEY_ARN: &str = "GITHUB_APP_PRIVATE_KEY_ARN";
pub const GITHUB_APP_PRIVATE_KEY_PARAM: &str = "GITHUB_APP_PRIVATE_KEY_PARAM";
/// The function that holds the App's private key for enrichment and hands out installation
/// tokens (`stages::token`): enrich asks it by Lambda `Invoke` instead of holding the key.
pub const TOKEN_FUNCTION_NAME: &str = "TOKEN_FUNCTION_NAME";
/// Failed GitHub deliveries redelivered at most per run of the redelivery function.
pub const REDELIVER_MAX_PER_RUN: &str = "REDELIVER_MAX_PER_RUN";

pub const DEFAULT_PENDING_SHARDS: u16 = 4;
pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("environment variable {0} is required but not set")]
    Missing(&'static str),
    #[error("environment variable {var}={value:?} is invalid: expected {expected}")]
    Invalid {
        var: &'static str,
        value: String,
        expected: &'static str,
    },
    #[error("{set} is set but {missing} is not: the Notion publisher needs both (or neither)")]
    Incomplete {
        set: &'static str,
        missing: &'static str,
    },
    #[error("{0} is for local development only and is refused inside Lambda (AWS_LAMBDA_FUNCTION_NAME is set): configure the webhook secret instead")]
    LocalOnly(&'static str),
}

/// Settings of the PR table every function shares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableConfig {
    pub table_name: String,
    /// How many values the sparse pending marker takes (`"0"`..`"N-1"`), spreading the GSI's writes.
    pub pending_shards: u16,
}

/// Settings of the webhook function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookConfig {
    pub table: TableConfig,
    pub max_body_bytes: usize,
    pub secret: SecretSource,
    /// `CHRONICLE_INSECURE_NO_SIGNATURE=1`: accept unsigned deliveries. Local development only.
    pub insecure_no_signature: bool,
    /// The pages table, where the hooks that delivered are recorded for redelivery
    /// (`PAGES_TABLE`; unset: not recorded).
    pub pages_table: Option<String>,
}

/// Settings of the redelivery function (GitHub's failed deliveries, asked again).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedeliverConfig {
    pub table: TableConfig,
    pub pages_table: String,
    pub api_url: String,
    /// For repository and organization hooks. Unset (and no app) = nothing can be listed.
    pub token: SecretSource,
    /// A GitHub App's id and private key, for the app's own hook (`/app/hook/deliveries`).
    pub app_id: Option<String>,
    pub app_key: SecretSource,
    pub timeout: std::time::Duration,
    pub max_retries: u32,
    /// Redeliveries asked at most per run.
    pub max_per_run: usize,
}

impl RedeliverConfig {
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(&|k| std::env::var(k).ok())
    }

    pub fn from_lookup(get: &impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let github = EnrichConfig::from_lookup(get)?;
        let max_per_run: usize = parse_or(get, REDELIVER_MAX_PER_RUN, 50, "a positive integer")?;
        if max_per_run == 0 {
            return Err(invalid(
                REDELIVER_MAX_PER_RUN,
                "0".into(),
                "a positive integer",
            ));
        }
        Ok(RedeliverConfig {
            table: github.table,
            pages_table: required(get, PAGES_TABLE)?,
            api_url: github.api_url,
            token: github.token,
            app_id: get(GITHUB_APP_ID).filter(|v| !v.trim().is_empty()),
            app_key: SecretSource::from_vars(
                get(GITHUB_APP_PRIVATE_KEY),
                get(GITHUB_APP_PRIVATE_KEY_ARN),
                get(GITHUB_APP_PRIVATE_KEY_PARAM),
            ),
            timeout: github.timeout,
            max_retries: github.max_retries,
            max_per_run,
        })
    }
}

/// Settings of the enrich function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnrichConfig {
    pub table: TableConfig,
    /// `https://api.github.com`, or `https://HOST/api/v3` for GitHub Enterprise Server.
    pub api_url: String,
    /// Unset = enrichment disabled (skipped quietly).
    pub token: SecretSource,
    pub timeout: std::time::Duration,
    pub max_retries: u32,
    /// Records of one batch processed at once.
    pub concurrency: usize,
    /// Changed paths stored per PR (the rest are counted per top-level directory).
    pub max_paths: usize,
    /// How long a deferred row waits for GitHub's budget before it goes ahead unenriched.
    pub max_wait: std::time::Duration,
    /// The pages table, where repository contexts are kept (`PAGES_TABLE`; unset: no context
    /// is fetched).
    pub pages_table: Option<String>,
    /// Where linked issues are looked up (`LINKED_ISSUES_SCOPE`: `repository`, the default, or
    /// `owner`).
    pub issue_scope: chronicle_domain::IssueScope,
    /// A GitHub App (`GITHUB_APP_ID`, `GITHUB_APP_PRIVATE_KEY` or `…_ARN`, `…_PARAM`): each
    /// repository is read with its installation's token, preferred to `token` when both are set.
    pub app_id: Option<String>,
    pub app_key: SecretSource,
    /// The token function (`TOKEN_FUNCTION_NAME`): each installation's token is asked of it, and
    /// enrich holds no key (setting a key too is refused at start).
    pub token_function: Option<String>,
}

impl EnrichConfig {
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(&|k| std::env::var(k).ok())
    }

    pub fn from_lookup(get: &impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let api_url = get(GITHUB_API_URL)
            .filter(|v| !v.trim().is_empty())
            .unwrap_or_else(|| DEFAULT_GITHUB_API_URL.to_string());
        let api_url = secure_url(GITHUB_API_URL, api_url)?;
        let timeout: u64 = parse_or(get, GITHUB_TIMEOUT_SECONDS, 10, "a number of seconds")?;
        let concurrency: usize = parse_or(get, ENRICH_CONCURRENCY, 4, "a positive integer")?;
        let max_paths: usize = parse_or(get, ENRICH_MAX_PATHS, 500, "an integer from 1 to 3000")?;
        if concurrency == 0 {
            return Err(invalid(
                ENRICH_CONCURRENCY,
                "0".into(),
                "a positive integer",
            ));
        }
        if !(1..=3000).contains(&max_paths) {
            return Err(invalid(
                ENRICH_MAX_PATHS,
                max_paths.to_string(),
                "an integer from 1 to 3000",
            ));
        }
        Ok(EnrichConfig {
            table: TableConfig::from_lookup(get)?,
            api_url,
            token: SecretSource::from_vars(
                get(GITHUB_TOKEN),
                get(GITHUB_TOKEN_ARN),
                get(GITHUB_TOKEN_PARAM),
            ),
            timeout: std::time::Duration::from_secs(timeout.max(1)),
            max_retries: parse_or(get, GITHUB_MAX_RETRIES, 3, "a number of retries")?,
            concurrency,
            max_paths,
            max_wait: std::time::Duration::from_secs(parse_or(
                get,
                ENRICH_MAX_WAIT_SECONDS,
                6 * 3600,
                "a number of seconds",
            )?),
            pages_table: get(PAGES_TABLE).filter(|t| !t.trim().is_empty()),
            issue_scope: issue_scope(get)?,
            app_id: get(GITHUB_APP_ID).filter(|v| !v.trim().is_empty()),
            app_key: SecretSource::from_vars(
                get(GITHUB_APP_PRIVATE_KEY),
                get(GITHUB_APP_PRIVATE_KEY_ARN),
                get(GITHUB_APP_PRIVATE_KEY_PARAM),
            ),
            token_function: get(TOKEN_FUNCTION_NAME).filter(|v| !v.trim().is_empty()),
        })
    }
}

/// Settings of the token function: the App (its id and private key) and GitHub's API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenConfig {
    pub api_url: String,
    pub timeout: std::time::Duration,
    pub app_id: String,
    pub app_key: SecretSource,
}

impl TokenConfig {
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(&|k| std::env::var(k).ok())
    }

    pub fn from_lookup(get: &impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let api_url = get(GITHUB_API_URL)
            .filter(|v| !v.trim().is_empty())
            .unwrap_or_else(|| DEFAULT_GITHUB_API_URL.to_string());
        let timeout: u64 = parse_or(get, GITHUB_TIMEOUT_SECONDS, 10, "a number of seconds")?;
        let app_key = SecretSource::from_vars(
            get(GITHUB_APP_PRIVATE_KEY),
            get(GITHUB_APP_PRIVATE_KEY_ARN),
            get(GITHUB_APP_PRIVATE_KEY_PARAM),
        );
        if app_key == SecretSource::Unset {
            return Err(ConfigError::Missing(GITHUB_APP_PRIVATE_KEY_ARN));
        }
        Ok(TokenConfig {
            api_url: secure_url(GITHUB_API_URL, api_url)?,
            timeout: std::time::Duration::from_secs(timeout.max(1)),
            app_id: get(GITHUB_APP_ID)
                .filter(|v| !v.trim().is_empty())
                .ok_or(ConfigError::Missing(GITHUB_APP_ID))?,
            app_key,
        })
    }
}

/// `LINKED_ISSUES_SCOPE`: `repository` (unset) or `owner`.
pub fn issue_scope(
    get: &impl Fn(&str) -> Option<String>,
) -> Result<chronicle_domain::IssueScope, ConfigError> {
    match get(LINKED_ISSUES_SCOPE).filter(|v| !v.trim().is_empty()) {
        None => Ok(chronicle_domain::IssueScope::default()),
        Some(v) => chronicle_domain::IssueScope::parse(&v)
            .ok_or_else(|| invalid(LINKED_ISSUES_SCOPE, v, "repository or owner")),
    }
}

/// Settings of the sweeper function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SweeperConfig {
    pub table: TableConfig,
    pub queue_url: String,
    /// How long a row without `enrichedAt` waits for enrichment (from `receivedAt`).
    pub enrich_grace: std::time::Duration,
    /// How long a sweep's claim on a row lasts; a row whose message was lost goes again after it.
    pub claim_ttl: std::time::Duration,
    /// Whether enrichment runs at all; if not, nothing waits for it.
    pub enrich_enabled: bool,
    /// Backpressure: the sweeper tops the queue up to this many messages, never more.
    pub max_queued: usize,
}

impl SweeperConfig {
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(&|k| std::env::var(k).ok())
    }

    pub fn from_lookup(get: &impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let queue_url = get(SUMMARIZE_QUEUE_URL)
            .filter(|v| !v.trim().is_empty())
            .ok_or(ConfigError::Missing(SUMMARIZE_QUEUE_URL))?;
        let grace: u64 = parse_or(get, ENRICH_GRACE_SECONDS, 120, "a number of seconds")?;
        let claim_ttl: u64 = parse_or(get, CLAIM_TTL_SECONDS, 900, "a positive number of seconds")?;
        if claim_ttl == 0 {
            return Err(invalid(
                CLAIM_TTL_SECONDS,
                "0".into(),
                "a positive number of seconds",
            ));
        }
        let enrich_enabled = match get(ENRICH_ENABLED) {
            None => true,
            Some(_) => flag(get, ENRICH_ENABLED)?,
        };
        let max_queued: usize = parse_or(get, SWEEP_MAX_QUEUED, 500, "a positive integer")?;
        if max_queued == 0 {
            return Err(invalid(SWEEP_MAX_QUEUED, "0".into(), "a positive integer"));
        }
        Ok(SweeperConfig {
            table: TableConfig::from_lookup(get)?,
            queue_url,
            enrich_grace: std::time::Duration::from_secs(grace),
            claim_ttl: std::time::Duration::from_secs(claim_ttl),
            enrich_enabled,
            max_queued,
        })
    }
}

/// Settings of the summarize function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummarizeConfig {
    pub table: TableConfig,
    pub entries_table: String,
    pub pages_table: String,
    /// Attempts on a row (counted at each claim) before it is given up (`failedAt`).
    pub max_attempts: u32,
    pub modules_file: Option<String>,
    pub modules_param: Option<String>,
    /// Where a message goes when its row is given up, so the DLQ alarm fires and an operator can
    /// redrive it (SQS's own redrive covers messages that fail without an attempt being counted).
    pub dlq_url: Option<String>,
    /// The optional LLM summary paragraph (`None`: extractive).
    pub summary: Option<LlmConfig>,
}

/// Settings of the page builder function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuilderConfig {
    pub entries_table: String,
    pub pages_table: String,
    /// At most one build of a page per interval, however many PRs land.
    pub rebuild_interval: std::time::Duration,
    /// Pages built at once.
    pub concurrency: usize,
    /// Where the Markdown publisher writes `<owner>/<repo>/<module>.md`.
    pub output_dir: String,
    /// `s3://bucket/prefix/`: write the Markdown pages to S3 instead of `output_dir`.
    pub output_s3: Option<(String, String)>,
    /// Notion, when its token and parent page are configured.
    pub notion: Option<NotionConfig>,
    /// Publish Markdown as well as Notion.
    pub markdown_with_notion: bool,
    /// The modules config (for what each module covers, in its page's header).
    pub modules_file: Option<String>,
    pub modules_param: Option<String>,
    /// The optional LLM-written story of each module (`None`: the deterministic one only).
    pub story: Option<StoryConfig>,
}

/// Who writes the optional LLM texts: one provider for the summaries and the stories.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LlmProvider {
    /// Amazon Bedrock's Converse API, with the function's role.
    Bedrock,
    /// Anthropic's Messages API at `url` with `key`.
    Anthropic { url: String, key: SecretSource },
    /// An OpenAI-compatible `chat/completions` endpoint (key optional).
    OpenAi { url: String, key: SecretSource },
}

/// One use of the LLM: the shared provider, and this use's model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LlmConfig {
    pub provider: LlmProvider,
    pub model: String,
}

impl LlmConfig {
    /// The provider (`LLM_PROVIDER`, `LLM_API_URL`, `LLM_API_KEY` or `…_ARN`, `…_PARAM`) with the
    /// model in `model_var` (`SUMMARY_MODEL`, `STORY_MODEL`). `None` when that model is unset; an
    /// error when it is set without a provider, or the provider is unknown.
    pub fn from_lookup(
        get: &impl Fn(&str) -> Option<String>,
        model_var: &'static str,
    ) -> Result<Option<Self>, ConfigError> {
        let non_empty = |k: &str| {
            get(k)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let Some(model) = non_empty(model_var) else {
            return Ok(None);
        };
        let provider = non_empty(LLM_PROVIDER).ok_or(ConfigError::Incomplete {
            set: model_var,
            missing: LLM_PROVIDER,
        })?;
        let key = || {
            SecretSource::from_vars(
                get(LLM_API_KEY),
                get(LLM_API_KEY_ARN),
                get(LLM_API_KEY_PARAM),
            )
        };
        let provider = match provider.as_str() {
            "bedrock" => LlmProvider::Bedrock,
            "anthropic" => LlmProvider::Anthropic {
                url: secure_url(
                    LLM_API_URL,
                    non_empty(LLM_API_URL).unwrap_or_else(|| DEFAULT_ANTHROPIC_API_URL.to_string()),
                )?,
                key: key(),
            },
            "openai" => LlmProvider::OpenAi {
                url: secure_url(
                    LLM_API_URL,
                    non_empty(LLM_API_URL).ok_or(ConfigError::Missing(LLM_API_URL))?,
                )?,
                key: key(),
            },
            other => {
                return Err(invalid(
                    LLM_PROVIDER,
                    other.to_string(),
                    "bedrock, anthropic or openai",
                ))
            }
        };
        Ok(Some(LlmConfig { provider, model }))
    }
}

/// Settings of the optional LLM story.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoryConfig {
    pub llm: LlmConfig,
    /// New entries that make a stored story stale (besides a week's age).
    pub min_new_entries: u64,
}

impl StoryConfig {
    /// The LLM with `STORY_MODEL` (unset: no story), and `STORY_MIN_NEW_ENTRIES` (default 20).
    pub fn from_lookup(get: &impl Fn(&str) -> Option<String>) -> Result<Option<Self>, ConfigError> {
        let Some(llm) = LlmConfig::from_lookup(get, STORY_MODEL)? else {
            return Ok(None);
        };
        Ok(Some(StoryConfig {
            llm,
            min_new_entries: parse_or(get, STORY_MIN_NEW_ENTRIES, 20, "a number of entries")?,
        }))
    }
}

/// Settings of the Notion publisher.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotionConfig {
    pub token: crate::secret::SecretSource,
    pub parent_page_id: String,
    pub api_url: String,
}

impl NotionConfig {
    /// `None` when neither a token nor a parent page is configured; an error when only one is.
    pub fn from_lookup(get: &impl Fn(&str) -> Option<String>) -> Result<Option<Self>, ConfigError> {
        let non_empty = |k: &str| get(k).filter(|v| !v.trim().is_empty());
        let token = crate::secret::SecretSource::from_vars(
            get(NOTION_TOKEN),
            get(NOTION_TOKEN_ARN),
            get(NOTION_TOKEN_PARAM),
        );
        let parent = non_empty(NOTION_PARENT_PAGE_ID);
        let token_set = token != crate::secret::SecretSource::Unset;
        match (token_set, parent) {
            (false, None) => Ok(None),
            (true, None) => Err(ConfigError::Incomplete {
                set: NOTION_TOKEN,
                missing: NOTION_PARENT_PAGE_ID,
            }),
            (false, Some(_)) => Err(ConfigError::Incomplete {
                set: NOTION_PARENT_PAGE_ID,
                missing: NOTION_TOKEN,
            }),
            (true, Some(parent)) => Ok(Some(NotionConfig {
                token,
                parent_page_id: parent.trim().to_string(),
                api_url: secure_url(
                    NOTION_API_URL,
                    non_empty(NOTION_API_URL).unwrap_or_else(|| DEFAULT_NOTION_API_URL.to_string()),
                )?,
            })),
        }
    }
}

/// A base URL a credential is sent to: `https://`, or `http://` on the loopback interface.
fn secure_url(var: &'static str, url: String) -> Result<String, ConfigError> {
    match crate::url::check_secure(&url) {
        Ok(()) => Ok(url.trim().to_string()),
        Err(_) => Err(invalid(
            var,
            url,
            "an https:// URL (http:// only on 127.0.0.1, ::1 or localhost)",
        )),
    }
}

fn required(
    get: &impl Fn(&str) -> Option<String>,
    var: &'static str,
) -> Result<String, ConfigError> {
    get(var)
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .ok_or(ConfigError::Missing(var))
}

impl SummarizeConfig {
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(&|k| std::env::var(k).ok())
    }

    pub fn from_lookup(get: &impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let max_attempts: u32 = parse_or(get, MAX_ATTEMPTS, 5, "a positive number of attempts")?;
        if max_attempts == 0 {
            return Err(invalid(
                MAX_ATTEMPTS,
                "0".into(),
                "a positive number of attempts",
            ));
        }
        let non_empty = |k: &str| get(k).filter(|v| !v.trim().is_empty());
        Ok(SummarizeConfig {
            table: TableConfig::from_lookup(get)?,
            entries_table: required(get, ENTRIES_TABLE)?,
            pages_table: required(get, PAGES_TABLE)?,
            max_attempts,
            modules_file: non_empty(MODULES_CONFIG_FILE),
            modules_param: non_empty(MODULES_CONFIG_PARAM),
            dlq_url: non_empty(SUMMARIZE_DLQ_URL),
            summary: LlmConfig::from_lookup(get, SUMMARY_MODEL)?,
        })
    }
}

impl BuilderConfig {
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(&|k| std::env::var(k).ok())
    }

    pub fn from_lookup(get: &impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let non_empty = |k: &str| get(k).filter(|v| !v.trim().is_empty());
        let interval: u64 = parse_or(get, PAGE_REBUILD_SECONDS, 60, "a number of seconds")?;
        let concurrency: usize = parse_or(get, PAGE_BUILD_CONCURRENCY, 2, "a positive integer")?;
        if concurrency == 0 {
            return Err(invalid(
                PAGE_BUILD_CONCURRENCY,
                "0".into(),
                "a positive integer",
            ));
        }
        Ok(BuilderConfig {
            entries_table: required(get, ENTRIES_TABLE)?,
            pages_table: required(get, PAGES_TABLE)?,
            rebuild_interval: std::time::Duration::from_secs(interval),
            concurrency,
            output_dir: non_empty(OUTPUT_DIR).unwrap_or_else(|| "out".to_string()),
            notion: NotionConfig::from_lookup(get)?,
            markdown_with_notion: matches!(
                non_empty(PUBLISH_MARKDOWN).as_deref().map(str::trim),
                Some("1" | "true" | "yes")
            ),
            modules_file: non_empty(MODULES_CONFIG_FILE),
            modules_param: non_empty(MODULES_CONFIG_PARAM),
            story: StoryConfig::from_lookup(get)?,
            output_s3: match non_empty(OUTPUT_S3_URI) {
                None => None,
                Some(uri) => Some(
                    parse_s3_uri(&uri)
                        .ok_or_else(|| invalid(OUTPUT_S3_URI, uri, "s3://bucket/prefix/"))?,
                ),
            },
        })
    }
}

/// Parses `s3://bucket/prefix/` into the bucket and the prefix.
pub fn parse_s3_uri(uri: &str) -> Option<(String, String)> {
    let rest = uri.trim().strip_prefix("s3://")?;
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    (!bucket.is_empty()).then(|| (bucket.to_string(), prefix.to_string()))
}

impl TableConfig {
    pub fn from_lookup(get: &impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let table_name = get(TABLE_NAME)
            .filter(|v| !v.trim().is_empty())
            .ok_or(ConfigError::Missing(TABLE_NAME))?;
        let pending_shards = parse_or(
            get,
            PENDING_SHARDS,
            DEFAULT_PENDING_SHARDS,
            "an integer from 1 to 32",
        )?;
        if !(1..=32).contains(&pending_shards) {
            return Err(invalid(
                PENDING_SHARDS,
                pending_shards.to_string(),
                "an integer from 1 to 32",
            ));
        }
        Ok(TableConfig {
            table_name,
            pending_shards,
        })
    }
}

impl WebhookConfig {
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(&|k| std::env::var(k).ok())
    }

    pub fn from_lookup(get: &impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let max_body_bytes = parse_or(
            get,
            MAX_BODY_BYTES,
            DEFAULT_MAX_BODY_BYTES,
            "a positive number of bytes",
        )?;
        if max_body_bytes == 0 {
            return Err(invalid(
                MAX_BODY_BYTES,
                "0".into(),
                "a positive number of bytes",
            ));
        }
        let insecure_no_signature = flag(get, INSECURE_NO_SIGNATURE)?;
        // Lambda's runtime sets AWS_LAMBDA_FUNCTION_NAME: a deployed webhook always checks.
        if insecure_no_signature && get("AWS_LAMBDA_FUNCTION_NAME").is_some_and(|v| !v.is_empty()) {
            return Err(ConfigError::LocalOnly(INSECURE_NO_SIGNATURE));
        }
        Ok(WebhookConfig {
            table: TableConfig::from_lookup(get)?,
            max_body_bytes,
            secret: SecretSource::from_vars(
                get(GITHUB_WEBHOOK_SECRET),
                get(GITHUB_WEBHOOK_SECRET_ARN),
                get(GITHUB_WEBHOOK_SECRET_PARAM),
            ),
            insecure_no_signature,
            pages_table: get(PAGES_TABLE).filter(|t| !t.trim().is_empty()),
        })
    }
}

fn invalid(var: &'static str, value: String, expected: &'static str) -> ConfigError {
    ConfigError::Invalid {
        var,
        value,
        expected,
    }
}

fn parse_or<T: std::str::FromStr>(
    get: &impl Fn(&str) -> Option<String>,
    var: &'static str,
    default: T,
    expected: &'static str,
) -> Result<T, ConfigError> {
    match get(var).filter(|v| !v.trim().is_empty()) {
        None => Ok(default),
        Some(v) => v.trim().parse().map_err(|_| invalid(var, v, expected)),
    }
}

fn flag(get: &impl Fn(&str) -> Option<String>, var: &'static str) -> Result<bool, ConfigError> {
    match get(var).as_deref().map(str::trim) {
        None | Some("") | Some("0") | Some("false") => Ok(false),
        Some("1") | Some("true") => Ok(true),
        Some(other) => Err(invalid(var, other.to_string(), "1/true or 0/false")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn lookup(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn defaults_and_overrides() {
        let c = WebhookConfig::from_lookup(&lookup(&[("TABLE_NAME", "t")])).unwrap();
        assert_eq!(c.table.pending_shards, 4);
        assert_eq!(c.max_body_bytes, 1024 * 1024);
        assert_eq!(c.secret, SecretSource::Unset);
        assert!(!c.insecure_no_signature);
        let c = WebhookConfig::from_lookup(&lookup(&[
            ("TABLE_NAME", "t"),
            ("MAX_BODY_BYTES", "2048"),
            ("PENDING_SHARDS", "8"),
            ("CHRONICLE_INSECURE_NO_SIGNATURE", "1"),
        ]))
        .unwrap();
        assert_eq!(
            (
                c.max_body_bytes,
                c.table.pending_shards,
                c.insecure_no_signature
            ),
            (2048, 8, true)
        );
    }

    /// The insecure switch works on a developer's machine only, never inside Lambda.
    #[test]
    fn the_insecure_switch_is_refused_inside_lambda() {
        let local = WebhookConfig::from_lookup(&lookup(&[
            ("TABLE_NAME", "t"),
            ("CHRONICLE_INSECURE_NO_SIGNATURE", "1"),
        ]))
        .unwrap();
        assert!(local.insecure_no_signature);
        let err = WebhookConfig::from_lookup(&lookup(&[
            ("TABLE_NAME", "t"),
            ("CHRONICLE_INSECURE_NO_SIGNATURE", "1"),
            ("AWS_LAMBDA_FUNCTION_NAME", "chronicle-webhook"),
        ]))
        .unwrap_err();
        assert!(err.to_string().contains("refused inside Lambda"), "{err}");
        assert!(WebhookConfig::from_lookup(&lookup(&[
            ("TABLE_NAME", "t"),
            ("AWS_LAMBDA_FUNCTION_NAME", "chronicle-webhook"),
        ]))
        .is_ok());
    }

    /// A credential is never sent in clear text: base URLs are https, or http on loopback.
    #[test]
    fn credentialed_urls_must_be_https_except_on_loopback() {
        let enrich = |url: &str| {
            EnrichConfig::from_lookup(&lookup(&[("TABLE_NAME", "t"), ("GITHUB_API_URL", url)]))
        };
        assert!(enrich("http://ghe.example/api/v3").is_err());
        assert!(enrich("http://127.0.0.1:9000").is_ok());
        let notion = |url: &str| {
            NotionConfig::from_lookup(&lookup(&[
                ("NOTION_TOKEN", "secret_x"),
                ("NOTION_PARENT_PAGE_ID", "p"),
                ("NOTION_API_URL", url),
            ]))
        };
        assert!(notion("http://api.notion.com").is_err());
        assert!(notion("http://localhost:7000").unwrap().is_some());
        let story = |provider: &str, url: &str| {
            StoryConfig::from_lookup(&lookup(&[
                ("LLM_PROVIDER", provider),
                ("STORY_MODEL", "m"),
                ("LLM_API_URL", url),
            ]))
        };
        assert!(story("openai", "http://10.0.0.5:11434/v1").is_err());
        assert!(story("anthropic", "http://api.anthropic.com").is_err());
        assert!(story("openai", "http://localhost:11434/v1").is_ok());
        // Linked issues: the repository by default, the owner when asked, nothing else.
        let scope = |v: &str| {
            EnrichConfig::from_lookup(&lookup(&[("TABLE_NAME", "t"), ("LINKED_ISSUES_SCOPE", v)]))
                .map(|c| c.issue_scope)
        };
        assert_eq!(scope("").unwrap(), chronicle_domain::IssueScope::Repository);
        assert_eq!(scope("owner").unwrap(), chronicle_domain::IssueScope::Owner);
        assert!(scope("everything").is_err());
    }

    #[test]
    fn enrich_defaults_and_errors() {
        let c = EnrichConfig::from_lookup(&lookup(&[("TABLE_NAME", "t")])).unwrap();
        assert_eq!(c.api_url, "https://api.github.com");
        assert_eq!(c.token, SecretSource::Unset);
        assert_eq!((c.concurrency, c.max_paths, c.max_retries), (4, 500, 3));
        let c = EnrichConfig::from_lookup(&lookup(&[
            ("TABLE_NAME", "t"),
            ("GITHUB_TOKEN_ARN", "arn:x"),
            ("GITHUB_API_URL", "https://ghe.example/api/v3"),
        ]))
        .unwrap();
        assert_eq!(c.token, SecretSource::SecretsManager("arn:x".into()));
        assert_eq!(c.api_url, "https://ghe.example/api/v3");
        assert!(EnrichConfig::from_lookup(&lookup(&[
            ("TABLE_NAME", "t"),
            ("GITHUB_API_URL", "api.github.com")
        ]))
        .is_err());
        assert!(EnrichConfig::from_lookup(&lookup(&[
            ("TABLE_NAME", "t"),
            ("ENRICH_MAX_PATHS", "0")
        ]))
        .is_err());
    }

    #[test]
    fn the_token_function_needs_the_app_and_enrich_names_it() {
        let c = EnrichConfig::from_lookup(&lookup(&[
            ("TABLE_NAME", "t"),
            ("TOKEN_FUNCTION_NAME", "stack-token"),
        ]))
        .unwrap();
        assert_eq!(c.token_function.as_deref(), Some("stack-token"));
        assert_eq!(c.app_key, SecretSource::Unset);
        let t = TokenConfig::from_lookup(&lookup(&[
            ("GITHUB_APP_ID", "7"),
            ("GITHUB_APP_PRIVATE_KEY_ARN", "arn:key"),
        ]))
        .unwrap();
        assert_eq!(t.app_key, SecretSource::SecretsManager("arn:key".into()));
        assert_eq!(t.api_url, "https://api.github.com");
        assert_eq!(
            TokenConfig::from_lookup(&lookup(&[("GITHUB_APP_ID", "7")])),
            Err(ConfigError::Missing(GITHUB_APP_PRIVATE_KEY_ARN))
        );
        assert_eq!(
            TokenConfig::from_lookup(&lookup(&[("GITHUB_APP_PRIVATE_KEY_ARN", "arn:key")])),
            Err(ConfigError::Missing(GITHUB_APP_ID))
        );
    }

    const TABLES: [(&str, &str); 2] = [("ENTRIES_TABLE", "e"), ("PAGES_TABLE", "p")];

    fn with_tables<'a>(pairs: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
        let mut all = pairs.to_vec();
        all.extend(TABLES);
        all
    }

    #[test]
    fn summarize_needs_its_three_tables() {
        let c =
            SummarizeConfig::from_lookup(&lookup(&with_tables(&[("TABLE_NAME", "t")]))).unwrap();
        assert_eq!(
            (
                c.entries_table.as_str(),
                c.pages_table.as_str(),
                c.max_attempts
            ),
            ("e", "p", 5)
        );
        assert_eq!(
            SummarizeConfig::from_lookup(&lookup(&[("TABLE_NAME", "t"), ("PAGES_TABLE", "p")])),
            Err(ConfigError::Missing("ENTRIES_TABLE"))
        );
        assert!(SummarizeConfig::from_lookup(&lookup(&with_tables(&[
            ("TABLE_NAME", "t"),
            ("MAX_ATTEMPTS", "0")
        ])))
        .is_err());
    }

    #[test]
    fn builder_output_is_a_directory_or_s3() {
        let c = BuilderConfig::from_lookup(&lookup(&TABLES)).unwrap();
        assert_eq!((c.output_dir.as_str(), c.output_s3.clone()), ("out", None));
        assert_eq!(c.rebuild_interval, std::time::Duration::from_secs(60));
        let c = BuilderConfig::from_lookup(&lookup(&with_tables(&[
            ("OUTPUT_S3_URI", "s3://b/narratives/"),
            ("PAGE_REBUILD_SECONDS", "5"),
        ])))
        .unwrap();
        assert_eq!(
            c.output_s3,
            Some(("b".to_string(), "narratives/".to_string()))
        );
        assert_eq!(c.rebuild_interval, std::time::Duration::from_secs(5));
        assert!(
            BuilderConfig::from_lookup(&lookup(&with_tables(&[("OUTPUT_S3_URI", "b/x")]))).is_err()
        );
        assert!(BuilderConfig::from_lookup(&lookup(&with_tables(&[(
            "PAGE_BUILD_CONCURRENCY",
            "0"
        )])))
        .is_err());
        assert_eq!(
            BuilderConfig::from_lookup(&lookup(&[("ENTRIES_TABLE", "e")])),
            Err(ConfigError::Missing("PAGES_TABLE"))
        );
    }

    #[test]
    fn notion_needs_its_token_and_its_parent() {
        let c = BuilderConfig::from_lookup(&lookup(&TABLES)).unwrap();
        assert_eq!(c.notion, None);
        assert!(!c.markdown_with_notion);
        let c = BuilderConfig::from_lookup(&lookup(&with_tables(&[
            (
                "NOTION_TOKEN_ARN",
                "arn:aws:secretsmanager:eu-west-1:1:secret:n",
            ),
            ("NOTION_PARENT_PAGE_ID", " 1f2e3d "),
            ("PUBLISH_MARKDOWN", "1"),
        ])))
        .unwrap();
        let notion = c.notion.unwrap();
        assert_eq!(notion.parent_page_id, "1f2e3d");
        assert_eq!(notion.api_url, "https://api.notion.com");
        assert!(c.markdown_with_notion);
        let only_token =
            BuilderConfig::from_lookup(&lookup(&with_tables(&[("NOTION_TOKEN", "secret_x")])))
                .unwrap_err();
        assert_eq!(
            only_token.to_string(),
            "NOTION_TOKEN is set but NOTION_PARENT_PAGE_ID is not: the Notion publisher needs both (or neither)"
        );
        assert!(!only_token.to_string().contains("secret_x"));
    }

    #[test]
    fn errors_name_the_variable() {
        assert_eq!(
            WebhookConfig::from_lookup(&lookup(&[])),
            Err(ConfigError::Missing("TABLE_NAME"))
        );
        let e =
            WebhookConfig::from_lookup(&lookup(&[("TABLE_NAME", "t"), ("MAX_BODY_BYTES", "lots")]))
                .unwrap_err();
        assert!(e.to_string().contains("MAX_BODY_BYTES=\"lots\""), "{e}");
        let e =
            WebhookConfig::from_lookup(&lookup(&[("TABLE_NAME", "t"), ("PENDING_SHARDS", "0")]))
                .unwrap_err();
        assert!(e.to_string().contains("PENDING_SHARDS"), "{e}");
        let e = WebhookConfig::from_lookup(&lookup(&[
            ("TABLE_NAME", "t"),
            ("CHRONICLE_INSECURE_NO_SIGNATURE", "yes"),
        ]));
        assert!(e.is_err());
    }
}
