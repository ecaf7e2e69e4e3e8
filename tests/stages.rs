//! The stages end to end against the emulator: the webhook, the table stream and the queues, enrichment, the sweeper, summaries, redelivery, backfill, the repository context, the operator CLI and the local stack.
//!
//! One test binary per group, not per file: each binary links the AWS SDKs once.

mod app_token;
mod backfill;
mod context;
mod enrich;
mod local_stack;
mod ops;
mod org;
mod org_lifecycle;
mod queues;
mod redeliver;
mod streams;
mod summarize;
mod sweeper;
mod webhook;
