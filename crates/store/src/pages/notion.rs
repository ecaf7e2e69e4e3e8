//! What the page item records of its Notion pages: a claim before one is created (so two
//! builders never make two), the page and its content hash once it is, and forgetting it.

use super::*;

/// What claiming the creation of a Notion page gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CreateClaim {
    /// This builder may create it. `retry`: an earlier claim expired without recording a page,
    /// so the page may exist already (look for it before creating another).
    Claimed { retry: bool },
    /// It exists.
    Exists(NotionPage),
    /// Another builder is creating it.
    Held,
}

impl PageStore {
    /// Claims the creation of the Notion page `label` of a page item until `until`: only if no
    /// page is recorded for it and no other live claim exists. The item must exist (it does
    /// once the page was marked stale).
    pub async fn claim_notion_create(
        &self,
        repo: &str,
        module: &str,
        label: &str,
        owner: &str,
        now: OffsetDateTime,
        until: OffsetDateTime,
    ) -> Result<CreateClaim, StoreError> {
        let claim = NotionPage {
            create_owner: Some(owner.to_string()),
            create_until: Some(rfc3339_millis(until)),
            ..Default::default()
        };
        let result = self
            .update(repo, module)
            .update_expression("SET #notion.#label = :claim")
            .condition_expression(
                "attribute_exists(#notion) AND attribute_not_exists(#notion.#label.#id) AND \
                 (attribute_not_exists(#notion.#label.#until) OR #notion.#label.#until < :now)",
            )
            .expression_attribute_names("#notion", a::NOTION)
            .expression_attribute_names("#label", label)
            .expression_attribute_names("#id", "id")
            .expression_attribute_names("#until", "createUntil")
            .expression_attribute_values(
                ":claim",
                serde_dynamo::to_attribute_value(&claim).map_err(|e| self.bad(e))?,
            )
            .expression_attribute_values(":now", AttributeValue::S(rfc3339_millis(now)))
            .return_values(ReturnValue::UpdatedOld)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        self.meter.write();
        match result {
            Ok(out) => {
                // An earlier claim (now expired), a forgotten page or a claim given back: a
                // page may exist already.
                let retry = out
                    .attributes
                    .and_then(|old| old.get(a::NOTION).cloned())
                    .is_some_and(|notion| {
                        notion
                            .as_m()
                            .ok()
                            .and_then(|m| m.get(label))
                            .is_some_and(|entry| {
                                entry.as_m().is_ok_and(|e| {
                                    e.contains_key("createUntil") || e.contains_key("lookFirst")
                                })
                            })
                    });
                Ok(CreateClaim::Claimed { retry })
            }
            Err(e) => match refused(&e) {
                Some(None) => Err(StoreError::Dynamo {
                    operation: "UpdateItem",
                    table: self.table.clone(),
                    message: format!("no page item for {repo} {module}"),
                }),
                Some(Some(old)) => {
                    let old = self.parse(old)?;
                    match old.notion.get(label) {
                        Some(page) if page.id.is_some() => Ok(CreateClaim::Exists(page.clone())),
                        _ if !old.notion.is_empty() || old.version > 0 => Ok(CreateClaim::Held),
                        _ => Err(StoreError::Dynamo {
                            operation: "UpdateItem",
                            table: self.table.clone(),
                            message: format!("the page item of {repo} {module} has no notion map"),
                        }),
                    }
                }
                None => Err(dynamo_error(&self.table, "UpdateItem", &e)),
            },
        }
    }

    /// Records the Notion page created under `owner`'s claim. `false`: the claim was lost.
    pub async fn record_notion_page(
        &self,
        repo: &str,
        module: &str,
        label: &str,
        owner: &str,
        page: &NotionPage,
    ) -> Result<bool, StoreError> {
        let id = page.id.clone().unwrap_or_default();
        let result = self
            .update(repo, module)
            .update_expression("SET #notion.#label = :page")
            // Or already recorded by this very write (its answer lost, the SDK sent it again).
            .condition_expression("#notion.#label.#owner = :owner OR #notion.#label.#id = :id")
            .expression_attribute_names("#notion", a::NOTION)
            .expression_attribute_names("#label", label)
            .expression_attribute_names("#owner", "createOwner")
            .expression_attribute_names("#id", "id")
            .expression_attribute_values(":id", AttributeValue::S(id))
            .expression_attribute_values(
                ":page",
                serde_dynamo::to_attribute_value(page).map_err(|e| self.bad(e))?,
            )
            .expression_attribute_values(":owner", AttributeValue::S(owner.to_string()))
            .send()
            .await;
        self.meter.write();
        applied(&self.table, "UpdateItem", result)
    }

    /// Records the hash of the content last sent to the Notion page `label`, if it is still `id`,
    /// and, when its children were listed for it, when and the pages a person put there.
    pub async fn record_notion_hash(
        &self,
        repo: &str,
        module: &str,
        label: &str,
        id: &str,
        hash: &str,
        listed: Option<(OffsetDateTime, &[chronicle_domain::OtherPage])>,
    ) -> Result<(), StoreError> {
        self.record_hash(repo, module, label, id, hash, listed, None)
            .await
            .map(drop)
    }

    /// [`Self::record_notion_hash`], only while `lease_owner` holds the item's build lease (its
    /// owner, and not expired at `now`): the fence of a replace. One that outlived its lease may
    /// have landed after the next holder's, so its content must not be recorded as what the
    /// page holds. `false`: nothing was recorded.
    #[allow(clippy::too_many_arguments)]
    pub async fn record_notion_hash_leased(
        &self,
        repo: &str,
        module: &str,
        label: &str,
        id: &str,
        hash: &str,
        listed: Option<(OffsetDateTime, &[chronicle_domain::OtherPage])>,
        lease_owner: &str,
        now: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        self.record_hash(
            repo,
            module,
            label,
            id,
            hash,
            listed,
            Some((lease_owner, now)),
        )
        .await
    }

    #[allow(clippy::too_many_arguments)]
    async fn record_hash(
        &self,
        repo: &str,
        module: &str,
        label: &str,
        id: &str,
        hash: &str,
        listed: Option<(OffsetDateTime, &[chronicle_domain::OtherPage])>,
        lease: Option<(&str, OffsetDateTime)>,
    ) -> Result<bool, StoreError> {
        let mut request = self.update(repo, module);
        request = match listed {
            Some((at, others)) => request
                .update_expression(
                    "SET #notion.#label.#hash = :hash, #notion.#label.#listed = :listed, \
                     #notion.#label.#others = :others",
                )
                .expression_attribute_names("#listed", "listedAt")
                .expression_attribute_names("#others", "others")
                .expression_attribute_values(":listed", AttributeValue::S(rfc3339_millis(at)))
                .expression_attribute_values(
                    ":others",
                    serde_dynamo::to_attribute_value(others).map_err(|e| self.bad(e))?,
                ),
            None => request.update_expression("SET #notion.#label.#hash = :hash"),
        };
        let mut condition = "#notion.#label.#id = :id".to_string();
        if let Some((owner, now)) = lease {
            condition.push_str(" AND #owner = :owner AND #until > :now");
            request = request
                .expression_attribute_names("#owner", a::BUILD_OWNER)
                .expression_attribute_names("#until", a::BUILD_UNTIL)
                .expression_attribute_values(":owner", AttributeValue::S(owner.to_string()))
                .expression_attribute_values(":now", AttributeValue::S(rfc3339_millis(now)));
        }
        let result = request
            .condition_expression(condition)
            .expression_attribute_names("#notion", a::NOTION)
            .expression_attribute_names("#label", label)
            .expression_attribute_names("#hash", "hash")
            .expression_attribute_names("#id", "id")
            .expression_attribute_values(":hash", AttributeValue::S(hash.to_string()))
            .expression_attribute_values(":id", AttributeValue::S(id.to_string()))
            .send()
            .await;
        self.meter.write();
        applied(&self.table, "UpdateItem", result)
    }

    /// Gives a creation claim back after a create that certainly failed, so the next build
    /// need not wait for it to expire (it still looks for the page before creating one).
    pub async fn release_notion_claim(
        &self,
        repo: &str,
        module: &str,
        label: &str,
        owner: &str,
    ) -> Result<(), StoreError> {
        let result = self
            .update(repo, module)
            .update_expression("SET #notion.#label = :look")
            .expression_attribute_values(":look", look_first())
            .condition_expression(
                "#notion.#label.#owner = :owner AND attribute_not_exists(#notion.#label.#id)",
            )
            .expression_attribute_names("#notion", a::NOTION)
            .expression_attribute_names("#label", label)
            .expression_attribute_names("#owner", "createOwner")
            .expression_attribute_names("#id", "id")
            .expression_attribute_values(":owner", AttributeValue::S(owner.to_string()))
            .send()
            .await;
        self.meter.write();
        applied(&self.table, "UpdateItem", result).map(drop)
    }

    /// Forgets the Notion page recorded for `label` as gone (deleted by hand), if it is still
    /// `id`. What is left says to look for it by title before creating another, should it be
    /// there after all.
    pub async fn forget_notion_page(
        &self,
        repo: &str,
        module: &str,
        label: &str,
        id: &str,
    ) -> Result<(), StoreError> {
        self.unrecord_notion_page(repo, module, label, id, true)
            .await
    }

    /// Drops the record of a page Chronicle moved to the trash itself (no longer published).
    pub async fn drop_notion_page(
        &self,
        repo: &str,
        module: &str,
        label: &str,
        id: &str,
    ) -> Result<(), StoreError> {
        self.unrecord_notion_page(repo, module, label, id, false)
            .await
    }

    pub(super) async fn unrecord_notion_page(
        &self,
        repo: &str,
        module: &str,
        label: &str,
        id: &str,
        look: bool,
    ) -> Result<(), StoreError> {
        let request = self.update(repo, module);
        let request = if look {
            request
                .update_expression("SET #notion.#label = :look")
                .expression_attribute_values(":look", look_first())
        } else {
            request.update_expression("REMOVE #notion.#label")
        };
        let result = request
            .condition_expression("#notion.#label.#id = :id")
            .expression_attribute_names("#notion", a::NOTION)
            .expression_attribute_names("#label", label)
            .expression_attribute_names("#id", "id")
            .expression_attribute_values(":id", AttributeValue::S(id.to_string()))
            .send()
            .await;
        self.meter.write();
        applied(&self.table, "UpdateItem", result).map(drop)
    }
}
