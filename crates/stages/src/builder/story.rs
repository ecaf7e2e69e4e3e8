//! The module's LLM story within a page build: the stored one while it is current, else one
//! call (capped per instance), saved on the page item as soon as it is written.

use std::time::{Duration, Instant};

use time::OffsetDateTime;

use super::{BuildError, PageBuilder, STORY_CALLS_PER_MINUTE};
use crate::domain::{ModuleEntry, PageItem};
use crate::pages::content::ModuleFacts;

impl PageBuilder {
    /// The module's story for this build. What a call produced is saved on the page item at once
    /// (and kept in this instance), so a publish retry or a failed publish never pays for it
    /// again; calls are capped at [`STORY_CALLS_PER_MINUTE`] per instance.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn story_of(
        &self,
        repo: &str,
        module: &str,
        item: &PageItem,
        facts: &ModuleFacts,
        main: &[ModuleEntry],
        writer: &chronicle_llm::Writer,
        min_new: u64,
        deadline: Instant,
    ) -> Result<Option<crate::story::StoredStory>, BuildError> {
        let key = (repo.to_string(), module.to_string());
        let cached = self
            .stories
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .cloned();
        // What this instance wrote stands only beside the item's own story, and only when no
        // older: the item (read with the build's lease) loses its story when another instance
        // removed the page, and a story cached from before must not come back with it.
        let stored = match (cached, &item.story) {
            (Some(c), Some(i)) if c.generated_at >= i.generated_at => Some(c),
            _ => item.story.clone(),
        };
        let mut prompt = crate::story::prompt(
            repo,
            module,
            facts.description.as_ref().map(|d| d.text.as_str()),
            &facts.years,
            main,
        );
        let now = OffsetDateTime::now_utc();
        let model = writer.model();
        let current = stored.as_ref().is_some_and(|s| {
            crate::story::is_current_for(s, &prompt, &model, facts.entry_count, min_new, now)
        });
        // A prompt with no PR to cite is asked nothing (`story_for`): it takes no call's slot.
        let calls = !current && !prompt.prs.is_empty();
        if calls && !self.story_call_allowed() {
            tracing::info!(
                repo,
                module,
                "story calls capped this minute; the next build writes it"
            );
            // Meanwhile the last grounded story, if it cites no PR that may have moved away.
            return Ok(stored.filter(|s| !s.text.is_empty() && s.entry_count <= facts.entry_count));
        }
        if calls {
            // Only a call that will be made counts as the cache's last use.
            prompt.cache = self.cache.mark(now);
        }
        let story = crate::story::story_for(
            writer,
            stored.as_ref(),
            &prompt,
            facts.entry_count,
            min_new,
            now,
            deadline,
        )
        .await;
        use std::sync::atomic::Ordering::Relaxed;
        if let Some(refused) = story.as_ref().filter(|s| s.error.is_some()) {
            // A stored refusal is never current: this build asked, and was refused again.
            self.story_refused.fetch_add(1, Relaxed);
            tracing::error!(
                repo,
                module,
                advice = refused.advice.as_deref().unwrap_or(""),
                "the story's model was refused; see the page's advice in `chronicle status`"
            );
        }
        if let Some(new) = story.as_ref().filter(|s| Some(*s) != stored.as_ref()) {
            self.story_dropped.fetch_add(new.dropped, Relaxed);
            if new.withheld.is_some() {
                self.story_withheld.fetch_add(1, Relaxed);
            }
            self.pages.set_story(repo, module, new).await?;
            self.stories
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(key, new.clone());
        }
        Ok(story)
    }

    /// Forgets what this instance wrote of the module's story: its page was removed (it has
    /// no entries), and the stored story with it, so a module that comes back asks anew.
    pub(super) fn forget_story(&self, repo: &str, module: &str) {
        self.stories
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&(repo.to_string(), module.to_string()));
    }

    /// At most [`STORY_CALLS_PER_MINUTE`] story calls in any minute.
    fn story_call_allowed(&self) -> bool {
        let mut calls = self.story_calls.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        while calls
            .front()
            .is_some_and(|t| now.duration_since(*t) > Duration::from_secs(60))
        {
            calls.pop_front();
        }
        if calls.len() >= STORY_CALLS_PER_MINUTE {
            return false;
        }
        calls.push_back(now);
        true
    }
}
