//! The entries table: one item per (PR, module), keyed so that one Query returns one module's
//! entries in merge order and nothing else: partition `page` = `repo#module`, sort `order` =
//! `mergedAt#number` ([`chronicle_domain::order_key`]).
//!
//! An entry is keyed by its PR, so writing it again replaces it: a retry can never make two.
//! Every write is conditional on the writer's claim `generation` (see [`attr::GENERATION`]):
//! a worker that lost its lease cannot overwrite what a later claim wrote.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;

use super::{applied, attr, dynamo_error, Item, Meter, StoreError};
use chronicle_domain::{order_key, ModuleEntry};

/// Attribute names of the entries table (the entry's own fields are [`ModuleEntry`]'s).
pub mod entry_attr {
    pub const PAGE: &str = "page";
    pub const ORDER: &str = "order";
}

/// Which of a module's entries a Query reads, by their order keys.
enum Keys {
    All,
    Between(String, String),
    Below(String),
}

/// Items per Query page (DynamoDB also stops at 1 MB).
const QUERY_PAGE: i32 = 200;

#[derive(Clone, Debug)]
pub struct EntryStore {
    client: Client,
    table: String,
    meter: Meter,
}

impl EntryStore {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        EntryStore {
            client,
            table: table.into(),
            meter: Meter::default(),
        }
    }

    pub fn with_meter(mut self, meter: Meter) -> Self {
        self.meter = meter;
        self
    }

    pub fn table_name(&self) -> &str {
        &self.table
    }

    /// The partition of one module's entries.
    pub fn page_key(repo: &str, module: &str) -> String {
        format!("{repo}#{module}")
    }

    fn key(repo: &str, module: &str, merged_at: &str, number: u64) -> Item {
        HashMap::from([
            (
                entry_attr::PAGE.to_string(),
                AttributeValue::S(Self::page_key(repo, module)),
            ),
            (
                entry_attr::ORDER.to_string(),
                AttributeValue::S(order_key(merged_at, number)),
            ),
        ])
    }

    /// Writes (or rewrites) the entry for claim `generation`. `false`: an entry written by a
    /// later claim is there, so this writer has been superseded and wrote nothing.
    pub async fn put(&self, entry: &ModuleEntry, generation: u64) -> Result<bool, StoreError> {
        let item = self.item(entry, generation)?;
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(#page) OR #generation <= :generation")
            .expression_attribute_names("#page", entry_attr::PAGE)
            .expression_attribute_names("#generation", attr::GENERATION)
            .expression_attribute_values(":generation", AttributeValue::N(generation.to_string()))
            .send()
            .await;
        self.meter.write();
        applied(&self.table, "PutItem", result)
    }

    /// The stored item of an entry written by claim `generation` (its keys included).
    pub fn item(&self, entry: &ModuleEntry, generation: u64) -> Result<Item, StoreError> {
        let mut item: Item = serde_dynamo::to_item(entry).map_err(|e| StoreError::Dynamo {
            operation: "PutItem",
            table: self.table.clone(),
            message: format!("the entry does not serialize: {e}"),
        })?;
        item.extend(Self::key(
            &entry.repo,
            &entry.module,
            &entry.merged_at,
            entry.number,
        ));
        item.insert(
            attr::GENERATION.to_string(),
            AttributeValue::N(generation.to_string()),
        );
        Ok(item)
    }

    /// Deletes a PR's entry from a module it no longer belongs to, unless a later claim wrote
    /// it. Deleting what is not there succeeds.
    pub async fn delete(
        &self,
        repo: &str,
        module: &str,
        merged_at: &str,
        number: u64,
        generation: u64,
    ) -> Result<(), StoreError> {
        let result = self
            .client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(Self::key(repo, module, merged_at, number)))
            .condition_expression("attribute_not_exists(#page) OR #generation <= :generation")
            .expression_attribute_names("#page", entry_attr::PAGE)
            .expression_attribute_names("#generation", attr::GENERATION)
            .expression_attribute_values(":generation", AttributeValue::N(generation.to_string()))
            .send()
            .await;
        self.meter.write();
        applied(&self.table, "DeleteItem", result).map(drop)
    }

    /// The module's newest entries, newest first, at most `limit`.
    pub async fn newest(
        &self,
        repo: &str,
        module: &str,
        limit: usize,
    ) -> Result<Vec<ModuleEntry>, StoreError> {
        self.query(repo, module, Keys::All, false, limit).await
    }

    /// Every entry the module has in `year`, oldest first.
    pub async fn year(
        &self,
        repo: &str,
        module: &str,
        year: i32,
    ) -> Result<Vec<ModuleEntry>, StoreError> {
        let range = Keys::Between(format!("{year:04}"), format!("{year:04}~"));
        self.query(repo, module, range, true, usize::MAX).await
    }

    /// Every entry from order key `from` on (`from` included), oldest first: a module page's
    /// entries and those merged since.
    pub async fn since(
        &self,
        repo: &str,
        module: &str,
        from: &str,
    ) -> Result<Vec<ModuleEntry>, StoreError> {
        let range = Keys::Between(from.to_string(), "~".to_string());
        self.query(repo, module, range, true, usize::MAX).await
    }

    /// The newest `limit` entries of `year` older than order key `below`, oldest first: the
    /// entries of an archive's open part.
    pub async fn year_before(
        &self,
        repo: &str,
        module: &str,
        year: i32,
        below: &str,
        limit: usize,
    ) -> Result<Vec<ModuleEntry>, StoreError> {
        let start = format!("{year:04}");
        if limit == 0 || below <= start.as_str() {
            return Ok(Vec::new());
        }
        let end = format!("{year:04}~");
        let below = if below < end.as_str() { below } else { &end };
        // Newest first from just below `below`: exactly the `limit` entries wanted, when the
        // year has that many there (else the read stops in the year before, dropped).
        let mut entries = self
            .query(repo, module, Keys::Below(below.to_string()), false, limit)
            .await?;
        entries.retain(|e| e.year() == year);
        entries.reverse();
        Ok(entries)
    }

    fn parse(&self, repo: &str, module: &str, item: Item) -> Result<ModuleEntry, StoreError> {
        serde_dynamo::from_item(item).map_err(|e| StoreError::Dynamo {
            operation: "Query",
            table: self.table.clone(),
            message: format!("an entry of {repo}#{module} does not parse: {e}"),
        })
    }

    async fn query(
        &self,
        repo: &str,
        module: &str,
        keys: Keys,
        forward: bool,
        limit: usize,
    ) -> Result<Vec<ModuleEntry>, StoreError> {
        let mut entries = Vec::new();
        let mut start = None;
        loop {
            let want = (limit - entries.len()).min(QUERY_PAGE as usize) as i32;
            let mut request = self
                .client
                .query()
                .table_name(&self.table)
                .expression_attribute_names("#page", entry_attr::PAGE)
                .expression_attribute_values(
                    ":page",
                    AttributeValue::S(Self::page_key(repo, module)),
                )
                .scan_index_forward(forward)
                // A build that read an older replica could publish without an entry whose
                // stale mark it already saw, and complete clean.
                .consistent_read(true)
                .limit(want)
                .set_exclusive_start_key(start);
            request = match &keys {
                // `order` starts with the merge time, so a year is a key range.
                Keys::Between(from, to) => request
                    .key_condition_expression("#page = :page AND #order BETWEEN :from AND :to")
                    .expression_attribute_names("#order", entry_attr::ORDER)
                    .expression_attribute_values(":from", AttributeValue::S(from.clone()))
                    .expression_attribute_values(":to", AttributeValue::S(to.clone())),
                Keys::Below(below) => request
                    .key_condition_expression("#page = :page AND #order < :below")
                    .expression_attribute_names("#order", entry_attr::ORDER)
                    .expression_attribute_values(":below", AttributeValue::S(below.clone())),
                Keys::All => request.key_condition_expression("#page = :page"),
            };
            let out = request
                .send()
                .await
                .map_err(|e| dynamo_error(&self.table, "Query", &e))?;
            self.meter.read(out.items().len());
            for item in out.items.unwrap_or_default() {
                entries.push(self.parse(repo, module, item)?);
            }
            match out.last_evaluated_key {
                Some(next) if entries.len() < limit => start = Some(next),
                _ => return Ok(entries),
            }
        }
    }
}
