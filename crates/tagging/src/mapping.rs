//! A module's mapping form in a modules config: `{paths, description, notes, ignore}`.

use serde_yaml::Value;

use crate::{kind, ModuleCtx, TaggingError};

/// A module's mapping form, split.
pub(crate) struct Described {
    pub paths: Value,
    pub description: Option<String>,
    pub notes: Option<String>,
    pub ignore: Option<Value>,
}

/// The most of a module's `notes:` kept, in characters: a few paragraphs, not a manual.
pub const NOTES_MAX_CHARS: usize = 2_000;

impl ModuleCtx<'_> {
    /// The mapping form `{paths, description, notes, ignore}` split; any other value is the
    /// paths themselves.
    pub(crate) fn described(&self, value: Value) -> Result<Described, TaggingError> {
        let Value::Mapping(mapping) = value else {
            return Ok(Described {
                paths: value,
                description: None,
                notes: None,
                ignore: None,
            });
        };
        let mut paths = None;
        let mut described = Described {
            paths: Value::Null,
            description: None,
            notes: None,
            ignore: None,
        };
        let text = |what: &str, v: Value| match v {
            Value::String(s) if !s.trim().is_empty() => Ok(s.trim().to_string()),
            other => Err(self.err(format!(
                "{what} is {}, expected a non-empty string",
                kind(&other)
            ))),
        };
        for (key, v) in mapping {
            match key.as_str() {
                Some("paths") => paths = Some(v),
                Some("description") => described.description = Some(text("description", v)?),
                Some("notes") => {
                    let notes = text("notes", v)?;
                    if notes.chars().count() > NOTES_MAX_CHARS {
                        return Err(self.err(format!(
                            "notes run to {} characters, at most {NOTES_MAX_CHARS}",
                            notes.chars().count()
                        )));
                    }
                    described.notes = Some(notes);
                }
                Some("ignore") => described.ignore = Some(v),
                _ => {
                    return Err(self.err(format!(
                        "unknown key {}, expected paths, description, notes and ignore (or a list of globs)",
                        serde_yaml::to_string(&key).unwrap_or_default().trim_end()
                    )))
                }
            }
        }
        described.paths = paths.ok_or_else(|| {
            self.err("a module given as a mapping needs paths (its globs)".into())
        })?;
        Ok(described)
    }
}
