//! Partitioned groups (S10). The engine sends no group command yet, so a
//! group reply answers nothing it sent and is dropped.

use super::Engine;
use crate::error::BackendError;
use crate::ids::OpId;

impl Engine {
    /// A reply to [`Command::JoinGroup`](crate::Command::JoinGroup).
    pub(super) fn on_group_joined(&mut self, _op: OpId, _result: Result<(), BackendError>) {}

    /// A reply to [`Command::LeaveGroup`](crate::Command::LeaveGroup).
    pub(super) fn on_group_left(&mut self, _op: OpId, _result: Result<(), BackendError>) {}
}
