//! A small, bounded JSON reader for the two objects of an unsecured JWS (its
//! header and its claims). Only what RFC 8259 allows is accepted; nesting deeper
//! than [`MAX_DEPTH`] is refused, and nothing is allocated beyond what the bytes
//! present justify (each string at most its encoded length, each array or object
//! one slot per element read).

/// Deepest nesting of arrays and objects accepted.
pub(crate) const MAX_DEPTH: usize = 16;

/// One JSON value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Json {
    Null,
    Bool(bool),
    Number(f64),
    String(String),
    Array(Vec<Json>),
    /// Members in the order written; a repeated name keeps its last value on
    /// lookup ([`Json::get`]), as Kafka's reader does.
    Object(Vec<(String, Json)>),
}

impl Json {
    /// The value of member `name` of an object (the last one if repeated).
    pub(crate) fn get(&self, name: &str) -> Option<&Json> {
        match self {
            Json::Object(members) => members
                .iter()
                .rev()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v),
            _ => None,
        }
    }
}

/// Why a text is not the JSON expected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct JsonError(pub(crate) &'static str);

/// Parses `text` as one JSON value, with only whitespace around it.
pub(crate) fn parse(text: &[u8]) -> Result<Json, JsonError> {
    let mut p = Parser { text, at: 0 };
    let value = p.value(0)?;
    p.skip_ws();
    if p.at != text.len() {
        return Err(JsonError("trailing bytes after the JSON value"));
    }
    Ok(value)
}

/// Writes `s` as a JSON string literal (quotes included) onto `out`.
pub(crate) fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

struct Parser<'a> {
    text: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn skip_ws(&mut self) {
        while matches!(self.text.get(self.at), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.text.get(self.at).copied()
    }

    fn expect(&mut self, byte: u8, what: &'static str) -> Result<(), JsonError> {
        if self.peek() == Some(byte) {
            self.at += 1;
            Ok(())
        } else {
            Err(JsonError(what))
        }
    }

    fn literal(&mut self, word: &'static [u8], value: Json) -> Result<Json, JsonError> {
        if self.text[self.at..].starts_with(word) {
            self.at += word.len();
            Ok(value)
        } else {
            Err(JsonError("unknown literal"))
        }
    }

    fn value(&mut self, depth: usize) -> Result<Json, JsonError> {
        self.skip_ws();
        match self.peek() {
            None => Err(JsonError("unexpected end of JSON")),
            Some(b'{') => self.object(depth + 1),
            Some(b'[') => self.array(depth + 1),
            Some(b'"') => self.string().map(Json::String),
            Some(b't') => self.literal(b"true", Json::Bool(true)),
            Some(b'f') => self.literal(b"false", Json::Bool(false)),
            Some(b'n') => self.literal(b"null", Json::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => Err(JsonError("unexpected character in JSON")),
        }
    }

    fn object(&mut self, depth: usize) -> Result<Json, JsonError> {
        if depth > MAX_DEPTH {
            return Err(JsonError("JSON nested too deeply"));
        }
        self.at += 1;
        let mut members = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.at += 1;
            return Ok(Json::Object(members));
        }
        loop {
            self.skip_ws();
            if self.peek() != Some(b'"') {
                return Err(JsonError("JSON object member name is not a string"));
            }
            let name = self.string()?;
            self.skip_ws();
            self.expect(b':', "missing ':' in JSON object")?;
            let value = self.value(depth)?;
            members.push((name, value));
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b'}') => {
                    self.at += 1;
                    return Ok(Json::Object(members));
                }
                _ => return Err(JsonError("missing ',' or '}' in JSON object")),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<Json, JsonError> {
        if depth > MAX_DEPTH {
            return Err(JsonError("JSON nested too deeply"));
        }
        self.at += 1;
        let mut items = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.at += 1;
            return Ok(Json::Array(items));
        }
        loop {
            items.push(self.value(depth)?);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b']') => {
                    self.at += 1;
                    return Ok(Json::Array(items));
                }
                _ => return Err(JsonError("missing ',' or ']' in JSON array")),
            }
        }
    }

    fn number(&mut self) -> Result<Json, JsonError> {
        let start = self.at;
        if self.peek() == Some(b'-') {
            self.at += 1;
        }
        match self.peek() {
            Some(b'0') => self.at += 1,
            Some(b'1'..=b'9') => self.digits(),
            _ => return Err(JsonError("malformed JSON number")),
        }
        if self.peek() == Some(b'.') {
            self.at += 1;
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(JsonError("malformed JSON number"));
            }
            self.digits();
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.at += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.at += 1;
            }
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(JsonError("malformed JSON number"));
            }
            self.digits();
        }
        // The slice is ASCII digits, signs, '.' and 'e' only.
        let text = std::str::from_utf8(&self.text[start..self.at])
            .map_err(|_| JsonError("malformed JSON number"))?;
        text.parse::<f64>()
            .map(Json::Number)
            .map_err(|_| JsonError("malformed JSON number"))
    }

    fn digits(&mut self) {
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.at += 1;
        }
    }

    fn string(&mut self) -> Result<String, JsonError> {
        self.at += 1; // the opening quote
        let mut out = Vec::new();
        loop {
            let Some(b) = self.peek() else {
                return Err(JsonError("unterminated JSON string"));
            };
            self.at += 1;
            match b {
                b'"' => break,
                b'\\' => {
                    let Some(e) = self.peek() else {
                        return Err(JsonError("unterminated JSON string"));
                    };
                    self.at += 1;
                    let c = match e {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => self.unicode_escape()?,
                        _ => return Err(JsonError("unknown escape in JSON string")),
                    };
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                }
                0..=0x1f => return Err(JsonError("control character in JSON string")),
                b => out.push(b),
            }
        }
        String::from_utf8(out).map_err(|_| JsonError("JSON string is not UTF-8"))
    }

    /// The character of a `\uXXXX` escape (the `\u` already read), a surrogate
    /// pair taking two escapes.
    fn unicode_escape(&mut self) -> Result<char, JsonError> {
        let first = self.hex4()?;
        let code = if (0xD800..0xDC00).contains(&first) {
            if !self.text[self.at..].starts_with(b"\\u") {
                return Err(JsonError("unpaired surrogate in JSON string"));
            }
            self.at += 2;
            let second = self.hex4()?;
            if !(0xDC00..0xE000).contains(&second) {
                return Err(JsonError("unpaired surrogate in JSON string"));
            }
            0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)
        } else {
            first
        };
        char::from_u32(code).ok_or(JsonError("unpaired surrogate in JSON string"))
    }

    fn hex4(&mut self) -> Result<u32, JsonError> {
        let digits = self
            .text
            .get(self.at..self.at + 4)
            .ok_or(JsonError("short \\u escape in JSON string"))?;
        let mut v = 0u32;
        for d in digits {
            let n = (*d as char)
                .to_digit(16)
                .ok_or(JsonError("bad \\u escape in JSON string"))?;
            v = v * 16 + n;
        }
        self.at += 4;
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_values_a_jws_holds() {
        let v = parse(br#" {"alg":"none","exp":1.7e9,"iat":-2,"scope":["a","b\u00e9"],"x":{"y":[true,false,null]},"s":"q\"\\\/\n\ud83d\ude00"} "#).unwrap();
        assert_eq!(v.get("alg"), Some(&Json::String("none".into())));
        assert_eq!(v.get("exp"), Some(&Json::Number(1.7e9)));
        assert_eq!(v.get("iat"), Some(&Json::Number(-2.0)));
        assert_eq!(
            v.get("scope"),
            Some(&Json::Array(vec![
                Json::String("a".into()),
                Json::String("bé".into())
            ]))
        );
        assert_eq!(v.get("s"), Some(&Json::String("q\"\\/\n😀".into())));
        assert!(v.get("x").unwrap().get("y").is_some());
        assert_eq!(v.get("missing"), None);
    }

    #[test]
    fn repeated_names_keep_the_last_value() {
        let v = parse(br#"{"a":1,"a":2}"#).unwrap();
        assert_eq!(v.get("a"), Some(&Json::Number(2.0)));
    }

    #[test]
    fn malformed_text_is_an_error_not_a_panic() {
        for bad in [
            &b""[..],
            b"{",
            b"{\"a\"}",
            b"{\"a\":}",
            b"{\"a\":1,}",
            b"[1,]",
            b"{a:1}",
            b"\"abc",
            b"\"\\x\"",
            b"\"\\u12\"",
            b"\"\\ud800\"",
            b"\"\x01\"",
            b"01",
            b"1.",
            b"1e",
            b"-",
            b"tru",
            b"{} {}",
            b"\"\xff\"",
        ] {
            assert!(parse(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn nesting_is_bounded() {
        let deep = "[".repeat(MAX_DEPTH + 1) + &"]".repeat(MAX_DEPTH + 1);
        assert!(parse(deep.as_bytes()).is_err());
        let ok = "[".repeat(MAX_DEPTH) + &"]".repeat(MAX_DEPTH);
        assert!(parse(ok.as_bytes()).is_ok());
        // A hostile depth far past the limit stops early, without recursing on.
        let hostile = "[".repeat(100_000);
        assert!(parse(hostile.as_bytes()).is_err());
    }

    #[test]
    fn written_strings_read_back() {
        let mut out = String::new();
        write_string(&mut out, "a\"b\\c\nd\u{1}é");
        assert_eq!(
            parse(out.as_bytes()).unwrap(),
            Json::String("a\"b\\c\nd\u{1}é".into())
        );
    }
}
