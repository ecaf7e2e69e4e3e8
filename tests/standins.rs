//! The local stand-ins for GitHub and Notion, held to the published protocols.
//!
//! One test binary per group, not per file: each binary links the AWS SDKs once.

mod github_rest;
mod notion_stub;
