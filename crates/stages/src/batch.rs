//! Working through one Lambda batch: its items at once (bounded), each in its own task, so a
//! panic fails only its item and the results of the others are kept.

use std::fmt::Display;
use std::future::Future;

use futures::StreamExt;

/// Runs `work` on every `(id, item)`, at most `concurrency` at a time, each in a task of its own.
/// Returns the id and error message of every item whose work failed or panicked.
pub async fn failed_items<I, T, E, F, Fut>(
    items: Vec<(String, I)>,
    concurrency: usize,
    work: F,
) -> Vec<(String, String)>
where
    F: Fn(I) -> Fut,
    Fut: Future<Output = Result<T, E>> + Send + 'static,
    T: Send + 'static,
    E: Display + Send + 'static,
{
    futures::stream::iter(items)
        .map(|(id, item)| {
            let task = tokio::spawn(work(item));
            async move {
                let failure = match task.await {
                    Ok(Ok(_)) => None,
                    Ok(Err(e)) => Some(e.to_string()),
                    Err(join) => Some(format!("processing panicked: {}", panic_message(join))),
                };
                failure.map(|message| (id, message))
            }
        })
        .buffer_unordered(concurrency.max(1))
        .filter_map(|failure| async move { failure })
        .collect()
        .await
}

fn panic_message(join: tokio::task::JoinError) -> String {
    match join.try_into_panic() {
        Ok(payload) => payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "non-string panic".into()),
        Err(e) => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panic_fails_only_its_item() {
        let items = (0..6).map(|i| (i.to_string(), i)).collect();
        let mut failed = failed_items(items, 2, |i: u32| async move {
            match i {
                2 => panic!("boom on {i}"),
                4 => Err("four is refused"),
                _ => Ok(i),
            }
        })
        .await;
        failed.sort();
        assert_eq!(
            failed,
            [
                (
                    "2".to_string(),
                    "processing panicked: boom on 2".to_string()
                ),
                ("4".to_string(), "four is refused".to_string())
            ]
        );
    }
}
