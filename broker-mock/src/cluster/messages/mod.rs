//! Baton-private requests on the controller listener, each declared once with
//! `wire_struct!`/`impl_message!` and used by both ends: the corrupt-replica report
//! ([`corrupt_report`]) and the planned-move report ([`move_report`]).

pub mod corrupt_report;
pub mod move_report;
