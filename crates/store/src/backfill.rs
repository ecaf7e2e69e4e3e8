//! Backfill checkpoints: one item per repository in the pages table (partition
//! `backfill#OWNER/REPO`, which no repository name can collide with), rewritten after every page
//! so a killed run continues where it stopped.

use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;
use serde::{Deserialize, Serialize};

use super::{Item, StoreError};
use chronicle_domain::RepoName;

const PARTITION_PREFIX: &str = "backfill#";
const SORT_KEY: &str = "checkpoint";

/// Where a backfill of one repository stands.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Checkpoint {
    pub repo: String,
    pub module: String,
    pub repository: String,
    /// The window asked for (`since..until`, RFC 3339, empty when open): a run with another
    /// window starts again from the beginning.
    pub window: String,
    /// The GraphQL cursor after the last page fully written.
    pub cursor: Option<String>,
    pub imported: u64,
    pub updated: u64,
    pub unchanged: u64,
    pub outside_window: u64,
    pub points: u64,
    pub requests: u64,
    pub pages: u64,
    pub total: u64,
    pub started_at: String,
    pub updated_at: String,
    pub finished_at: Option<String>,
}

impl Checkpoint {
    pub fn new(repo: &RepoName, window: &str, started_at: String) -> Self {
        Checkpoint {
            repo: format!("{PARTITION_PREFIX}{repo}"),
            module: SORT_KEY.to_string(),
            repository: repo.to_string(),
            window: window.to_string(),
            started_at: started_at.clone(),
            updated_at: started_at,
            ..Default::default()
        }
    }
}

#[derive(Clone, Debug)]
pub struct CheckpointStore {
    client: Client,
    table: String,
}

impl CheckpointStore {
    /// `table`: the pages table.
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        CheckpointStore {
            client,
            table: table.into(),
        }
    }

    pub async fn get(&self, repo: &RepoName) -> Result<Option<Checkpoint>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(
                "repo",
                AttributeValue::S(format!("{PARTITION_PREFIX}{repo}")),
            )
            .key("module", AttributeValue::S(SORT_KEY.to_string()))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| self.error("GetItem", &e))?;
        out.item
            .map(|item| serde_dynamo::from_item(item).map_err(|e| self.error("GetItem", &e)))
            .transpose()
    }

    pub async fn put(&self, checkpoint: &Checkpoint) -> Result<(), StoreError> {
        let item: Item =
            serde_dynamo::to_item(checkpoint).map_err(|e| self.error("PutItem", &e))?;
        self.client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .send()
            .await
            .map_err(|e| self.error("PutItem", &e))?;
        Ok(())
    }

    pub async fn delete(&self, repo: &RepoName) -> Result<(), StoreError> {
        self.client
            .delete_item()
            .table_name(&self.table)
            .key(
                "repo",
                AttributeValue::S(format!("{PARTITION_PREFIX}{repo}")),
            )
            .key("module", AttributeValue::S(SORT_KEY.to_string()))
            .send()
            .await
            .map_err(|e| self.error("DeleteItem", &e))?;
        Ok(())
    }

    fn error(&self, operation: &'static str, e: &dyn std::error::Error) -> StoreError {
        StoreError::Dynamo {
            operation,
            table: self.table.clone(),
            message: chronicle_domain::error::error_chain(e),
        }
    }
}
