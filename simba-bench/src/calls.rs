//! A diagnostic for the groups section: with `SIMBA_BENCH_CALLS=<file>`
//! set, every member's backend calls (acquire, withdraw, release, renew)
//! and release broadcasts are written to `<file>`, one line each: the
//! milliseconds since the first call, the member, the call, the name, the
//! outcome and the call's duration in milliseconds. Whether or not it is
//! set, the wrapper records when each release was sent ([`Releases`]).

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use simba_backends::{Backend, Inspection};
use simba_core::{
    AcquireOutcome, BackendError, Fraction, LeaseName, RenewError, Renewal, SessionGrant,
    SessionId, SlotClaim, Token,
};
use std::io::Write as _;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Where the lines go, and the instant they count from.
struct Sink {
    file: Mutex<std::fs::File>,
    start: Instant,
}

fn sink() -> Option<&'static Sink> {
    static SINK: OnceLock<Option<Sink>> = OnceLock::new();
    SINK.get_or_init(|| {
        let path = std::env::var_os("SIMBA_BENCH_CALLS")?;
        let file = std::fs::File::create(path).ok()?;
        Some(Sink {
            file: Mutex::new(file),
            start: Instant::now(),
        })
    })
    .as_ref()
}

fn line(member: usize, call: &str, name: &str, outcome: &str, took: Option<Duration>) {
    if let Some(s) = sink() {
        let at = s.start.elapsed().as_secs_f64() * 1e3;
        let took = took.map_or(-1.0, |d| d.as_secs_f64() * 1e3);
        if let Ok(mut f) = s.file.lock() {
            let _ = writeln!(f, "{at:.1} m{member} {call} {name} {outcome} {took:.1}");
        }
    }
}

/// When each lease name's latest release was sent, for the groups
/// section's "from the release" times (S10.3 counts a graceful move from
/// the old owner's release).
#[derive(Clone, Default)]
pub struct Releases(Arc<Mutex<std::collections::BTreeMap<String, Instant>>>);

impl Releases {
    fn sent(&self, name: &LeaseName) {
        if let Ok(mut m) = self.0.lock() {
            m.insert(name.as_str().to_owned(), Instant::now());
        }
    }

    /// When the latest release of `name` was sent, if one was.
    pub fn last(&self, name: &str) -> Option<Instant> {
        self.0.lock().ok().and_then(|m| m.get(name).copied())
    }
}

/// `inner`, recording when it sends releases in `releases`, and logging
/// its calls as member `member` when `SIMBA_BENCH_CALLS` is set.
pub fn wrap(inner: Arc<dyn Backend>, member: usize, releases: Releases) -> Arc<dyn Backend> {
    Arc::new(Logged {
        inner,
        member,
        releases,
    })
}

struct Logged {
    inner: Arc<dyn Backend>,
    member: usize,
    releases: Releases,
}

impl Backend for Logged {
    fn max_concurrent_calls(&self) -> Option<usize> {
        self.inner.max_concurrent_calls()
    }
    fn open_session_with<'a>(
        &'a self,
        lease_duration: Duration,
        metadata: &'a simba_backends::SessionMetadata,
    ) -> BoxFuture<'a, Result<SessionGrant, BackendError>> {
        self.inner.open_session_with(lease_duration, metadata)
    }
    fn open_session(
        &self,
        lease_duration: Duration,
    ) -> BoxFuture<'_, Result<SessionGrant, BackendError>> {
        self.inner.open_session(lease_duration)
    }
    fn renew(&self, session: SessionId) -> BoxFuture<'_, Result<Renewal, RenewError>> {
        async move {
            let t = Instant::now();
            let r = self.inner.renew(session).await;
            let o = match &r {
                Ok(r) => format!("ok/{}", r.groups.first().map_or(0, |g| g.members.len())),
                Err(e) => format!("err:{e:?}").replace(' ', "_"),
            };
            line(self.member, "renew", "-", &o, Some(t.elapsed()));
            r
        }
        .boxed()
    }
    fn acquire<'a>(
        &'a self,
        session: SessionId,
        name: &'a LeaseName,
    ) -> BoxFuture<'a, Result<AcquireOutcome, BackendError>> {
        async move {
            let t = Instant::now();
            let r = self.inner.acquire(session, name).await;
            let o = match &r {
                Ok(AcquireOutcome::Won { .. }) => "won".to_string(),
                Ok(AcquireOutcome::Held { .. }) => "held".to_string(),
                Ok(o) => format!("{o:?}").replace(' ', "_"),
                Err(e) => format!("err:{e}").replace(' ', "_"),
            };
            line(self.member, "acquire", name.as_str(), &o, Some(t.elapsed()));
            r
        }
        .boxed()
    }
    fn release<'a>(
        &'a self,
        session: SessionId,
        name: &'a LeaseName,
        token: Token,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        async move {
            self.releases.sent(name);
            let t = Instant::now();
            let r = self.inner.release(session, name, token).await;
            let o = if r.is_ok() { "ok" } else { "err" };
            line(self.member, "release", name.as_str(), o, Some(t.elapsed()));
            r
        }
        .boxed()
    }
    fn withdraw<'a>(
        &'a self,
        session: SessionId,
        name: &'a LeaseName,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        async move {
            let t = Instant::now();
            let r = self.inner.withdraw(session, name).await;
            let o = if r.is_ok() { "ok" } else { "err" };
            line(self.member, "withdraw", name.as_str(), o, Some(t.elapsed()));
            r
        }
        .boxed()
    }
    fn close_session(&self, session: SessionId) -> BoxFuture<'_, Result<(), BackendError>> {
        self.inner.close_session(session)
    }
    fn inspect<'a>(
        &'a self,
        prefix: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Inspection, BackendError>> {
        self.inner.inspect(prefix)
    }
    fn subscribe_releases(
        &self,
    ) -> BoxFuture<'_, Result<Option<BoxStream<'static, LeaseName>>, BackendError>> {
        async move {
            let member = self.member;
            Ok(self.inner.subscribe_releases().await?.map(|s| {
                s.inspect(move |n| line(member, "broadcast", n.as_str(), "-", None))
                    .boxed()
            }))
        }
        .boxed()
    }
    fn broadcasts_releases(&self) -> bool {
        self.inner.broadcasts_releases()
    }
    fn renewal_proves(&self) -> Fraction {
        self.inner.renewal_proves()
    }
    fn join_group<'a>(
        &'a self,
        session: SessionId,
        group: &'a LeaseName,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        async move {
            let t = Instant::now();
            let r = self.inner.join_group(session, group).await;
            line(self.member, "join", group.as_str(), "-", Some(t.elapsed()));
            r
        }
        .boxed()
    }
    fn leave_group<'a>(
        &'a self,
        session: SessionId,
        group: &'a LeaseName,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        async move {
            let t = Instant::now();
            let r = self.inner.leave_group(session, group).await;
            line(self.member, "leave", group.as_str(), "-", Some(t.elapsed()));
            r
        }
        .boxed()
    }
    fn claim_slot<'a>(
        &'a self,
        session: SessionId,
        name: &'a LeaseName,
        token: Token,
        slot: u64,
    ) -> BoxFuture<'a, Result<SlotClaim, BackendError>> {
        self.inner.claim_slot(session, name, token, slot)
    }
    fn name(&self) -> &'static str {
        self.inner.name()
    }
}
