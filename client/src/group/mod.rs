//! Consumer groups.

pub mod assignor;
