//! `chronicle bench`: the figures the docs quote, measured through the local stack and the
//! stand-ins (never asserted in tests): the webhook, sweeps and the pipeline's latency, history
//! growth and the hot module, backfill, backpressure, the functions' bootstrap, page quality and
//! what the LLM texts cost.

pub mod alloc;
pub mod backfill;
pub mod backpressure;
pub mod bootstrap;
pub mod git_history;
pub mod history;
pub mod hot;
pub mod quality;
pub mod story;
pub mod webhook;
