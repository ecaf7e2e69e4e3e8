//! The publisher's page tree in Notion: which pages exist (recorded, listed, adopted after a
//! lost record), creating one under a claim so two builders never make two, and forgetting a
//! subtree that is gone.

use super::*;

impl NotionPublisher {
    /// Makes sure the page `label` of page item `module` exists: recorded, adopted, or created
    /// under `parent_id` (with `content`, or a placeholder). `true`: created with `content`.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn ensure(
        &self,
        set: &PageSet<'_>,
        module: &str,
        label: &str,
        title: &str,
        parent_id: &str,
        content: Option<&str>,
        known: &mut Known,
    ) -> Result<bool, PublishError> {
        if id_of(known, label).is_some() {
            return Ok(false);
        }
        let repo = set.item.repo.as_str();
        let waited_until = std::time::Instant::now() + CLAIM_WAIT;
        loop {
            let now = OffsetDateTime::now_utc();
            let claim = self
                .pages
                .claim_notion_create(repo, module, label, set.owner, now, now + self.create_claim)
                .await?;
            match claim {
                CreateClaim::Exists(page) => {
                    known.insert(label.to_string(), page);
                    return Ok(false);
                }
                CreateClaim::Held => {
                    if std::time::Instant::now() >= waited_until {
                        return Err(PublishError::Busy(format!(
                            "another builder is creating the Notion page {title:?}; it is built again later"
                        )));
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    if let Some(item) = self.pages.get(repo, module).await? {
                        if let Some(page) = item.notion.get(label).filter(|p| p.id.is_some()) {
                            known.insert(label.to_string(), page.clone());
                            return Ok(false);
                        }
                    }
                }
                CreateClaim::Claimed { retry } => {
                    // Never outlive the claim: past it another builder may create the page.
                    let until = set.deadline.min(
                        std::time::Instant::now()
                            + self
                                .create_claim
                                .saturating_sub(Duration::from_secs(10))
                                .max(self.create_claim / 2),
                    );
                    if retry
                        && self
                            .adopt(set, module, label, parent_id, title, known)
                            .await?
                    {
                        return Ok(false);
                    }
                    let markdown = content.unwrap_or(PLACEHOLDER);
                    match self
                        .client
                        .create_page(parent_id, title, markdown, until)
                        .await
                    {
                        Ok(page) => {
                            let hash = content.map(content_hash);
                            if let Err(e) = self
                                .record(set, module, label, &page.id, &page.url, hash, true, known)
                                .await
                            {
                                // The claim was lost: another builder owns this page now.
                                tracing::warn!(repo, module, label, page = %page.id, "a page created after its claim was lost goes to the trash");
                                self.client.trash_page(&page.id, set.deadline).await?;
                                return Err(e);
                            }
                            tracing::info!(repo, module, label, page = %page.id, "created a Notion page");
                            return Ok(content.is_some());
                        }
                        Err(e) if e.maybe_applied() => {
                            // It may exist: look before anyone creates another.
                            if self
                                .adopt(set, module, label, parent_id, title, known)
                                .await?
                            {
                                return Ok(false);
                            }
                            // The claim stays until it expires: the next build looks again.
                            return Err(e.into());
                        }
                        Err(e) => {
                            self.pages
                                .release_notion_claim(repo, module, label, set.owner)
                                .await?;
                            return Err(e.into());
                        }
                    }
                }
            }
        }
    }

    /// Records the child of `parent_id` titled `title` as `label`'s page, if Notion has one: a
    /// create that was applied though its answer never came. `true` if one was found.
    pub(super) async fn adopt(
        &self,
        set: &PageSet<'_>,
        module: &str,
        label: &str,
        parent_id: &str,
        title: &str,
        known: &mut Known,
    ) -> Result<bool, PublishError> {
        let Some(found) = self.find_child(parent_id, title, set).await? else {
            return Ok(false);
        };
        tracing::info!(repo = %set.item.repo, module, label, page = %found.id, "adopted a page an interrupted create made");
        let url = url_of_id(&found.id);
        self.record(set, module, label, &found.id, &url, None, false, known)
            .await?;
        Ok(true)
    }

    /// Records the page created (or adopted) for `label`. Refused: recorded by this same call
    /// already (an answer lost and the write sent again) is fine; another page recorded (this
    /// builder's claim expired) is [`PublishError::LeaseLost`].
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn record(
        &self,
        set: &PageSet<'_>,
        module: &str,
        label: &str,
        id: &str,
        url: &str,
        hash: Option<String>,
        created: bool,
        known: &mut Known,
    ) -> Result<(), PublishError> {
        let repo = set.item.repo.as_str();
        let page = NotionPage {
            id: Some(id.to_string()),
            // Module and index pages keep Notion's URL (the index links them); archive pages
            // are linked by id, so a busy module's page item stays small.
            url: (label == MAIN_LABEL).then(|| url.to_string()),
            hash,
            // A page just created has no children but those this build creates.
            listed_at: created.then(|| chronicle_domain::rfc3339_millis(OffsetDateTime::now_utc())),
            ..Default::default()
        };
        if !self
            .pages
            .record_notion_page(repo, module, label, set.owner, &page)
            .await?
        {
            let recorded = self
                .pages
                .get(repo, module)
                .await?
                .and_then(|item| item.notion.get(label).and_then(|p| p.id.clone()));
            if recorded.as_deref().map(normalize) != Some(normalize(id)) {
                return Err(PublishError::LeaseLost);
            }
        }
        known.insert(label.to_string(), page);
        Ok(())
    }

    /// Fails with [`PublishError::Unreachable`] unless the configured parent page is reachable
    /// (a page of its tree that is not found is then gone; else access was lost).
    pub(super) async fn ensure_reachable(&self, set: &PageSet<'_>) -> Result<(), PublishError> {
        match self
            .client
            .page_state(&self.parent_page_id, set.deadline)
            .await?
        {
            PageState::Live(_) => Ok(()),
            _ => Err(PublishError::Unreachable {
                parent: self.parent_page_id.clone(),
            }),
        }
    }

    /// Whether page `id` is gone for good: in the trash, or not found while the configured
    /// parent page is still reachable. A 404 with the parent out of reach too is lost access
    /// (the integration removed from Connections, the tree moved out of its reach): every
    /// record is kept and the build fails with advice ([`PublishError::Unreachable`]), so that
    /// once access is back the same pages are updated, never a second tree created.
    pub(super) async fn is_gone(&self, id: &str, set: &PageSet<'_>) -> Result<bool, PublishError> {
        match self.client.page_state(id, set.deadline).await? {
            PageState::Live(_) => Ok(false),
            PageState::Trashed | PageState::NotFound => {
                self.ensure_reachable(set).await?;
                Ok(true)
            }
        }
    }

    /// The child pages of `id`, listed once per build.
    pub(super) async fn listing<'a>(
        &self,
        listings: &'a mut Listings,
        id: &str,
        set: &PageSet<'_>,
    ) -> Result<&'a Vec<ChildPage>, PublishError> {
        let key = normalize(id);
        if !listings.0.contains_key(&key) {
            let children = self.client.child_pages(id, set.deadline).await?;
            listings.0.insert(key.clone(), children);
        }
        Ok(&listings.0[&key])
    }

    /// The child page of `parent_id` titled `title`, if there is one. More than one (a create
    /// that was applied twice): the first is kept, the others go to the trash.
    pub(super) async fn find_child(
        &self,
        parent_id: &str,
        title: &str,
        set: &PageSet<'_>,
    ) -> Result<Option<ChildPage>, PublishError> {
        let bot = self.client.bot_id(set.deadline).await?;
        let children = self.client.child_pages(parent_id, set.deadline).await?;
        // Only pages this integration created: a person's page of the same title is theirs.
        let mut matching = children.into_iter().filter(|c| {
            !c.database && c.title == title && c.created_by.as_deref() == Some(bot.as_str())
        });
        let first = matching.next();
        for duplicate in matching {
            tracing::warn!(page = %duplicate.id, title, "a duplicate page from an interrupted create goes to the trash");
            self.client.trash_page(&duplicate.id, set.deadline).await?;
        }
        Ok(first)
    }

    /// A page found gone: it, or the page it went to the trash with (an archive page goes with
    /// its year, its year with the module page), is forgotten with everything under it, so the
    /// build creates them again.
    pub(super) async fn gone(
        &self,
        set: &PageSet<'_>,
        key: &DocKey,
        id: &str,
        module: &str,
        original: PublishError,
    ) -> Result<PublishError, PublishError> {
        let repo = set.item.repo.as_str();
        // Made sure of first: a live page, or one out of the integration's reach, is never
        // forgotten (that would make a duplicate).
        if !self.is_gone(id, set).await? {
            return Ok(original);
        }
        let mut known = set.item.notion.clone();
        let label = match key {
            DocKey::Archive { label, .. } => label,
            DocKey::Module { .. } => {
                // Its archive pages went to the trash with it.
                known.entry(MAIN_LABEL.to_string()).or_default().id = Some(id.to_string());
                for (l, p) in &known {
                    if let Some(old) = &p.id {
                        self.pages.forget_notion_page(repo, module, l, old).await?;
                    }
                }
                return Ok(PublishError::Missing(vec![key.clone()]));
            }
            DocKey::Index { .. } => {
                self.pages
                    .forget_notion_page(repo, module, key.label(), id)
                    .await?;
                return Ok(PublishError::Missing(vec![key.clone()]));
            }
        };
        // Its recorded ancestors, outermost first: the module page, then the year (or, in an
        // older layout, the year, quarter, month).
        let mut ancestors: Vec<(String, String)> = known
            .iter()
            .filter(|(l, _)| *l != label && (l.as_str() == MAIN_LABEL || archive_under(l, label)))
            .filter_map(|(l, p)| Some((l.clone(), p.id.clone()?)))
            .collect();
        ancestors.sort_by_key(|(l, _)| if l == MAIN_LABEL { 0 } else { l.len() });
        for (ancestor, ancestor_id) in ancestors {
            // The parent page is reachable (made sure of above): a 404 here is gone.
            if matches!(
                self.client.page_state(&ancestor_id, set.deadline).await?,
                PageState::Live(_)
            ) {
                continue;
            }
            if ancestor == MAIN_LABEL {
                // The module page went: everything under it did.
                for (l, p) in &known {
                    if let Some(old) = &p.id {
                        self.pages.forget_notion_page(repo, module, l, old).await?;
                    }
                }
                return Ok(PublishError::Missing(vec![DocKey::Module {
                    repo: repo.to_string(),
                    module: module.to_string(),
                }]));
            }
            self.pages
                .forget_notion_page(repo, module, &ancestor, &ancestor_id)
                .await?;
            self.forget_subtree(repo, module, &ancestor, &mut known)
                .await?;
            return Ok(PublishError::Missing(vec![DocKey::Archive {
                repo: repo.to_string(),
                module: module.to_string(),
                label: ancestor,
            }]));
        }
        self.pages
            .forget_notion_page(repo, module, label, id)
            .await?;
        self.forget_subtree(repo, module, label, &mut known).await?;
        Ok(PublishError::Missing(vec![key.clone()]))
    }

    /// Forgets every recorded archive page under `root` (they went to the trash with it).
    pub(super) async fn forget_subtree(
        &self,
        repo: &str,
        module: &str,
        root: &str,
        known: &mut Known,
    ) -> Result<(), PublishError> {
        let under: Vec<(String, String)> = known
            .iter()
            .filter(|(label, _)| *label != root && archive_under(root, label))
            .filter_map(|(label, page)| Some((label.clone(), page.id.clone()?)))
            .collect();
        for (label, id) in under {
            self.pages
                .forget_notion_page(repo, module, &label, &id)
                .await?;
            known.remove(&label);
        }
        Ok(())
    }
}
