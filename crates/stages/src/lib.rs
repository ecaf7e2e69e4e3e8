//! Chronicle's stages and the concepts they share, above the lower crates (see
//! docs/ARCHITECTURE.md for the map):
//! - concepts: module tagging ([`tagging`], [`workspaces`]), a repository's [`context`],
//!   summaries ([`summary`], [`kind`]), a PR's entries per module ([`entries`]), pages as views
//!   ([`pages`]), publishers ([`publish`]), the optional LLM story ([`story`]);
//! - the stages: [`enrich`], [`sweeper`], [`summarize`], the page [`builder`], [`redeliver`],
//!   [`backfill`].
//!
//! The webhook stage is `chronicle-ingest`; the store, clients, configuration and domain types
//! are their own crates, named below under the paths the stages use.

// The lower layers, each its own crate (see docs/ARCHITECTURE.md), named here under the paths
// the stages use.
pub use chronicle_aws::{error, secret, telemetry};
pub use chronicle_http::backoff;
pub use chronicle_ingest::{payload, signature, webhook};
pub use chronicle_store as store;
pub use chronicle_summary::kind;
pub use chronicle_tagging::{context, workspaces};
pub use {chronicle_aws as aws, chronicle_config as config, chronicle_domain as domain};
pub use {chronicle_github as github, chronicle_http as http, chronicle_notion as notion};
pub use {chronicle_pages as pages, chronicle_publish as publish};
pub use {chronicle_summary as summary, chronicle_tagging as tagging};

pub mod backfill;
pub mod batch;
pub mod builder;
pub mod edits;
pub mod enrich;
pub mod entries;
pub mod redeliver;
pub mod status;
pub mod story;
pub mod summarize;
pub mod sweeper;
pub use chronicle_tokens as token;
