//! Counts what the stores ask of DynamoDB: items read and write requests. The benchmarks and
//! the page builder's metrics report these, because they are what a history's length could
//! make grow (invariant 9), and they do not depend on how fast the emulator is.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A shared counter: clones count into the same totals.
#[derive(Clone, Debug, Default)]
pub struct Meter(Arc<Counts>);

#[derive(Debug, Default)]
struct Counts {
    items_read: AtomicU64,
    read_requests: AtomicU64,
    write_requests: AtomicU64,
}

/// The totals at one moment; subtract two readings to get what happened in between.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MeterReading {
    pub items_read: u64,
    pub read_requests: u64,
    pub write_requests: u64,
}

impl Meter {
    /// One read request that returned (or, for a Query, examined) `items` items.
    pub fn read(&self, items: usize) {
        self.0.items_read.fetch_add(items as u64, Ordering::Relaxed);
        self.0.read_requests.fetch_add(1, Ordering::Relaxed);
    }

    pub fn write(&self) {
        self.0.write_requests.fetch_add(1, Ordering::Relaxed);
    }

    pub fn reading(&self) -> MeterReading {
        MeterReading {
            items_read: self.0.items_read.load(Ordering::Relaxed),
            read_requests: self.0.read_requests.load(Ordering::Relaxed),
            write_requests: self.0.write_requests.load(Ordering::Relaxed),
        }
    }
}

impl std::ops::Sub for MeterReading {
    type Output = MeterReading;

    fn sub(self, earlier: MeterReading) -> MeterReading {
        MeterReading {
            items_read: self.items_read.saturating_sub(earlier.items_read),
            read_requests: self.read_requests.saturating_sub(earlier.read_requests),
            write_requests: self.write_requests.saturating_sub(earlier.write_requests),
        }
    }
}
