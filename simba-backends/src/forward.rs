//! What every backend's `impl Backend` forwards the same way, as macros
//! expanded in it.

/// [`Backend::open_session`](crate::Backend::open_session) as every backend
/// answers it: [`Backend::open_session_with`](crate::Backend::open_session_with)
/// without metadata.
macro_rules! open_session_without_metadata {
    () => {
        fn open_session(
            &self,
            lease_duration: std::time::Duration,
        ) -> futures::future::BoxFuture<
            '_,
            Result<simba_core::SessionGrant, simba_core::BackendError>,
        > {
            self.open_session_with(lease_duration, &$crate::metadata::NO_METADATA)
        }
    };
}
pub(crate) use open_session_without_metadata;
