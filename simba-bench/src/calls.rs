//! A diagnostic for the groups section: with `SIMBA_BENCH_CALLS=<file>`
//! set, every member's backend calls (acquire, withdraw, release, renew),
//! release broadcasts, partitions gained and lost and each new target of
//! a group are written to `<file>`, one line each: the milliseconds since
//! the first call, the member, the call, the name, the outcome and the
//! call's duration in milliseconds (a target's partitions follow on a line
//! of their own). Whether or not it is
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

/// With `SIMBA_BENCH_CALLS` set, writes an event of member `member` (a
/// partition `name` gained or lost) among its calls.
pub fn event(member: usize, what: &str, name: &str) {
    line(member, what, name, "-", None);
}

/// With `SIMBA_BENCH_CALLS` set, writes member `member`'s new target of
/// `group` (S10.2): the word `target`, the group, the live members and the
/// target's size, then the partitions, comma-separated.
pub fn target(member: usize, group: &str, members: usize, target: &[u32]) {
    let list: Vec<String> = target.iter().map(u32::to_string).collect();
    let outcome = format!("{members}/{}", target.len());
    line(member, "target", group, &outcome, None);
    if let Some(s) = sink() {
        if let Ok(mut f) = s.file.lock() {
            let _ = writeln!(f, "  m{member} {}", list.join(","));
        }
    }
}

/// When each lease name's latest release was sent and answered, and when
/// each member's calls ran, for the groups section's "from the release"
/// times and round trips (S10.3 counts a graceful move from the old
/// owner's release, in backend round trips).
#[derive(Clone, Default)]
pub struct Releases(Arc<Mutex<Ledger>>);

#[derive(Default)]
struct Ledger {
    /// Per lease name, its latest release: sent, and answered (`None`
    /// while in flight).
    released: std::collections::BTreeMap<String, (Instant, Option<Instant>)>,
    /// Per member, every backend call it made: started and answered.
    calls: std::collections::BTreeMap<usize, Vec<(Instant, Instant)>>,
    /// Per member and lease name, when each of its acquires of the name
    /// was answered.
    asks: std::collections::BTreeMap<(usize, String), Vec<Instant>>,
}

/// The backend calls on one moved partition's path, from its old owner's
/// release to the call that won it for its new owner ([`Releases::path`]).
#[derive(Clone, Copy, Debug)]
pub struct Path {
    /// Round trips: the release, and each acquire of the partition by its
    /// new owner answered after the release was sent, up to the one that
    /// won it (2: it won at its first ask after the release).
    pub round_trips: usize,
    /// Of the time from the release being sent to the gain, how much no
    /// call on the path was running: time the move spent waiting for
    /// neither the backend nor the network.
    pub idle: Duration,
}

impl Releases {
    fn sent(&self, name: &LeaseName) {
        if let Ok(mut m) = self.0.lock() {
            m.released
                .insert(name.as_str().to_owned(), (Instant::now(), None));
        }
    }

    fn answered(&self, name: &LeaseName) {
        if let Ok(mut m) = self.0.lock() {
            if let Some(r) = m.released.get_mut(name.as_str()) {
                r.1.get_or_insert_with(Instant::now);
            }
        }
    }

    fn asked(&self, member: usize, name: &LeaseName) {
        if let Ok(mut m) = self.0.lock() {
            m.asks
                .entry((member, name.as_str().to_owned()))
                .or_default()
                .push(Instant::now());
        }
    }

    fn ran(&self, member: usize, started: Instant) {
        if let Ok(mut m) = self.0.lock() {
            m.calls
                .entry(member)
                .or_default()
                .push((started, Instant::now()));
        }
    }

    /// When the latest release of `name` was sent, if one was.
    pub fn last(&self, name: &str) -> Option<Instant> {
        self.0
            .lock()
            .ok()
            .and_then(|m| m.released.get(name).map(|r| r.0))
    }

    /// The path of `name`'s latest release to `member`, who gained it at
    /// `gained`: the round trips (the release, and the member's acquires of
    /// `name` answered since the release was sent), and the time no call
    /// ran on it (neither the release nor a call of the member that ended
    /// after the release was answered, or after it was sent when the gain
    /// came before the answer: a broadcast can overtake the reply). `None`
    /// without a release sent before `gained`.
    ///
    /// ```
    /// use simba_bench::calls::Releases;
    /// // Nothing was released: no path.
    /// assert!(Releases::default().path("orders:p0", 0, std::time::Instant::now()).is_none());
    /// ```
    pub fn path(&self, name: &str, member: usize, gained: Instant) -> Option<Path> {
        let m = self.0.lock().ok()?;
        let (sent, answered) = *m.released.get(name)?;
        if sent > gained {
            return None;
        }
        let answered = answered.unwrap_or(gained).min(gained);
        let from = if answered < gained { answered } else { sent };
        let mut on_path: Vec<(Instant, Instant)> = m
            .calls
            .get(&member)
            .map(|c| {
                c.iter()
                    .filter(|(s, e)| *e > from && *s < gained)
                    .copied()
                    .collect()
            })
            .unwrap_or_default();
        let round_trips = 1 + m.asks.get(&(member, name.to_owned())).map_or(0, |a| {
            a.iter().filter(|&&t| t > sent && t <= gained).count()
        });
        // Busy: the release, then the member's calls, clipped to the
        // window from the release being sent to the gain.
        on_path.push((sent, answered));
        on_path.sort();
        let mut busy = Duration::ZERO;
        let mut reach = sent;
        for (s, e) in on_path {
            let (s, e) = (s.max(reach), e.min(gained));
            if e > s {
                busy += e - s;
                reach = e;
            }
        }
        let idle = gained.saturating_duration_since(sent).saturating_sub(busy);
        Some(Path { round_trips, idle })
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
            self.releases.ran(self.member, t);
            for c in calls {
                match c {
                    Command::Release { name, .. } => self.releases.answered(name),
                    Command::Acquire { name, .. } => self.releases.asked(self.member, name),
                    _ => {}
                }
            }
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
            _ => {
                return async move {
                    let t = Instant::now();
                    let r = call.run(&*self.inner).await;
                    self.releases.ran(self.member, t);
                    r
                }
                .boxed()
            }
        };
        async move {
            let name = call.name().map_or("-", LeaseName::as_str);
            if let Call::Release { name, .. } = call {
                self.releases.sent(name);
            }
            let t = Instant::now();
            let r = call.run(&*self.inner).await;
            self.releases.ran(self.member, t);
            match call {
                Call::Release { name, .. } => self.releases.answered(name),
                Call::Acquire { name, .. } => self.releases.asked(self.member, name),
                _ => {}
            }
            let o = match &r {
                _ if matches!(call, Call::JoinGroup { .. } | Call::LeaveGroup { .. }) => r
                    .error()
                    .map_or_else(|| "-".to_string(), |e| format!("err:{e}").replace(' ', "_")),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A partition released at 0 ms (answered at 2 ms) and won by member 1
    /// at its second ask, the gain seen at 10 ms: the member's first ask
    /// ran from 1 to 5 ms (answered `Held`), its second from 6 to 9 ms.
    /// Three round trips (the release and two asks), and 2 ms with no call
    /// running (5 to 6 ms and 9 to 10 ms).
    #[test]
    fn a_path_counts_the_release_and_the_asks_and_the_time_between_calls() {
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let releases = Releases::default();
        if let Ok(mut m) = releases.0.lock() {
            m.released.insert("orders:p7".into(), (ms(0), Some(ms(2))));
            m.calls.insert(1, vec![(ms(1), ms(5)), (ms(6), ms(9))]);
            m.asks.insert((1, "orders:p7".into()), vec![ms(5), ms(9)]);
        }
        let path = releases.path("orders:p7", 1, ms(10));
        assert_eq!(
            path.map(|p| (p.round_trips, p.idle)),
            Some((3, Duration::from_millis(2)))
        );
        // Another member, which asked nothing: the release alone; and a
        // partition never released has no path.
        assert_eq!(
            releases.path("orders:p7", 2, ms(10)).map(|p| p.round_trips),
            Some(1)
        );
        assert!(releases.path("orders:p8", 1, ms(10)).is_none());
    }
}
