//! File names of pages: one path component per owner, repository, module and archive label,
//! safe on every file system and distinct for distinct names.

/// One path component from a repo owner, repo name or module name: `/` and `\\` become `__`,
/// characters that are unsafe in file names (controls, `:*?"<>|`) become `_`, and a `.` that
/// starts the name or touches another `.` becomes `_`, so no component is `.` or `..`, hidden,
/// or contains `..`. An empty name becomes `_`.
///
/// Distinct names give distinct components. Plain names stay as they are (`src__api` for
/// `src/api`, `my_crate`); a name whose component could also be another's (one with `_` and a
/// `/`, one already holding `__`, one with any other character replaced, one ending like a
/// suffix) gets `~` and 12 hex digits of its SHA-256. A component is at most
/// [`MAX_SEGMENT_BYTES`] bytes, so a file name with its temp suffix fits in 255.
pub fn path_segment(name: &str) -> String {
    let out = legacy_path_segment(name);
    // Unambiguous: unchanged and without `__` (which only a `/` makes), or changed by `/` alone
    // in a name without `_` (so each `__` reads back as one `/`).
    let plain = if name.contains('/') {
        out == name.replace('/', "__") && !name.contains('_')
    } else {
        out == name && !out.contains("__")
    };
    if !plain || out.len() > MAX_SEGMENT_BYTES || chronicle_domain::has_hash_suffix(&out) {
        chronicle_domain::with_hash_suffix(out, name, MAX_SEGMENT_BYTES)
    } else {
        out
    }
}

/// The component an earlier version gave (the replacements alone, never a suffix): its file is
/// deleted when a page is written under a new name, so an upgrade leaves no stale copy.
pub fn legacy_path_segment(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    let mut out = String::with_capacity(name.len());
    for (i, &c) in chars.iter().enumerate() {
        let dot_run = i == 0 || chars[i - 1] == '.' || chars.get(i + 1) == Some(&'.');
        match c {
            '/' | '\\' => out.push_str("__"),
            ':' | '*' | '?' | '"' | '<' | '>' | '|' => out.push('_'),
            '.' if dot_run => out.push('_'),
            c if c.is_control() => out.push('_'),
            c => out.push(c),
        }
    }
    if out.is_empty() {
        out.push('_');
    }
    out
}

/// Whether some name's [`path_segment`] is `component`: a name needing no suffix is either
/// unchanged, or its `/`s written as `__` (and then it had no `_`, so the way back is unique).
pub fn could_be_current(component: &str) -> bool {
    path_segment(component) == component || path_segment(&component.replace("__", "/")) == component
}

/// The longest path component [`path_segment`] gives, in bytes.
pub const MAX_SEGMENT_BYTES: usize = 200;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_segments_are_safe() {
        let changed = |name: &str, prefix: &str| {
            let segment = path_segment(name);
            assert!(
                segment.starts_with(&format!("{prefix}~")) && segment.len() == prefix.len() + 13,
                "{name:?} → {segment:?}"
            );
        };
        assert_eq!(path_segment("src/api"), "src__api");
        assert_eq!(
            path_segment("Codertocat/Hello-World"),
            "Codertocat__Hello-World"
        );
        assert_eq!(path_segment("(root)"), "(root)");
        assert_eq!(path_segment("my_crate"), "my_crate");
        changed("a__b", "a__b");
        changed("acme/my_team", "acme__my_team");
        changed("a\\b", "a__b");
        changed("../x", "____x");
        changed(".github", "_github");
        changed("", "_");
        changed("a:b*c", "a_b_c");
        // Distinct names, distinct files.
        let names = ["a/b", "a__b", "a\\b", "a_/b", "a/_b", "a___b", "a_b", "a:b"];
        let segments: std::collections::BTreeSet<String> =
            names.iter().map(|n| path_segment(n)).collect();
        assert_eq!(segments.len(), names.len(), "{segments:?}");
        let posing = path_segment("a:b");
        assert_ne!(
            path_segment(&posing),
            posing,
            "a name posing as a changed one"
        );
        let long = "é/".repeat(200);
        assert!(path_segment(&long).len() <= MAX_SEGMENT_BYTES);
        assert_ne!(path_segment(&long), path_segment(&format!("{long}x")));
    }
}
