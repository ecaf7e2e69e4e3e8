//! Chronicle's LLM clients, used only off the webhook path and always optional:
//! - [`summarizer`]: the summary paragraph of one PR through Anthropic's Messages API, falling
//!   back to the extractive paragraph on any error;
//! - [`writer`]: longer text (the module story) through Bedrock's Converse API, Anthropic's
//!   Messages API or an OpenAI-compatible endpoint, asked once within a deadline.
//!
//! What a text may say is decided above (`stages::story` grounds the story); this crate only
//! asks, with the key never logged.

pub mod bedrock;
pub mod summarizer;
pub mod writer;

pub use summarizer::*;
pub use writer::{Answer, Usage, WriteError, Writer, DEADLINE_MARGIN};
