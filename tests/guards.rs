//! Hostile repositories and credentials that must not leave their host.
//!
//! One test binary per group, not per file: each binary links the AWS SDKs once.

mod hostile;
mod redirects;
