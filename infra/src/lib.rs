//! What runs the infrastructure on one machine: the emulator, the table from `template.yaml`,
//! the local stack that serves the same handlers as Lambda, and the operator CLI's commands.

pub mod alloc;
pub mod backfill_cli;
pub mod backfill_org;
pub mod bench;
pub mod bench_backfill;
pub mod bench_backpressure;
pub mod bench_bootstrap;
pub mod bench_history;
pub mod bench_hot;
pub mod bench_quality;
pub mod bench_story;
pub mod confirm;
pub mod converse_standin;
pub mod demo;
pub mod dev;
pub mod emulator;
pub mod git_history;
pub mod github_standin;
pub mod http_server;
pub mod notion_standin;
pub mod ops_cli;
pub mod poll;
pub mod progress;
pub mod queues;
pub mod replay;
pub mod samples;
pub mod stack;
pub mod streams;
pub mod synthetic;
pub mod synthetic_load;
pub mod template;
