//! The async drivers of a broker node in a cluster: its session with the controller,
//! metadata replay and role reconciliation ([`node`]), one replica fetcher per
//! followed partition (`fetcher`), and the background scrubber (`scrubber`).

pub mod node;

pub(crate) mod fetcher;
mod scrubber;
