//! Chronicle's library: everything the Lambda functions and the local stack share.
//!
//! Each behaviour lives in a small module named after it, so a reader can find it by name:
//! - domain types ([`domain`]) and the GitHub payload model ([`payload`]);
//! - the DynamoDB store ([`store`]): PR rows, module entries, page items;
//! - clients: GitHub REST ([`github`]), Notion ([`notion`]);
//! - concepts: signatures ([`signature`]), module tagging ([`tagging`]), summaries
//!   ([`summary`]), a PR's entries per module ([`entries`]), pages as views ([`pages`]),
//!   publishers ([`publish`]);
//! - the stages: [`webhook`], [`enrich`], [`sweeper`], [`summarize`], and the page builder
//!   ([`pages::build`]);
//! - configuration ([`config`], a leaf), secrets ([`secret`]), telemetry ([`telemetry`]).

pub mod aws;
pub mod backfill;
pub mod backoff;
pub mod batch;
pub mod config;
pub mod domain;
pub mod edits;
pub mod enrich;
pub mod entries;
pub mod error;
pub mod github;
pub mod hooks;
pub mod http;
pub mod kind;
pub mod notion;
pub mod pages;
pub mod payload;
pub mod publish;
pub mod redeliver;
pub mod secret;
pub mod signature;
pub mod status;
pub mod store;
pub mod story;
pub mod summarize;
pub mod summary;
pub mod sweeper;
pub mod tagging;
pub mod telemetry;
pub mod webhook;
pub mod workspaces;
