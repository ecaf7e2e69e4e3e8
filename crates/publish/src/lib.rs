//! Where pages go. Every publisher replaces whole pages, so a retried, duplicated, racing or
//! crashed build can never duplicate or lose an entry: the output depends only on the entries.
//!
//! - [`MarkdownPublisher`]: files under a directory, each written atomically (temporary file,
//!   then rename).
//! - [`S3MarkdownPublisher`]: the same files as S3 objects (one `PutObject` each).
//! - [`NotionPublisher`]: Notion pages, created once (claim, then create) and replaced whole
//!   through the Markdown content API.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use futures::future::BoxFuture;

use chronicle_domain::PageItem;
use chronicle_notion::NotionError;
use chronicle_pages::render::commonmark;
use chronicle_pages::{DocKey, Document};
use chronicle_store::StoreError;

pub mod notion;
pub use notion::NotionPublisher;

#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    /// A file could not be written (disk full, permissions, a vanished directory).
    #[error("writing {path} failed: {message}")]
    Io { path: String, message: String },
    /// A remote store refused or failed the write (throttling, 5xx, network).
    #[error("writing {target} failed: {message}")]
    Remote { target: String, message: String },
    #[error(transparent)]
    Notion(#[from] NotionError),
    /// The page bookkeeping in DynamoDB failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Another builder is creating a page this one needs; the page is built again later.
    #[error("{0}")]
    Busy(String),
    /// Pages that were published before are gone (deleted by hand): they are forgotten, and
    /// the build must publish them anew (their periods read again).
    #[error("published pages are gone and must be published again: {0:?}")]
    Missing(Vec<DocKey>),
    /// The build lease was lost while publishing; another builder has the page.
    #[error("the build lease was lost while publishing")]
    LeaseLost,
    /// Notion answers 404 for Chronicle's pages and for the configured parent page too: the
    /// integration lost access. Nothing is forgotten; the pages are updated once it is back.
    #[error("Notion answers 404 for the published pages and for the parent page {parent}: the integration lost access to them")]
    Unreachable { parent: String },
    /// Published pages a person moved (into a toggle or a column of their parent, or under
    /// another page): they stay recorded (never published a second time), and the parent,
    /// which can no longer name them, is not replaced.
    #[error("published pages were moved out of their place under {parent:?}: {pages:?}")]
    Moved { parent: String, pages: Vec<String> },
    /// Notion refused this very content before (at `at`) and it has not changed since: not
    /// sent again (it would be refused again), until it changes or the refusal is a day old.
    #[error("not sent again, unchanged since Notion refused it at {at}: {error}")]
    StillRefused { at: String, error: String },
}

impl PublishError {
    /// What the operator must do, when only they can fix it.
    pub fn advice(&self) -> Option<&str> {
        match self {
            PublishError::Notion(e) => e.advice(),
            PublishError::Unreachable { .. } => Some(
                "Share the parent page (NOTION_PARENT_PAGE_ID) with the integration again: open \
                 it in Notion, ••• → Connections → add the integration (or restore it from the \
                 trash). Nothing was forgotten: the same pages are updated by themselves once \
                 Chronicle can reach them.",
            ),
            PublishError::Moved { .. } => Some(
                "A person moved Chronicle's pages into a toggle or a column of their parent page, \
                 or under another page. Move them back to the top level of the page they were \
                 under (or delete them, to have them published again); until then that page is \
                 not updated.",
            ),
            _ => None,
        }
    }

    /// Brief trouble that the same publish can get past later, unchanged: Notion's 429/529,
    /// 409, 5xx, no answer, too little time left, or a store's brief failure. Not a failure of
    /// the page (nothing to record, no back-off beyond its `Retry-After`).
    pub fn is_transient(&self) -> bool {
        match self {
            PublishError::Notion(e) => e.is_transient(),
            PublishError::Store(_) | PublishError::Remote { .. } | PublishError::Busy(_) => true,
            _ => false,
        }
    }

    /// How long the destination asked to wait before the next attempt.
    pub fn retry_after(&self) -> Option<std::time::Duration> {
        match self {
            PublishError::Notion(e) => e.retry_after(),
            _ => None,
        }
    }
}

/// The pages one build publishes.
#[derive(Debug, Clone, Copy)]
pub struct PageSet<'a> {
    /// The page item the documents belong to (a module's, or the repository index's).
    pub item: &'a PageItem,
    /// For the index: every page item of the repository (where its module pages are).
    pub repo_items: &'a [PageItem],
    /// The documents, parents before children.
    pub docs: &'a [Document],
    /// Pages no longer produced (an archive period merged or emptied): removed.
    pub removed: &'a [DocKey],
    /// The build lease this runs under (it guards the bookkeeping writes).
    pub owner: &'a str,
    pub deadline: Instant,
}

/// The organisation index one build publishes (once per builder tick and owner, after the
/// repositories' indexes).
#[derive(Debug, Clone, Copy)]
pub struct OrgSet<'a> {
    /// The GitHub owner (an organisation or a user).
    pub org: &'a str,
    /// Every repository's row on its index.
    pub repos: &'a [chronicle_domain::OrgRepo],
    /// The build lease of the organisation page's item this runs under: a publisher that
    /// records what it sent does so only while this still holds it.
    pub owner: &'a str,
    /// No request is sent after it (the lease's end, less a margin).
    pub deadline: Instant,
}

/// What a publish did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Published {
    pub documents: usize,
    pub bytes: usize,
    pub removed: usize,
    /// Requests made to the destination (files: 0).
    pub requests: u64,
}

pub trait Publisher: Send + Sync {
    /// Replaces every page of the set, whole, and removes the removed ones.
    fn publish<'a>(
        &'a self,
        set: &'a PageSet<'a>,
    ) -> BoxFuture<'a, Result<Published, PublishError>>;

    /// A short name for logs and metrics (`markdown`, `notion`).
    fn name(&self) -> &'static str;

    /// Replaces the organisation index of `set.org`, rendered from its repositories' rows.
    /// Publishers without one publish nothing. Its failure is the organisation page's alone:
    /// the repositories' pages are published without it.
    fn publish_org<'a>(
        &'a self,
        _set: &'a OrgSet<'a>,
    ) -> BoxFuture<'a, Result<Published, PublishError>> {
        Box::pin(async { Ok(Published::default()) })
    }

    /// Whether [`Publisher::publish_org`] publishes anything (else the builder keeps no rows
    /// for it).
    fn publishes_org(&self) -> bool {
        false
    }
}

/// A shared publisher (`Arc<dyn Publisher>`) is a publisher.
impl<P: Publisher + ?Sized> Publisher for Arc<P> {
    fn publish<'a>(
        &'a self,
        set: &'a PageSet<'a>,
    ) -> BoxFuture<'a, Result<Published, PublishError>> {
        (**self).publish(set)
    }

    fn name(&self) -> &'static str {
        (**self).name()
    }

    fn publish_org<'a>(
        &'a self,
        set: &'a OrgSet<'a>,
    ) -> BoxFuture<'a, Result<Published, PublishError>> {
        (**self).publish_org(set)
    }

    fn publishes_org(&self) -> bool {
        (**self).publishes_org()
    }
}

/// Several publishers at once (Markdown and Notion), in order; the first failure fails the
/// build, and since each replaces whole pages the retry repeats none of their effects twice.
pub struct Publishers(pub Vec<Arc<dyn Publisher>>);

impl Publisher for Publishers {
    fn publish<'a>(
        &'a self,
        set: &'a PageSet<'a>,
    ) -> BoxFuture<'a, Result<Published, PublishError>> {
        Box::pin(async move {
            let mut total = Published::default();
            for publisher in &self.0 {
                let one = publisher.publish(set).await?;
                total.documents += one.documents;
                total.bytes += one.bytes;
                total.removed += one.removed;
                total.requests += one.requests;
            }
            Ok(total)
        })
    }

    fn name(&self) -> &'static str {
        match self.0.as_slice() {
            [one] => one.name(),
            _ => "several",
        }
    }

    fn publishes_org(&self) -> bool {
        self.0.iter().any(|p| p.publishes_org())
    }

    fn publish_org<'a>(
        &'a self,
        set: &'a OrgSet<'a>,
    ) -> BoxFuture<'a, Result<Published, PublishError>> {
        // Every publisher's, whatever another's did: a page Notion refuses never holds up the
        // Markdown one. The first failure is the build's (recorded on its item).
        Box::pin(async move {
            let mut total = Published::default();
            let mut failure = None;
            for publisher in &self.0 {
                match publisher.publish_org(set).await {
                    Ok(one) => {
                        total.documents += one.documents;
                        total.bytes += one.bytes;
                        total.requests += one.requests;
                    }
                    Err(e) => {
                        tracing::warn!(publisher = publisher.name(), error = %e, "the organisation page failed in one publisher; the others are published");
                        failure.get_or_insert(e);
                    }
                }
            }
            failure.map_or(Ok(total), Err)
        })
    }
}

/// Writes each page to `<out>/<path>` ([`DocKey::path`]), atomically: the rendering goes to a
/// temporary file in the same directory, which is then renamed over the page, so a reader (or a
/// crash) never sees half a page. Concurrent builds of one page each write a complete
/// rendering; the last rename wins.
#[derive(Debug, Clone)]
pub struct MarkdownPublisher {
    out_dir: PathBuf,
}

impl MarkdownPublisher {
    pub fn new(out_dir: impl Into<PathBuf>) -> Self {
        MarkdownPublisher {
            out_dir: out_dir.into(),
        }
    }

    pub fn out_dir(&self) -> &Path {
        &self.out_dir
    }

    pub fn page_path(&self, key: &DocKey) -> PathBuf {
        self.out_dir.join(key.path())
    }
}

impl Publisher for MarkdownPublisher {
    fn publish<'a>(
        &'a self,
        set: &'a PageSet<'a>,
    ) -> BoxFuture<'a, Result<Published, PublishError>> {
        let pages: Vec<(PathBuf, String)> = set
            .docs
            .iter()
            .map(|d| (self.page_path(&d.key), commonmark(d)))
            .collect();
        // Removed pages, and the copies an earlier version wrote under another file name (of
        // the pages written, and of those removed).
        let removed: Vec<PathBuf> = set
            .removed
            .iter()
            .map(|k| self.page_path(k))
            .chain(
                set.docs
                    .iter()
                    .map(|d| &d.key)
                    .chain(set.removed)
                    .filter_map(DocKey::legacy_path)
                    .map(|p| self.out_dir.join(p)),
            )
            .collect();
        Box::pin(async move {
            let mut published = Published::default();
            for (path, markdown) in pages {
                published.documents += 1;
                published.bytes += markdown.len();
                let shown = path.display().to_string();
                tokio::task::spawn_blocking(move || write_atomically(&path, &markdown))
                    .await
                    .map_err(|e| PublishError::Io {
                        path: shown.clone(),
                        message: format!("the write task did not finish: {e}"),
                    })??;
            }
            for path in removed {
                match std::fs::remove_file(&path) {
                    Ok(()) => published.removed += 1,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => {
                        return Err(PublishError::Io {
                            path: path.display().to_string(),
                            message: e.to_string(),
                        })
                    }
                }
            }
            Ok(published)
        })
    }

    fn name(&self) -> &'static str {
        "markdown"
    }

    fn publishes_org(&self) -> bool {
        true
    }

    fn publish_org<'a>(
        &'a self,
        set: &'a OrgSet<'a>,
    ) -> BoxFuture<'a, Result<Published, PublishError>> {
        let path = self.out_dir.join(chronicle_pages::org::org_path(set.org));
        let markdown = chronicle_pages::org::org_page(set.org, set.repos);
        Box::pin(async move {
            let bytes = markdown.len();
            let shown = path.display().to_string();
            tokio::task::spawn_blocking(move || write_atomically(&path, &markdown))
                .await
                .map_err(|e| PublishError::Io {
                    path: shown,
                    message: format!("the write task did not finish: {e}"),
                })??;
            Ok(Published {
                documents: 1,
                bytes,
                ..Default::default()
            })
        })
    }
}

/// An S3 client; path-style addressing when the endpoint is overridden (an emulator such as moto
/// at `http://127.0.0.1:PORT` cannot serve `bucket.127.0.0.1` virtual hosts).
pub fn s3_client(sdk: &aws_config::SdkConfig) -> aws_sdk_s3::Client {
    let config = aws_sdk_s3::config::Builder::from(sdk)
        .force_path_style(sdk.endpoint_url().is_some())
        .build();
    aws_sdk_s3::Client::from_conf(config)
}

/// Writes the same Markdown pages to S3: `s3://<bucket>/<prefix><path>`. One `PutObject`
/// replaces a whole page, so a retry cannot duplicate an entry.
pub struct S3MarkdownPublisher {
    client: aws_sdk_s3::Client,
    bucket: String,
    prefix: String,
}

impl S3MarkdownPublisher {
    pub fn new(
        client: aws_sdk_s3::Client,
        bucket: impl Into<String>,
        prefix: impl Into<String>,
    ) -> Self {
        let mut prefix = prefix.into();
        if !prefix.is_empty() && !prefix.ends_with('/') {
            prefix.push('/');
        }
        S3MarkdownPublisher {
            client,
            bucket: bucket.into(),
            prefix,
        }
    }

    pub fn key(&self, page: &DocKey) -> String {
        format!("{}{}", self.prefix, page.path())
    }

    fn remote_error<E>(&self, key: &str, e: &aws_sdk_s3::error::SdkError<E>) -> PublishError
    where
        E: std::error::Error + aws_sdk_s3::error::ProvideErrorMetadata + 'static,
    {
        PublishError::Remote {
            target: format!("s3://{}/{key}", self.bucket),
            message: chronicle_aws::error_message(e),
        }
    }
}

impl Publisher for S3MarkdownPublisher {
    fn publish<'a>(
        &'a self,
        set: &'a PageSet<'a>,
    ) -> BoxFuture<'a, Result<Published, PublishError>> {
        Box::pin(async move {
            let mut published = Published::default();
            for doc in set.docs {
                let key = self.key(&doc.key);
                let body = commonmark(doc);
                published.documents += 1;
                published.bytes += body.len();
                published.requests += 1;
                self.client
                    .put_object()
                    .bucket(&self.bucket)
                    .key(&key)
                    .content_type("text/markdown; charset=utf-8")
                    .body(body.into_bytes().into())
                    .send()
                    .await
                    .map_err(|e| self.remote_error(&key, &e))?;
            }
            let legacy: Vec<String> = set
                .docs
                .iter()
                .map(|d| &d.key)
                .chain(set.removed)
                .filter_map(DocKey::legacy_path)
                .map(|p| format!("{}{p}", self.prefix))
                .collect();
            let keys = set.removed.iter().map(|page| self.key(page)).chain(legacy);
            for key in keys {
                published.requests += 1;
                self.client
                    .delete_object()
                    .bucket(&self.bucket)
                    .key(&key)
                    .send()
                    .await
                    .map_err(|e| self.remote_error(&key, &e))?;
                published.removed += 1;
            }
            Ok(published)
        })
    }

    fn name(&self) -> &'static str {
        "markdown-s3"
    }

    fn publishes_org(&self) -> bool {
        true
    }

    fn publish_org<'a>(
        &'a self,
        set: &'a OrgSet<'a>,
    ) -> BoxFuture<'a, Result<Published, PublishError>> {
        Box::pin(async move {
            let markdown = chronicle_pages::org::org_page(set.org, set.repos);
            let key = format!("{}{}", self.prefix, chronicle_pages::org::org_path(set.org));
            self.client
                .put_object()
                .bucket(&self.bucket)
                .key(&key)
                .content_type("text/markdown; charset=utf-8")
                .body(markdown.as_bytes().to_vec().into())
                .send()
                .await
                .map_err(|e| self.remote_error(&key, &e))?;
            Ok(Published {
                documents: 1,
                bytes: markdown.len(),
                requests: 1,
                ..Default::default()
            })
        })
    }
}

pub use chronicle_pages::path::{
    could_be_current, legacy_path_segment, path_segment, MAX_SEGMENT_BYTES,
};

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Writes `contents` to `path` through a temporary sibling and a rename. `Ok(false)` if the file
/// already held exactly these bytes (nothing written).
fn write_atomically(path: &Path, contents: &str) -> Result<bool, PublishError> {
    let io = |at: &Path, e: std::io::Error| PublishError::Io {
        path: at.display().to_string(),
        message: e.to_string(),
    };
    if std::fs::read(path).is_ok_and(|existing| existing == contents.as_bytes()) {
        return Ok(false);
    }
    let dir = path.parent().ok_or_else(|| PublishError::Io {
        path: path.display().to_string(),
        message: "the path has no directory".into(),
    })?;
    std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = dir.join(format!(
        ".{file_name}.{}.{}.tmp",
        std::process::id(),
        TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| {
        let mut file = std::fs::File::create(&temp).map_err(|e| io(&temp, e))?;
        file.write_all(contents.as_bytes())
            .map_err(|e| io(&temp, e))?;
        file.sync_all().map_err(|e| io(&temp, e))?;
        drop(file);
        std::fs::rename(&temp, path).map_err(|e| io(path, e))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result?;
    // Make the rename itself durable where the platform allows it; best effort.
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory under the system temp dir, removed when dropped.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(label: &str) -> Self {
            let dir = std::env::temp_dir().join(format!(
                "chronicle-publish-{label}-{}-{}",
                std::process::id(),
                TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
            ));
            std::fs::create_dir_all(&dir).unwrap();
            TempDir(dir)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn doc(key: DocKey, text: &str) -> Document {
        Document {
            title: "T".into(),
            key,
            parent: None,
            blocks: vec![chronicle_pages::Block::Paragraph(vec![
                chronicle_pages::Span::text(text),
            ])],
        }
    }

    #[tokio::test]
    async fn pages_are_written_whole_and_removed_pages_deleted() {
        let dir = TempDir::new("files");
        let publisher = MarkdownPublisher::new(&dir.0);
        let item = PageItem::default();
        let module = DocKey::Module {
            repo: "acme/app".into(),
            module: "src/api".into(),
        };
        let old = DocKey::Archive {
            repo: "acme/app".into(),
            module: "src/api".into(),
            label: "2019".into(),
        };
        let set = |docs: &'static [Document], removed: &'static [DocKey]| PageSet {
            item: Box::leak(Box::new(item.clone())),
            repo_items: &[],
            docs,
            removed,
            owner: "o",
            deadline: Instant::now() + std::time::Duration::from_secs(10),
        };
        let first: &'static [Document] = Box::leak(Box::new([
            doc(module.clone(), "one"),
            doc(old.clone(), "old"),
        ]));
        let published = publisher.publish(&set(first, &[])).await.unwrap();
        assert_eq!(published.documents, 2);
        let path = dir.0.join("acme/app/src__api.md");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "# T\n\none\n");
        assert!(dir.0.join("acme/app/src__api/2019.md").exists());
        // Again, with the archive gone: the page is replaced, the archive file deleted.
        let second: &'static [Document] = Box::leak(Box::new([doc(module.clone(), "two")]));
        let removed: &'static [DocKey] = Box::leak(Box::new([old.clone()]));
        let published = publisher.publish(&set(second, removed)).await.unwrap();
        assert_eq!(published.removed, 1);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "# T\n\ntwo\n");
        assert!(!dir.0.join("acme/app/src__api/2019.md").exists());
        // Removing what is not there is fine; no temporary file is left behind.
        publisher.publish(&set(second, removed)).await.unwrap();
        let names: Vec<String> = std::fs::read_dir(dir.0.join("acme/app"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");
    }

    /// A name that now takes a suffix: the copy an earlier version wrote under the plain name
    /// is deleted when the page is written, so no stale page stays beside the new one.
    #[tokio::test]
    async fn the_copy_under_an_earlier_file_name_is_deleted() {
        let dir = TempDir::new("legacy");
        let publisher = MarkdownPublisher::new(&dir.0);
        let key = DocKey::Module {
            repo: "acme/app".into(),
            module: "acme/web_team".into(),
        };
        let legacy = key.legacy_path().expect("the name now takes a suffix");
        assert_eq!(legacy, "acme/app/acme__web_team.md");
        std::fs::create_dir_all(dir.0.join("acme/app")).unwrap();
        std::fs::write(dir.0.join(&legacy), "old").unwrap();
        let docs: &'static [Document] = Box::leak(Box::new([doc(key.clone(), "new")]));
        let item = PageItem::default();
        let published = publisher
            .publish(&PageSet {
                item: &item,
                repo_items: &[],
                docs,
                removed: &[],
                owner: "o",
                deadline: Instant::now() + std::time::Duration::from_secs(10),
            })
            .await
            .unwrap();
        assert_eq!(published.removed, 1);
        assert!(!dir.0.join(&legacy).exists());
        assert!(dir.0.join(key.path()).exists());
        let plain = DocKey::Module {
            repo: "acme/app".into(),
            module: "src/api".into(),
        };
        assert_eq!(plain.legacy_path(), None, "a plain name keeps its file");
        // An earlier name that is another module's current one is never deleted.
        for (changed, current) in [
            ("a:b", "a_b"),
            ("crates\\api", "crates/api"),
            (".github", "_github"),
        ] {
            let old = DocKey::Module {
                repo: "acme/app".into(),
                module: changed.into(),
            };
            let other = DocKey::Module {
                repo: "acme/app".into(),
                module: current.into(),
            };
            assert!(
                old.legacy_path().is_none_or(|p| p != other.path()),
                "{changed} vs {current}"
            );
        }
    }
}
