//! GitHub's APIs: REST (`rest`, the enrich stage's fallback and the webhook-era client) and
//! GraphQL (`graphql`, typed against GitHub's published schema; backfill and enrichment).

pub mod app;
pub mod context;
pub mod graphql;
pub mod hooks;
mod rest;

pub use rest::*;
