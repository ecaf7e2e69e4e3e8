//! Progress of the CLI's long runs: a bar on a terminal (stderr), nothing when piped, so a log
//! or `--json` output never carries escape codes.

use std::io::IsTerminal;

pub struct Bar(Option<indicatif::ProgressBar>);

impl Bar {
    /// A counter of `unit`s whose total is not known in advance.
    pub fn new(unit: &str) -> Bar {
        Bar(std::io::stderr().is_terminal().then(|| {
            let bar = indicatif::ProgressBar::new_spinner();
            bar.set_style(
                indicatif::ProgressStyle::with_template(&format!(
                    "{{spinner}} [{{elapsed_precise}}] {{pos}} {unit} · {{per_sec}}"
                ))
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
            );
            bar
        }))
    }

    /// A bar over `len` `unit`s.
    pub fn with_len(len: u64, unit: &str) -> Bar {
        Bar(std::io::stderr().is_terminal().then(|| {
            let bar = indicatif::ProgressBar::new(len);
            bar.set_style(
                indicatif::ProgressStyle::with_template(&format!(
                    "[{{elapsed_precise}}] {{bar:30}} {{pos}}/{{len}} {unit} · ETA {{eta}}"
                ))
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            bar
        }))
    }

    pub fn inc(&self) {
        self.inc_by(1);
    }

    pub fn inc_by(&self, n: u64) {
        if let Some(bar) = &self.0 {
            bar.inc(n);
        }
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.0 {
            bar.finish_and_clear();
        }
    }
}
