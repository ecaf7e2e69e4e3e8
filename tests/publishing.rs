//! From entries to pages: summaries, the page builder, the Notion publisher, the LLM story and the golden pages.
//!
//! One test binary per group, not per file: each binary links the AWS SDKs once.

mod golden;
mod grounding;
mod notion;
mod notion_org;
mod pages;
mod story;
mod summary;
