//! How `baton consume` prints a record: the raw value, a JSON object, or a
//! template with `{field}` placeholders. Pure functions over bytes.

use baton_kafka::ConsumerRecord;

use crate::error::CliError;

/// One piece of a template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// Text printed as it is.
    Text(Vec<u8>),
    /// The record's topic.
    Topic,
    /// The record's partition.
    Partition,
    /// The record's offset.
    Offset,
    /// The record's timestamp.
    Timestamp,
    /// The record's key.
    Key,
    /// The record's value.
    Value,
    /// The record's headers.
    Headers,
}

/// An output format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Format {
    /// The value, then a newline.
    Raw,
    /// One JSON object per line.
    Json,
    /// A template, then a newline.
    Template(Vec<Piece>),
}

impl Format {
    /// `raw`, `json`, or a template with at least one `{field}`.
    pub fn parse(s: &str) -> Result<Format, CliError> {
        match s {
            "raw" => Ok(Format::Raw),
            "json" => Ok(Format::Json),
            _ => parse_template(s).map(Format::Template),
        }
    }

    /// Appends `record` in this format to `out`.
    pub fn write(&self, record: &ConsumerRecord, out: &mut Vec<u8>) {
        match self {
            Format::Raw => {
                out.extend_from_slice(record.value.as_deref().unwrap_or_default());
            }
            Format::Json => json(record, out),
            Format::Template(pieces) => {
                for piece in pieces {
                    template_piece(piece, record, out);
                }
            }
        }
        out.push(b'\n');
    }
}

fn parse_template(s: &str) -> Result<Vec<Piece>, CliError> {
    let bad = |why: String| {
        CliError::usage(format!("--format {s:?}: {why}"))
            .hint("use raw, json, or a template such as '{offset} {key}={value}'")
    };
    let mut pieces = Vec::new();
    let mut text = Vec::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('n') => text.push(b'\n'),
                Some('t') => text.push(b'\t'),
                Some('\\') => text.push(b'\\'),
                Some('{') => text.push(b'{'),
                other => return Err(bad(format!("unknown escape \\{}", other.unwrap_or(' ')))),
            },
            '{' => {
                let name: String = chars.by_ref().take_while(|c| *c != '}').collect();
                let piece = match name.as_str() {
                    "topic" => Piece::Topic,
                    "partition" => Piece::Partition,
                    "offset" => Piece::Offset,
                    "timestamp" => Piece::Timestamp,
                    "key" => Piece::Key,
                    "value" => Piece::Value,
                    "headers" => Piece::Headers,
                    _ => return Err(bad(format!("unknown field {{{name}}}"))),
                };
                if !text.is_empty() {
                    pieces.push(Piece::Text(std::mem::take(&mut text)));
                }
                pieces.push(piece);
            }
            c => {
                let mut buf = [0; 4];
                text.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
    if !text.is_empty() {
        pieces.push(Piece::Text(text));
    }
    if !pieces.iter().any(|p| !matches!(p, Piece::Text(_))) {
        return Err(bad("no {field} in it".into()));
    }
    Ok(pieces)
}

fn template_piece(piece: &Piece, r: &ConsumerRecord, out: &mut Vec<u8>) {
    match piece {
        Piece::Text(t) => out.extend_from_slice(t),
        Piece::Topic => out.extend_from_slice(r.topic.as_bytes()),
        Piece::Partition => out.extend_from_slice(r.partition.to_string().as_bytes()),
        Piece::Offset => out.extend_from_slice(r.offset.to_string().as_bytes()),
        Piece::Timestamp => out.extend_from_slice(r.timestamp.to_string().as_bytes()),
        Piece::Key => out.extend_from_slice(r.key.as_deref().unwrap_or_default()),
        Piece::Value => out.extend_from_slice(r.value.as_deref().unwrap_or_default()),
        Piece::Headers => {
            for (i, h) in r.headers.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(h.key.as_bytes());
                out.push(b'=');
                out.extend_from_slice(h.value.as_deref().unwrap_or_default());
            }
        }
    }
}

/// `{"topic":..,"partition":..,"offset":..,"timestamp":..,"key":..,"value":..,
/// "headers":[[k,v],..]}`.
fn json(r: &ConsumerRecord, out: &mut Vec<u8>) {
    out.extend_from_slice(b"{\"topic\":");
    json_string(r.topic.as_bytes(), out);
    out.extend_from_slice(
        format!(
            ",\"partition\":{},\"offset\":{},\"timestamp\":{},\"key\":",
            r.partition, r.offset, r.timestamp
        )
        .as_bytes(),
    );
    json_bytes(r.key.as_deref(), out);
    out.extend_from_slice(b",\"value\":");
    json_bytes(r.value.as_deref(), out);
    out.extend_from_slice(b",\"headers\":[");
    for (i, h) in r.headers.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.push(b'[');
        json_string(h.key.as_bytes(), out);
        out.push(b',');
        json_bytes(h.value.as_deref(), out);
        out.push(b']');
    }
    out.extend_from_slice(b"]}");
}

fn json_bytes(b: Option<&[u8]>, out: &mut Vec<u8>) {
    match b {
        Some(b) => json_string(b, out),
        None => out.extend_from_slice(b"null"),
    }
}

/// A JSON string of `b`, read as UTF-8 (invalid sequences become U+FFFD).
fn json_string(b: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for c in String::from_utf8_lossy(b).chars() {
        match c {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            '\n' => out.extend_from_slice(b"\\n"),
            '\r' => out.extend_from_slice(b"\\r"),
            '\t' => out.extend_from_slice(b"\\t"),
            c if (c as u32) < 0x20 => {
                out.extend_from_slice(format!("\\u{:04x}", c as u32).as_bytes())
            }
            c => {
                let mut buf = [0; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_parse_their_fields_and_escapes() {
        let Format::Template(p) = Format::parse("{partition}:{offset}\\t{key}").unwrap() else {
            panic!("a template");
        };
        assert_eq!(
            p,
            vec![
                Piece::Partition,
                Piece::Text(b":".to_vec()),
                Piece::Offset,
                Piece::Text(b"\t".to_vec()),
                Piece::Key
            ]
        );
        assert_eq!(Format::parse("raw").unwrap(), Format::Raw);
        for bad in ["plain", "{nope}", "\\x{key}"] {
            assert!(Format::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn json_strings_escape_controls_and_quotes() {
        let mut out = Vec::new();
        json_string(b"a\"b\\c\n\x01\xff", &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "\"a\\\"b\\\\c\\n\\u0001\u{fffd}\""
        );
    }
}
