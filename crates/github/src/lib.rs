//! GitHub's APIs: REST (`rest`, the enrich stage's fallback and the webhook-era client) and
//! GraphQL (`graphql`, typed against GitHub's published schema; backfill and enrichment), App
//! installation tokens (`app`) and webhook deliveries (`deliveries`). A client only: what the
//! answers mean for a repository's modules is the stages' business.

pub mod app;
pub mod auth;
pub mod deliveries;
pub mod graphql;
pub mod installation;
mod installation_error;
mod rest;

pub use rest::*;
