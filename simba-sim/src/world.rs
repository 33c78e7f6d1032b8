//! The shared world of one run: the backend, the trace, the fenced
//! resources and the checkers that watch them.

use crate::journal::{lock, Journal};
use crate::node::{NodeCell, Tasks};
use simba_backends::MemoryBackend;
use simba_client::Term;
use std::any::{Any, TypeId};
use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub(crate) struct WorldInner {
    pub(crate) start: tokio::time::Instant,
    pub(crate) backend: MemoryBackend,
    /// The trace and the violations found (shared with the nodes' tasks and
    /// their view of the backend).
    pub(crate) journal: Arc<Journal>,
    /// Whether the backend is restarting (shared with the nodes' view of it).
    pub(crate) backend_down: Arc<AtomicBool>,
    pub(crate) nodes: Vec<Arc<NodeCell>>,
    /// The tasks the harness owns on the run's runtime.
    pub(crate) tasks: Arc<Tasks>,
    registers: Mutex<BTreeMap<String, Arc<Mutex<Resource>>>>,
    maps: Mutex<BTreeMap<String, Arc<Mutex<Resource>>>>,
    /// The application's shared state ([`crate::Node::shared`]), by type.
    shared: Mutex<BTreeMap<TypeId, Arc<dyn Any + Send + Sync>>>,
}

impl WorldInner {
    pub(crate) fn new(
        journal: Arc<Journal>,
        backend: MemoryBackend,
        nodes: Vec<Arc<NodeCell>>,
        tasks: Arc<Tasks>,
    ) -> WorldInner {
        WorldInner {
            start: journal.start,
            backend,
            tasks,
            journal,
            backend_down: Arc::default(),
            nodes,
            registers: Mutex::default(),
            maps: Mutex::default(),
            shared: Mutex::default(),
        }
    }

    pub(crate) fn now(&self) -> Duration {
        self.journal.now()
    }

    pub(crate) fn record(&self, node: Option<usize>, text: String) {
        self.journal.record(node, text);
    }

    pub(crate) fn shared<T: Default + Send + Sync + 'static>(&self) -> Arc<T> {
        let mut table = lock(&self.shared);
        let entry = table
            .entry(TypeId::of::<T>())
            .or_insert_with(|| Arc::new(T::default()) as Arc<dyn Any + Send + Sync>)
            .clone();
        drop(table);
        match entry.downcast::<T>() {
            Ok(t) => t,
            // Cannot happen (the entry of T's id holds a T).
            Err(_) => Arc::new(T::default()),
        }
    }

    pub(crate) fn violate(&self, node: Option<usize>, what: String) {
        self.journal.violate(node, what);
    }

    fn resource(&self, map: bool, name: &str) -> Arc<Mutex<Resource>> {
        let table = if map { &self.maps } else { &self.registers };
        lock(table)
            .entry(name.to_owned())
            .or_insert_with(|| Arc::new(Mutex::new(Resource::default())))
            .clone()
    }

    pub(crate) fn register(self: &Arc<Self>, name: &str, node: usize) -> FencedRegister {
        FencedRegister {
            name: name.to_owned(),
            node,
            world: self.clone(),
            state: self.resource(false, name),
        }
    }

    pub(crate) fn map(self: &Arc<Self>, name: &str, node: usize) -> FencedMap {
        FencedMap {
            name: name.to_owned(),
            node,
            world: self.clone(),
            state: self.resource(true, name),
        }
    }
}

/// What a write carries: the lease it is fenced by and the term's token.
///
/// ```
/// use simba_sim::Fence;
/// let fence = Fence::new("ledger", 7);
/// assert_eq!(fence.token(), 7);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fence {
    lease: String,
    token: u64,
}

impl Fence {
    /// A fence for `lease` with `token`.
    pub fn new(lease: impl Into<String>, token: u64) -> Fence {
        Fence {
            lease: lease.into(),
            token,
        }
    }

    /// The fencing token.
    pub fn token(&self) -> u64 {
        self.token
    }

    /// The lease it is fenced by.
    pub fn lease(&self) -> &str {
        &self.lease
    }
}

impl From<&Term> for Fence {
    fn from(term: &Term) -> Fence {
        Fence::new(term.name(), term.token())
    }
}

/// A write the resource refused: its token is lower than one it accepted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("stale fence: token {token} is lower than the accepted {accepted}")]
pub struct StaleFence {
    /// The refused write's token.
    pub token: u64,
    /// The greatest token accepted so far.
    pub accepted: u64,
}

/// One write in a resource's history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Write {
    /// Simulated time.
    pub at: Duration,
    /// The writing node.
    pub node: usize,
    /// The writer's fence.
    pub fence: Fence,
    /// The key (maps only).
    pub key: Option<String>,
    /// The value written.
    pub value: String,
    /// Whether the resource checked the fence (false: an unfenced write).
    pub fenced: bool,
    /// Whether it was accepted.
    pub accepted: bool,
}

#[derive(Default)]
struct Resource {
    value: Option<String>,
    entries: BTreeMap<String, String>,
    accepted: Option<u64>,
    history: Vec<Write>,
}

impl Resource {
    /// Applies one write, checking the fence if `fenced`; the history check
    /// (no accepted write with a token below one accepted before) runs on
    /// every accepted write, fenced or not.
    #[allow(clippy::too_many_arguments)]
    fn write(
        &mut self,
        world: &WorldInner,
        what: &str,
        node: usize,
        fence: &Fence,
        key: Option<&str>,
        value: String,
        fenced: bool,
    ) -> Result<(), StaleFence> {
        let at = world.now();
        let stale = self.accepted.filter(|a| fence.token < *a);
        let accepted = !(fenced && stale.is_some());
        let target = key.map_or(String::new(), |k| format!("[{k}]"));
        world.record(
            Some(node),
            format!(
                "{what}{target} ← {value:?} token {} ({}{})",
                fence.token,
                if fenced { "" } else { "unfenced, " },
                if accepted { "accepted" } else { "refused" }
            ),
        );
        self.history.push(Write {
            at,
            node,
            fence: fence.clone(),
            key: key.map(str::to_owned),
            value: value.clone(),
            fenced,
            accepted,
        });
        if let (false, Some(a)) = (accepted, stale) {
            return Err(StaleFence {
                token: fence.token,
                accepted: a,
            });
        }
        if let Some(a) = stale {
            world.violate(
                Some(node),
                format!(
                    "fenced resource {what}: a write with token {} was accepted after token {a} \
                     (an unfenced write by a stale leader)",
                    fence.token
                ),
            );
        }
        self.accepted = Some(self.accepted.map_or(fence.token, |a| a.max(fence.token)));
        match key {
            Some(k) => {
                let _ = self.entries.insert(k.to_owned(), value);
            }
            None => self.value = Some(value),
        }
        Ok(())
    }
}

/// A fenced register shared by every node (think: a row in the
/// application's database that accepts a write only with a token at least
/// the greatest it has accepted). Its history is checked.
///
/// ```
/// # fn f(register: simba_sim::FencedRegister, term: &simba_client::Term) {
/// if term.is_valid() {
///     let _ = register.write(&term.into(), "v1");
/// }
/// # }
/// ```
#[derive(Clone)]
pub struct FencedRegister {
    name: String,
    node: usize,
    world: Arc<WorldInner>,
    state: Arc<Mutex<Resource>>,
}

impl FencedRegister {
    /// Writes `value` if `fence`'s token is at least the greatest accepted.
    ///
    /// # Errors
    /// [`StaleFence`] if a greater token was accepted before.
    pub fn write(&self, fence: &Fence, value: impl Into<String>) -> Result<(), StaleFence> {
        let what = format!("register {}", self.name);
        lock(&self.state).write(
            &self.world,
            &what,
            self.node,
            fence,
            None,
            value.into(),
            true,
        )
    }

    /// Writes `value` without checking the fence, as a store without
    /// fencing would. The history check still sees the token: a write
    /// accepted below a greater accepted token is a violation.
    pub fn write_unfenced(&self, fence: &Fence, value: impl Into<String>) {
        let what = format!("register {}", self.name);
        let _ = lock(&self.state).write(
            &self.world,
            &what,
            self.node,
            fence,
            None,
            value.into(),
            false,
        );
    }

    /// The current value.
    pub fn read(&self) -> Option<String> {
        lock(&self.state).value.clone()
    }
}

/// A fenced key-value map shared by every node: one fence for the whole
/// map, checked on every put. Its history is checked.
///
/// ```
/// # fn f(map: simba_sim::FencedMap, term: &simba_client::Term) {
/// let next = map.len();
/// if term.is_valid() {
///     let _ = map.put(&term.into(), format!("{next:08}"), "entry");
/// }
/// # }
/// ```
#[derive(Clone)]
pub struct FencedMap {
    name: String,
    node: usize,
    world: Arc<WorldInner>,
    state: Arc<Mutex<Resource>>,
}

impl FencedMap {
    /// Puts `key` → `value` if `fence`'s token is at least the greatest
    /// accepted.
    ///
    /// # Errors
    /// [`StaleFence`] if a greater token was accepted before.
    pub fn put(
        &self,
        fence: &Fence,
        key: impl Into<String>,
        value: impl Into<String>,
    ) -> Result<(), StaleFence> {
        let what = format!("map {}", self.name);
        let key = key.into();
        lock(&self.state).write(
            &self.world,
            &what,
            self.node,
            fence,
            Some(&key),
            value.into(),
            true,
        )
    }

    /// Puts without checking the fence (see [`FencedRegister::write_unfenced`]).
    pub fn put_unfenced(&self, fence: &Fence, key: impl Into<String>, value: impl Into<String>) {
        let what = format!("map {}", self.name);
        let key = key.into();
        let _ = lock(&self.state).write(
            &self.world,
            &what,
            self.node,
            fence,
            Some(&key),
            value.into(),
            false,
        );
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<String> {
        lock(&self.state).entries.get(key).cloned()
    }

    /// The number of keys.
    pub fn len(&self) -> usize {
        lock(&self.state).entries.len()
    }

    /// Whether the map is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every entry, in key order.
    pub fn entries(&self) -> BTreeMap<String, String> {
        lock(&self.state).entries.clone()
    }
}

/// What an invariant sees: the fenced resources and their histories, at
/// any moment of the run and at its end.
///
/// ```
/// fn no_key_twice(world: &simba_sim::World) -> Result<(), String> {
///     let mut seen = std::collections::BTreeSet::new();
///     for w in world.map_history("ledger").iter().filter(|w| w.accepted) {
///         if !seen.insert(w.key.clone()) {
///             return Err(format!("{:?} written twice", w.key));
///         }
///     }
///     Ok(())
/// }
/// # let _ = no_key_twice;
/// ```
pub struct World {
    pub(crate) inner: Arc<WorldInner>,
}

impl World {
    /// The simulated time since the start of the run.
    pub fn now(&self) -> Duration {
        self.inner.now()
    }

    /// The register `name`'s value.
    pub fn register(&self, name: &str) -> Option<String> {
        lock(&self.inner.resource(false, name)).value.clone()
    }

    /// The map `name`'s entries.
    pub fn map(&self, name: &str) -> BTreeMap<String, String> {
        lock(&self.inner.resource(true, name)).entries.clone()
    }

    /// Every write to the register `name`, accepted or not.
    pub fn register_history(&self, name: &str) -> Vec<Write> {
        lock(&self.inner.resource(false, name)).history.clone()
    }

    /// Every put to the map `name`, accepted or not.
    pub fn map_history(&self, name: &str) -> Vec<Write> {
        lock(&self.inner.resource(true, name)).history.clone()
    }
}
