//! Clients that carry a credential follow no redirect off their host: an LLM endpoint, Notion
//! or a GitHub Enterprise proxy that answers 307 to another host never receives the key there.
//! Two real HTTP servers on loopback: one redirects everything to the other (a different host
//! name, `localhost` against `127.0.0.1`), and the other counts what reaches it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chronicle_llm::{LlmSummarizer, Writer};
use stages::github::GitHubClient;
use stages::notion::NotionClient;
use stages::secret::Secret;
use stages::story::prompt;
use stages::summary::{Summarizer, SummaryInput};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A server that answers every request with `answer(path)` and counts them.
async fn server(answer: fn(&str, u16) -> String) -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let count = Arc::new(AtomicUsize::new(0));
    let counted = count.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let counted = counted.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 64 * 1024];
                let mut read = 0;
                // Headers, then whatever body Content-Length names.
                loop {
                    let Ok(n) = socket.read(&mut buf[read..]).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    read += n;
                    let text = String::from_utf8_lossy(&buf[..read]).to_string();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let length: usize = text
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length:")
                                    .map(|v| v.trim().parse().unwrap_or(0))
                            })
                            .unwrap_or(0);
                        if read >= end + 4 + length {
                            break;
                        }
                    }
                }
                counted.fetch_add(1, Ordering::SeqCst);
                let text = String::from_utf8_lossy(&buf[..read]).to_string();
                let path = text.split_whitespace().nth(1).unwrap_or("/").to_string();
                let response = answer(&path, port);
                let _ = socket.write_all(response.as_bytes()).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    (port, count)
}

fn not_found(_: &str, _: u16) -> String {
    "HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}".into()
}

static ELSEWHERE: std::sync::OnceLock<u16> = std::sync::OnceLock::new();

/// 307 to the same path on `localhost:ELSEWHERE`; a GitHub-style 301 on its own host for
/// `/repos/old/name/…`.
fn redirect(path: &str, own: u16) -> String {
    let location = match path.strip_prefix("/repos/old/name/") {
        Some(rest) => format!("http://127.0.0.1:{own}/repos/new/name/{rest}"),
        None => format!("http://localhost:{}{path}", ELSEWHERE.get().unwrap()),
    };
    let status = if path.starts_with("/repos/old/") {
        "301 Moved Permanently"
    } else {
        "307 Temporary Redirect"
    };
    format!("HTTP/1.1 {status}\r\nlocation: {location}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
}

fn soon() -> Instant {
    Instant::now() + Duration::from_secs(60)
}

#[tokio::test]
async fn no_credentialed_client_follows_a_redirect_to_another_host() {
    let (elsewhere, reached) = server(not_found).await;
    ELSEWHERE.set(elsewhere).unwrap();
    let (port, asked) = server(redirect).await;
    let base = format!("http://127.0.0.1:{port}");

    // The summary LLM: the redirect is an error, the summary extractive.
    let summarizer = LlmSummarizer::new(
        &base,
        Secret::new("sk-ant-never-leaves"),
        "claude",
        Duration::from_secs(5),
    )
    .with_retry(0, Duration::from_millis(1));
    let modules = vec![stages::domain::ModuleName::new("api")];
    let summary = summarizer
        .summarize(
            &SummaryInput {
                title: "Add paging",
                body: Some("Pages the list endpoint."),
                labels: &[],
                files: &[],
                issues: &[],
                modules: &modules,
            },
            soon(),
        )
        .await;
    assert!(!summary.text.is_empty());

    // The story writers.
    let entries = Vec::new();
    let p = prompt("acme/app", "api", None, &Default::default(), &entries);
    for writer in [
        Writer::anthropic(&base, Secret::new("sk-ant-story"), "claude"),
        Writer::openai(&base, Some(Secret::new("sk-openai")), "gpt"),
    ] {
        let before = asked.load(Ordering::SeqCst);
        assert!(stages::story::write(&writer, &p, soon()).await.is_err());
        assert_eq!(asked.load(Ordering::SeqCst), before + 1, "asked once");
    }

    // Notion.
    let notion = NotionClient::new(&base, Secret::new("secret_notion")).with_retry(
        0,
        Duration::from_millis(1),
        Duration::from_secs(5),
    );
    assert!(notion.bot_id(soon()).await.is_err());

    // GitHub: another host is refused, a 301 on its own host is followed.
    let github =
        GitHubClient::new(&base, &Secret::new("ghp_token"), Duration::from_secs(5), 0).unwrap();
    let repo = stages::domain::RepoName::parse("acme/app").unwrap();
    assert!(github.pull_totals(&repo, 1, soon()).await.is_err());
    let before = asked.load(Ordering::SeqCst);
    let old = stages::domain::RepoName::parse("old/name").unwrap();
    let _ = github.pull_totals(&old, 1, soon()).await;
    assert_eq!(
        asked.load(Ordering::SeqCst) - before,
        2,
        "the 301 on GitHub's own host is followed"
    );

    assert!(asked.load(Ordering::SeqCst) >= 6);
    assert_eq!(
        reached.load(Ordering::SeqCst),
        0,
        "no request, and so no credential, reached the other host"
    );
}
