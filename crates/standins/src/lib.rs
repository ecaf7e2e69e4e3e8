//! The services Chronicle calls, stood in on loopback for the tests, the benches and the local
//! stack: GitHub (REST and GraphQL, each query validated against the vendored schema), Notion,
//! Bedrock's Converse API, and the HTTP front API Gateway gives the webhook; and the synthetic
//! merged-PR histories they serve. Each speaks the real protocol and is stricter than the real
//! service, never looser.

pub mod converse_standin;
pub mod github_standin;
pub mod http_server;
pub mod notion_standin;
pub mod synthetic;
