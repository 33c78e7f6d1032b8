//! The Redis backend (feature `redis`), with release broadcasts over pub/sub.
//!
//! Every operation is one Lua script, and Redis runs a script atomically:
//! no other command runs between its first and its last line. Remaining times
//! are the server's `PTTL`s and tokens are floored by the server's `TIME`, so
//! the client's clock is never read. Keys (all under one Cluster hash tag,
//! `{prefix}`):
//!
//! | key | type | holds |
//! |---|---|---|
//! | `{p}:s:<id>` | string, `PEXPIRE` = lease duration | the session's lease duration in µs; it exists exactly while the session lives |
//! | `{p}:o:<id>` | hash, outlives `{p}:s:<id>` by 1 s | lease name → token of every lease the session owns |
//! | `{p}:l:<name>` | hash, never expires | `holder` (session id, absent when free) and `token` (the latest token of the name) |
//! | `{p}:names` | sorted set (score 0) | every lease name, for `inspect` by prefix (`ZRANGEBYLEX`) |
//! | `{p}:sessions` | sorted set | session ids scored by expiry, for `inspect` |
//! | `{p}:g:<group>` | sorted set | the group's members (S10.1), scored by their session's expiry in ms |
//! | `{p}:j:<id>` | set, outlives `{p}:s:<id>` by 1 s | the groups the session joined |
//! | `{p}:c:<name>` | string, never expires | the last claimed schedule slot of `name` (S11.1) |
//!
//! Releases and closes `PUBLISH` the freed names on `{p}:released`.
//!
//! Tokens are `max(latest token + 1, server TIME in µs)`: strictly increasing
//! even if the server restarts and loses every key (no persistence), as long
//! as the server clock is not stepped back across the restart. See
//! `docs/BACKENDS.md` for the argument in full.
//!
//! The crate's `tokio-comp` (feature `runtime-tokio`) and `smol-comp`
//! (feature `runtime-async-std`; async-std and smol share one reactor) drive
//! the connection; with both, a call inside a tokio runtime uses tokio.

use crate::{
    check_lease_duration, check_prefix, random_session_id, redact, Backend, BackendConfig,
    Inspection, LeaseInfo, SessionInfo, SessionMetadata,
};
use ::redis::aio::MultiplexedConnection;
use ::redis::{AsyncConnectionConfig, Client, ErrorKind, RedisError, Script, ScriptInvocation};
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use simba_core::{
    AcquireOutcome, BackendError, BackendErrorKind, GroupView, LeaseName, RenewError, Renewal,
    SessionGrant, SessionId, SlotClaim, Token,
};
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const NAME: &str = "redis";

/// Shared by the scripts: the server's time in µs and in ms, as exact
/// integers (Lua numbers are doubles: exact below 2^53, i.e. until year 2255
/// in µs), and integer formatting that never switches to `1e+15` notation.
const PRELUDE: &str = r"
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function int(n) return string.format('%.0f', n) end
-- The owned-list version of a session (field `#v` of its owned hash, a
-- field no lease name can take, S3.1): the server's time in µs, or one more
-- than the last version, so that it never repeats, even if the hash was
-- lost and made again. Bumped by every change to the list a live session
-- can see; `ttl` keeps the hash's expiry when the bump creates it.
local function bump(k, ttl)
  local v = now_us()
  local old = tonumber(redis.call('HGET', k, '#v') or '0')
  if v <= old then v = old + 1 end
  redis.call('HSET', k, '#v', int(v))
  redis.call('PEXPIRE', k, ttl)
end
";

/// KEYS: session, sessions index. ARGV: id, session value (lease µs, then
/// `|` and the session's metadata if it has any), lease ms.
const OPEN: &str = r"
local ms = tonumber(ARGV[3])
if not redis.call('SET', KEYS[1], ARGV[2], 'PX', ms, 'NX') then
  return redis.error_reply('SIMBA session id collision')
end
local now_ms = math.floor(now_us() / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', int(now_ms))
redis.call('ZADD', KEYS[2], int(now_ms + ms), ARGV[1])
return ms
";

/// KEYS: session, owned, sessions index, joined groups. ARGV: id, key tag,
/// the owned-list version the caller last saw ('' if none).
/// Returns nil once the session has expired, else {ms, {name, token, ...},
/// {group, 'id,id,...', ...}, version, full}: the owned list is listed
/// (full = 1) only if its version is not the caller's, so that a renewal's
/// work does not grow with the number of leases held while they stay the
/// same (issue 10); `{group, …}` are the live members of every group joined
/// (S10.1). A member's score is its session's expiry less 1 ms (the server
/// time is read first, so the score never exceeds the true expiry), and only
/// members scored after now are listed: an expired member never is.
/// The session's value is its lease in µs, then `|` and its metadata if it
/// has any.
const RENEW: &str = r"
local now_ms = math.floor(now_us() / 1000)
local lease_us = redis.call('GET', KEYS[1])
if not lease_us then return false end
local ms = math.floor(tonumber(string.match(lease_us, '^%d+')) / 1000)
if ms < 1 then ms = 1 end
redis.call('PEXPIRE', KEYS[1], ms)
redis.call('PEXPIRE', KEYS[2], ms + 1000)
redis.call('ZADD', KEYS[3], int(now_ms + ms), ARGV[1])
local groups = {}
local joined = redis.call('SMEMBERS', KEYS[4])
if #joined > 0 then
  redis.call('PEXPIRE', KEYS[4], ms + 1000)
  for _, g in ipairs(joined) do
    local gk = ARGV[2] .. ':g:' .. g
    redis.call('ZADD', gk, int(now_ms + ms - 1), ARGV[1])
    redis.call('ZREMRANGEBYSCORE', gk, '-inf', int(now_ms))
    table.insert(groups, g)
    table.insert(groups, table.concat(redis.call('ZRANGE', gk, 0, -1), ','))
  end
end
local v = redis.call('HGET', KEYS[2], '#v') or ''
if v ~= '' and v == ARGV[3] then
  return {ms, {}, groups, v, 0}
end
return {ms, redis.call('HGETALL', KEYS[2]), groups, v, 1}
";

/// KEYS: session, joined groups, group. ARGV: id, group, channel.
/// Returns 1 if the session is a member now, 0 if it is not live. A new
/// membership is announced by the group's name on the release channel
/// (S10.5): the members renew at once and hand the joiner its partitions.
const JOIN: &str = r"
local now_ms = math.floor(now_us() / 1000)
local pttl = redis.call('PTTL', KEYS[1])
if pttl < 0 then return 0 end
if redis.call('ZADD', KEYS[3], int(now_ms + pttl - 1), ARGV[1]) > 0 then
  redis.call('PUBLISH', ARGV[3], ARGV[2])
end
redis.call('SADD', KEYS[2], ARGV[2])
redis.call('PEXPIRE', KEYS[2], pttl + 1000)
return 1
";

/// KEYS: joined groups, group. ARGV: id, group.
const LEAVE: &str = r"
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('SREM', KEYS[1], ARGV[2])
return 1
";

/// KEYS: session, lease, slot. ARGV: id, token, slot (decimal, no leading
/// zeros). Returns {0, ''} if the session does not hold the lease with that
/// token (or is not live), {1, ''} once the slot is recorded, {2, last} if
/// `last` >= slot was claimed already. Slots compare as decimal strings
/// (longer is larger, then lexicographic): exact for every u64, where a Lua
/// number is exact only below 2^53.
const CLAIM: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return {0, ''} end
local h = redis.call('HMGET', KEYS[2], 'holder', 'token')
if h[1] ~= ARGV[1] or h[2] ~= ARGV[2] then return {0, ''} end
local last = redis.call('GET', KEYS[3])
if last and (#last > #ARGV[3] or (#last == #ARGV[3] and last >= ARGV[3])) then
  return {2, last}
end
redis.call('SET', KEYS[3], ARGV[3])
return {1, ''}
";

/// KEYS: session, owned, lease, names index. ARGV: id, name, key tag.
/// Returns {code, token, holder, remaining ms}: code 0 = caller expired,
/// 1 = won (the caller's remaining ms), 2 = held by a live session (the
/// holder's remaining ms, S4.4).
const ACQUIRE: &str = r"
local pttl = redis.call('PTTL', KEYS[1])
if pttl < 0 then return {0, '', '', 0} end
local h = redis.call('HMGET', KEYS[3], 'holder', 'token')
local holder, tok = h[1], h[2]
if holder and holder == ARGV[1] then return {1, tok, holder, pttl} end
if holder then
  -- The holder's session key exists exactly while it lives; its PTTL is
  -- the holder's remaining time.
  local hp = redis.call('PTTL', ARGV[3] .. ':s:' .. holder)
  if hp ~= -2 then
    return {2, tok or '', holder, hp}
  end
  -- The expired holder's list: no version bump, its session never renews
  -- again (S1.2).
  redis.call('HDEL', ARGV[3] .. ':o:' .. holder, ARGV[2])
end
local token = now_us()
if tok then
  local after = tonumber(tok) + 1
  if after > token then token = after end
end
local ts = int(token)
redis.call('HSET', KEYS[3], 'holder', ARGV[1], 'token', ts)
redis.call('HSET', KEYS[2], ARGV[2], ts)
bump(KEYS[2], pttl + 1000)
redis.call('ZADD', KEYS[4], 0, ARGV[2])
return {1, ts, ARGV[1], pttl}
";

/// KEYS: lease, owned, session. ARGV: id, token, name, channel.
const RELEASE: &str = r"
local h = redis.call('HMGET', KEYS[1], 'holder', 'token')
if h[1] == ARGV[1] and h[2] == ARGV[2] then
  redis.call('HDEL', KEYS[1], 'holder')
  redis.call('HDEL', KEYS[2], ARGV[3])
  local pttl = redis.call('PTTL', KEYS[3])
  if pttl >= 0 then bump(KEYS[2], pttl + 1000) end
  redis.call('PUBLISH', ARGV[4], ARGV[3])
  return 1
end
return 0
";

/// KEYS: session, owned, sessions index, joined groups. ARGV: id, key tag,
/// channel.
const CLOSE: &str = r"
local names = redis.call('HKEYS', KEYS[2])
for _, g in ipairs(redis.call('SMEMBERS', KEYS[4])) do
  redis.call('ZREM', ARGV[2] .. ':g:' .. g, ARGV[1])
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[4])
redis.call('ZREM', KEYS[3], ARGV[1])
local freed = 0
for _, n in ipairs(names) do
  local lk = ARGV[2] .. ':l:' .. n
  if n ~= '#v' and redis.call('HGET', lk, 'holder') == ARGV[1] then
    redis.call('HDEL', lk, 'holder')
    redis.call('PUBLISH', ARGV[3], n)
    freed = freed + 1
  end
end
return freed
";

/// KEYS: sessions index, names index. ARGV: key tag, lex min, lex max.
/// Returns {{id, lease µs, remaining ms, ...}, {name, token, holder, remaining ms, ...}}
/// (holder '' and remaining -1 when free).
const INSPECT: &str = r"
local ss = {}
for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local sk = ARGV[1] .. ':s:' .. id
  local p = redis.call('PTTL', sk)
  if p >= 0 then
    local lease = redis.call('GET', sk)
    table.insert(ss, id)
    table.insert(ss, lease)
    table.insert(ss, tostring(p))
  elseif p == -2 then
    redis.call('ZREM', KEYS[1], id)
  end
end
local ls = {}
for _, n in ipairs(redis.call('ZRANGEBYLEX', KEYS[2], ARGV[2], ARGV[3])) do
  local h = redis.call('HMGET', ARGV[1] .. ':l:' .. n, 'holder', 'token')
  local holder, rem = '', '-1'
  if h[1] then
    local p = redis.call('PTTL', ARGV[1] .. ':s:' .. h[1])
    if p >= 0 then holder = h[1]; rem = tostring(p) end
  end
  table.insert(ls, n)
  table.insert(ls, h[2] or '0')
  table.insert(ls, holder)
  table.insert(ls, rem)
end
return {ss, ls}
";

struct Scripts {
    open: Script,
    renew: Script,
    acquire: Script,
    release: Script,
    close: Script,
    inspect: Script,
    join: Script,
    leave: Script,
    claim: Script,
}

impl Scripts {
    fn new() -> Scripts {
        let s = |body: &str| Script::new(&format!("{PRELUDE}{body}"));
        Scripts {
            open: s(OPEN),
            renew: s(RENEW),
            acquire: s(ACQUIRE),
            release: s(RELEASE),
            close: s(CLOSE),
            inspect: s(INSPECT),
            join: s(JOIN),
            leave: s(LEAVE),
            claim: s(CLAIM),
        }
    }
}

/// The key names of one deployment (one key prefix).
#[derive(Clone, Debug)]
struct Keys {
    /// `{prefix}`: the Cluster hash tag every key starts with.
    tag: String,
    sessions: String,
    names: String,
    channel: String,
}

impl Keys {
    fn new(prefix: &str) -> Keys {
        let tag = format!("{{{prefix}}}");
        Keys {
            sessions: format!("{tag}:sessions"),
            names: format!("{tag}:names"),
            channel: format!("{tag}:released"),
            tag,
        }
    }
    fn session(&self, id: SessionId) -> String {
        format!("{}:s:{id}", self.tag)
    }
    fn owned(&self, id: SessionId) -> String {
        format!("{}:o:{id}", self.tag)
    }
    fn lease(&self, name: &LeaseName) -> String {
        format!("{}:l:{name}", self.tag)
    }
    fn joined(&self, id: SessionId) -> String {
        format!("{}:j:{id}", self.tag)
    }
    fn group(&self, group: &LeaseName) -> String {
        format!("{}:g:{group}", self.tag)
    }
    fn slot(&self, name: &LeaseName) -> String {
        format!("{}:c:{name}", self.tag)
    }
}

struct Inner {
    target: Target,
    redacted_url: String,
    config: AsyncConnectionConfig,
    timeout: Duration,
    /// The shared multiplexed connection; `None` after it broke, so that the
    /// next call opens a fresh one.
    conn: Mutex<Option<MultiplexedConnection>>,
    keys: Keys,
    scripts: Scripts,
    /// Per session: the owned-list version last listed by the server, and
    /// that list. A renewal sends the version and gets the list back only
    /// if it changed, so renewing 10,000 unchanged leases costs no more on
    /// the server or the wire than renewing one (issue 10).
    owned_cache: Mutex<HashMap<SessionId, OwnedList>>,
}

/// A session's owned leases as last listed, with their version.
struct OwnedList {
    version: String,
    owned: Vec<(LeaseName, Token)>,
}

/// The Redis backend. Cheap to clone (one shared multiplexed connection,
/// reopened on the next call after it breaks).
#[derive(Clone)]
pub struct RedisBackend {
    inner: Arc<Inner>,
}

impl fmt::Debug for RedisBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisBackend")
            .field("url", &self.inner.redacted_url)
            .field("key_prefix", &self.inner.keys.tag)
            .finish_non_exhaustive()
    }
}

/// Turns a driver error into a typed [`BackendError`] (credentials redacted).
fn map_err(what: &str, e: &RedisError) -> BackendError {
    let kind = if matches!(
        e.kind(),
        ErrorKind::AuthenticationFailed | ErrorKind::InvalidClientConfig
    ) {
        BackendErrorKind::Rejected
    } else if e.is_io_error() && e.to_string().contains("certificate") {
        // rustls refused the server's certificate (unknown issuer, wrong
        // name, expired): a setting to fix, not a server that is down.
        BackendErrorKind::Rejected
    } else if e.is_timeout() {
        BackendErrorKind::Timeout
    } else if e.is_io_error()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_unrecoverable_error()
    {
        BackendErrorKind::Unavailable
    } else {
        match e.kind() {
            ErrorKind::Parse | ErrorKind::UnexpectedReturnType => BackendErrorKind::Malformed,
            _ => match e.code() {
                Some("NOPERM" | "WRONGPASS" | "NOAUTH" | "WRONGTYPE" | "NOSCRIPT") => {
                    BackendErrorKind::Rejected
                }
                Some(
                    "LOADING" | "BUSY" | "MASTERDOWN" | "READONLY" | "TRYAGAIN" | "CLUSTERDOWN"
                    | "MOVED" | "ASK",
                ) => BackendErrorKind::Unavailable,
                Some("OOM") => BackendErrorKind::Rejected,
                _ => BackendErrorKind::Other,
            },
        }
    };
    BackendError::new(kind, redact(&format!("{NAME} {what}: {e}")))
}

/// Where the backend's connections go.
enum Target {
    /// One server (`redis://`, `rediss://`).
    Direct(Client),
    /// The primary that Sentinels name (`redis+sentinel://`).
    Sentinel(SentinelTarget),
}

/// `redis+sentinel://[user:password@]host:port[,host:port…]/service[/db]`:
/// the Sentinels to ask, in order, which server is the primary of
/// `service`; the credentials and database are the data servers'.
struct SentinelTarget {
    sentinels: Vec<(String, Client)>,
    service: String,
    /// `redis://[user:password@]` of the data servers.
    userinfo: String,
    db: i64,
}

/// The hosts, service and database of a `redis+sentinel://` URL.
fn parse_sentinel(url: &str, redacted: &str) -> Result<SentinelTarget, BackendError> {
    let bad = |why: &str| {
        BackendError::new(
            BackendErrorKind::Rejected,
            format!("{NAME}: bad URL `{redacted}`: {why}"),
        )
    };
    let rest = url
        .split_once("://")
        .map(|x| x.1)
        .ok_or_else(|| bad("expected redis+sentinel://host:port[,host:port…]/service[/db]"))?;
    let rest = rest.split(['?', '#']).next().unwrap_or("");
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let (userinfo, hosts) = match authority.rfind('@') {
        Some(at) => (format!("{}@", &authority[..at]), &authority[at + 1..]),
        None => (String::new(), authority),
    };
    let mut sentinels = Vec::new();
    for h in hosts.split(',').filter(|h| !h.is_empty()) {
        let hp = if h.contains(':') {
            h.to_owned()
        } else {
            format!("{h}:26379")
        };
        let client = Client::open(format!("redis://{hp}"))
            .map_err(|e| bad(&format!("Sentinel address `{h}`: {e}")))?;
        sentinels.push((hp, client));
    }
    if sentinels.is_empty() {
        return Err(bad("no Sentinel address"));
    }
    let mut parts = path.split('/').filter(|p| !p.is_empty());
    let service = parts
        .next()
        .ok_or_else(|| bad("no service name (…/service[/db])"))?
        .to_owned();
    let db = match parts.next() {
        None => 0,
        Some(d) => d
            .parse::<i64>()
            .map_err(|_| bad("the database must be a number"))?,
    };
    if parts.next().is_some() {
        return Err(bad("expected …/service[/db]"));
    }
    Ok(SentinelTarget {
        sentinels,
        service,
        userinfo,
        db,
    })
}

impl Target {
    /// A client of the server to use now: the one server, or the primary
    /// the first Sentinel that answers names, checked to call itself
    /// primary (`ROLE`: a Sentinel's view may lag a fail-over).
    async fn client(&self, config: &AsyncConnectionConfig) -> Result<Client, BackendError> {
        let st = match self {
            Target::Direct(c) => return Ok(c.clone()),
            Target::Sentinel(st) => st,
        };
        let mut last = format!("no Sentinel answered for service `{}`", st.service);
        for (addr, sentinel) in &st.sentinels {
            let named: Result<Option<(String, u16)>, RedisError> = async {
                let mut c = sentinel
                    .get_multiplexed_async_connection_with_config(config)
                    .await?;
                ::redis::cmd("SENTINEL")
                    .arg("get-master-addr-by-name")
                    .arg(&st.service)
                    .query_async(&mut c)
                    .await
            }
            .await;
            let (host, port) = match named {
                Ok(Some(hp)) => hp,
                Ok(None) => {
                    last = format!("Sentinel {addr} knows no service `{}`", st.service);
                    continue;
                }
                Err(e) => {
                    last = format!("Sentinel {addr}: {e}");
                    continue;
                }
            };
            let node = Client::open(format!("redis://{}{host}:{port}/{}", st.userinfo, st.db))
                .map_err(|e| map_err(&format!("primary {host}:{port}"), &e))?;
            let role: Result<Vec<::redis::Value>, RedisError> = async {
                let mut c = node
                    .get_multiplexed_async_connection_with_config(config)
                    .await?;
                ::redis::cmd("ROLE").query_async(&mut c).await
            }
            .await;
            match role {
                Ok(v) if matches!(v.first(), Some(::redis::Value::BulkString(b)) if b == b"master") => {
                    return Ok(node)
                }
                Ok(_) => {
                    last = format!("{host}:{port}, named by Sentinel {addr}, is not a primary")
                }
                Err(e) => last = redact(&format!("{host}:{port}, named by Sentinel {addr}: {e}")),
            }
        }
        Err(BackendError::new(
            BackendErrorKind::Unavailable,
            format!("{NAME}: {last}"),
        ))
    }
}

fn malformed(what: String) -> BackendError {
    BackendError::new(BackendErrorKind::Malformed, format!("{NAME}: {what}"))
}

fn token_from(name: &str, s: &str) -> Result<Token, BackendError> {
    s.parse::<u64>()
        .ok()
        .and_then(Token::new)
        .ok_or_else(|| malformed(format!("token {s:?} of lease `{name}` is not > 0")))
}

fn session_from(s: &str) -> Result<SessionId, BackendError> {
    if s.len() != 32 {
        return Err(malformed(format!("session id {s:?} is not 32 hex digits")));
    }
    s.parse()
        .map_err(|_| malformed(format!("session id {s:?} is not 32 hex digits")))
}

fn name_from(s: &str) -> Result<LeaseName, BackendError> {
    LeaseName::new(s).map_err(|e| malformed(format!("lease name {s:?}: {e}")))
}

fn millis(ms: i64) -> Duration {
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

fn int_from(what: &str, s: &str) -> Result<i64, BackendError> {
    s.parse()
        .map_err(|_| malformed(format!("{what} {s:?} is not an integer")))
}

/// A runtime-agnostic timeout.
async fn within<T>(
    limit: Duration,
    what: &str,
    fut: impl std::future::Future<Output = Result<T, BackendError>>,
) -> Result<T, BackendError> {
    let fut = std::pin::pin!(fut);
    match futures::future::select(fut, futures_timer::Delay::new(limit)).await {
        futures::future::Either::Left((r, _)) => r,
        futures::future::Either::Right(_) => Err(BackendError::new(
            BackendErrorKind::Timeout,
            format!("{NAME} {what}: no answer within {limit:?}"),
        )),
    }
}

/// A client for `rediss://` that trusts the CA in the PEM file `ca`.
#[cfg(any(feature = "redis-tls", feature = "redis-tls-async-std"))]
fn tls_client(
    url: &str,
    ca: &str,
    redacted_url: &str,
) -> Result<redis::RedisResult<Client>, BackendError> {
    let root_cert = std::fs::read(ca).map_err(|e| {
        BackendError::new(
            BackendErrorKind::Rejected,
            format!("{NAME}: {redacted_url}: cannot read the CA file `{ca}` (simba_tls_ca): {e}"),
        )
    })?;
    Ok(Client::build_with_tls(
        url,
        redis::TlsCertificates {
            client_tls: None,
            root_cert: Some(root_cert),
        },
    ))
}

/// Without a TLS feature, `simba_tls_ca` cannot be honoured.
#[cfg(not(any(feature = "redis-tls", feature = "redis-tls-async-std")))]
fn tls_client(
    _url: &str,
    _ca: &str,
    redacted_url: &str,
) -> Result<redis::RedisResult<Client>, BackendError> {
    Err(BackendError::new(
        BackendErrorKind::Rejected,
        format!(
            "{NAME}: {redacted_url}: simba_tls_ca needs TLS, and this build has neither the \
             `redis-tls` nor the `redis-tls-async-std` feature"
        ),
    ))
}

/// A renewal's owned list, `{name, token, ...}` with the version field
/// `#v` left out, sorted by name.
fn owned_from(flat: &[String]) -> Result<Vec<(LeaseName, Token)>, BackendError> {
    if flat.len() % 2 != 0 {
        return Err(malformed("renew listed an odd number of fields".into()));
    }
    let mut owned = Vec::with_capacity(flat.len() / 2);
    for pair in flat.chunks_exact(2) {
        if pair[0] != "#v" {
            owned.push((name_from(&pair[0])?, token_from(&pair[0], &pair[1])?));
        }
    }
    owned.sort();
    Ok(owned)
}

impl RedisBackend {
    fn owned_cache(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, OwnedList>> {
        self.inner
            .owned_cache
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// The owned-list version last listed for `session`, if any.
    fn cached_version(&self, session: SessionId) -> Option<String> {
        self.owned_cache().get(&session).map(|c| c.version.clone())
    }

    /// The list last listed for `session`, if it is still at `version`.
    fn cached_list(&self, session: SessionId, version: &str) -> Option<Vec<(LeaseName, Token)>> {
        self.owned_cache()
            .get(&session)
            .filter(|c| c.version == version)
            .map(|c| c.owned.clone())
    }

    fn remember(&self, session: SessionId, version: String, owned: &[(LeaseName, Token)]) {
        let mut cache = self.owned_cache();
        if version.is_empty() {
            cache.remove(&session);
        } else {
            cache.insert(
                session,
                OwnedList {
                    version,
                    owned: owned.to_vec(),
                },
            );
        }
    }

    fn forget(&self, session: SessionId) {
        self.owned_cache().remove(&session);
    }

    /// Connects to `url` with the default options (Simba's URL parameters
    /// apply, see [`BackendConfig`]).
    ///
    /// # Errors
    /// `Rejected` if `url` names another kind of backend or is malformed;
    /// otherwise as [`RedisBackend::connect`].
    pub async fn connect_url(url: &str) -> Result<RedisBackend, BackendError> {
        let config = BackendConfig::parse_for(url, crate::BackendKind::Redis, NAME)?;
        Self::connect(&config).await
    }

    /// Connects to the server that `config` names (authenticating with the
    /// URL's ACL user and password, over TLS for `rediss://`) and checks that
    /// it answers. There is no schema: Redis needs no migration.
    ///
    /// # Errors
    /// `Rejected` for a bad URL, wrong credentials or a TLS URL in a build
    /// without TLS; `Unavailable`/`Timeout` if the server cannot be reached
    /// within the configured connect timeout.
    pub async fn connect(config: &BackendConfig) -> Result<RedisBackend, BackendError> {
        crate::ensure_rustls_provider();
        let redacted_url = config.redacted_url();
        let sentinel = config
            .url()
            .get(..15)
            .is_some_and(|s| s.eq_ignore_ascii_case("redis+sentinel:"));
        let target = if sentinel {
            if config.tls_ca().is_some() {
                return Err(BackendError::new(
                    BackendErrorKind::Rejected,
                    format!("{NAME}: {redacted_url}: TLS through Sentinel is not supported"),
                ));
            }
            Target::Sentinel(parse_sentinel(config.url(), &redacted_url)?)
        } else {
            Target::Direct(
                match config.tls_ca() {
                    None => Client::open(config.url()),
                    Some(ca) => tls_client(config.url(), ca, &redacted_url)?,
                }
                .map_err(|e| {
                    let mut err = map_err(&format!("URL {redacted_url}"), &e);
                    err.kind = BackendErrorKind::Rejected;
                    err
                })?,
            )
        };
        let timeout = config.connect_timeout();
        let backend = RedisBackend {
            inner: Arc::new(Inner {
                owned_cache: Mutex::new(HashMap::new()),
                target,
                redacted_url,
                config: AsyncConnectionConfig::new()
                    .set_connection_timeout(Some(timeout))
                    .set_response_timeout(Some(timeout)),
                timeout,
                conn: Mutex::new(None),
                keys: Keys::new(config.key_prefix()),
                scripts: Scripts::new(),
            }),
        };
        within(timeout, "PING", backend.ping()).await?;
        Ok(backend)
    }

    /// Redis has no schema: nothing to migrate.
    ///
    /// # Errors
    /// Never.
    pub async fn migrate(&self) -> Result<(), BackendError> {
        Ok(())
    }

    /// The pub/sub channel releases are broadcast on (`{prefix}:released`).
    pub fn channel(&self) -> &str {
        &self.inner.keys.channel
    }

    /// The hash tag every key of this deployment starts with (`{prefix}`).
    pub fn key_tag(&self) -> &str {
        &self.inner.keys.tag
    }

    /// Sends a raw `PING` over the shared connection (for benchmarks: the
    /// round trip every call pays).
    ///
    /// # Errors
    /// A [`BackendError`] if the call failed.
    pub async fn ping(&self) -> Result<(), BackendError> {
        let mut conn = self.conn().await?;
        ::redis::cmd("PING")
            .query_async::<String>(&mut conn)
            .await
            .map_err(|e| self.broken(&e, "PING"))?;
        Ok(())
    }

    /// The shared connection, opened if there is none.
    async fn conn(&self) -> Result<MultiplexedConnection, BackendError> {
        if let Some(c) = self.lock().clone() {
            return Ok(c);
        }
        let inner = &self.inner;
        let open = async {
            inner
                .target
                .client(&inner.config)
                .await?
                .get_multiplexed_async_connection_with_config(&inner.config)
                .await
                .map_err(|e| map_err(&format!("connect to {}", inner.redacted_url), &e))
        };
        let c = within(inner.timeout, "connect", open).await?;
        *self.lock() = Some(c.clone());
        Ok(c)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<MultiplexedConnection>> {
        self.inner.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Maps `e`, dropping the shared connection if it is broken.
    fn broken(&self, e: &RedisError, what: &str) -> BackendError {
        let err = map_err(what, e);
        if matches!(
            err.kind,
            BackendErrorKind::Unavailable | BackendErrorKind::Timeout
        ) {
            *self.lock() = None;
        }
        err
    }

    /// Runs `script` with the keys and arguments that `build` gives it
    /// (from the backend's key names) on the shared connection; `what`
    /// names the call in errors.
    async fn run<T: ::redis::FromRedisValue>(
        &self,
        what: &str,
        script: &Script,
        build: impl FnOnce(&Keys, &mut ScriptInvocation<'_>),
    ) -> Result<T, BackendError> {
        let mut inv = script.prepare_invoke();
        build(&self.inner.keys, &mut inv);
        let mut conn = self.conn().await?;
        inv.invoke_async(&mut conn)
            .await
            .map_err(|e| self.broken(&e, what))
    }

    /// For the conformance suite: runs `acquire(session, name)` through
    /// [`RedisBackend::while_killed`].
    ///
    /// # Errors
    /// A [`BackendError`] if the helper connection failed.
    #[cfg(feature = "testkit")]
    pub async fn acquire_while_killed(
        &self,
        session: SessionId,
        name: &LeaseName,
    ) -> Result<Result<AcquireOutcome, BackendError>, BackendError> {
        self.while_killed(self.acquire(session, name)).await
    }

    /// For failure tests: runs `call` (a call of this backend) while the
    /// server holds writes (`CLIENT PAUSE … WRITE`, so a script waits on the
    /// server), kills the shared connection serving it (`CLIENT KILL ID`),
    /// lifts the pause, and returns what `call` returned. The pause lasts a
    /// few tens of milliseconds and delays every client's writes on that
    /// server.
    ///
    /// # Errors
    /// A [`BackendError`] if the helper connection failed.
    #[cfg(feature = "testkit")]
    pub async fn while_killed<T>(
        &self,
        call: impl std::future::Future<Output = T>,
    ) -> Result<T, BackendError> {
        let err = |e: RedisError| map_err("test helper", &e);
        let (id, mut helper) = self.helper_connection().await?;
        ::redis::cmd("CLIENT")
            .arg("PAUSE")
            .arg(3000)
            .arg("WRITE")
            .query_async::<()>(&mut helper)
            .await
            .map_err(err)?;
        let killer = async {
            // Give the call time to reach the server and wait there; if it
            // has not, the kill still breaks it before it is sent.
            futures_timer::Delay::new(Duration::from_millis(50)).await;
            let killed = ::redis::cmd("CLIENT")
                .arg("KILL")
                .arg("ID")
                .arg(id)
                .query_async::<i64>(&mut helper.clone())
                .await;
            let unpaused = ::redis::cmd("CLIENT")
                .arg("UNPAUSE")
                .query_async::<()>(&mut helper.clone())
                .await;
            killed.map_err(err)?;
            unpaused.map_err(err)
        };
        let (result, killed) = futures::join!(call, killer);
        killed?;
        Ok(result)
    }

    /// Joins (`join`) or leaves `group` for `session`, by the join or leave
    /// script (a join also checks the session's key: 0, the session is not
    /// live, and a join by it is a no-op).
    async fn membership(
        &self,
        join: bool,
        session: SessionId,
        group: &LeaseName,
    ) -> Result<(), BackendError> {
        let scripts = &self.inner.scripts;
        let (what, script) = if join {
            ("join group", &scripts.join)
        } else {
            ("leave group", &scripts.leave)
        };
        let _: i64 = self
            .run(what, script, |keys, inv| {
                if join {
                    inv.key(keys.session(session));
                }
                inv.key(keys.joined(session))
                    .key(keys.group(group))
                    .arg(session.to_string())
                    .arg(group.as_str());
                if join {
                    inv.arg(&keys.channel);
                }
            })
            .await?;
        Ok(())
    }

    /// For failure tests: the server's id of this client's shared
    /// connection (`CLIENT ID`), and a helper connection of its own.
    #[cfg(feature = "testkit")]
    async fn helper_connection(
        &self,
    ) -> Result<(i64, ::redis::aio::MultiplexedConnection), BackendError> {
        let err = |e: RedisError| map_err("test helper", &e);
        let mut ours = self.conn().await?;
        let id: i64 = ::redis::cmd("CLIENT")
            .arg("ID")
            .query_async(&mut ours)
            .await
            .map_err(err)?;
        let helper = self
            .inner
            .target
            .client(&self.inner.config)
            .await?
            .get_multiplexed_async_connection_with_config(&self.inner.config)
            .await
            .map_err(err)?;
        Ok((id, helper))
    }

    /// For failure tests: kills every connection of this client's shared
    /// connection from the server side (`CLIENT KILL ID`) and returns how
    /// many were killed.
    ///
    /// # Errors
    /// A [`BackendError`] if the helper connection failed.
    #[cfg(feature = "testkit")]
    pub async fn kill_connection(&self) -> Result<i64, BackendError> {
        let err = |e: RedisError| map_err("test helper", &e);
        let (id, mut helper) = self.helper_connection().await?;
        ::redis::cmd("CLIENT")
            .arg("KILL")
            .arg("ID")
            .arg(id)
            .query_async(&mut helper)
            .await
            .map_err(err)
    }

    async fn pubsub(inner: &Inner) -> Result<::redis::aio::PubSub, BackendError> {
        let what = "subscribe";
        within(inner.timeout, what, async {
            let mut ps = inner
                .target
                .client(&inner.config)
                .await?
                .get_async_pubsub()
                .await
                .map_err(|e| map_err(what, &e))?;
            ps.subscribe(&inner.keys.channel)
                .await
                .map_err(|e| map_err(what, &e))?;
            Ok(ps)
        })
        .await
    }
}

/// The lease duration in whole milliseconds (at least 1): Redis expires keys
/// by the millisecond, and rounding down never promises more than asked.
fn lease_ms(lease_duration: Duration) -> Result<(i64, i64), BackendError> {
    let us = check_lease_duration(lease_duration)?;
    Ok((us, (us / 1000).max(1)))
}

impl Backend for RedisBackend {
    fn open_session_with<'a>(
        &'a self,
        lease_duration: Duration,
        metadata: &'a SessionMetadata,
    ) -> BoxFuture<'a, Result<SessionGrant, BackendError>> {
        async move {
            let (us, ms) = lease_ms(lease_duration)?;
            let value = if metadata.is_empty() {
                us.to_string()
            } else {
                format!("{us}|{}", metadata.encode())
            };
            let session = random_session_id()?;
            let granted: i64 = self
                .run("open session", &self.inner.scripts.open, |keys, inv| {
                    inv.key(keys.session(session))
                        .key(&keys.sessions)
                        .arg(session.to_string())
                        .arg(value)
                        .arg(ms);
                })
                .await?;
            Ok(SessionGrant {
                session,
                remaining: millis(granted),
            })
        }
        .boxed()
    }

    fn renew(&self, session: SessionId) -> BoxFuture<'_, Result<Renewal, RenewError>> {
        async move {
            let seen = self.cached_version(session);
            type Reply = (i64, Vec<String>, Vec<String>, String, i64);
            let reply: Option<Reply> = self
                .run("renew", &self.inner.scripts.renew, |keys, inv| {
                    inv.key(keys.session(session))
                        .key(keys.owned(session))
                        .key(&keys.sessions)
                        .key(keys.joined(session))
                        .arg(session.to_string())
                        .arg(&keys.tag)
                        .arg(seen.as_deref().unwrap_or(""));
                })
                .await?;
            let Some((ms, flat, groups, version, full)) = reply else {
                self.forget(session);
                return Err(RenewError::Expired);
            };
            let owned = if full == 0 {
                // Unchanged since the version this call sent.
                match self.cached_list(session, &version) {
                    Some(owned) => owned,
                    None => {
                        return Err(malformed(format!(
                            "renew said version {version:?} is unchanged, but it was not sent"
                        ))
                        .into())
                    }
                }
            } else {
                let owned = owned_from(&flat)?;
                self.remember(session, version, &owned);
                owned
            };
            Ok(Renewal {
                groups: group_views(&groups)?,
                remaining: millis(ms),
                owned,
            })
        }
        .boxed()
    }

    fn acquire<'a>(
        &'a self,
        session: SessionId,
        name: &'a LeaseName,
    ) -> BoxFuture<'a, Result<AcquireOutcome, BackendError>> {
        async move {
            let (code, token, holder, ms): (i64, String, String, i64) = self
                .run("acquire", &self.inner.scripts.acquire, |keys, inv| {
                    inv.key(keys.session(session))
                        .key(keys.owned(session))
                        .key(keys.lease(name))
                        .key(&keys.names)
                        .arg(session.to_string())
                        .arg(name.as_str())
                        .arg(&keys.tag);
                })
                .await?;
            match code {
                0 => Ok(AcquireOutcome::Expired),
                1 => Ok(AcquireOutcome::Won {
                    token: token_from(name.as_str(), &token)?,
                    remaining: millis(ms),
                }),
                2 => Ok(AcquireOutcome::Held {
                    holder: Some(session_from(&holder)?),
                    token: if token.is_empty() {
                        None
                    } else {
                        Some(token_from(name.as_str(), &token)?)
                    },
                    // PTTL: -1 for a key without expiry (never set so).
                    holder_remaining: (ms >= 0).then(|| millis(ms)),
                }),
                other => Err(malformed(format!("acquire answered code {other}"))),
            }
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
            let _: i64 = self
                .run("release", &self.inner.scripts.release, |keys, inv| {
                    inv.key(keys.lease(name))
                        .key(keys.owned(session))
                        .key(keys.session(session))
                        .arg(session.to_string())
                        .arg(token.get().to_string())
                        .arg(name.as_str())
                        .arg(&keys.channel);
                })
                .await?;
            Ok(())
        }
        .boxed()
    }

    fn close_session(&self, session: SessionId) -> BoxFuture<'_, Result<(), BackendError>> {
        async move {
            let _: i64 = self
                .run("close session", &self.inner.scripts.close, |keys, inv| {
                    inv.key(keys.session(session))
                        .key(keys.owned(session))
                        .key(&keys.sessions)
                        .key(keys.joined(session))
                        .arg(session.to_string())
                        .arg(&keys.tag)
                        .arg(&keys.channel);
                })
                .await?;
            self.forget(session);
            Ok(())
        }
        .boxed()
    }

    fn inspect<'a>(
        &'a self,
        prefix: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Inspection, BackendError>> {
        async move {
            let prefix = prefix.unwrap_or("");
            check_prefix(prefix)?;
            // `~` sorts after every character a name may hold (S3.1).
            let (lo, hi) = if prefix.is_empty() {
                ("-".to_owned(), "+".to_owned())
            } else {
                (format!("[{prefix}"), format!("[{prefix}~"))
            };
            let (ss, ls): (Vec<String>, Vec<String>) = self
                .run("inspect", &self.inner.scripts.inspect, |keys, inv| {
                    inv.key(&keys.sessions)
                        .key(&keys.names)
                        .arg(&keys.tag)
                        .arg(lo)
                        .arg(hi);
                })
                .await?;
            if ss.len() % 3 != 0 || ls.len() % 4 != 0 {
                return Err(malformed("inspect answered a ragged list".into()));
            }
            let mut out = Inspection::default();
            for s in ss.chunks_exact(3) {
                let (lease_us, metadata) = s[1].split_once('|').unwrap_or((&s[1], ""));
                let lease_us = int_from("lease duration", lease_us)?;
                out.sessions.push(SessionInfo {
                    session: session_from(&s[0])?,
                    remaining: millis(int_from("remaining time", &s[2])?),
                    lease_duration: Duration::from_micros(u64::try_from(lease_us).unwrap_or(0)),
                    metadata: SessionMetadata::decode(metadata),
                });
            }
            for l in ls.chunks_exact(4) {
                let token = int_from("token", &l[1])?;
                let rem = int_from("remaining time", &l[3])?;
                out.leases.push(LeaseInfo {
                    name: name_from(&l[0])?,
                    token: if token == 0 {
                        None
                    } else {
                        Some(token_from(&l[0], &l[1])?)
                    },
                    holder: if l[2].is_empty() {
                        None
                    } else {
                        Some(session_from(&l[2])?)
                    },
                    remaining: (rem >= 0).then(|| millis(rem)),
                });
            }
            out.sessions.sort_by_key(|s| s.session);
            out.leases.sort_by(|a, b| a.name.cmp(&b.name));
            Ok(out)
        }
        .boxed()
    }

    fn subscribe_releases(
        &self,
    ) -> BoxFuture<'_, Result<Option<BoxStream<'static, LeaseName>>, BackendError>> {
        async move {
            let first = Self::pubsub(&self.inner).await?;
            let inner = self.inner.clone();
            let state = (inner, Some(first.into_on_message()));
            let stream = futures::stream::unfold(state, |(inner, mut current)| async move {
                loop {
                    match current.as_mut() {
                        Some(messages) => match messages.next().await {
                            Some(msg) => {
                                let Ok(payload) = msg.get_payload::<String>() else {
                                    continue;
                                };
                                match LeaseName::new(payload) {
                                    Ok(name) => return Some((name, (inner, current))),
                                    Err(_) => continue, // not ours: ignore
                                }
                            }
                            // The connection broke: resubscribe. Releases
                            // published meanwhile are lost (the engine's
                            // retry covers them).
                            None => current = None,
                        },
                        None => {
                            futures_timer::Delay::new(Duration::from_millis(250)).await;
                            if let Ok(ps) = Self::pubsub(&inner).await {
                                current = Some(ps.into_on_message());
                            }
                        }
                    }
                }
            });
            Ok(Some(stream.boxed()))
        }
        .boxed()
    }

    fn broadcasts_releases(&self) -> bool {
        true
    }

    crate::forward::groups_by_membership!();

    fn claim_slot<'a>(
        &'a self,
        session: SessionId,
        name: &'a LeaseName,
        token: Token,
        slot: u64,
    ) -> BoxFuture<'a, Result<SlotClaim, BackendError>> {
        async move {
            let (code, last): (i64, String) = self
                .run("claim slot", &self.inner.scripts.claim, |keys, inv| {
                    inv.key(keys.session(session))
                        .key(keys.lease(name))
                        .key(keys.slot(name))
                        .arg(session.to_string())
                        .arg(token.get().to_string())
                        .arg(slot.to_string());
                })
                .await?;
            match code {
                0 => Ok(SlotClaim::NotHolder),
                1 => Ok(SlotClaim::Claimed),
                2 => Ok(SlotClaim::AlreadyClaimed {
                    last: last.parse().map_err(|_| {
                        malformed(format!("last slot {last:?} of `{name}` is not a u64"))
                    })?,
                }),
                other => Err(malformed(format!("claim slot answered code {other}"))),
            }
        }
        .boxed()
    }

    fn name(&self) -> &'static str {
        NAME
    }
}

/// The renewal's `{group, 'id,id,...', ...}` list as views (members
/// ascending).
fn group_views(flat: &[String]) -> Result<Vec<GroupView>, BackendError> {
    if flat.len() % 2 != 0 {
        return Err(malformed(
            "renew listed an odd number of group fields".into(),
        ));
    }
    let mut out = Vec::with_capacity(flat.len() / 2);
    for pair in flat.chunks_exact(2) {
        let group = name_from(&pair[0])?;
        let mut members = pair[1]
            .split(',')
            .filter(|m| !m.is_empty())
            .map(session_from)
            .collect::<Result<Vec<_>, _>>()?;
        members.sort_unstable();
        members.dedup();
        out.push(GroupView { group, members });
    }
    out.sort_by(|a, b| a.group.cmp(&b.group));
    Ok(out)
}
