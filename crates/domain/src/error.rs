//! Error text shared by every client.

/// An error and its sources on one line (`a: b: c`): the useful part of a transport failure
/// (connection refused, timed out) is usually deep in the chain.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut message = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        message.push_str(": ");
        message.push_str(&s.to_string());
        source = s.source();
    }
    message
}
