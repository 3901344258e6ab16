//! Support for `interop_go.rs`: running the Go program in
//! `tests/interop/go/` (built by `baton_testkit::tools::go`), the seeded records it produces and the check
//! of what it consumed.

pub mod check;
pub mod process;
pub mod records;

pub use baton_testkit::seed;
pub use baton_testkit::tools::go::binary;

/// A scratch directory for one test's record files, removed on drop.
pub fn scratch() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("baton-interop-go-")
        .tempdir()
        .expect("temp dir")
}

/// The `RESULT {json}` line of a run, with just enough JSON reading for the
/// flat objects the program prints.
#[derive(Debug, Clone)]
pub struct GoResult {
    /// The JSON object.
    pub json: String,
}

impl GoResult {
    /// The raw text of `key`'s value.
    pub fn raw(&self, key: &str) -> Option<&str> {
        let needle = format!("\"{key}\":");
        let start = self.json.find(&needle)? + needle.len();
        let rest = &self.json[start..];
        let end = if rest.starts_with('[') {
            rest.find(']')? + 1
        } else if let Some(s) = rest.strip_prefix('"') {
            let mut escaped = false;
            let close = s.char_indices().find(|&(_, c)| {
                let hit = c == '"' && !escaped;
                escaped = c == '\\' && !escaped;
                hit
            })?;
            close.0 + 2
        } else {
            rest.find([',', '}']).unwrap_or(rest.len())
        };
        Some(&rest[..end])
    }

    /// Whether `key` is `true`.
    pub fn bool(&self, key: &str) -> bool {
        self.raw(key) == Some("true")
    }

    /// `key` as an integer.
    pub fn int(&self, key: &str) -> Option<i64> {
        self.raw(key)?.trim().parse().ok()
    }
}
