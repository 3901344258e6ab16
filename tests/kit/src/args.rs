//! Command-line flags shared by the examples: `--flag value` pairs read one by
//! one and `-h`/`--help` printing the example's help
//! (the default seed is `baton_testkit::seed()`).

use std::fmt::Display;
use std::str::FromStr;

/// The example's arguments after the program name.
#[derive(Debug)]
pub struct Args {
    rest: std::iter::Skip<std::env::Args>,
    help: &'static str,
}

impl Args {
    /// The process's arguments; `help` is printed for `-h` and `--help`.
    pub fn new(help: &'static str) -> Self {
        Args {
            rest: std::env::args().skip(1),
            help,
        }
    }

    /// The next flag, or `None` after the last. `-h` and `--help` print the
    /// help and end the process.
    pub fn next_flag(&mut self) -> Option<String> {
        let flag = self.rest.next()?;
        if flag == "-h" || flag == "--help" {
            print!("{}", self.help);
            std::process::exit(0);
        }
        Some(flag)
    }

    /// The value that follows `flag`, parsed.
    pub fn value<T>(&mut self, flag: &str) -> Result<T, String>
    where
        T: FromStr,
        T::Err: Display,
    {
        let raw = self
            .rest
            .next()
            .ok_or_else(|| format!("{flag} needs a value"))?;
        raw.parse().map_err(|e| format!("{flag}: {e}"))
    }
}

/// The error for a flag the example does not know.
pub fn unknown(flag: &str) -> String {
    format!("unknown argument {flag:?}; try --help")
}
