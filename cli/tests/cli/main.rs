//! End-to-end tests of the `baton` binary: each runs the built binary as a
//! process against an in-process broker on 127.0.0.1 port 0.

mod check;
mod exit_codes;
mod groups;
mod harness;
mod produce_consume;
mod security;
mod topics;
