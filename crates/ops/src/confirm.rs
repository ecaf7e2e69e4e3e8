//! A bulk change to a deployed stack is confirmed first: above [`CONFIRM_ABOVE`] items,
//! `--yes`, or an interactive "y" to a question that shows the count. `--dry-run` previews and
//! needs neither; the local stack needs neither.

use std::io::{BufRead, IsTerminal, Write};

use crate::backfill::EXIT_USAGE;

/// Items a command may change on a deployed stack without confirmation.
pub const CONFIRM_ABOVE: u64 = 10;

/// Whether bulk changes need a confirmation, and whether it was given.
#[derive(Debug, Clone, Default)]
pub struct Guard {
    /// The stack's name when the target is a deployed stack (`--stack`).
    pub stack: Option<String>,
    /// `--yes`.
    pub yes: bool,
}

impl Guard {
    /// `Ok` when `count` items of `what` may be changed by `command`; otherwise the exit code and
    /// message (nothing was changed).
    pub fn check(&self, command: &str, what: &str, count: u64) -> Result<(), (u8, String)> {
        let Some(stack) = &self.stack else {
            return Ok(());
        };
        if self.yes || count <= CONFIRM_ABOVE {
            return Ok(());
        }
        let question =
            format!("chronicle {command}: {count} {what} on stack {stack} will be changed. Go ahead? [y/N] ");
        let refused = || {
            (
                EXIT_USAGE,
                format!(
                    "{count} {what} on the deployed stack {stack}: pass --yes to go ahead (--dry-run previews); nothing was changed"
                ),
            )
        };
        if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
            return Err(refused());
        }
        let mut err = std::io::stderr();
        let _ = write!(err, "{question}");
        let _ = err.flush();
        let mut answer = String::new();
        let _ = std::io::stdin().lock().read_line(&mut answer);
        match answer.trim().to_ascii_lowercase().as_str() {
            "y" | "yes" => Ok(()),
            _ => Err(refused()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_large_change_to_a_deployed_stack_needs_yes() {
        let local = Guard::default();
        assert!(local.check("rebuild", "pages", 10_000).is_ok());
        let deployed = Guard {
            stack: Some("prod".into()),
            yes: false,
        };
        assert!(deployed.check("rebuild", "pages", CONFIRM_ABOVE).is_ok());
        // Tests run without a terminal: a large change is refused, naming --yes.
        let (code, message) = deployed
            .check("rebuild", "pages", CONFIRM_ABOVE + 1)
            .unwrap_err();
        assert_eq!(code, EXIT_USAGE);
        assert!(
            message.contains("--yes") && message.contains("11 pages"),
            "{message}"
        );
        let yes = Guard {
            stack: Some("prod".into()),
            yes: true,
        };
        assert!(yes.check("rebuild", "pages", 1_000_000).is_ok());
    }
}
