//! The loop both emulated event sources run (the table's stream, the summarize queue): poll,
//! wait, poll again, until told to stop.

use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::watch;

/// Runs `poll` on `state` every `interval` until `stop` turns true (or its sender is gone). A
/// stop that arrives mid-poll drops the poll: each source makes that safe by letting go of a
/// record only once its handler's answer is in, so an interrupted batch is delivered again.
pub async fn until_stopped<S>(
    state: &mut S,
    interval: Duration,
    mut stop: watch::Receiver<bool>,
    mut poll: impl for<'a> FnMut(&'a mut S) -> BoxFuture<'a, ()>,
) {
    loop {
        if *stop.borrow_and_update() {
            return;
        }
        tokio::select! {
            () = poll(state) => {}
            changed = stop.changed() => {
                if changed.is_err() || *stop.borrow() { return; }
                continue;
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            changed = stop.changed() => {
                if changed.is_err() || *stop.borrow() { return; }
            }
        }
    }
}
