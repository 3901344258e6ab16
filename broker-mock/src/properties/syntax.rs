//! Java `.properties` syntax, as `java.util.Properties.load` reads it: `#` and
//! `!` comment lines, `key=value`, `key: value` and `key value`, a line ending in
//! an odd number of backslashes continued on the next (whose leading blanks are
//! skipped), and the escapes `\t`, `\n`, `\r`, `\f`, `\uXXXX` and `\<char>`.
//!
//! Deviations from Java: a key given twice is an error rather than the last one
//! winning, and a malformed `\u` escape is an error naming its line (Java throws
//! without one).

use super::error::PropertiesError;

/// One `key = value` entry and the line it starts on (1-based).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Property {
    /// The key, escapes resolved.
    pub key: String,
    /// The value, escapes resolved.
    pub value: String,
    /// The natural line the entry starts on.
    pub line: usize,
}

/// Most bytes of properties text read; larger files are refused (a broker's
/// configuration, PEM key material inline included, is far smaller).
pub const MAX_PROPERTIES_BYTES: usize = 4 * 1024 * 1024;

/// Parses properties text into its entries, in file order.
pub fn parse(text: &str) -> Result<Vec<Property>, PropertiesError> {
    if text.len() > MAX_PROPERTIES_BYTES {
        return Err(PropertiesError::TooLarge {
            bytes: text.len(),
            limit: MAX_PROPERTIES_BYTES,
        });
    }
    let lines: Vec<&str> = split_lines(text);
    let mut out: Vec<Property> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let start = i;
        let first = lines[i].trim_start_matches([' ', '\t', '\u{c}']);
        i += 1;
        if first.is_empty() || first.starts_with('#') || first.starts_with('!') {
            continue;
        }
        // Join continuation lines: a line ending in an odd number of backslashes
        // goes on with the next, minus its leading blanks.
        let mut logical = String::from(first);
        while ends_in_odd_backslashes(&logical) {
            logical.pop();
            match lines.get(i) {
                Some(next) => {
                    logical.push_str(next.trim_start_matches([' ', '\t', '\u{c}']));
                    i += 1;
                }
                None => break,
            }
        }
        let line = start + 1;
        let (key, value) = split_entry(&logical);
        let key = unescape(key, line)?;
        let value = unescape(value, line)?;
        if let Some(earlier) = out.iter().find(|p| p.key == key) {
            return Err(PropertiesError::Duplicate {
                key,
                line,
                first: earlier.line,
            });
        }
        out.push(Property { key, value, line });
    }
    Ok(out)
}

/// Natural lines: ended by `\n`, `\r` or `\r\n`.
fn split_lines(text: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        match rest.find(['\n', '\r']) {
            Some(at) => {
                lines.push(&rest[..at]);
                let skip = if rest[at..].starts_with("\r\n") { 2 } else { 1 };
                rest = &rest[at + skip..];
            }
            None => {
                lines.push(rest);
                rest = "";
            }
        }
    }
    lines
}

fn ends_in_odd_backslashes(s: &str) -> bool {
    s.bytes().rev().take_while(|b| *b == b'\\').count() % 2 == 1
}

/// Splits a logical line into its raw key and raw value: the key ends at the
/// first unescaped `=`, `:` or blank; then blanks, at most one `=` or `:`, and
/// blanks again are skipped.
fn split_entry(line: &str) -> (&str, &str) {
    let bytes = line.as_bytes();
    let mut end = bytes.len();
    let mut escaped = false;
    for (at, &b) in bytes.iter().enumerate() {
        if escaped {
            escaped = false;
            continue;
        }
        match b {
            b'\\' => escaped = true,
            b'=' | b':' | b' ' | b'\t' | 0x0c => {
                end = at;
                break;
            }
            _ => {}
        }
    }
    let key = &line[..end];
    let mut rest = line[end..].trim_start_matches([' ', '\t', '\u{c}']);
    if let Some(r) = rest.strip_prefix(['=', ':']) {
        rest = r.trim_start_matches([' ', '\t', '\u{c}']);
    }
    (key, rest)
}

/// Resolves escapes.
fn unescape(raw: &str, line: usize) -> Result<String, PropertiesError> {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\u{c}'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                let code = (hex.len() == 4)
                    .then(|| u32::from_str_radix(&hex, 16).ok())
                    .flatten()
                    .and_then(char::from_u32)
                    .ok_or_else(|| PropertiesError::Syntax {
                        line,
                        reason: format!("malformed \\u escape \\u{hex}"),
                    })?;
                out.push(code);
            }
            Some(other) => out.push(other),
            // A lone backslash at the very end is dropped, as Java does.
            None => {}
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(text: &str) -> Vec<(String, String, usize)> {
        parse(text)
            .unwrap()
            .into_iter()
            .map(|p| (p.key, p.value, p.line))
            .collect()
    }

    #[test]
    fn separators_comments_and_blank_lines() {
        let got = pairs(
            "# comment\n  ! another\n\na=1\nb : 2\nc 3\r\nd\te = x\nempty=\nbare\n  spaced  =  v  \n",
        );
        let want = [
            ("a", "1", 4),
            ("b", "2", 5),
            ("c", "3", 6),
            ("d", "e = x", 7),
            ("empty", "", 8),
            ("bare", "", 9),
            ("spaced", "v  ", 10),
        ];
        assert_eq!(got.len(), want.len());
        for ((k, v, l), (wk, wv, wl)) in got.iter().zip(want) {
            assert_eq!((k.as_str(), v.as_str(), *l), (wk, wv, wl));
        }
    }

    #[test]
    fn continuations_and_escapes() {
        let got = pairs(
            "list=one,\\\n     two,\\\n  three\nkey\\=with\\:seps=v\\tx\\u0041\\\\\nlast=end\\",
        );
        assert_eq!(got[0], ("list".into(), "one,two,three".into(), 1));
        assert_eq!(got[1], ("key=with:seps".into(), "v\txA\\".into(), 4));
        assert_eq!(got[2], ("last".into(), "end".into(), 5));
    }

    #[test]
    fn an_even_number_of_backslashes_does_not_continue() {
        let got = pairs("a=x\\\\\nb=y\n");
        assert_eq!(got[0].1, "x\\");
        assert_eq!(got[1].0, "b");
    }

    #[test]
    fn malformed_unicode_escapes_and_duplicates_are_errors() {
        let err = parse("ok=1\nbad=\\u12g4\n").unwrap_err();
        assert!(
            matches!(err, PropertiesError::Syntax { line: 2, .. }),
            "{err}"
        );
        let err = parse("bad=\\u12").unwrap_err();
        assert!(err.to_string().contains("line 1"), "{err}");
        let err = parse("a=1\n\na=2\n").unwrap_err();
        assert!(
            matches!(
                err,
                PropertiesError::Duplicate {
                    line: 3,
                    first: 1,
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn too_large_input_is_refused() {
        let big = "#".repeat(MAX_PROPERTIES_BYTES + 1);
        assert!(matches!(parse(&big), Err(PropertiesError::TooLarge { .. })));
    }
}
