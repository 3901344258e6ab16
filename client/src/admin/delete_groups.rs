//! [`Admin::delete_groups`]: DeleteGroups (API key 42) sent to each group's
//! coordinator.

use baton_protocol::messages::DeleteGroupsRequest;
use baton_protocol::ErrorCode;

use super::describe_groups::collect;
use super::group_coordinators::GroupOutcome;
use super::{Admin, AdminError};

impl Admin {
    /// Deletes groups and their committed offsets, asking each group's
    /// coordinator. Only a group without members can be deleted: a group with
    /// members fails with NON_EMPTY_GROUP, an unknown one with GROUP_ID_NOT_FOUND,
    /// both in [`AdminError::Groups`] (the other groups were deleted).
    ///
    /// Coordinator moves, loading coordinators and connection failures are retried
    /// with backoff until the operation timeout. A retry after an attempt whose
    /// answer was lost may find the group already gone (GROUP_ID_NOT_FOUND).
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe in effect: if the future is dropped after a request was
    /// sent, the groups may or may not be deleted. The connections stay usable.
    pub async fn delete_groups(
        &self,
        group_ids: impl IntoIterator<Item = impl Into<String>>,
    ) -> Result<(), AdminError> {
        let groups: Vec<String> = group_ids.into_iter().map(Into::into).collect();
        let results = self
            .per_coordinator(groups, |_, conn, groups| {
                Box::pin(async move {
                    let resp = conn
                        .send(&DeleteGroupsRequest {
                            groups_names: groups,
                        })
                        .await?;
                    Ok(resp
                        .results
                        .into_iter()
                        .map(|r| {
                            let code = ErrorCode::from_code(r.error_code);
                            let outcome = if code.is_ok() {
                                GroupOutcome::Done(())
                            } else {
                                GroupOutcome::from_error(&r.group_id, code, None)
                            };
                            (r.group_id, outcome)
                        })
                        .collect())
                })
            })
            .await?;
        collect(results).map(|_| ())
    }
}
