//! Chronicle's library: everything the Lambda functions and the local stack share.
//!
//! Each behaviour lives in a small module named after it, so a reader can find it by name:
//! the GitHub payload model ([`payload`]), the domain types ([`domain`]), the webhook signature
//! check ([`signature`]), the DynamoDB store ([`store`]), the webhook ingest handler
//! ([`webhook`]), the GitHub REST client ([`github`]), the enrich stage ([`enrich`]), the narrative ([`narrative`]), summaries ([`summary`]), the
//! Notion client ([`notion`]) and the publishers ([`publish`]), configuration ([`config`]), secrets ([`secret`]) and telemetry ([`telemetry`]).

pub mod aws;
pub mod batch;
pub mod config;
pub mod domain;
pub mod enrich;
pub mod github;
pub mod narrative;
pub mod notion;
pub mod payload;
pub mod publish;
pub mod secret;
pub mod signature;
pub mod store;
pub mod summarize;
pub mod summary;
pub mod sweeper;
pub mod tagging;
pub mod telemetry;
pub mod webhook;
