//! Ingest: the webhook stage. A GitHub delivery is verified ([`signature`]), read
//! ([`payload`]) and stored as a PR row ([`webhook`]); a repository's rename, transfer,
//! deletion, creation or addition to the App ([`lifecycle`]) updates its organisation row.
//! Nothing else: no call leaves for anything but DynamoDB (invariant 1). This crate's
//! dependencies hold that: no HTTP client, GraphQL, Markdown, S3, SQS or LLM crate is among
//! them.

pub mod lifecycle;
pub mod payload;
pub mod signature;
pub mod webhook;
