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
}

/// A model's answer: its text, and whether it stopped at its token limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub text: String,
    pub truncated: bool,
}

/// Which model answers, and how it is reached.
pub enum Writer {
    /// Amazon Bedrock's Converse API, authorised by the function's role.
    Bedrock {
        client: aws_sdk_bedrockruntime::Client,
        model_id: String,
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
        Writer::Bedrock {
            client: aws_sdk_bedrockruntime::Client::new(sdk),
            model_id: model_id.to_string(),
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

    /// `provider/model`, as stored with what it wrote.
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
    /// the caller's own work). Unchecked: the caller decides what of it may be used.
    pub async fn write(
        &self,
        system: &str,
        user: &str,
        max_tokens: i32,
        deadline: Instant,
    ) -> Result<Answer, WriteError> {
        let provider = self.provider();
        let timeout = deadline
            .saturating_duration_since(Instant::now())
            .saturating_sub(DEADLINE_MARGIN)
            .min(Duration::from_secs(60));
        if timeout < Duration::from_secs(5) {
            return Err(WriteError::NoTime);
        }
        match tokio::time::timeout(timeout, self.ask(system, user, max_tokens, timeout)).await {
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
    ) -> Result<Answer, WriteError> {
        let provider = self.provider();
        match self {
            Writer::Bedrock { client, model_id } => {
                converse(client, model_id, system, user, max_tokens, provider).await
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
                    .header("anthropic-version", crate::summarizer::ANTHROPIC_VERSION);
                let answer = post_json(request, &body, timeout, provider).await?;
                Ok(Answer {
                    text: answer["content"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|c| c["text"].as_str())
                        .collect::<Vec<_>>()
                        .join("\n"),
                    truncated: answer["stop_reason"] == "max_tokens",
                })
            }
            Writer::OpenAi {
                http,
                url,
                key,
                model,
            } => {
                let body = serde_json::json!({
                    "model": model,
                    "max_tokens": max_tokens,
                    "temperature": 0.2,
                    "messages": [
                        {"role": "system", "content": system},
                        {"role": "user", "content": user},
                    ],
                });
                let mut request = http.post(format!("{url}/v1/chat/completions"));
                if let Some(key) = key {
                    request = request.bearer_auth(key.expose());
                }
                let answer = post_json(request, &body, timeout, provider).await?;
                Ok(Answer {
                    text: answer["choices"][0]["message"]["content"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    truncated: answer["choices"][0]["finish_reason"] == "length",
                })
            }
        }
    }
}

/// Bedrock's Converse API, once: its text blocks joined, and whether it stopped at its limit.
async fn converse(
    client: &aws_sdk_bedrockruntime::Client,
    model_id: &str,
    system: &str,
    user: &str,
    max_tokens: i32,
    provider: &'static str,
) -> Result<Answer, WriteError> {
    let failed = |message: String| WriteError::Failed { provider, message };
    use aws_sdk_bedrockruntime::types::{
        ContentBlock, ConversationRole, InferenceConfiguration, Message, SystemContentBlock,
    };
    let message = Message::builder()
        .role(ConversationRole::User)
        .content(ContentBlock::Text(user.to_string()))
        .build()
        .map_err(|e| failed(e.to_string()))?;
    let answer = client
        .converse()
        .model_id(model_id)
        .system(SystemContentBlock::Text(system.to_string()))
        .messages(message)
        .inference_config(
            InferenceConfiguration::builder()
                .max_tokens(max_tokens)
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
            return Err(if code == "ThrottlingException" {
                WriteError::Throttled { provider, message }
            } else {
                failed(message)
            });
        }
    };
    let truncated = output.stop_reason == aws_sdk_bedrockruntime::types::StopReason::MaxTokens;
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
    if !status.is_success() {
        return Err(failed(format!("{status}: {answer}")));
    }
    Ok(answer)
}
