//! A bounded regular-expression matcher for `SubscribedTopicRegex`
//! (ConsumerGroupHeartbeat v1, KIP-848).
//!
//! Kafka compiles the subscription with RE2/J and selects the topics whose whole
//! name matches (`Matcher.matches()`). This is the RE2 subset topic names need,
//! with RE2's guarantee: no backtracking, matching is linear in the name for a
//! given pattern (a Pike VM over the compiled program, without captures).
//!
//! Supported: literals, `.`, classes `[a-z0-9_]` and `[^...]`, the escapes `\d \D
//! \w \W \s \S` and any escaped punctuation, groups `(...)` and `(?:...)`,
//! alternation `|`, the quantifiers `* + ?` and `{n}`, `{n,}`, `{n,m}` (greedy or
//! lazy: the same for a whole-name match), and `^`/`$` (the match is anchored at
//! both ends anyway). Anything else (backreferences, lookaround, flags) is an
//! error, as RE2 refuses most of it.
//!
//! Bounds: a pattern longer than [`MAX_PATTERN_LEN`] bytes or compiling to more
//! than [`MAX_PROGRAM`] instructions (repetition counts multiply) is refused, so
//! one heartbeat cannot buy more than that.

use std::fmt;

/// Longest pattern accepted, in bytes.
pub const MAX_PATTERN_LEN: usize = 1024;
/// Most instructions a compiled pattern may have.
pub const MAX_PROGRAM: usize = 8192;
/// Largest repetition count in `{n,m}` (RE2's limit).
const MAX_REPEAT: u32 = 1000;
/// Deepest group nesting.
const MAX_DEPTH: usize = 64;

/// Why a pattern was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegexError(pub String);

impl fmt::Display for RegexError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RegexError {}

fn err<T>(msg: impl Into<String>) -> Result<T, RegexError> {
    Err(RegexError(msg.into()))
}

/// A set of characters: ranges, possibly negated.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Class {
    ranges: Vec<(char, char)>,
    negated: bool,
}

impl Class {
    fn one(c: char) -> Class {
        Class {
            ranges: vec![(c, c)],
            negated: false,
        }
    }

    fn matches(&self, c: char) -> bool {
        self.ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi) != self.negated
    }
}

#[derive(Debug, Clone)]
enum Node {
    Empty,
    /// An index into the parser's class table (shared by repetitions).
    Set(usize),
    Concat(Vec<Node>),
    Alt(Vec<Node>),
    Repeat(Box<Node>, u32, Option<u32>),
}

struct Parser<'a> {
    chars: std::iter::Peekable<std::str::Chars<'a>>,
    depth: usize,
    classes: Vec<Class>,
}

fn digit() -> Vec<(char, char)> {
    vec![('0', '9')]
}
fn word() -> Vec<(char, char)> {
    vec![('0', '9'), ('A', 'Z'), ('_', '_'), ('a', 'z')]
}
fn space() -> Vec<(char, char)> {
    vec![('\t', '\n'), ('\x0c', '\r'), (' ', ' ')]
}

impl Parser<'_> {
    fn set(&mut self, c: Class) -> Node {
        self.classes.push(c);
        Node::Set(self.classes.len() - 1)
    }

    fn alt(&mut self) -> Result<Node, RegexError> {
        let mut branches = vec![self.concat()?];
        while self.chars.peek() == Some(&'|') {
            self.chars.next();
            branches.push(self.concat()?);
        }
        Ok(if branches.len() == 1 {
            branches.pop().unwrap_or(Node::Empty)
        } else {
            Node::Alt(branches)
        })
    }

    fn concat(&mut self) -> Result<Node, RegexError> {
        let mut items = Vec::new();
        while let Some(&c) = self.chars.peek() {
            if c == '|' || c == ')' {
                break;
            }
            let atom = self.atom()?;
            let atom = self.quantified(atom)?;
            items.push(atom);
        }
        Ok(Node::Concat(items))
    }

    fn quantified(&mut self, atom: Node) -> Result<Node, RegexError> {
        let mut node = atom;
        loop {
            let (min, max) = match self.chars.peek() {
                Some('*') => (0, None),
                Some('+') => (1, None),
                Some('?') => (0, Some(1)),
                Some('{') => {
                    self.chars.next();
                    let (min, max) = self.counts()?;
                    node = Node::Repeat(Box::new(node), min, max);
                    self.lazy_suffix();
                    if matches!(self.chars.peek(), Some('*' | '+' | '?' | '{')) {
                        return err("bad repetition operator");
                    }
                    return Ok(node);
                }
                _ => return Ok(node),
            };
            self.chars.next();
            node = Node::Repeat(Box::new(node), min, max);
            self.lazy_suffix();
            if matches!(self.chars.peek(), Some('*' | '+' | '?' | '{')) {
                return err("bad repetition operator");
            }
        }
    }

    fn lazy_suffix(&mut self) {
        if self.chars.peek() == Some(&'?') {
            self.chars.next();
        }
    }

    fn number(&mut self) -> Result<Option<u32>, RegexError> {
        let mut n: Option<u32> = None;
        while let Some(d) = self.chars.peek().and_then(|c| c.to_digit(10)) {
            self.chars.next();
            let v = n.unwrap_or(0).saturating_mul(10).saturating_add(d);
            if v > MAX_REPEAT {
                return err("bad repetition operator: count over 1000");
            }
            n = Some(v);
        }
        Ok(n)
    }

    fn counts(&mut self) -> Result<(u32, Option<u32>), RegexError> {
        let Some(min) = self.number()? else {
            return err("missing repetition count");
        };
        let max = match self.chars.next() {
            Some('}') => Some(min),
            Some(',') => {
                let max = self.number()?;
                if self.chars.next() != Some('}') {
                    return err("missing closing }");
                }
                max
            }
            _ => return err("missing closing }"),
        };
        if max.is_some_and(|m| m < min) {
            return err("bad repetition operator: max below min");
        }
        Ok((min, max))
    }

    fn atom(&mut self) -> Result<Node, RegexError> {
        let Some(c) = self.chars.next() else {
            return err("unexpected end of pattern");
        };
        match c {
            '(' => {
                self.depth += 1;
                if self.depth > MAX_DEPTH {
                    return err("groups nested too deeply");
                }
                if self.chars.peek() == Some(&'?') {
                    self.chars.next();
                    if self.chars.next() != Some(':') {
                        return err("unsupported group flags");
                    }
                }
                let inner = self.alt()?;
                if self.chars.next() != Some(')') {
                    return err("missing closing )");
                }
                self.depth -= 1;
                Ok(inner)
            }
            '*' | '+' | '?' | '{' => err("missing argument to repetition operator"),
            '^' | '$' => Ok(Node::Empty),
            '.' => Ok(self.set(Class {
                ranges: vec![('\n', '\n')],
                negated: true,
            })),
            '[' => self.class(),
            '\\' => {
                let c = self.escape()?;
                Ok(self.set(c))
            }
            c => Ok(self.set(Class::one(c))),
        }
    }

    fn escape(&mut self) -> Result<Class, RegexError> {
        let Some(c) = self.chars.next() else {
            return err("trailing backslash");
        };
        let (ranges, negated) = match c {
            'd' => (digit(), false),
            'D' => (digit(), true),
            'w' => (word(), false),
            'W' => (word(), true),
            's' => (space(), false),
            'S' => (space(), true),
            'n' => (vec![('\n', '\n')], false),
            't' => (vec![('\t', '\t')], false),
            c if c.is_ascii_punctuation() => (vec![(c, c)], false),
            c => return err(format!("invalid escape sequence \\{c}")),
        };
        Ok(Class { ranges, negated })
    }

    fn class(&mut self) -> Result<Node, RegexError> {
        let mut negated = false;
        if self.chars.peek() == Some(&'^') {
            self.chars.next();
            negated = true;
        }
        let mut ranges = Vec::new();
        let mut first = true;
        loop {
            let Some(c) = self.chars.next() else {
                return err("missing closing ]");
            };
            if c == ']' && !first {
                break;
            }
            first = false;
            let lo = if c == '\\' {
                let e = self.escape()?;
                if e.negated || e.ranges.len() != 1 || e.ranges[0].0 != e.ranges[0].1 {
                    if e.negated {
                        return err("negated escape in a class is not supported");
                    }
                    ranges.extend(e.ranges);
                    continue;
                }
                e.ranges[0].0
            } else {
                c
            };
            let mut lookahead = self.chars.clone();
            if lookahead.next() == Some('-') && lookahead.peek().is_some_and(|&n| n != ']') {
                self.chars.next();
                let hi = match self.chars.next() {
                    Some('\\') => {
                        let e = self.escape()?;
                        if e.negated || e.ranges.len() != 1 {
                            return err("bad character class range");
                        }
                        e.ranges[0].0
                    }
                    Some(h) => h,
                    None => return err("missing closing ]"),
                };
                if hi < lo {
                    return err("bad character class range");
                }
                ranges.push((lo, hi));
            } else {
                ranges.push((lo, lo));
            }
        }
        Ok(self.set(Class { ranges, negated }))
    }
}

#[derive(Debug, Clone, Copy)]
enum Inst {
    Set(usize),
    Split(usize, usize),
    Jmp(usize),
    Match,
}

struct Compiler {
    prog: Vec<Inst>,
}

impl Compiler {
    fn push(&mut self, i: Inst) -> Result<usize, RegexError> {
        if self.prog.len() >= MAX_PROGRAM {
            return err("pattern too large");
        }
        self.prog.push(i);
        Ok(self.prog.len() - 1)
    }

    fn node(&mut self, n: &Node) -> Result<(), RegexError> {
        match n {
            Node::Empty => Ok(()),
            Node::Set(c) => self.push(Inst::Set(*c)).map(drop),
            Node::Concat(items) => items.iter().try_for_each(|i| self.node(i)),
            Node::Alt(branches) => {
                let mut jumps = Vec::new();
                for (i, b) in branches.iter().enumerate() {
                    if i + 1 < branches.len() {
                        let split = self.push(Inst::Split(0, 0))?;
                        self.node(b)?;
                        jumps.push(self.push(Inst::Jmp(0))?);
                        let next = self.prog.len();
                        self.prog[split] = Inst::Split(split + 1, next);
                    } else {
                        self.node(b)?;
                    }
                }
                let end = self.prog.len();
                for j in jumps {
                    self.prog[j] = Inst::Jmp(end);
                }
                Ok(())
            }
            Node::Repeat(inner, min, max) => {
                for _ in 0..*min {
                    self.node(inner)?;
                }
                match max {
                    None => {
                        let split = self.push(Inst::Split(0, 0))?;
                        self.node(inner)?;
                        self.push(Inst::Jmp(split))?;
                        let end = self.prog.len();
                        self.prog[split] = Inst::Split(split + 1, end);
                    }
                    Some(max) => {
                        let mut splits = Vec::new();
                        for _ in *min..*max {
                            splits.push(self.push(Inst::Split(0, 0))?);
                            self.node(inner)?;
                        }
                        let end = self.prog.len();
                        for s in splits {
                            self.prog[s] = Inst::Split(s + 1, end);
                        }
                    }
                }
                Ok(())
            }
        }
    }
}

/// A compiled pattern that matches whole topic names.
#[derive(Debug, Clone)]
pub struct TopicRegex {
    prog: Vec<Inst>,
    classes: Vec<Class>,
}

impl TopicRegex {
    /// Compiles `pattern`; an error names what is wrong with it.
    pub fn new(pattern: &str) -> Result<TopicRegex, RegexError> {
        if pattern.len() > MAX_PATTERN_LEN {
            return err(format!("pattern longer than {MAX_PATTERN_LEN} bytes"));
        }
        let mut p = Parser {
            chars: pattern.chars().peekable(),
            depth: 0,
            classes: Vec::new(),
        };
        let ast = p.alt()?;
        if p.chars.next().is_some() {
            return err("unexpected )");
        }
        let mut c = Compiler { prog: Vec::new() };
        c.node(&ast)?;
        c.push(Inst::Match)?;
        Ok(TopicRegex {
            prog: c.prog,
            classes: p.classes,
        })
    }

    /// Whether the whole of `name` matches.
    pub fn is_match(&self, name: &str) -> bool {
        let n = self.prog.len();
        let mut current = Vec::with_capacity(n);
        let mut next = Vec::with_capacity(n);
        let mut seen = vec![false; n];
        self.add(&mut current, &mut seen, 0);
        for c in name.chars() {
            seen.iter_mut().for_each(|s| *s = false);
            next.clear();
            for &pc in &current {
                if let Inst::Set(class) = self.prog[pc] {
                    if self.classes[class].matches(c) {
                        self.add(&mut next, &mut seen, pc + 1);
                    }
                }
            }
            std::mem::swap(&mut current, &mut next);
            if current.is_empty() {
                return false;
            }
        }
        current
            .iter()
            .any(|&pc| matches!(self.prog[pc], Inst::Match))
    }

    /// Adds the thread at `pc` and everything it reaches without consuming input
    /// (an explicit stack: no recursion on the pattern's size).
    fn add(&self, list: &mut Vec<usize>, seen: &mut [bool], pc: usize) {
        let mut stack = vec![pc];
        while let Some(pc) = stack.pop() {
            if seen[pc] {
                continue;
            }
            seen[pc] = true;
            match self.prog[pc] {
                Inst::Jmp(t) => stack.push(t),
                Inst::Split(a, b) => {
                    stack.push(b);
                    stack.push(a);
                }
                Inst::Set(_) | Inst::Match => list.push(pc),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, s: &str) -> bool {
        TopicRegex::new(p).unwrap().is_match(s)
    }

    #[test]
    fn whole_name_matches() {
        assert!(m("orders", "orders"));
        assert!(!m("orders", "orders-eu"));
        assert!(m("orders.*", "orders-eu"));
        assert!(m("^orders-(eu|us)$", "orders-us"));
        assert!(!m("orders-(eu|us)", "orders-asia"));
        assert!(m("t[0-9]+", "t42"));
        assert!(!m("t[0-9]+", "t"));
        assert!(m("t[^x]?", "t"));
        assert!(m("a{2,3}", "aaa"));
        assert!(!m("a{2,3}", "aaaa"));
        assert!(m("a{2}b{1,}", "aabbb"));
        assert!(m("\\w+\\.\\d", "topic_x.7"));
        assert!(m("(?:ab)*c", "ababc"));
        assert!(m("", ""));
        assert!(m("x|", ""));
        assert!(m("[-a]+", "a-a"));
        assert!(m("a.*?b", "axxb"));
    }

    #[test]
    fn bad_patterns_are_errors() {
        for p in [
            "(", "a)", "[a", "*a", "a**", "\\", "a{3,2}", "a{1001}", "(?i)a", "\\1", "[z-a]",
        ] {
            assert!(TopicRegex::new(p).is_err(), "{p}");
        }
        assert!(TopicRegex::new(&"a".repeat(MAX_PATTERN_LEN + 1)).is_err());
        // Repetition multiplies: bounded by the program size.
        assert!(TopicRegex::new("((a{100}){100}){100}").is_err());
    }

    #[test]
    fn no_exponential_blowup() {
        let r = TopicRegex::new("(a*)*(a|aa)*b").unwrap();
        assert!(!r.is_match(&"a".repeat(5000)));
    }
}
