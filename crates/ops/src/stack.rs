//! A deployed Chronicle stack, found by name: its outputs (table and queue names) and parameters
//! read with CloudFormation's `DescribeStacks`, using the standard AWS profile and region. And
//! the local stack, found by its endpoint: its SDK configuration and its tables' names.

use std::collections::HashMap;

use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_dynamodb::config::Credentials;

#[derive(Debug, thiserror::Error)]
pub enum StackError {
    #[error("no CloudFormation stack named {0} in this account and region (check --stack, AWS_PROFILE and AWS_REGION)")]
    NotFound(String),
    #[error(
        "stack {stack} has no output {output}: deployed from an older template? (sam deploy again)"
    )]
    MissingOutput { stack: String, output: String },
    #[error("CloudFormation DescribeStacks for {stack} failed: {message}")]
    Aws { stack: String, message: String },
}

#[derive(Debug, Clone)]
pub struct Stack {
    pub name: String,
    pub outputs: HashMap<String, String>,
    pub parameters: HashMap<String, String>,
}

impl Stack {
    pub async fn load(sdk: &SdkConfig, name: &str) -> Result<Stack, StackError> {
        let client = aws_sdk_cloudformation::Client::new(sdk);
        let out = match client.describe_stacks().stack_name(name).send().await {
            Ok(out) => out,
            Err(e) => {
                let message = stages::aws::error_message(&e);
                // CloudFormation answers a missing stack with a ValidationError naming it.
                if message.contains("does not exist") {
                    return Err(StackError::NotFound(name.to_string()));
                }
                return Err(StackError::Aws {
                    stack: name.to_string(),
                    message,
                });
            }
        };
        let stack = out
            .stacks()
            .first()
            .ok_or_else(|| StackError::NotFound(name.to_string()))?;
        Ok(Stack {
            name: name.to_string(),
            outputs: stack
                .outputs()
                .iter()
                .filter_map(|o| Some((o.output_key()?.to_string(), o.output_value()?.to_string())))
                .collect(),
            parameters: stack
                .parameters()
                .iter()
                .filter_map(|p| {
                    Some((
                        p.parameter_key()?.to_string(),
                        p.parameter_value().unwrap_or_default().to_string(),
                    ))
                })
                .collect(),
        })
    }

    pub fn output(&self, key: &str) -> Result<&str, StackError> {
        self.outputs
            .get(key)
            .map(String::as_str)
            .ok_or_else(|| StackError::MissingOutput {
                stack: self.name.clone(),
                output: key.to_string(),
            })
    }

    /// The PR table (with the deployed `PendingShards`: a row in a shard the sweeper does not
    /// query would never be summarized) and the pages table.
    pub fn tables(&self) -> Result<(stages::config::TableConfig, String), StackError> {
        let table = stages::config::TableConfig {
            table_name: self.output("PrTableName")?.to_string(),
            pending_shards: self
                .parameter("PendingShards")
                .and_then(|v| v.parse().ok())
                .unwrap_or(4),
        };
        Ok((table, self.output("PagesTableName")?.to_string()))
    }

    pub fn parameter(&self, key: &str) -> Option<&str> {
        self.parameters
            .get(key)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }
}

/// The local stack's PR table when `TABLE_NAME` is not set.
pub const DEFAULT_TABLE: &str = "chronicle-dev";

/// The local stack's PR table and pages table as the environment names them (`TABLE_NAME`,
/// `PAGES_TABLE`, `PENDING_SHARDS`), with `chronicle dev`'s defaults: what the operator
/// commands use without `--stack`.
pub fn local_tables() -> (stages::config::TableConfig, String) {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let table_name = env(stages::config::TABLE_NAME).unwrap_or_else(|| DEFAULT_TABLE.to_string());
    let pages_table =
        env(stages::config::PAGES_TABLE).unwrap_or_else(|| format!("{table_name}-pages"));
    let table = stages::config::TableConfig {
        table_name,
        pending_shards: env("PENDING_SHARDS")
            .and_then(|v| v.parse().ok())
            .unwrap_or(4),
    };
    (table, pages_table)
}

/// SDK configuration for the local stack's emulator at `endpoint`: region and credentials from the environment if
/// set, else `us-east-1` and dummy keys (moto accepts any).
pub async fn local_sdk_config(endpoint: &str) -> SdkConfig {
    let region = std::env::var("AWS_REGION")
        .or_else(|_| std::env::var("AWS_DEFAULT_REGION"))
        .unwrap_or_else(|_| "us-east-1".into());
    let mut loader = aws_config::defaults(BehaviorVersion::latest())
        .http_client(stages::aws::http_client())
        .endpoint_url(endpoint)
        .region(Region::new(region));
    if std::env::var("AWS_ACCESS_KEY_ID").is_err() {
        loader = loader.credentials_provider(Credentials::new(
            "test",
            "test",
            None,
            None,
            "chronicle-local",
        ));
    }
    loader.load().await
}
