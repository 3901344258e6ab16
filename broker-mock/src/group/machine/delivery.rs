//! The answers the machine hands back: a [`Delivery`] names the [`Waiter`] (a parked
//! or just received JoinGroup / SyncGroup request) it answers.

use baton_protocol::messages::{JoinGroupResponse, SyncGroupResponse};
use baton_protocol::ErrorCode;

/// Identifies one parked request; chosen by the caller, echoed in [`Delivery`].
pub type Waiter = u64;

/// A response for a parked (or just received) JoinGroup or SyncGroup request.
#[derive(Debug, Clone, PartialEq)]
pub enum Delivery {
    /// The answer to a JoinGroup request.
    Join(Waiter, JoinGroupResponse),
    /// The answer to a SyncGroup request.
    Sync(Waiter, SyncGroupResponse),
}

/// A JoinGroup answer carrying only an error (generation -1).
pub(super) fn join_error(waiter: Waiter, member_id: &str, code: ErrorCode) -> Delivery {
    Delivery::Join(
        waiter,
        JoinGroupResponse {
            error_code: code.code(),
            generation_id: -1,
            member_id: member_id.to_owned(),
            ..Default::default()
        },
    )
}

/// A SyncGroup answer carrying only an error.
pub(super) fn sync_error(waiter: Waiter, code: ErrorCode) -> Delivery {
    Delivery::Sync(
        waiter,
        SyncGroupResponse {
            error_code: code.code(),
            ..Default::default()
        },
    )
}
