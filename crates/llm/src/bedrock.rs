//! How a Bedrock model is named, and what to tell the operator when Bedrock refuses it.
//!
//! Bedrock's Converse `modelId` takes a foundation model id (`anthropic.claude-…-v1:0`), a
//! cross-Region inference profile id (`us.`, `eu.`, `apac.`, `jp.`, `au.`, `ca.`, `us-gov.` or
//! `global.` before the model id) or an inference profile ARN. Current Claude models are invoked
//! on demand only through a profile: their bare id is refused with a `ValidationException`.

/// A model as the operator configured it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelRef {
    /// `vendor.model…` or `arn:…:foundation-model/vendor.model…`: invoked in the function's
    /// Region.
    Foundation { id: String },
    /// `<scope>.vendor.model…`: routed by Bedrock across the Regions of `scope`.
    Profile {
        id: String,
        scope: String,
        foundation: String,
    },
    /// `arn:…:inference-profile/<id>` (system-defined) or `…:application-inference-profile/…`.
    ProfileArn {
        arn: String,
        /// The foundation model of a system-defined profile (`None` for an application profile,
        /// whose model the ARN does not name).
        foundation: Option<String>,
    },
}

/// The prefixes of Bedrock's system-defined cross-Region inference profiles.
pub const PROFILE_SCOPES: &[&str] = &["us", "eu", "apac", "jp", "au", "ca", "us-gov", "global"];

impl ModelRef {
    pub fn parse(model: &str) -> ModelRef {
        let model = model.trim();
        if model.starts_with("arn:") {
            if model.contains(":foundation-model/") {
                return ModelRef::Foundation {
                    id: model.to_string(),
                };
            }
            let foundation = model
                .split_once(":inference-profile/")
                .and_then(|(_, id)| id.split_once('.'))
                .map(|(_, f)| f.to_string());
            return ModelRef::ProfileArn {
                arn: model.to_string(),
                foundation,
            };
        }
        match model.split_once('.') {
            Some((scope, rest)) if PROFILE_SCOPES.contains(&scope) && rest.contains('.') => {
                ModelRef::Profile {
                    id: model.to_string(),
                    scope: scope.to_string(),
                    foundation: rest.to_string(),
                }
            }
            _ => ModelRef::Foundation {
                id: model.to_string(),
            },
        }
    }

    /// The geography prefix a Region's profiles carry (`us-east-1` → `us`).
    pub fn scope_of_region(region: &str) -> &'static str {
        match region.split('-').next().unwrap_or_default() {
            "eu" => "eu",
            "ap" => "apac",
            "ca" => "ca",
            "us" if region.starts_with("us-gov") => "us-gov",
            _ => "us",
        }
    }
}

/// Whether Bedrock caches a prompt prefix for this model (Converse `cachePoint`): Claude 3.5
/// Haiku, 3.7 Sonnet and every Claude 4 model, and Amazon Nova. An application profile's model is
/// unknown, so it is not asked.
pub fn supports_caching(model: &ModelRef) -> bool {
    let foundation = match model {
        // A foundation model's ARN ends in its id.
        ModelRef::Foundation { id } => id.rsplit('/').next().unwrap_or(id),
        ModelRef::Profile { foundation, .. } => foundation.as_str(),
        ModelRef::ProfileArn {
            foundation: Some(f),
            ..
        } => f.as_str(),
        ModelRef::ProfileArn {
            foundation: None, ..
        } => return false,
    };
    let old_claude = [
        "claude-v2",
        "claude-instant",
        "claude-3-haiku",
        "claude-3-sonnet",
        "claude-3-opus",
        "claude-3-5-sonnet",
    ];
    (foundation.starts_with("anthropic.claude")
        && !old_claude.iter().any(|o| foundation.contains(o)))
        || foundation.starts_with("amazon.nova")
}

/// Bedrock's answer to a model it will not run on demand, from the error's code and message:
/// what to set instead. `None` when the error is not about the model (throttling, a transient
/// fault), so the caller treats it as a passing failure.
pub fn advice(model: &str, code: &str, message: &str, region: &str) -> Option<String> {
    let lower = message.to_ascii_lowercase();
    match code {
        "ValidationException"
            if (lower.contains("on-demand throughput") || lower.contains("inference profile"))
                && matches!(ModelRef::parse(model), ModelRef::Foundation { .. }) =>
        {
            let scope = ModelRef::scope_of_region(region);
            Some(format!(
                "{model} is invoked on demand only through an inference profile: set the model to \
                 `{scope}.{model}` (or `global.{model}`), and deploy it so the template grants the \
                 profile and the models it routes to"
            ))
        }
        "ValidationException" if lower.contains("inference profile") => Some(format!(
            "Bedrock will not run {model} in {region} as given: check the id or ARN against \
             `aws bedrock list-inference-profiles` there ({message})"
        )),
        "ValidationException" if lower.contains("model identifier is invalid") => Some(format!(
            "Bedrock does not know {model} in {region}: use a foundation model id, an inference \
             profile id (`us.`, `eu.`, `apac.`, `global.`…) or a profile ARN that \
             `aws bedrock list-inference-profiles` shows"
        )),
        "AccessDeniedException" => Some(format!(
            "the function may not invoke {model}: enable the model in the Bedrock console (Model \
             access) and deploy with this model id, so the template grants it (for a profile, \
             the profile and its foundation models)"
        )),
        "ResourceNotFoundException" => Some(format!(
            "{model} is not available in {region}: choose a model or an inference profile \
             offered there"
        )),
        // A 400 is never transient: the request as configured will not run (a model that is
        // retired, a prompt over its context window), so it is an alarmed refusal.
        "ValidationException" => Some(format!("Bedrock refused {model} in {region}: {message}")),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_ids_profiles_and_arns_are_told_apart() {
        assert_eq!(
            ModelRef::parse("anthropic.claude-3-5-haiku-20241022-v1:0"),
            ModelRef::Foundation {
                id: "anthropic.claude-3-5-haiku-20241022-v1:0".into()
            }
        );
        assert_eq!(
            ModelRef::parse("us.anthropic.claude-sonnet-4-5-20250929-v1:0"),
            ModelRef::Profile {
                id: "us.anthropic.claude-sonnet-4-5-20250929-v1:0".into(),
                scope: "us".into(),
                foundation: "anthropic.claude-sonnet-4-5-20250929-v1:0".into(),
            }
        );
        assert!(matches!(
            ModelRef::parse("global.anthropic.claude-sonnet-4-5-20250929-v1:0"),
            ModelRef::Profile { scope, .. } if scope == "global"
        ));
        assert_eq!(
            ModelRef::parse(
                "arn:aws:bedrock:eu-west-1:123456789012:inference-profile/eu.anthropic.claude-haiku-4-5-20251001-v1:0"
            ),
            ModelRef::ProfileArn {
                arn: "arn:aws:bedrock:eu-west-1:123456789012:inference-profile/eu.anthropic.claude-haiku-4-5-20251001-v1:0".into(),
                foundation: Some("anthropic.claude-haiku-4-5-20251001-v1:0".into()),
            }
        );
        assert!(matches!(
            ModelRef::parse(
                "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/a1b2c3"
            ),
            ModelRef::ProfileArn {
                foundation: None,
                ..
            }
        ));
        assert_eq!(
            ModelRef::parse(
                "arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-3-haiku-20240307-v1:0"
            ),
            ModelRef::Foundation {
                id: "arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-3-haiku-20240307-v1:0"
                    .into()
            }
        );
        // A vendor called like a scope is still a foundation model without a second dot.
        assert!(matches!(
            ModelRef::parse("us.model"),
            ModelRef::Foundation { .. }
        ));
    }

    #[test]
    fn a_profile_only_model_gets_the_profile_to_use() {
        let message = "Invocation of model ID anthropic.claude-sonnet-4-5-20250929-v1:0 with \
                       on-demand throughput isn’t supported. Retry your request with the ID or \
                       ARN of an inference profile that contains this model.";
        let a = advice(
            "anthropic.claude-sonnet-4-5-20250929-v1:0",
            "ValidationException",
            message,
            "eu-central-1",
        )
        .unwrap();
        assert!(
            a.contains("`eu.anthropic.claude-sonnet-4-5-20250929-v1:0`"),
            "{a}"
        );
        // A profile is not told to become a profile of itself.
        let a = advice(
            "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
            "ValidationException",
            "The provided model identifier is invalid for this inference profile.",
            "us-east-1",
        )
        .unwrap();
        assert!(!a.contains("us.us."), "{a}");
        assert!(a.contains("list-inference-profiles"), "{a}");
        assert!(
            advice("m", "ValidationException", "Input is too long", "us-east-1")
                .unwrap()
                .contains("Input is too long")
        );
        assert!(advice("m", "ThrottlingException", "slow down", "us-east-1").is_none());
        assert!(advice("m", "AccessDeniedException", "no", "us-east-1")
            .unwrap()
            .contains("Model access"));
        assert_eq!(ModelRef::scope_of_region("ap-southeast-2"), "apac");
        assert_eq!(ModelRef::scope_of_region("us-west-2"), "us");
    }
}
