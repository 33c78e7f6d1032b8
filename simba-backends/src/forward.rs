//! What every backend's `impl Backend` forwards the same way, as macros
//! expanded in it.

/// [`Backend::join_group`](crate::Backend::join_group) and
/// [`Backend::leave_group`](crate::Backend::leave_group) of a backend whose
/// one call `membership(join, session, group)` does both.
macro_rules! groups_by_membership {
    () => {
        fn join_group<'a>(
            &'a self,
            session: simba_core::SessionId,
            group: &'a simba_core::LeaseName,
        ) -> futures::future::BoxFuture<'a, Result<(), simba_core::BackendError>> {
            futures::FutureExt::boxed(self.membership(true, session, group))
        }

        fn leave_group<'a>(
            &'a self,
            session: simba_core::SessionId,
            group: &'a simba_core::LeaseName,
        ) -> futures::future::BoxFuture<'a, Result<(), simba_core::BackendError>> {
            futures::FutureExt::boxed(self.membership(false, session, group))
        }
    };
}
pub(crate) use groups_by_membership;
