//! Who writes longer text from a prompt: Amazon Bedrock's Converse API, Anthropic's Messages API
//! or an OpenAI-compatible endpoint, each asked once within the time left before a deadline.
//! What the text is for, and whether it may be kept, is the caller's (see `stages::story`).

use std::time::{Duration, Instant};

use chronicle_aws::secret::Secret;

/// What the caller keeps of its invocation after the answer: the writer gives up this long before
/// the deadline.
pub const DEADLINE_MARGIN: Duration = Duration::from_secs(45);

#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("{provider} throttled the request: {message}")]
    Throttled {
        provider: &'static str,
        message: String,
    },
    #[error("{provider} did not answer within {0:?}", .timeout)]
    Timeout {
        provider: &'static str,
        timeout: Duration,
    },
    #[error("no time left before the deadline for the model's answer")]
    NoTime,
    #[error("{provider} failed: {message}")]
    Failed {
        provider: &'static str,
        message: String,
    },
    /// The model's own filter or guardrail withheld its answer (`reason`: the stop reason it
    /// gave). Final for this input: asking it again costs as much and answers the same.
    #[error(
        "{provider} withheld its answer ({reason}): its content filter or guardrail stopped it"
    )]
    Withheld {
        provider: &'static str,
        reason: String,
    },
    /// The model, or the right to call it, is wrong: asking again will not help until the
    /// operator acts on the advice.
    #[error("{provider} refused the model: {message}")]
    Misconfigured {
        provider: &'static str,
        message: String,
        advice: String,
        /// The request field the endpoint named as at fault (OpenAI's `error.param`).
        param: Option<String>,
    },
}

impl WriteError {
    /// What the operator must do, when the configuration is at fault.
    pub fn advice(&self) -> Option<&str> {
        match self {
            WriteError::Misconfigured { advice, .. } => Some(advice),
            _ => None,
        }
    }

    /// The stop reason, when the model's filter or guardrail withheld the answer.
    pub fn withheld(&self) -> Option<&str> {
        match self {
            WriteError::Withheld { reason, .. } => Some(reason),
            _ => None,
        }
    }

    /// Worth asking again soon: throttling, a timeout, a transient fault.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            WriteError::Throttled { .. } | WriteError::Timeout { .. } | WriteError::Failed { .. }
        )
    }
}

/// A model's answer: its text, whether it was cut off (its token limit, or the model's context
/// window), and the tokens it cost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub text: String,
    pub truncated: bool,
    pub usage: Usage,
}

/// Tokens of one call, as the provider counted them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Input tokens billed at the full price (cached ones not included).
    pub input: u64,
    pub output: u64,
    /// Input tokens read from the prompt cache (billed at a tenth).
    pub cache_read: u64,
    /// Input tokens written to the prompt cache (billed at a quarter more).
    pub cache_write: u64,
}

/// The `anthropic-version` header sent with every Messages API request.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// Stop reasons that mean the text is cut off.
pub(crate) const CUT_OFF: &[&str] = &["max_tokens", "model_context_window_exceeded", "length"];

/// Stop reasons that mean the model's safety withheld the answer: Anthropic's `refusal`, an
/// OpenAI-compatible endpoint's `content_filter` (Bedrock's are typed: see [`converse`]).
pub(crate) const WITHHELD: &[&str] = &["refusal", "content_filter"];

/// The answer's stop reason as a [`WriteError::Withheld`], when it is one of [`WITHHELD`]: the
/// text that came with it (often none, or the provider's canned words) is no answer.
fn withheld(provider: &'static str, stop: Option<&str>) -> Result<(), WriteError> {
    match stop.filter(|r| WITHHELD.contains(r)) {
        Some(reason) => Err(WriteError::Withheld {
            provider,
            reason: reason.to_string(),
        }),
        None => Ok(()),
    }
}

/// Which model answers, and how it is reached.
pub enum Writer {
    /// Amazon Bedrock's Converse API, authorised by the function's role.
    Bedrock {
        client: aws_sdk_bedrockruntime::Client,
        model_id: String,
        /// Mark the system prompt as a cacheable prefix (`cachePoint`), where the model caches.
        cache: bool,
    },
    /// Anthropic's Messages API (`{url}/v1/messages`).
    Anthropic {
        http: reqwest::Client,
        url: String,
        key: Secret,
        model: String,
    },
    /// An OpenAI-compatible endpoint (`{url}/v1/chat/completions`), key optional.
    OpenAi {
        http: reqwest::Client,
        url: String,
        key: Option<Secret>,
        model: String,
    },
}

impl Writer {
    pub fn bedrock(sdk: &aws_config::SdkConfig, model_id: &str) -> Self {
        Self::bedrock_with(aws_sdk_bedrockruntime::Client::new(sdk), model_id)
    }

    /// Over `client` (a stand-in's in tests), caching the system prompt where the model can.
    pub fn bedrock_with(client: aws_sdk_bedrockruntime::Client, model_id: &str) -> Self {
        let model_id = model_id.trim().to_string();
        Writer::Bedrock {
            cache: crate::bedrock::supports_caching(&crate::bedrock::ModelRef::parse(&model_id)),
            client,
            model_id,
        }
    }

    pub fn anthropic(url: &str, key: Secret, model: &str) -> Self {
        Writer::Anthropic {
            http: chronicle_http::credentialed()
                .build()
                .expect("a client with a static configuration builds"),
            url: url.trim_end_matches('/').to_string(),
            key,
            model: model.to_string(),
        }
    }

    pub fn openai(url: &str, key: Option<Secret>, model: &str) -> Self {
        Writer::OpenAi {
            http: chronicle_http::credentialed()
                .build()
                .expect("a client with a static configuration builds"),
            url: url.trim_end_matches('/').to_string(),
            key,
            model: model.to_string(),
        }
    }

    /// The writer a configuration names, its key read from where it is kept.
    pub async fn from_config(
        config: &chronicle_config::LlmConfig,
        sdk: &aws_config::SdkConfig,
    ) -> Result<Self, chronicle_aws::secret::SecretError> {
        use chronicle_aws::secret::Resolve;
        use chronicle_config::LlmProvider;
        Ok(match &config.provider {
            LlmProvider::Bedrock => Writer::bedrock(sdk, &config.model),
            LlmProvider::Anthropic { url, key } => {
                let key = key.resolve(sdk).await?.ok_or_else(|| {
                    chronicle_aws::secret::SecretError::EmptyParameter {
                        name: chronicle_config::LLM_API_KEY.into(),
                    }
                })?;
                Writer::anthropic(url, key, &config.model)
            }
            LlmProvider::OpenAi { url, key } => {
                Writer::openai(url, key.resolve(sdk).await?, &config.model)
            }
        })
    }

    /// `provider/model`, as stored with what it wrote, and what an answer its filter withheld
    /// is final for (Chronicle configures no guardrail of its own: were one configured, its id
    /// and version would belong here).
    pub fn model(&self) -> String {
        match self {
            Writer::Bedrock { model_id, .. } => format!("bedrock/{model_id}"),
            Writer::Anthropic { model, .. } => format!("anthropic/{model}"),
            Writer::OpenAi { model, .. } => format!("openai/{model}"),
        }
    }

    fn provider(&self) -> &'static str {
        match self {
            Writer::Bedrock { .. } => "Bedrock",
            Writer::Anthropic { .. } => "the Anthropic API",
            Writer::OpenAi { .. } => "the OpenAI-compatible endpoint",
        }
    }

    /// The model's text for `prompt`, within the time left before `deadline` (less a margin for
    /// the caller's own work). Unchecked: the caller decides what of it may be used. The system
    /// prompt is marked for the prompt cache (where the model caches) only when `cache` says
    /// another call will read it soon: a write costs more than an unmarked call.
    pub async fn write(
        &self,
        system: &str,
        user: &str,
        max_tokens: i32,
        deadline: Instant,
        cache: bool,
    ) -> Result<Answer, WriteError> {
        let timeout = deadline
            .saturating_duration_since(Instant::now())
            .saturating_sub(DEADLINE_MARGIN)
            .min(Duration::from_secs(60));
        if timeout < Duration::from_secs(5) {
            return Err(WriteError::NoTime);
        }
        self.ask_within(system, user, max_tokens, timeout, cache)
            .await
    }

    /// The model's text, asked once, given up after `timeout`.
    pub async fn write_within(
        &self,
        system: &str,
        user: &str,
        max_tokens: i32,
        timeout: Duration,
    ) -> Result<Answer, WriteError> {
        self.ask_within(system, user, max_tokens, timeout, true)
            .await
    }

    async fn ask_within(
        &self,
        system: &str,
        user: &str,
        max_tokens: i32,
        timeout: Duration,
        mark: bool,
    ) -> Result<Answer, WriteError> {
        let provider = self.provider();
        match tokio::time::timeout(timeout, self.ask(system, user, max_tokens, timeout, mark)).await
        {
            Ok(answer) => answer,
            Err(_) => Err(WriteError::Timeout { provider, timeout }),
        }
    }

    async fn ask(
        &self,
        system: &str,
        user: &str,
        max_tokens: i32,
        timeout: Duration,
        mark: bool,
    ) -> Result<Answer, WriteError> {
        let provider = self.provider();
        match self {
            Writer::Bedrock {
                client,
                model_id,
                cache,
            } => {
                let ask = Ask {
                    system,
                    user,
                    max_tokens,
                    cache: *cache && mark,
                };
                converse(client, model_id, &ask, provider).await
            }
            Writer::Anthropic {
                http,
                url,
                key,
                model,
            } => {
                let body = serde_json::json!({
                    "model": model,
                    "max_tokens": max_tokens,
                    "system": system,
                    "messages": [{"role": "user", "content": user}],
                });
                let request = http
                    .post(format!("{url}/v1/messages"))
                    .header("x-api-key", key.expose())
                    .header("anthropic-version", ANTHROPIC_VERSION);
                let answer = post_json(request, &body, timeout, provider).await?;
                withheld(provider, answer["stop_reason"].as_str())?;
                let tokens = |k: &str| answer["usage"][k].as_u64().unwrap_or(0);
                Ok(Answer {
                    text: answer["content"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|c| c["text"].as_str())
                        .collect::<Vec<_>>()
                        .join("\n"),
                    truncated: CUT_OFF.contains(&answer["stop_reason"].as_str().unwrap_or("")),
                    usage: Usage {
                        input: tokens("input_tokens"),
                        output: tokens("output_tokens"),
                        cache_read: tokens("cache_read_input_tokens"),
                        cache_write: tokens("cache_creation_input_tokens"),
                    },
                })
            }
            Writer::OpenAi {
                http,
                url,
                key,
                model,
            } => {
                let ask = Ask {
                    system,
                    user,
                    max_tokens,
                    cache: false,
                };
                chat_completions(http, url, key.as_ref(), model, &ask, timeout, provider).await
            }
        }
    }
}

/// One request's text and limits.
struct Ask<'a> {
    system: &'a str,
    user: &'a str,
    max_tokens: i32,
    cache: bool,
}

/// An OpenAI-compatible `chat/completions`, once. The limit goes as `max_tokens`, which Ollama
/// and vLLM read; api.openai.com has deprecated it for `max_completion_tokens` (and refuses it
/// for reasoning models), so that host gets the new name, and any endpoint that refuses
/// `max_tokens` as unsupported (`error.param`) is asked again with it; one that refuses the
/// temperature (reasoning models take only the default) is asked again without one.
async fn chat_completions(
    http: &reqwest::Client,
    url: &str,
    key: Option<&Secret>,
    model: &str,
    ask: &Ask<'_>,
    timeout: Duration,
    provider: &'static str,
) -> Result<Answer, WriteError> {
    let mut new_name = reqwest::Url::parse(url)
        .ok()
        .and_then(|u| u.host_str().map(|h| h == "api.openai.com"))
        .unwrap_or(false);
    // Reasoning models take only the default temperature: asked again without one.
    let mut temperature = true;
    loop {
        let limit = if new_name {
            "max_completion_tokens"
        } else {
            "max_tokens"
        };
        let mut body = serde_json::json!({
            "model": model,
            limit: ask.max_tokens,
            "messages": [
                {"role": "system", "content": ask.system},
                {"role": "user", "content": ask.user},
            ],
        });
        if temperature {
            body["temperature"] = serde_json::json!(0.2);
        }
        let mut request = http.post(format!("{url}/v1/chat/completions"));
        if let Some(key) = key {
            request = request.bearer_auth(key.expose());
        }
        let answer = match post_json(request, &body, timeout, provider).await {
            // The field the endpoint names (`error.param`), not a word of its message.
            Err(WriteError::Misconfigured { param: Some(p), .. })
                if !new_name && p == "max_tokens" =>
            {
                new_name = true;
                continue;
            }
            Err(WriteError::Misconfigured { param: Some(p), .. })
                if temperature && p == "temperature" =>
            {
                temperature = false;
                continue;
            }
            other => other?,
        };
        withheld(provider, answer["choices"][0]["finish_reason"].as_str())?;
        let tokens = |k: &str| answer["usage"][k].as_u64().unwrap_or(0);
        let cached = answer["usage"]["prompt_tokens_details"]["cached_tokens"]
            .as_u64()
            .unwrap_or(0);
        return Ok(Answer {
            text: answer["choices"][0]["message"]["content"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            truncated: CUT_OFF
                .contains(&answer["choices"][0]["finish_reason"].as_str().unwrap_or("")),
            usage: Usage {
                input: tokens("prompt_tokens").saturating_sub(cached),
                output: tokens("completion_tokens"),
                cache_read: cached,
                cache_write: 0,
            },
        });
    }
}

/// Bedrock's Converse API, once: its text blocks joined, whether it was cut off, and its usage.
/// The system prompt is marked as a cacheable prefix where the model caches; Bedrock caches it
/// once it is long enough for the model (else the mark is ignored).
async fn converse(
    client: &aws_sdk_bedrockruntime::Client,
    model_id: &str,
    ask: &Ask<'_>,
    provider: &'static str,
) -> Result<Answer, WriteError> {
    let failed = |message: String| WriteError::Failed { provider, message };
    use aws_sdk_bedrockruntime::types::{
        CachePointBlock, CachePointType, ContentBlock, ConversationRole, InferenceConfiguration,
        Message, StopReason, SystemContentBlock,
    };
    let message = Message::builder()
        .role(ConversationRole::User)
        .content(ContentBlock::Text(ask.user.to_string()))
        .build()
        .map_err(|e| failed(e.to_string()))?;
    let mut request = client
        .converse()
        .model_id(model_id)
        .system(SystemContentBlock::Text(ask.system.to_string()));
    if ask.cache {
        let point = CachePointBlock::builder()
            .r#type(CachePointType::Default)
            .build()
            .map_err(|e| failed(e.to_string()))?;
        request = request.system(SystemContentBlock::CachePoint(point));
    }
    let answer = request
        .messages(message)
        .inference_config(
            InferenceConfiguration::builder()
                .max_tokens(ask.max_tokens)
                .temperature(0.2)
                .build(),
        )
        .send()
        .await;
    let output = match answer {
        Ok(o) => o,
        Err(e) => {
            let code = e
                .as_service_error()
                .and_then(aws_sdk_bedrockruntime::error::ProvideErrorMetadata::code)
                .unwrap_or_default()
                .to_string();
            let message = chronicle_aws::error_message(&e);
            let region = client
                .config()
                .region()
                .map(|r| r.to_string())
                .unwrap_or_default();
            if let Some(advice) = crate::bedrock::advice(model_id, &code, &message, &region) {
                return Err(WriteError::Misconfigured {
                    provider,
                    message: format!("{code}: {message}"),
                    advice,
                    param: None,
                });
            }
            return Err(if code == "ThrottlingException" {
                WriteError::Throttled { provider, message }
            } else {
                failed(message)
            });
        }
    };
    // A filtered or guarded answer is no answer, whatever text came with it (a guardrail's
    // blocked message), and final for this input.
    if matches!(
        output.stop_reason,
        StopReason::ContentFiltered | StopReason::GuardrailIntervened
    ) {
        return Err(WriteError::Withheld {
            provider,
            reason: output.stop_reason.as_str().to_string(),
        });
    }
    let truncated = matches!(
        output.stop_reason,
        StopReason::MaxTokens | StopReason::ModelContextWindowExceeded
    );
    let usage = output
        .usage
        .as_ref()
        .map(|u| Usage {
            input: u.input_tokens.max(0) as u64,
            output: u.output_tokens.max(0) as u64,
            cache_read: u.cache_read_input_tokens.unwrap_or(0).max(0) as u64,
            cache_write: u.cache_write_input_tokens.unwrap_or(0).max(0) as u64,
        })
        .unwrap_or_default();
    let text: Vec<String> = match output.output {
        Some(aws_sdk_bedrockruntime::types::ConverseOutput::Message(m)) => m
            .content
            .into_iter()
            .filter_map(|c| match c {
                ContentBlock::Text(t) => Some(t),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    Ok(Answer {
        text: text.join("\n"),
        truncated,
        usage,
    })
}

async fn post_json(
    request: reqwest::RequestBuilder,
    body: &serde_json::Value,
    timeout: Duration,
    provider: &'static str,
) -> Result<serde_json::Value, WriteError> {
    let failed = |message: String| WriteError::Failed { provider, message };
    let response = request
        .json(body)
        .timeout(timeout)
        .send()
        .await
        .map_err(|e| failed(chronicle_aws::error::error_chain(&e)))?;
    let status = response.status();
    let answer: serde_json::Value = response.json().await.unwrap_or_default();
    if status.as_u16() == 429 || status.as_u16() == 529 {
        return Err(WriteError::Throttled {
            provider,
            message: format!("{status}"),
        });
    }
    if matches!(status.as_u16(), 400 | 401 | 403 | 404) {
        let advice = match status.as_u16() {
            401 | 403 => {
                "the API key is missing, wrong or not allowed this model: check the key's secret"
            }
            404 => "the model or the endpoint does not exist: check the model name and the API URL",
            _ => "the endpoint refused the request: check the model name and the API URL",
        };
        return Err(WriteError::Misconfigured {
            provider,
            message: format!("{status}: {answer}"),
            advice: advice.to_string(),
            param: answer["error"]["param"].as_str().map(str::to_string),
        });
    }
    if !status.is_success() {
        return Err(failed(format!("{status}: {answer}")));
    }
    Ok(answer)
}
