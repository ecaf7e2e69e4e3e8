//! The Notion pages table: one row per (repo, module) that remembers the module's Notion page
//! (its id, its header blocks, its month headings, the last block of each entry) and holds the
//! page's lock.
//!
//! Every change to a page happens under its lock, a lease taken with a conditional write: two
//! workers publishing the first PRs of a new module at once cannot both create a page (the
//! claim comes before the create), and entries and month headings are placed in page order.
//! Every write after the claim is conditional on still holding it.

use std::collections::BTreeMap;

use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};
use aws_sdk_dynamodb::Client;
use time::OffsetDateTime;

use super::{Item, StoreError};
use crate::domain::{rfc3339_millis, RepoName};

/// Attribute names of the pages table.
pub mod page_attr {
    pub const REPO: &str = "repo";
    pub const MODULE: &str = "module";
    pub const PAGE_ID: &str = "pageId";
    /// Set just before the page is created: a later lock holder that finds it without a
    /// `pageId` looks for the page under the parent before creating one.
    pub const CREATE_STARTED_AT: &str = "createStartedAt";
    pub const HEADER_IDS: &str = "headerIds";
    pub const HEADER_TEXT: &str = "headerText";
    /// Month label (`May 2019`) → the id of its heading block.
    pub const MONTHS: &str = "months";
    /// PR number → `{last, mergedAt, author}`: the entry's last top-level block (where the
    /// next entry goes) and what the header and the page order need to know of it.
    pub const ENTRIES: &str = "entries";
    pub const LOCK_OWNER: &str = "lockOwner";
    pub const LOCK_UNTIL: &str = "lockUntil";
}
use page_attr as a;

/// A module page's row, as the lock holder sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageRow {
    pub page_id: Option<String>,
    pub create_started: bool,
    pub header_ids: Vec<String>,
    pub header_text: Vec<String>,
    pub months: BTreeMap<String, String>,
    pub entries: BTreeMap<u64, PageEntry>,
}

/// An entry on a module's Notion page, as the page row remembers it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageEntry {
    /// The id of its last top-level block.
    pub last: String,
    pub merged_at: String,
    pub author: String,
}

/// What taking a page's lock gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PageLock {
    Held(PageRow),
    /// Another worker holds it until then.
    Busy {
        until: Option<String>,
    },
}

#[derive(Clone, Debug)]
pub struct NotionPages {
    client: Client,
    table: String,
}

impl NotionPages {
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        NotionPages {
            client,
            table: table.into(),
        }
    }

    pub fn table_name(&self) -> &str {
        &self.table
    }

    fn key(repo: &RepoName, module: &str) -> Item {
        Item::from([
            (a::REPO.to_string(), AttributeValue::S(repo.to_string())),
            (a::MODULE.to_string(), AttributeValue::S(module.to_string())),
        ])
    }

    /// Takes the page's lock until `until` if it is free, expired, or already ours; creates the
    /// row on first use.
    pub async fn lock(
        &self,
        repo: &RepoName,
        module: &str,
        owner: &str,
        now: OffsetDateTime,
        until: OffsetDateTime,
    ) -> Result<PageLock, StoreError> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(Self::key(repo, module)))
            .update_expression(
                "SET #owner = :owner, #until = :until, \
                 #months = if_not_exists(#months, :empty), #entries = if_not_exists(#entries, :empty)",
            )
            .condition_expression(
                "attribute_not_exists(#until) OR #until < :now OR #owner = :owner",
            )
            .expression_attribute_names("#owner", a::LOCK_OWNER)
            .expression_attribute_names("#until", a::LOCK_UNTIL)
            .expression_attribute_names("#months", a::MONTHS)
            .expression_attribute_names("#entries", a::ENTRIES)
            .expression_attribute_values(":owner", AttributeValue::S(owner.to_string()))
            .expression_attribute_values(":until", AttributeValue::S(rfc3339_millis(until)))
            .expression_attribute_values(":now", AttributeValue::S(rfc3339_millis(now)))
            .expression_attribute_values(":empty", AttributeValue::M(Default::default()))
            .return_values(ReturnValue::AllNew)
            .return_values_on_condition_check_failure(
                aws_sdk_dynamodb::types::ReturnValuesOnConditionCheckFailure::AllOld,
            )
            .send()
            .await;
        match result {
            Ok(out) => Ok(PageLock::Held(parse_row(
                &out.attributes.unwrap_or_default(),
            ))),
            Err(e) => match e.as_service_error() {
                Some(s) if s.is_conditional_check_failed_exception() => {
                    let until = match s {
                        aws_sdk_dynamodb::operation::update_item::UpdateItemError::ConditionalCheckFailedException(c) => c
                            .item()
                            .and_then(|i| i.get(a::LOCK_UNTIL))
                            .and_then(|v| v.as_s().ok())
                            .cloned(),
                        _ => None,
                    };
                    Ok(PageLock::Busy { until })
                }
                _ => Err(super::dynamo_error(&self.table, "UpdateItem", &e)),
            },
        }
    }

    /// Lets the lock go (only ours).
    pub async fn unlock(
        &self,
        repo: &RepoName,
        module: &str,
        owner: &str,
    ) -> Result<bool, StoreError> {
        self.write(
            repo,
            module,
            owner,
            "REMOVE #owner, #until",
            Vec::new(),
            Vec::new(),
        )
        .await
    }

    /// Notes that this holder is about to create the page.
    pub async fn mark_creating(
        &self,
        repo: &RepoName,
        module: &str,
        owner: &str,
        now: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        self.write(
            repo,
            module,
            owner,
            "SET #started = :started",
            vec![("#started", a::CREATE_STARTED_AT)],
            vec![(":started", AttributeValue::S(rfc3339_millis(now)))],
        )
        .await
    }

    /// The page exists: its id and its header blocks.
    pub async fn set_page(
        &self,
        repo: &RepoName,
        module: &str,
        owner: &str,
        page_id: &str,
        header_ids: &[String],
        header_text: &[String],
    ) -> Result<bool, StoreError> {
        self.write(
            repo,
            module,
            owner,
            "SET #page = :page, #hids = :hids, #htext = :htext REMOVE #started",
            vec![
                ("#page", a::PAGE_ID),
                ("#hids", a::HEADER_IDS),
                ("#htext", a::HEADER_TEXT),
                ("#started", a::CREATE_STARTED_AT),
            ],
            vec![
                (":page", AttributeValue::S(page_id.to_string())),
                (":hids", strings(header_ids)),
                (":htext", strings(header_text)),
            ],
        )
        .await
    }

    /// The header's text as it now stands on the page.
    pub async fn set_header_text(
        &self,
        repo: &RepoName,
        module: &str,
        owner: &str,
        header_text: &[String],
    ) -> Result<bool, StoreError> {
        self.write(
            repo,
            module,
            owner,
            "SET #htext = :htext",
            vec![("#htext", a::HEADER_TEXT)],
            vec![(":htext", strings(header_text))],
        )
        .await
    }

    /// An entry is on the page (and its month's heading, if it made one).
    pub async fn set_entry(
        &self,
        repo: &RepoName,
        module: &str,
        owner: &str,
        number: u64,
        entry: &PageEntry,
        month: Option<(&str, &str)>,
    ) -> Result<bool, StoreError> {
        let mut expression = "SET #entries.#n = :entry".to_string();
        let mut names = vec![("#entries", a::ENTRIES)];
        let number = number.to_string();
        let value = AttributeValue::M(
            [
                ("last".to_string(), AttributeValue::S(entry.last.clone())),
                (
                    "mergedAt".to_string(),
                    AttributeValue::S(entry.merged_at.clone()),
                ),
                (
                    "author".to_string(),
                    AttributeValue::S(entry.author.clone()),
                ),
            ]
            .into(),
        );
        let mut values = vec![(":entry", value)];
        let mut extra_names: Vec<(String, String)> = vec![("#n".into(), number)];
        if let Some((label, id)) = month {
            expression.push_str(", #months.#month = :heading");
            names.push(("#months", a::MONTHS));
            extra_names.push(("#month".into(), label.to_string()));
            values.push((":heading", AttributeValue::S(id.to_string())));
        }
        self.write_with(repo, module, owner, &expression, names, extra_names, values)
            .await
    }

    async fn write(
        &self,
        repo: &RepoName,
        module: &str,
        owner: &str,
        expression: &str,
        names: Vec<(&str, &str)>,
        values: Vec<(&str, AttributeValue)>,
    ) -> Result<bool, StoreError> {
        self.write_with(repo, module, owner, expression, names, Vec::new(), values)
            .await
    }

    /// An update conditional on holding the lock; `false` if it is no longer ours.
    #[allow(clippy::too_many_arguments)]
    async fn write_with(
        &self,
        repo: &RepoName,
        module: &str,
        owner: &str,
        expression: &str,
        names: Vec<(&str, &str)>,
        extra_names: Vec<(String, String)>,
        values: Vec<(&str, AttributeValue)>,
    ) -> Result<bool, StoreError> {
        let mut request = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(Self::key(repo, module)))
            .update_expression(expression)
            .condition_expression("#owner = :owner")
            .expression_attribute_names("#owner", a::LOCK_OWNER)
            .expression_attribute_values(":owner", AttributeValue::S(owner.to_string()));
        if expression.contains("#until") {
            request = request.expression_attribute_names("#until", a::LOCK_UNTIL);
        }
        for (placeholder, name) in names {
            request = request.expression_attribute_names(placeholder, name);
        }
        for (placeholder, name) in extra_names {
            request = request.expression_attribute_names(placeholder, name);
        }
        for (placeholder, value) in values {
            request = request.expression_attribute_values(placeholder, value);
        }
        super::applied(&self.table, "UpdateItem", request.send().await)
    }
}

fn strings(values: &[String]) -> AttributeValue {
    AttributeValue::L(values.iter().cloned().map(AttributeValue::S).collect())
}

fn parse_row(item: &Item) -> PageRow {
    let s = |name: &str| item.get(name).and_then(|v| v.as_s().ok()).cloned();
    let list = |name: &str| match item.get(name) {
        Some(AttributeValue::L(l)) => l.iter().filter_map(|v| v.as_s().ok().cloned()).collect(),
        _ => Vec::new(),
    };
    let map = |name: &str| -> BTreeMap<String, String> {
        match item.get(name) {
            Some(AttributeValue::M(m)) => m
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_s().ok()?.clone())))
                .collect(),
            _ => BTreeMap::new(),
        }
    };
    PageRow {
        page_id: s(a::PAGE_ID),
        create_started: item.contains_key(a::CREATE_STARTED_AT),
        header_ids: list(a::HEADER_IDS),
        header_text: list(a::HEADER_TEXT),
        months: map(a::MONTHS),
        entries: match item.get(a::ENTRIES) {
            Some(AttributeValue::M(m)) => m
                .iter()
                .filter_map(|(k, v)| {
                    let fields = v.as_m().ok()?;
                    let field = |name: &str| {
                        fields
                            .get(name)
                            .and_then(|v| v.as_s().ok())
                            .cloned()
                            .unwrap_or_default()
                    };
                    Some((
                        k.parse().ok()?,
                        PageEntry {
                            last: field("last"),
                            merged_at: field("mergedAt"),
                            author: field("author"),
                        },
                    ))
                })
                .collect(),
            _ => BTreeMap::new(),
        },
    }
}
