//! The operator commands of the `chronicle` binary, on a deployed stack (`--stack NAME`, found
//! through CloudFormation) or the local one (`AWS_ENDPOINT_URL`): `backfill` (one repository, or
//! every one of an App installation), `status`, `failed`, `reprocess`, `rebuild`, `redrive` and
//! `redeliver`, with their confirmation guard and progress bars. The local stack and the benches
//! run the backfill through here too.

pub mod backfill;
pub mod backfill_org;
pub mod commands;
pub mod confirm;
pub mod progress;
pub mod stack;
pub mod stream_record;
