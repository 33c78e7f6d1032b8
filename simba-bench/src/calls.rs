//! A diagnostic for the groups section: with `SIMBA_BENCH_CALLS=<file>`
//! set, every member's backend calls (acquire, withdraw, release, renew)
//! and release broadcasts are written to `<file>`, one line each: the
//! milliseconds since the first call, the member, the call, the name, the
//! outcome and the call's duration in milliseconds. Whether or not it is
//! set, the wrapper records when each release was sent ([`Releases`]).
//! With `SIMBA_BENCH_NO_BATCH` set, the members send each call on its own
//! instead of in batches (S4.7), for a before/after comparison.

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use simba_backends::{Backend, Call, Layer, Layered, Reply};
use simba_core::{AcquireOutcome, BackendError, Command, Input, LeaseName};
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
    Arc::new(Layered(Logged {
        inner,
        member,
        releases,
    }))
}

struct Logged {
    inner: Arc<dyn Backend>,
    member: usize,
    releases: Releases,
}

impl Logged {
    /// A batch (S4.7): each release it carries counts as sent now, and
    /// each call is logged with its own outcome and the batch's duration,
    /// its word prefixed `batch:`.
    fn batch<'a>(&'a self, call: Call<'a>, calls: &'a [Command]) -> BoxFuture<'a, Reply> {
        async move {
            for c in calls {
                if let Command::Release { name, .. } = c {
                    self.releases.sent(name);
                }
            }
            let t = Instant::now();
            let r = call.run(&*self.inner).await;
            let took = t.elapsed();
            if let Reply::Batch(replies) = &r {
                for (c, reply) in calls.iter().zip(replies) {
                    let (word, name) = match c {
                        Command::Acquire { name, .. } => ("batch:acquire", name),
                        Command::Release { name, .. } => ("batch:release", name),
                        Command::Withdraw { name, .. } => ("batch:withdraw", name),
                        _ => continue,
                    };
                    let o = match reply {
                        Input::AcquireReplied {
                            result: Ok(AcquireOutcome::Won { .. }),
                            ..
                        } => "won".to_string(),
                        Input::AcquireReplied {
                            result: Ok(AcquireOutcome::Held { .. }),
                            ..
                        } => "held".to_string(),
                        Input::AcquireReplied { result: Err(e), .. }
                        | Input::ReleaseReplied { result: Err(e), .. }
                        | Input::WithdrawReplied { result: Err(e), .. } => {
                            format!("err:{e}").replace(' ', "_")
                        }
                        _ => "ok".to_string(),
                    };
                    line(self.member, word, name.as_str(), &o, Some(took));
                }
            }
            r
        }
        .boxed()
    }
}

impl Layer for Logged {
    fn inner(&self) -> &dyn Backend {
        &*self.inner
    }
    /// The backend's, or 1 with `SIMBA_BENCH_NO_BATCH` set: each call its
    /// own, to compare with batches (S4.7).
    fn max_batch(&self) -> usize {
        if std::env::var_os("SIMBA_BENCH_NO_BATCH").is_some() {
            1
        } else {
            self.inner.max_batch()
        }
    }
    fn call<'a>(&'a self, call: Call<'a>) -> BoxFuture<'a, Reply> {
        if let Call::Batch { calls, .. } = call {
            return self.batch(call, calls);
        }
        let word = match call {
            Call::Renew { .. } => "renew",
            Call::Acquire { .. } => "acquire",
            Call::Release { .. } => "release",
            Call::Withdraw { .. } => "withdraw",
            Call::JoinGroup { .. } => "join",
            Call::LeaveGroup { .. } => "leave",
            _ => return call.run(&*self.inner),
        };
        async move {
            let name = call.name().map_or("-", LeaseName::as_str);
            if let Call::Release { name, .. } = call {
                self.releases.sent(name);
            }
            let t = Instant::now();
            let r = call.run(&*self.inner).await;
            let o = match &r {
                _ if matches!(call, Call::JoinGroup { .. } | Call::LeaveGroup { .. }) => {
                    "-".to_string()
                }
                Reply::Renewed(Ok(r)) => {
                    format!("ok/{}", r.groups.first().map_or(0, |g| g.members.len()))
                }
                Reply::Renewed(Err(e)) => format!("err:{e:?}").replace(' ', "_"),
                Reply::Acquired(Ok(AcquireOutcome::Won { .. })) => "won".to_string(),
                Reply::Acquired(Ok(AcquireOutcome::Held { .. })) => "held".to_string(),
                Reply::Acquired(Ok(o)) => format!("{o:?}").replace(' ', "_"),
                Reply::Acquired(Err(e)) => format!("err:{e}").replace(' ', "_"),
                r if r.error().is_some() => "err".to_string(),
                _ => "ok".to_string(),
            };
            line(self.member, word, name, &o, Some(t.elapsed()));
            r
        }
        .boxed()
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
}
