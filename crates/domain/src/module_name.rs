//! A module's name: built in one place from every source (the modules config, workspace package
//! names, CODEOWNERS owners, top-level directories), because all but the first are text a
//! repository controls, and the name becomes a DynamoDB key, a page title and a file name.

use std::fmt;
use std::ops::Deref;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The longest module name kept, in bytes (suffix included). Well inside DynamoDB's 1,024-byte
/// sort key and 2,048-byte partition key (`owner/name#module`), and, at most doubled by
/// `pages::path::path_segment`, inside a 255-byte file name with its temp suffix.
pub const MODULE_NAME_MAX_BYTES: usize = 100;

/// What starts Chronicle's own page keys (`#index`, `#context`): never a module's first byte.
pub const RESERVED_PREFIX: char = '#';

/// A module's name, safe to store and publish:
/// - no control or bidirectional-override characters, no surrounding whitespace;
/// - never starts with [`RESERVED_PREFIX`] (a leading `#` becomes `_`);
/// - at most [`MODULE_NAME_MAX_BYTES`] bytes;
/// - never empty.
///
/// A name that had to be changed gets `~` and 12 hex digits of its original's SHA-256, so two
/// distinct originals stay two distinct modules (`#index` → `_index~f4dd11b1…`). A name that merely
/// looks like it carries such a suffix gets one too, so no original can pose as another's.
///
/// Stored names are read back as they were written (`serde(transparent)`): they were built here.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ModuleName(String);

/// Why a configured module name is refused: the operator wrote it, so it is corrected by them
/// rather than renamed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidModuleName {
    #[error("a module name is empty")]
    Empty,
    #[error("a module name cannot start with '#' (reserved for Chronicle's own pages)")]
    Reserved,
    #[error("a module name cannot hold control characters or surrounding spaces")]
    Control,
    #[error("a module name is {0} bytes, more than the {MODULE_NAME_MAX_BYTES} allowed")]
    TooLong(usize),
    #[error("a module name cannot end in '~' and 12 hex digits (the suffix of renamed names)")]
    Suffix,
}

impl ModuleName {
    /// The name for text from any source, made safe as the type promises.
    pub fn new(raw: &str) -> ModuleName {
        let trimmed = raw.trim();
        let mut lossy = trimmed.len() != raw.len();
        let mut name = String::with_capacity(trimmed.len().min(MODULE_NAME_MAX_BYTES));
        for c in trimmed.chars() {
            if c.is_control() || is_invisible(c) {
                lossy = true;
            } else {
                name.push(c);
            }
        }
        if name.starts_with(RESERVED_PREFIX) {
            name = format!("_{}", name.trim_start_matches(RESERVED_PREFIX));
            lossy = true;
        }
        if name.is_empty() {
            name.push('_');
            lossy = true;
        }
        if lossy || name.len() > MODULE_NAME_MAX_BYTES || has_hash_suffix(&name) {
            name = with_hash_suffix(name, raw, MODULE_NAME_MAX_BYTES);
        }
        ModuleName(name)
    }

    /// A name the operator configured: accepted only as written.
    pub fn configured(raw: &str) -> Result<ModuleName, InvalidModuleName> {
        if raw.trim().is_empty() {
            return Err(InvalidModuleName::Empty);
        }
        if raw.starts_with(RESERVED_PREFIX) {
            return Err(InvalidModuleName::Reserved);
        }
        if raw.len() > MODULE_NAME_MAX_BYTES {
            return Err(InvalidModuleName::TooLong(raw.len()));
        }
        if has_hash_suffix(raw) {
            return Err(InvalidModuleName::Suffix);
        }
        let name = ModuleName::new(raw);
        if name.0 != raw {
            return Err(InvalidModuleName::Control);
        }
        Ok(name)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// `text` cut (on a character boundary) so that `~` and [`short_hash`] of `original` fit in
/// `max_bytes`, then that suffix: what keeps a changed name apart from every other.
pub fn with_hash_suffix(mut text: String, original: &str, max_bytes: usize) -> String {
    let suffix = format!("~{}", short_hash(original));
    let mut cut = max_bytes.saturating_sub(suffix.len()).min(text.len());
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    text.truncate(cut);
    text.push_str(&suffix);
    text
}

/// 12 lowercase hex digits (48 bits) of the SHA-256 of `text`: too many to search for a
/// second name that collides with a given one.
pub fn short_hash(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    digest[..HASH_BYTES]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

const HASH_BYTES: usize = 6;

/// Whether `text` ends like a name [`ModuleName::new`] suffixed (`~` + 12 hex digits).
pub fn has_hash_suffix(text: &str) -> bool {
    let bytes = text.as_bytes();
    let digits = 2 * HASH_BYTES;
    bytes.len() > digits
        && bytes[bytes.len() - digits - 1] == b'~'
        && bytes[bytes.len() - digits..]
            .iter()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
}

/// Characters that show as nothing or reorder how text displays (Unicode's default-ignorable
/// code points, the Hangul fillers, line and paragraph separators, bidirectional controls): a
/// name or a story holding them can show as something else (`core\u{fe0f}` as `core`).
pub fn is_invisible(c: char) -> bool {
    matches!(c,
        '\u{00ad}' | '\u{034f}' | '\u{061c}' | '\u{115f}' | '\u{1160}' | '\u{17b4}' | '\u{17b5}'
        | '\u{180b}'..='\u{180f}'
        | '\u{200b}'..='\u{200f}'
        | '\u{2028}'..='\u{202e}'
        | '\u{2060}'..='\u{206f}'
        | '\u{3164}'
        | '\u{fe00}'..='\u{fe0f}'
        | '\u{feff}'
        | '\u{ffa0}'
        | '\u{fff0}'..='\u{fffb}'
        | '\u{1bca0}'..='\u{1bca3}'
        | '\u{1d173}'..='\u{1d17a}'
        | '\u{e0000}'..='\u{e0fff}')
}

impl Deref for ModuleName {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for ModuleName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::borrow::Borrow<str> for ModuleName {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ModuleName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for ModuleName {
    fn from(raw: &str) -> Self {
        ModuleName::new(raw)
    }
}

impl From<String> for ModuleName {
    fn from(raw: String) -> Self {
        ModuleName::new(&raw)
    }
}

impl From<ModuleName> for String {
    fn from(name: ModuleName) -> Self {
        name.0
    }
}

impl PartialEq<str> for ModuleName {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for ModuleName {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl PartialEq<String> for ModuleName {
    fn eq(&self, other: &String) -> bool {
        &self.0 == other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_are_kept_as_written() {
        for name in [
            "core",
            "acme/platform",
            "(root)",
            "@acme/ui",
            "web app",
            "crates/api",
        ] {
            assert_eq!(ModuleName::new(name).as_str(), name);
            assert_eq!(ModuleName::configured(name).unwrap().as_str(), name);
        }
    }

    #[test]
    fn reserved_controls_and_long_names_are_renamed_and_stay_distinct() {
        let index = ModuleName::new("#index");
        assert!(index.starts_with("_index~"), "{index}");
        assert!(!ModuleName::new("##context").starts_with('#'));
        assert_ne!(ModuleName::new("#index"), ModuleName::new("_index"));
        let control = ModuleName::new("a\u{7}b\u{202e}c\n");
        assert!(control.starts_with("abc~"), "{control}");
        assert_ne!(control, ModuleName::new("abc"));
        assert_eq!(ModuleName::new("").as_str().len(), 14);
        assert_ne!(ModuleName::new("core\u{fe0f}").as_str(), "core");
        let invisible = ModuleName::new("core\u{200b}");
        assert_ne!(invisible.as_str(), "core", "a look-alike is renamed");
        assert!(invisible.starts_with("core~"), "{invisible}");
        assert_ne!(ModuleName::new(""), ModuleName::new("\u{1}"));
        let long_a = ModuleName::new(&"é".repeat(600));
        let long_b = ModuleName::new(&format!("{}x", "é".repeat(600)));
        assert!(long_a.len() <= MODULE_NAME_MAX_BYTES);
        assert_ne!(long_a, long_b, "cut names keep their originals apart");
        // A name posing with a suffix is suffixed again.
        let real = ModuleName::new("#x");
        let posing = ModuleName::new(real.as_str());
        assert_ne!(real, posing);
    }

    #[test]
    fn a_configured_name_must_be_valid_as_written() {
        assert_eq!(
            ModuleName::configured("#index"),
            Err(InvalidModuleName::Reserved)
        );
        assert_eq!(ModuleName::configured("  "), Err(InvalidModuleName::Empty));
        assert_eq!(
            ModuleName::configured("a\tb"),
            Err(InvalidModuleName::Control)
        );
        assert!(matches!(
            ModuleName::configured(&"x".repeat(101)),
            Err(InvalidModuleName::TooLong(101))
        ));
    }
}
