//! Where narratives go. Publishing is idempotent: a retry or a duplicate message can never add
//! an entry twice. The Markdown publishers replace a module's whole page with a fresh rendering
//! (a file, or an S3 object); the Notion publisher ([`notion`]) appends the PR's entry once and
//! records what it appended.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use std::time::Instant;

use futures::future::BoxFuture;
use futures::FutureExt as _;

use crate::narrative::{render_markdown, ModulePage};
use crate::notion::NotionError;
use crate::store::{Item, StoreError};

pub mod notion;
pub use notion::NotionPublisher;

#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    /// A file could not be written (disk full, permissions, a vanished directory): worth retrying.
    #[error("writing {path} failed: {message}")]
    Io { path: String, message: String },
    /// A remote store refused or failed the write (throttling, 5xx, network): worth retrying.
    #[error("writing {target} failed: {message}")]
    Remote { target: String, message: String },
    /// Notion refused or failed; permanent when the request is invalid or access must be fixed.
    #[error(transparent)]
    Notion(#[from] NotionError),
    /// Another worker is writing the page; the message comes back later.
    #[error("the Notion page of {page} is being written by another worker (locked until {until}); it will be retried")]
    Busy { page: String, until: String },
    /// The page's bookkeeping in DynamoDB failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The page lock or the PR's lease was lost while publishing; nothing more was written.
    #[error("the {0} was lost while publishing; the message will come back")]
    LockLost(&'static str),
    /// Anything else; retrying it would fail the same way.
    #[error("{0}")]
    Other(String),
}

impl PublishError {
    /// `true` if retrying cannot help (the caller records the failure instead of retrying).
    /// I/O and remote-store errors are not permanent.
    pub fn is_permanent(&self) -> bool {
        match self {
            PublishError::Notion(e) => e.is_permanent(),
            PublishError::Other(_) => true,
            PublishError::Io { .. }
            | PublishError::Remote { .. }
            | PublishError::Busy { .. }
            | PublishError::Store(_)
            | PublishError::LockLost(_) => false,
        }
    }
}

/// One PR's entry being published to one module's page.
#[derive(Debug, Clone, Copy)]
pub struct Publication<'a> {
    /// The module's whole page, the PR's entry included.
    pub page: &'a ModulePage,
    /// The PR whose entry is being added.
    pub number: u64,
    /// The summarize lease this runs under (it guards every write to the PR row).
    pub lease_owner: &'a str,
    /// The PR row as claimed.
    pub row: &'a Item,
    /// When the invocation runs out of time.
    pub deadline: Instant,
}

impl<'a> Publication<'a> {
    /// A publication outside the summary lease (no `lease_owner`): for whole-page publishers,
    /// which never write the PR row.
    pub fn of_page(page: &'a ModulePage, number: u64, row: &'a Item, deadline: Instant) -> Self {
        Publication {
            page,
            number,
            lease_owner: "",
            row,
            deadline,
        }
    }
}

pub trait Publisher: Send + Sync {
    /// Puts the PR's entry on the module's page, idempotently: publishing the same entry twice
    /// leaves one copy of it.
    fn publish<'a>(&'a self, p: &'a Publication<'a>) -> BoxFuture<'a, Result<(), PublishError>>;

    /// Whether a page is rewritten whole from the rows it was given (Markdown), so that two
    /// workers publishing one module at once can each leave out the other's entry. A publisher
    /// that places entries under a lock (Notion) does not, and has nothing to mend.
    fn rewrites_pages(&self) -> bool {
        true
    }

    /// After the commit, when the module's committed entries are no longer those the page was
    /// rendered from: the publishers that rewrite pages publish the fresh page again.
    fn republish<'a>(&'a self, p: &'a Publication<'a>) -> BoxFuture<'a, Result<(), PublishError>> {
        if self.rewrites_pages() {
            self.publish(p)
        } else {
            Box::pin(async { Ok(()) })
        }
    }

    /// A short name for logs and metrics (`markdown`, `notion`).
    fn name(&self) -> &'static str;
}

/// A shared publisher (`Arc<dyn Publisher>`, `Arc<MarkdownPublisher>`) is a publisher.
impl<P: Publisher + ?Sized> Publisher for Arc<P> {
    fn publish<'a>(&'a self, p: &'a Publication<'a>) -> BoxFuture<'a, Result<(), PublishError>> {
        (**self).publish(p)
    }

    fn rewrites_pages(&self) -> bool {
        (**self).rewrites_pages()
    }

    fn republish<'a>(&'a self, p: &'a Publication<'a>) -> BoxFuture<'a, Result<(), PublishError>> {
        (**self).republish(p)
    }

    fn name(&self) -> &'static str {
        (**self).name()
    }
}

/// Several publishers at once (Markdown and Notion), in order; the first failure fails the
/// publish, and since each one is idempotent the retry repeats none of their effects.
pub struct Publishers(pub Vec<Arc<dyn Publisher>>);

impl Publisher for Publishers {
    fn publish<'a>(&'a self, p: &'a Publication<'a>) -> BoxFuture<'a, Result<(), PublishError>> {
        Box::pin(async move {
            for publisher in &self.0 {
                publisher.publish(p).await?;
            }
            Ok(())
        })
    }

    fn rewrites_pages(&self) -> bool {
        self.0.iter().any(|p| p.rewrites_pages())
    }

    fn republish<'a>(&'a self, p: &'a Publication<'a>) -> BoxFuture<'a, Result<(), PublishError>> {
        Box::pin(async move {
            for publisher in &self.0 {
                publisher.republish(p).await?;
            }
            Ok(())
        })
    }

    fn name(&self) -> &'static str {
        match self.0.as_slice() {
            [one] => one.name(),
            _ => "several",
        }
    }
}

/// Writes each module's page to `<out>/<owner>/<repo>/<module>.md`, atomically: the rendering
/// goes to a temporary file in the same directory, which is then renamed over the page, so a
/// reader (or a crash) never sees half a page. Concurrent publishes of one page each write a
/// complete rendering; the last rename wins.
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

    /// `<out>/<owner>/<repo>/<module>.md`, every part made path-safe (see [`path_segment`]):
    /// `src/api` → `src__api.md`, `(root)` → `(root).md`, `../x` → `____x.md`.
    pub fn page_path(&self, repo: &str, module: &str) -> PathBuf {
        self.out_dir.join(page_relative_path(repo, module))
    }
}

/// `<owner>/<repo>/<module>.md`, each part made path-safe: where a page lives under any root.
pub fn page_relative_path(repo: &str, module: &str) -> String {
    let (owner, name) = repo.split_once('/').unwrap_or(("_", repo));
    format!(
        "{}/{}/{}.md",
        path_segment(owner),
        path_segment(name),
        path_segment(module)
    )
}

/// Writes the same Markdown pages to S3: `s3://<bucket>/<prefix><owner>/<repo>/<module>.md`.
/// One `PutObject` replaces the whole page, so a retry cannot duplicate an entry.
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

    /// Parses `s3://bucket/prefix/`.
    pub fn parse_uri(uri: &str) -> Option<(String, String)> {
        let rest = uri.strip_prefix("s3://")?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        (!bucket.is_empty()).then(|| (bucket.to_string(), prefix.to_string()))
    }

    pub fn key(&self, repo: &str, module: &str) -> String {
        format!("{}{}", self.prefix, page_relative_path(repo, module))
    }
}

impl Publisher for S3MarkdownPublisher {
    fn publish<'a>(&'a self, p: &'a Publication<'a>) -> BoxFuture<'a, Result<(), PublishError>> {
        let page = p.page;
        Box::pin(async move {
            let key = self.key(&page.repo, &page.module);
            let body = render_markdown(page);
            self.client
                .put_object()
                .bucket(&self.bucket)
                .key(&key)
                .content_type("text/markdown; charset=utf-8")
                .body(body.into_bytes().into())
                .send()
                .await
                .map_err(|e| PublishError::Remote {
                    target: format!("s3://{}/{key}", self.bucket),
                    message: crate::aws::error_message(&e),
                })?;
            Ok(())
        })
    }

    fn name(&self) -> &'static str {
        "markdown-s3"
    }
}

impl Publisher for MarkdownPublisher {
    fn publish<'a>(&'a self, p: &'a Publication<'a>) -> BoxFuture<'a, Result<(), PublishError>> {
        let page = p.page;
        let path = self.page_path(&page.repo, &page.module);
        let markdown = render_markdown(page);
        async move {
            let shown = path.display().to_string();
            let bytes = markdown.len();
            let written = tokio::task::spawn_blocking(move || write_atomically(&path, &markdown))
                .await
                .map_err(|e| PublishError::Io {
                    path: shown.clone(),
                    message: format!("the write task did not finish: {e}"),
                })??;
            tracing::info!(
                path = %shown,
                bytes,
                entries = page.entries.len(),
                unchanged = !written,
                "published Markdown page"
            );
            Ok(())
        }
        .boxed()
    }

    fn name(&self) -> &'static str {
        "markdown"
    }
}

/// One path component from a repo owner, repo name or module name: `/` and `\` become `__`,
/// characters that are unsafe in file names (controls, `:*?"<>|`) become `_`, and a `.` that
/// starts the name or touches another `.` becomes `_`, so no component is `.` or `..`, hidden,
/// or contains `..`. An empty name becomes `_`. Distinct modules can in principle share a file
/// (`a/b` and `a__b`); module names from the tagging config do not.
pub fn path_segment(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    let mut out = String::with_capacity(name.len());
    for (i, &c) in chars.iter().enumerate() {
        let dot_run = i == 0 || chars[i - 1] == '.' || chars.get(i + 1) == Some(&'.');
        match c {
            '/' | '\\' => out.push_str("__"),
            ':' | '*' | '?' | '"' | '<' | '>' | '|' => out.push('_'),
            '.' if dot_run => out.push('_'),
            c if c.is_control() => out.push('_'),
            c => out.push(c),
        }
    }
    if out.is_empty() {
        out.push('_');
    }
    out
}

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
    let dir = path
        .parent()
        .ok_or_else(|| PublishError::Other(format!("{} has no directory", path.display())))?;
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
    use crate::narrative::Entry;

    /// Publishes a page the way a worker does, for PR 0 with no row behind it.
    async fn put(publisher: &dyn Publisher, page: &ModulePage) -> Result<(), PublishError> {
        let row = Item::new();
        let deadline = Instant::now() + std::time::Duration::from_secs(60);
        publisher
            .publish(&Publication::of_page(page, 0, &row, deadline))
            .await
    }

    /// A fresh directory under the system temp dir, removed when dropped.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(label: &str) -> Self {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos();
            let dir = std::env::temp_dir().join(format!(
                "chronicle-publish-{label}-{}-{nanos}-{}",
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

    fn entry(number: u64, merged_at: &str) -> Entry {
        crate::narrative::sample::entry(number, merged_at, "alice")
    }

    fn files_under(dir: &Path) -> Vec<PathBuf> {
        let mut found = Vec::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else {
                    found.push(p);
                }
            }
        }
        found.sort();
        found
    }

    #[tokio::test]
    async fn writes_the_page_and_rewriting_keeps_one_copy() {
        let tmp = TempDir::new("rewrite");
        let publisher = MarkdownPublisher::new(&tmp.0);
        assert_eq!(publisher.name(), "markdown");
        let first = ModulePage::new(
            "acme/widgets",
            "src",
            vec![entry(1, "2024-01-01T00:00:00Z")],
        );
        put(&publisher, &first).await.unwrap();
        let path = tmp.0.join("acme").join("widgets").join("src.md");
        assert_eq!(publisher.page_path("acme/widgets", "src"), path);
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            render_markdown(&first)
        );

        // A duplicate publish, then a page with a second entry (and the first one again).
        put(&publisher, &first).await.unwrap();
        let second = ModulePage::new(
            "acme/widgets",
            "src",
            vec![
                entry(1, "2024-01-01T00:00:00Z"),
                entry(2, "2024-01-02T00:00:00Z"),
                entry(1, "2024-01-01T00:00:00Z"),
            ],
        );
        put(&publisher, &second).await.unwrap();
        put(&publisher, &second).await.unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, render_markdown(&second));
        assert_eq!(text.matches("(#1)\n").count(), 1);
        assert_eq!(text.matches("(#2)\n").count(), 1);
        // No temporary files left behind, nothing else written.
        assert_eq!(files_under(&tmp.0), vec![path]);
    }

    #[tokio::test]
    async fn module_names_cannot_escape_the_output_directory() {
        let tmp = TempDir::new("safety");
        let publisher = MarkdownPublisher::new(&tmp.0);
        let repo_dir = tmp.0.join("acme").join("widgets");
        assert_eq!(
            publisher.page_path("acme/widgets", "../x"),
            repo_dir.join("____x.md")
        );
        assert_eq!(
            publisher.page_path("acme/widgets", "org/team"),
            repo_dir.join("org__team.md")
        );
        assert_eq!(
            publisher.page_path("acme/widgets", "(root)"),
            repo_dir.join("(root).md")
        );
        assert_eq!(
            publisher.page_path("acme/widgets", "../../../etc/passwd"),
            repo_dir.join(format!("{}etc__passwd.md", "_".repeat(12)))
        );
        assert_eq!(path_segment(".."), "__");
        assert_eq!(path_segment("."), "_");
        assert_eq!(path_segment(""), "_");
        assert_eq!(path_segment("a...b"), "a___b");
        assert_eq!(path_segment(".github"), "_github");
        assert_eq!(path_segment("v1.2"), "v1.2");
        assert_eq!(path_segment("x\0y:z"), "x_y_z");
        for module in ["../x", "org/team", "..", "a/../../b", "..\\..\\c"] {
            let p = publisher.page_path("acme/widgets", module);
            assert_eq!(p.parent().unwrap(), repo_dir, "{module}");
            assert!(
                !p.file_name().unwrap().to_str().unwrap().contains(".."),
                "{module}"
            );
        }

        for module in ["../x", "org/team"] {
            let page = ModulePage::new(
                "acme/widgets",
                module,
                vec![entry(3, "2024-01-03T00:00:00Z")],
            );
            put(&publisher, &page).await.unwrap();
        }
        assert_eq!(
            files_under(&tmp.0),
            vec![repo_dir.join("____x.md"), repo_dir.join("org__team.md")]
        );
        assert!(std::fs::read_to_string(repo_dir.join("org__team.md"))
            .unwrap()
            .starts_with("# acme/widgets · org/team\n"));
    }

    #[tokio::test]
    async fn an_unwritable_directory_is_a_transient_io_error() {
        let tmp = TempDir::new("unwritable");
        // A file where the owner directory should be.
        std::fs::write(tmp.0.join("acme"), b"not a directory").unwrap();
        let publisher: Arc<dyn Publisher> = Arc::new(MarkdownPublisher::new(&tmp.0));
        let page = ModulePage::new("acme/widgets", "src", vec![]);
        let err = put(&publisher, &page).await.unwrap_err();
        assert!(matches!(err, PublishError::Io { .. }), "{err:?}");
        assert!(!err.is_permanent());
        assert!(PublishError::Other("bad page".into()).is_permanent());
        assert_eq!(publisher.name(), "markdown");
    }
}
