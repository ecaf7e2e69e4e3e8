//! `chronicle dev`: the whole pipeline on one machine. The emulator (moto) started and stopped
//! with the stack, the tables and queues created from `template.yaml`, the DynamoDB stream and
//! SQS event sources emulated in front of the same handlers the Lambdas run, the webhook on
//! loopback, and what feeds it: recorded deliveries (`--replay`), a synthetic history
//! (`--synthetic`), a backfill (`--backfill`).

pub mod demo;
pub mod dev;
pub mod emulator;
pub mod poll;
pub mod queues;
pub mod replay;
pub mod samples;
pub mod streams;
pub mod synthetic_load;
pub mod template;
