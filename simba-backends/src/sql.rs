//! What the SQL backends share: error mapping, row decoding, schema checks,
//! and one skeleton over sqlx's databases ([`Skeleton`]) that runs the
//! statements every backend has ([`Statements`], in each database's
//! dialect). The `Backend` and test-hold calls that are the same on every
//! SQL database are written once as macros (`sql_backend_common!`,
//! `sql_backend_inherent!`, `hold_calls!`) expanded in each backend's
//! `impl`; each backend's file keeps what is its own (PostgreSQL's
//! LISTEN/NOTIFY and host lists, MySQL's release waker and acquire
//! procedure, SQLite's hint file).

use crate::{redact, LeaseInfo};
use simba_core::AcquireOutcome;
use simba_core::{BackendError, BackendErrorKind, GroupView, LeaseName, SessionId, Token};
use std::time::Duration;

/// Turns a driver error into a typed [`BackendError`] (credentials redacted).
pub(crate) fn map_err(backend: &str, what: &str, e: sqlx::Error) -> BackendError {
    use sqlx::Error as E;
    let kind = match &e {
        // rustls reports a certificate it cannot trust (unknown issuer,
        // wrong name, expired) as invalid data on the connection.
        E::Io(io)
            if io.kind() == std::io::ErrorKind::InvalidData
                && io.to_string().contains("certificate") =>
        {
            BackendErrorKind::Rejected
        }
        E::Io(_) | E::PoolClosed | E::WorkerCrashed => BackendErrorKind::Unavailable,
        // A certificate the settings do not trust, or a server without TLS
        // where the URL requires it: a setting to fix, not a wait.
        E::Tls(_) => BackendErrorKind::Rejected,
        E::PoolTimedOut => BackendErrorKind::Timeout,
        E::Configuration(_) => BackendErrorKind::Rejected,
        E::Protocol(_)
        | E::ColumnDecode { .. }
        | E::Decode(_)
        | E::ColumnNotFound(_)
        | E::ColumnIndexOutOfBounds { .. }
        | E::TypeNotFound { .. }
        | E::RowNotFound => BackendErrorKind::Malformed,
        E::Database(db) => {
            // MySQL reports a generic SQLSTATE; its error number says more.
            #[cfg(feature = "mysql")]
            if let Some(my) = db.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>() {
                let kind = db_kind(&my.number().to_string(), db.message());
                return BackendError::new(kind, redact(&format!("{backend} {what}: {e}")));
            }
            db_kind(db.code().as_deref().unwrap_or(""), db.message())
        }
        _ => BackendErrorKind::Other,
    };
    BackendError::new(kind, redact(&format!("{backend} {what}: {e}")))
}

/// Classifies a database error by its SQLSTATE / vendor code.
fn db_kind(code: &str, message: &str) -> BackendErrorKind {
    match code {
        // PostgreSQL: connection exceptions, admin shutdown / termination,
        // cannot connect now.
        c if c.starts_with("08") => BackendErrorKind::Unavailable,
        "57P01" | "57P02" | "57P03" | "53300" => BackendErrorKind::Unavailable,
        // PostgreSQL: a write refused in a read-only transaction, which is
        // what a standby answers (a host list moves on, see `Failover`).
        "25006" => BackendErrorKind::Unavailable,
        // PostgreSQL: privileges, undefined objects, constraint violations.
        "42501" | "42P01" | "42703" | "42883" => BackendErrorKind::Rejected,
        c if c.starts_with("23") => BackendErrorKind::Rejected,
        // PostgreSQL statement timeout / lock timeout.
        "57014" | "55P03" => BackendErrorKind::Timeout,
        // MySQL/MariaDB: access denied, unknown table/column, server gone.
        "1044" | "1045" | "1142" | "1143" | "1146" | "1054" => BackendErrorKind::Rejected,
        "1927" | "2006" | "2013" | "1053" => BackendErrorKind::Unavailable,
        "1205" => BackendErrorKind::Timeout,
        // SQLite: busy / locked (after busy_timeout), read-only, I/O.
        "5" | "6" | "261" | "517" => BackendErrorKind::Timeout,
        "8" | "10" | "14" | "23" => BackendErrorKind::Rejected,
        _ if message.contains("no such table") => BackendErrorKind::Rejected,
        _ => BackendErrorKind::Other,
    }
}

/// A value out of range in a row.
pub(crate) fn malformed(backend: &str, what: String) -> BackendError {
    BackendError::new(BackendErrorKind::Malformed, format!("{backend}: {what}"))
}

/// A session id column: exactly 16 bytes.
pub(crate) fn session_from(backend: &str, bytes: &[u8]) -> Result<SessionId, BackendError> {
    let arr: [u8; 16] = bytes.try_into().map_err(|_| {
        malformed(
            backend,
            format!(
                "a session id of {} bytes in a row (expected 16)",
                bytes.len()
            ),
        )
    })?;
    Ok(SessionId::from_bytes(arr))
}

/// A token column of an owned lease: > 0.
pub(crate) fn token_from(backend: &str, name: &str, v: i64) -> Result<Token, BackendError> {
    u64::try_from(v)
        .ok()
        .and_then(Token::new)
        .ok_or_else(|| malformed(backend, format!("token {v} of lease `{name}` is not > 0")))
}

/// A remaining time in microseconds; negative values clamp to zero (the
/// session expired while the statement ran).
pub(crate) fn micros(v: i64) -> Duration {
    Duration::from_micros(u64::try_from(v).unwrap_or(0))
}

/// A lease name column.
pub(crate) fn name_from(backend: &str, s: &str) -> Result<LeaseName, BackendError> {
    LeaseName::new(s).map_err(|e| malformed(backend, format!("lease name {s:?} in a row: {e}")))
}

/// `name=token,name=token` as built by the renew statements (names cannot
/// hold `=` or `,`, S3.1). MySQL lists owned leases as rows instead.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) fn parse_owned(
    backend: &str,
    list: Option<&str>,
) -> Result<Vec<(LeaseName, Token)>, BackendError> {
    let Some(list) = list.filter(|l| !l.is_empty()) else {
        return Ok(Vec::new());
    };
    list.split(',')
        .map(|item| {
            let (n, t) = item.split_once('=').ok_or_else(|| {
                malformed(backend, format!("owned lease entry {item:?} in a renewal"))
            })?;
            let t: i64 = t
                .parse()
                .map_err(|_| malformed(backend, format!("token {t:?} of lease `{n}`")))?;
            Ok((name_from(backend, n)?, token_from(backend, n, t)?))
        })
        .collect()
}

/// `group=HEXID,group=HEXID` as built by the renew statements of SQLite and
/// PostgreSQL (the live members of every group the session joined, in any
/// order) into views with members ascending. MySQL lists them as rows and
/// uses [`group_views`] directly.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) fn parse_groups(
    backend: &str,
    list: Option<&str>,
) -> Result<Vec<GroupView>, BackendError> {
    let Some(list) = list.filter(|l| !l.is_empty()) else {
        return Ok(Vec::new());
    };
    let mut pairs = Vec::new();
    for item in list.split(',') {
        let (g, id) = item.split_once('=').ok_or_else(|| {
            malformed(backend, format!("group member entry {item:?} in a renewal"))
        })?;
        let id: SessionId = id
            .parse()
            .map_err(|_| malformed(backend, format!("member id {id:?} of group `{g}`")))?;
        pairs.push((name_from(backend, g)?, id));
    }
    Ok(group_views(pairs))
}

/// Groups `(group, member)` pairs into [`GroupView`]s: groups ascending,
/// members ascending and without duplicates.
pub(crate) fn group_views(
    pairs: impl IntoIterator<Item = (LeaseName, SessionId)>,
) -> Vec<GroupView> {
    let mut map: std::collections::BTreeMap<LeaseName, Vec<SessionId>> =
        std::collections::BTreeMap::new();
    for (g, m) in pairs {
        map.entry(g).or_default().push(m);
    }
    map.into_iter()
        .map(|(group, mut members)| {
            members.sort_unstable();
            members.dedup();
            GroupView { group, members }
        })
        .collect()
}

/// A schedule slot as a signed 64-bit column value: SQL has no unsigned
/// 64-bit integer, so slots above `i64::MAX` are refused (`Rejected`).
pub(crate) fn slot_to_i64(backend: &str, slot: u64) -> Result<i64, BackendError> {
    i64::try_from(slot).map_err(|_| {
        BackendError::new(
            BackendErrorKind::Rejected,
            format!(
                "{backend}: slot {slot} is above the largest storable slot {}",
                i64::MAX
            ),
        )
    })
}

/// A slot column read back: never negative.
pub(crate) fn slot_from(backend: &str, name: &LeaseName, v: i64) -> Result<u64, BackendError> {
    u64::try_from(v).map_err(|_| {
        malformed(
            backend,
            format!("slot {v} of schedule `{name}` is negative"),
        )
    })
}

/// A token as a signed column value; `None` if no row can hold it (a token
/// above `i64::MAX` was never handed out, so it owns nothing).
pub(crate) fn token_to_i64(token: Token) -> Option<i64> {
    i64::try_from(token.get()).ok()
}

/// Checks that an existing table has exactly the columns Simba creates; a
/// foreign table of the same name is reported, never altered.
pub(crate) fn check_shape(
    backend: &str,
    table: &str,
    found: &[String],
    expected: &[&str],
) -> Result<(), BackendError> {
    let mut f: Vec<String> = found.iter().map(|c| c.to_ascii_lowercase()).collect();
    f.sort();
    let mut e: Vec<String> = expected.iter().map(|c| (*c).to_owned()).collect();
    e.sort();
    if f == e {
        Ok(())
    } else {
        Err(BackendError::new(
            BackendErrorKind::Rejected,
            format!(
                "{backend}: table `{table}` exists but is not a Simba table \
                 (columns [{}], expected [{}]); choose another table prefix",
                f.join(", "),
                e.join(", ")
            ),
        ))
    }
}

/// The columns of the sessions table.
pub(crate) const SESSION_COLUMNS: &[&str] = &["id", "lease_us", "expires_us", "metadata"];
/// One of Simba's migration files (written for the default table prefix
/// `simba_`, see `migrations/README.md`) for `table_prefix`: the files are
/// the only DDL; every backend runs them with the prefix replaced.
pub(crate) fn prefixed(ddl: &str, table_prefix: &str) -> String {
    ddl.replace(crate::DEFAULT_TABLE_PREFIX, table_prefix)
}

/// The columns of the leases table.
pub(crate) const LEASE_COLUMNS: &[&str] = &["name", "session", "token", "acquired_us"];
/// The columns of the group members table (S10.1).
pub(crate) const MEMBER_COLUMNS: &[&str] = &["name", "session"];
/// The columns of the schedule slots table (S11.1).
pub(crate) const SLOT_COLUMNS: &[&str] = &["name", "slot"];
/// The columns of the release log (MySQL / MariaDB, S4.2).
pub(crate) const RELEASE_COLUMNS: &[&str] = &["seq", "name", "token", "session", "node", "at_us"];

/// Builds an [`Inspection`] lease row.
pub(crate) fn lease_info(
    backend: &str,
    name: &str,
    token: i64,
    holder: Option<Vec<u8>>,
    remaining_us: Option<i64>,
) -> Result<LeaseInfo, BackendError> {
    let token = if token == 0 {
        None
    } else {
        Some(token_from(backend, name, token)?)
    };
    Ok(LeaseInfo {
        name: name_from(backend, name)?,
        holder: holder
            .as_deref()
            .map(|h| session_from(backend, h))
            .transpose()?,
        token,
        remaining: remaining_us.map(micros),
    })
}

#[cfg(feature = "sqlite")]
/// The outcome of an acquire that did not win, from a read after it:
/// `mine_us` is the caller's remaining time (`None` once expired),
/// `holder_us` the holder's (`None` or ≤ 0 once expired).
pub(crate) fn held_outcome(
    backend: &str,
    session: SessionId,
    name: &LeaseName,
    mine_us: Option<i64>,
    holder: Option<Vec<u8>>,
    token: Option<i64>,
    holder_us: Option<i64>,
) -> Result<AcquireOutcome, BackendError> {
    let Some(mine_us) = mine_us else {
        return Ok(AcquireOutcome::Expired);
    };
    let holder = holder
        .as_deref()
        .map(|h| session_from(backend, h))
        .transpose()?;
    match (holder, token) {
        (Some(h), Some(t)) if h == session => Ok(AcquireOutcome::Won {
            // A concurrent acquire by the same session won it.
            token: token_from(backend, name.as_str(), t)?,
            remaining: micros(mine_us),
        }),
        (Some(h), Some(t)) if holder_us.is_some_and(|r| r > 0) => Ok(AcquireOutcome::Held {
            holder: Some(h),
            token: Some(token_from(backend, name.as_str(), t)?),
            holder_remaining: holder_us.map(micros),
        }),
        // Freed or expired since the decision: someone else raced us.
        _ => Ok(AcquireOutcome::Held {
            holder: None,
            token: None,
            holder_remaining: None,
        }),
    }
}

/// Decodes the two result sets of an `inspect` (sessions: id, lease µs,
/// remaining µs, metadata; leases: name, token, holder, remaining µs) into an
/// [`Inspection`](crate::Inspection), sorted by session and by name. Shared
/// by every SQL backend; `err` maps a driver error the backend's way.
pub(crate) fn inspection_from_rows<R>(
    backend: &str,
    sessions: Vec<R>,
    leases: Vec<R>,
    err: impl Fn(sqlx::Error) -> BackendError,
) -> Result<crate::Inspection, BackendError>
where
    R: sqlx::Row,
    usize: sqlx::ColumnIndex<R>,
    for<'r> Vec<u8>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'r> String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    let mut out = crate::Inspection::default();
    for r in sessions {
        let id: Vec<u8> = r.try_get(0).map_err(&err)?;
        let lease_us: i64 = r.try_get(1).map_err(&err)?;
        let rem: i64 = r.try_get(2).map_err(&err)?;
        let metadata: Option<String> = r.try_get(3).map_err(&err)?;
        out.sessions.push(crate::SessionInfo {
            session: session_from(backend, &id)?,
            remaining: micros(rem),
            lease_duration: micros(lease_us),
            metadata: crate::SessionMetadata::decode(metadata.as_deref().unwrap_or("")),
        });
    }
    for r in leases {
        let name: String = r.try_get(0).map_err(&err)?;
        let token: i64 = r.try_get(1).map_err(&err)?;
        let holder: Option<Vec<u8>> = r.try_get(2).map_err(&err)?;
        let rem: Option<i64> = r.try_get(3).map_err(&err)?;
        out.leases
            .push(lease_info(backend, &name, token, holder, rem)?);
    }
    out.sessions.sort_by_key(|s| s.session);
    out.leases.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// What a locking acquire read, after it locked the lease row: the caller's
/// remaining time (`None` or ≤ 0 once expired), the row's holder and latest
/// token, and that holder's remaining time (`None` or ≤ 0 once expired).
#[cfg(any(feature = "postgres", feature = "mysql"))]
pub(crate) struct AcquireRead {
    pub(crate) mine_us: Option<i64>,
    pub(crate) holder: Option<Vec<u8>>,
    pub(crate) token: i64,
    pub(crate) holder_us: Option<i64>,
}

/// The answer to an acquire from the acquire routine's reply ([`AcquireRead`]),
/// shared by the transactional SQL backends (PostgreSQL's function, MySQL's
/// procedure), whose routine has already taken a lease it could take: the
/// caller must be live; the holder (just taken, or held already) gets its
/// term; a live holder is reported; a lease still free or with a holder
/// that is not live was *not* taken (the routine judged it with the same
/// clock reading, so this cannot happen), and is answered `Held` with no
/// time left, to be retried: a win that was not written is never claimed.
#[cfg(any(feature = "postgres", feature = "mysql"))]
pub(crate) fn decide(
    backend: &str,
    session: SessionId,
    name: &LeaseName,
    j: AcquireRead,
) -> Result<AcquireOutcome, BackendError> {
    let Some(mine) = j.mine_us.filter(|m| *m > 0) else {
        return Ok(AcquireOutcome::Expired);
    };
    let holder = j
        .holder
        .as_deref()
        .map(|h| session_from(backend, h))
        .transpose()?;
    let token = || token_from(backend, name.as_str(), j.token);
    match holder {
        Some(h) if h == session => Ok(AcquireOutcome::Won {
            token: token()?,
            remaining: micros(mine),
        }),
        Some(h) if j.holder_us.is_some_and(|r| r > 0) => Ok(AcquireOutcome::Held {
            holder: Some(h),
            token: Some(token()?),
            holder_remaining: j.holder_us.map(micros),
        }),
        _ => {
            if j.token.checked_add(1).is_none_or(|t| t <= 0) {
                return Err(malformed(
                    backend,
                    format!("token {} of lease `{name}`", j.token),
                ));
            }
            Ok(AcquireOutcome::Held {
                holder,
                token: Some(token()?),
                holder_remaining: Some(Duration::ZERO),
            })
        }
    }
}

/// Opens a lazily built pool's first connection within `timeout` (the
/// connect timeout), so a server that does not answer fails start-up quickly
/// even though a call may wait longer for a pooled connection later.
///
/// One plain connection is tried first and closed again: a pool retries a
/// refused connection silently until its acquire timeout, which would turn
/// "nothing listens there" into a late `Timeout`; the plain attempt reports
/// it at once as `Unavailable`, so a caller that retries with back-off (the
/// CLI's `simba lock --wait`) can say so and pace itself. The pool never
/// holds more than its budget: the plain connection is gone before the
/// pool's first one opens.
#[cfg(any(feature = "postgres", feature = "mysql"))]
pub(crate) async fn first_connection<DB: sqlx::Database>(
    backend: &str,
    what: &str,
    pool: &sqlx::Pool<DB>,
    timeout: Duration,
) -> Result<(), BackendError> {
    use futures::future::{select, Either};
    use sqlx::Connection as _;
    let options = pool.connect_options();
    let plain = DB::Connection::connect_with(&options);
    futures::pin_mut!(plain);
    match select(plain, futures_timer::Delay::new(timeout)).await {
        Either::Left((Ok(conn), _)) => {
            // Closing politely is best effort; a failure here says nothing
            // about the server's reachability.
            let _ = conn.close().await;
        }
        Either::Left((Err(e), _)) => return Err(map_err(backend, what, e)),
        Either::Right(_) => {
            return Err(BackendError::new(
                BackendErrorKind::Timeout,
                format!("{backend}: {what}: no connection within {timeout:?}"),
            ))
        }
    }
    let acquire = pool.acquire();
    futures::pin_mut!(acquire);
    match select(acquire, futures_timer::Delay::new(timeout)).await {
        Either::Left((Ok(_conn), _)) => Ok(()),
        Either::Left((Err(e), _)) => Err(map_err(backend, what, e)),
        Either::Right(_) => Err(BackendError::new(
            BackendErrorKind::Timeout,
            format!("{backend}: {what}: no connection within {timeout:?}"),
        )),
    }
}

#[cfg(any(feature = "postgres", feature = "mysql"))]
/// The TLS mode a URL asks for: the value of its query parameter `key`
/// (`sslmode` for PostgreSQL, `ssl-mode` for MySQL), lower-cased, with `_`
/// read as `-`; `None` if absent.
pub(crate) fn tls_mode(url: &str, key: &str) -> Option<String> {
    let query = url.split_once('?')?.1;
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=')?;
        (k == key).then(|| v.to_ascii_lowercase().replace('_', "-"))
    })
}

#[cfg(any(feature = "postgres", feature = "mysql"))]
/// Under the default `prefer` mode a server without TLS is spoken to in
/// plain text (as `libpq` and the MySQL clients do); say so, since the
/// operator may have expected TLS. `mode` is [`tls_mode`]'s answer.
pub(crate) fn log_plain_fallback(backend: &str, redacted_url: &str, mode: Option<&str>, tls: bool) {
    let prefer = matches!(mode, None | Some("prefer" | "preferred"));
    if prefer && !tls {
        tracing::warn!(
            backend,
            url = redacted_url,
            "connected WITHOUT TLS: the server does not offer it and the TLS mode is \
             `prefer` (the default); set `sslmode=require` (PostgreSQL) or \
             `ssl-mode=REQUIRED` (MySQL) to refuse plain text"
        );
    }
}

/// What a database holds of Simba's acquire routine (PostgreSQL's
/// function, MySQL's procedure) under the routine's name.
#[cfg(any(feature = "postgres", feature = "mysql"))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AcquireRoutine {
    /// This version's.
    Current,
    /// An older Simba's (its body has [`ACQUIRE_MARK`] with a lower
    /// version, or this version's number with another body).
    Outdated,
    /// A newer Simba's (a higher version): used as it is, never replaced,
    /// so that nodes of two versions side by side in a rolling upgrade do
    /// not take turns replacing it. Every version keeps the arguments and
    /// the answer's columns.
    Newer,
    /// A routine of the same name (and arguments) that Simba did not create.
    Foreign,
    /// None.
    Missing,
}

#[cfg(any(feature = "postgres", feature = "mysql"))]
impl AcquireRoutine {
    /// Judges a routine whose body is not this version's: by the version
    /// it declares after `mark` (`None`: not Simba's).
    pub(crate) fn of_version(declared: Option<u32>, current: u32) -> AcquireRoutine {
        match declared {
            Some(v) if v > current => AcquireRoutine::Newer,
            Some(_) => AcquireRoutine::Outdated,
            None => AcquireRoutine::Foreign,
        }
    }

    /// Whether acquires can call it as it is (this version's or a newer).
    pub(crate) fn usable(self) -> bool {
        matches!(self, AcquireRoutine::Current | AcquireRoutine::Newer)
    }

    /// `Ok` if acquires can call it as it is, else its
    /// [`AcquireRoutine::error`].
    pub(crate) fn check(self, backend: &str, routine: &str) -> Result<(), BackendError> {
        if self.usable() {
            Ok(())
        } else {
            Err(self.error(backend, routine))
        }
    }

    /// The `Rejected` error for a routine that acquires cannot call as it
    /// is; `routine` names it (e.g. "function `f(args)`").
    pub(crate) fn error(self, backend: &str, routine: &str) -> BackendError {
        BackendError::new(
            BackendErrorKind::Rejected,
            format!(
                "{backend}: the {routine} {}: create it \
                 (migrations/{backend}/0003_acquire.sql) or allow create_schema",
                self.why()
            ),
        )
    }

    /// What is wrong with it.
    fn why(self) -> &'static str {
        match self {
            AcquireRoutine::Current | AcquireRoutine::Newer => "is in place",
            AcquireRoutine::Missing => "is missing",
            AcquireRoutine::Outdated => "is an older Simba's",
            AcquireRoutine::Foreign => {
                "exists but was not created by Simba; drop or rename it, or use another table prefix"
            }
        }
    }
}

/// Every version of an acquire routine's body has this as its first line,
/// followed by `, version N`.
#[cfg(any(feature = "postgres", feature = "mysql"))]
pub(crate) const ACQUIRE_MARK: &str = "-- Simba's acquire";

/// The version that a Simba acquire routine's body (or MySQL comment)
/// declares after `mark`, if any.
#[cfg(any(feature = "postgres", feature = "mysql"))]
pub(crate) fn acquire_version(src: &str, mark: &str) -> Option<u32> {
    let rest = &src[src.find(mark)? + mark.len()..];
    let digits: String = rest
        .strip_prefix(", version ")?
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// The names of Simba's tables under one table prefix: four on every SQL
/// backend, and on MySQL / MariaDB a fifth, the release log its wakers
/// read (S4.2).
#[derive(Clone, Debug)]
pub(crate) struct Tables {
    pub(crate) prefix: String,
    pub(crate) sessions: String,
    pub(crate) leases: String,
    pub(crate) members: String,
    pub(crate) slots: String,
    /// The release log (MySQL / MariaDB only).
    pub(crate) releases: Option<String>,
}

impl Tables {
    pub(crate) fn new(prefix: &str) -> Tables {
        Tables {
            prefix: prefix.to_owned(),
            sessions: format!("{prefix}sessions"),
            leases: format!("{prefix}leases"),
            members: format!("{prefix}members"),
            slots: format!("{prefix}slots"),
            releases: None,
        }
    }

    /// The four tables and the release log.
    #[cfg(feature = "mysql")]
    pub(crate) fn with_release_log(prefix: &str) -> Tables {
        Tables {
            releases: Some(format!("{prefix}releases")),
            ..Tables::new(prefix)
        }
    }

    /// Each table with the columns Simba gives it.
    fn with_columns(&self) -> Vec<(&str, &'static [&'static str])> {
        let mut all = vec![
            (self.sessions.as_str(), SESSION_COLUMNS),
            (self.leases.as_str(), LEASE_COLUMNS),
            (self.members.as_str(), MEMBER_COLUMNS),
            (self.slots.as_str(), SLOT_COLUMNS),
        ];
        if let Some(r) = &self.releases {
            all.push((r.as_str(), RELEASE_COLUMNS));
        }
        all
    }

    /// How many tables there are.
    pub(crate) fn count(&self) -> usize {
        4 + usize::from(self.releases.is_some())
    }

    /// The DDL that drops the tables (the group members, schedule slots
    /// and release log first).
    #[cfg(any(feature = "postgres", feature = "mysql"))]
    pub(crate) fn drop_sql(&self) -> String {
        let Tables {
            sessions,
            leases,
            members,
            slots,
            releases,
            ..
        } = self;
        let log = releases
            .as_ref()
            .map(|r| format!("{r}, "))
            .unwrap_or_default();
        format!("DROP TABLE IF EXISTS {log}{members}, {slots}, {leases}, {sessions}")
    }

    /// The error of a backend started without DDL whose tables are not
    /// all there; `dir` names the backend's migration files.
    pub(crate) fn missing(&self, backend: &str, dir: &str) -> BackendError {
        let names: Vec<String> = self
            .with_columns()
            .iter()
            .map(|(t, _)| format!("`{t}`"))
            .collect();
        BackendError::new(
            BackendErrorKind::Rejected,
            format!(
                "{backend}: some of the tables {} are missing: create them \
                 (migrations/{dir}/*.sql) or allow create_schema",
                names.join(", ")
            ),
        )
    }
}

/// How many tables PostgreSQL and SQLite have.
pub(crate) const TABLES: usize = 4;

/// The statements that every SQL backend runs through its [`Skeleton`],
/// in its database's dialect. Every statement binds its values in one
/// order, the order of the parameters named here (PostgreSQL's `$n` and
/// SQLite's `?n` are numbered to match MySQL's positional `?`).
#[derive(Clone, Debug)]
pub(crate) struct Statements {
    /// The column names of a table (binds: the table).
    pub(crate) columns: &'static str,
    /// Opens a session (binds: id, lease µs, lease µs, metadata).
    pub(crate) open: String,
    /// Housekeeping after an open: forget expired sessions (ids are never
    /// reused, and an unknown session is an expired one). Its failure
    /// changes nothing.
    pub(crate) gc: Vec<String>,
    /// Renews a session (PostgreSQL and SQLite: binds the session, answers
    /// [`Skeleton::renew_lists`]'s row; MySQL: its own multi-statement).
    pub(crate) renew: String,
    /// Frees a lease held with a token (binds: session, name, token, then
    /// [`Statements::channel`] if any).
    pub(crate) release: String,
    /// Deletes a session (binds: session, then [`Statements::channel`] if
    /// any). Without a channel, its row (if it answers one) lists the
    /// leases the session held, `name,name`.
    pub(crate) close: String,
    /// After `close` (binds: session): its memberships (S10.1). Once the
    /// session row is gone no renewal lists them anyway; it only tidies.
    pub(crate) close_tidy: Option<String>,
    /// The last value `release` and `close` bind: PostgreSQL's NOTIFY
    /// channel.
    pub(crate) channel: Option<String>,
    /// Joins a group (binds: group, session); a session that is not live
    /// inserts nothing (S10.1).
    pub(crate) join: String,
    /// Leaves a group (binds: group, session).
    pub(crate) leave: String,
    /// Whether a session holds a lease with a token and is live (binds:
    /// name, session, token), locking what it judges where the database
    /// locks rows: a schedule slot claim's first step (S11.1).
    pub(crate) holds: String,
    /// `inspect`'s live sessions.
    pub(crate) inspect_sessions: String,
    /// `inspect`'s leases whose names start with a prefix (binds: the
    /// prefix's length, the prefix).
    pub(crate) inspect_leases: String,
    /// For a test hold: locks a lease row, inserting it free if missing,
    /// without changing it (binds: name); `None` where the hold's
    /// transaction holds every row already (SQLite's write lock).
    #[cfg_attr(not(feature = "testkit"), allow(dead_code))]
    pub(crate) lock: Option<String>,
}

/// The statements of a schedule slot's claim by an upsert (PostgreSQL,
/// SQLite), after [`Statements::holds`]: how its transaction begins
/// (`None`: the database's default), the upsert that answers a row only if
/// the slot is later (binds: name, slot), and the read of the last slot
/// (name).
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) struct ClaimSql<'a> {
    pub(crate) begin: Option<&'static str>,
    pub(crate) claim: &'a str,
    pub(crate) last_slot: &'a str,
}

/// The SQL backends' one skeleton over sqlx's database `DB`: the calls that
/// run the same way on every SQL database, with what differs (the
/// [`Statements`]' text and placeholders, how a transaction begins) given
/// by the backend.
pub(crate) struct Skeleton<DB> {
    /// The backend's name, for errors.
    pub(crate) name: &'static str,
    /// Whether statements are prepared under a name and cached per
    /// connection (sqlx's default; not behind a transaction-pooling proxy,
    /// where a named statement may be missing on the next server connection
    /// or clash with another client's).
    pub(crate) persistent: bool,
    pub(crate) t: Tables,
    pub(crate) s: Statements,
    db: std::marker::PhantomData<fn() -> DB>,
}

impl<DB> Clone for Skeleton<DB> {
    fn clone(&self) -> Self {
        Skeleton {
            t: self.t.clone(),
            s: self.s.clone(),
            ..*self
        }
    }
}

impl<DB> std::fmt::Debug for Skeleton<DB> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Skeleton")
            .field("name", &self.name)
            .field("persistent", &self.persistent)
            .field("t", &self.t)
            .field("s", &self.s)
            .finish()
    }
}

impl<DB> Skeleton<DB> {
    pub(crate) fn new(name: &'static str, persistent: bool, t: Tables, s: Statements) -> Self {
        Skeleton {
            name,
            persistent,
            t,
            s,
            db: std::marker::PhantomData,
        }
    }

    pub(crate) fn err(&self, what: &'static str) -> impl Fn(sqlx::Error) -> BackendError + '_ {
        move |e| map_err(self.name, what, e)
    }
}

impl<DB> Skeleton<DB>
where
    DB: sqlx::Database + sqlx::database::HasStatementCache,
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: sqlx::IntoArguments<'q, DB>,
    for<'q> &'q [u8]: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> &'q str: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q, 'r> i64: sqlx::Encode<'q, DB> + sqlx::Decode<'r, DB> + sqlx::Type<DB>,
    for<'q, 'r> String: sqlx::Encode<'q, DB> + sqlx::Decode<'r, DB> + sqlx::Type<DB>,
    for<'q> Option<String>: sqlx::Encode<'q, DB>,
    for<'r> Vec<u8>: sqlx::Decode<'r, DB> + sqlx::Type<DB>,
    usize: sqlx::ColumnIndex<DB::Row>,
{
    /// `stmt` bound with `session`'s id, prepared as the backend prepares.
    fn by_session<'q>(
        &self,
        stmt: &'q str,
        id: &'q [u8; 16],
    ) -> sqlx::query::Query<'q, DB, DB::Arguments<'q>> {
        sqlx::query(stmt).persistent(self.persistent).bind(&id[..])
    }

    /// A connection of `pool` for the call `what`.
    #[cfg(any(feature = "sqlite", feature = "mysql"))]
    pub(crate) async fn conn(
        &self,
        pool: &sqlx::Pool<DB>,
        what: &'static str,
    ) -> Result<sqlx::pool::PoolConnection<DB>, BackendError> {
        pool.acquire().await.map_err(self.err(what))
    }

    /// The column names of `table` in a transaction of its own (so that it
    /// also works behind a transaction-pooling proxy).
    async fn columns(
        &self,
        pool: &sqlx::Pool<DB>,
        table: &str,
    ) -> Result<Vec<String>, BackendError> {
        let get = self.err("read schema");
        let mut tx = pool.begin().await.map_err(&get)?;
        let rows = sqlx::query(self.s.columns)
            .persistent(self.persistent)
            .bind(table)
            .fetch_all(&mut *tx)
            .await
            .map_err(&get)?;
        tx.commit().await.map_err(&get)?;
        rows.iter()
            .map(|r| sqlx::Row::try_get(r, 0))
            .collect::<Result<_, _>>()
            .map_err(&get)
    }

    /// How many of Simba's tables exist; `Rejected` on a table of another
    /// shape.
    pub(crate) async fn check_tables(&self, pool: &sqlx::Pool<DB>) -> Result<usize, BackendError> {
        let mut present = 0;
        for (table, cols) in self.t.with_columns() {
            let found = self.columns(pool, table).await?;
            if !found.is_empty() {
                check_shape(self.name, table, &found, cols)?;
                present += 1;
            }
        }
        Ok(present)
    }

    /// The error of a backend started without DDL whose tables are not all
    /// there (unless they all are).
    pub(crate) async fn require_tables(&self, pool: &sqlx::Pool<DB>) -> Result<(), BackendError> {
        if self.check_tables(pool).await? < self.t.count() {
            return Err(self.t.missing(self.name, self.name));
        }
        Ok(())
    }

    /// Prepares the schema at start-up: with `create`, runs `migrate`;
    /// without, refuses to start unless every table exists and `routine`
    /// (the check of the acquire routine, where the backend has one) passes.
    pub(crate) async fn prepare_schema(
        &self,
        pool: &sqlx::Pool<DB>,
        create: bool,
        migrate: impl std::future::Future<Output = Result<(), BackendError>>,
        routine: impl std::future::Future<Output = Result<(), BackendError>>,
    ) -> Result<(), BackendError> {
        if create {
            return migrate.await;
        }
        self.require_tables(pool).await?;
        routine.await
    }

    /// A migration's first step where the schema has an acquire routine
    /// (`routine` names it) found in `state`: `None` if every table and a
    /// usable routine are in place (nothing to do); `Rejected` for a
    /// routine Simba did not create (nothing is changed); else
    /// `Some(state)`, to migrate from.
    #[cfg(any(feature = "postgres", feature = "mysql"))]
    pub(crate) async fn routine_to_migrate(
        &self,
        pool: &sqlx::Pool<DB>,
        state: AcquireRoutine,
        routine: &str,
    ) -> Result<Option<AcquireRoutine>, BackendError> {
        if self.check_tables(pool).await? == self.t.count() && state.usable() {
            return Ok(None);
        }
        if state == AcquireRoutine::Foreign {
            return Err(state.error(self.name, routine));
        }
        Ok(Some(state))
    }

    /// Runs the DDL `ddl` (each string one query, which may hold several
    /// statements) that drops the tables, for `drop_tables`.
    #[cfg(any(feature = "postgres", feature = "mysql"))]
    pub(crate) async fn drop_tables(
        &self,
        pool: &sqlx::Pool<DB>,
        ddl: &[String],
    ) -> Result<(), BackendError> {
        for stmt in ddl {
            sqlx::raw_sql(stmt)
                .execute(pool)
                .await
                .map_err(self.err("drop tables"))?;
        }
        Ok(())
    }

    /// Opens a session, then runs the housekeeping statements.
    pub(crate) async fn open(
        &self,
        c: &mut DB::Connection,
        lease_duration: Duration,
        metadata: &crate::SessionMetadata,
    ) -> Result<simba_core::SessionGrant, BackendError> {
        let lease_us = crate::check_lease_duration(lease_duration)?;
        let session = crate::random_session_id()?;
        self.by_session(&self.s.open, &session.to_bytes())
            .bind(lease_us)
            .bind(lease_us)
            .bind((!metadata.is_empty()).then(|| metadata.encode()))
            .execute(&mut *c)
            .await
            .map_err(self.err("open session"))?;
        for stmt in &self.s.gc {
            let _ = sqlx::query(stmt)
                .persistent(self.persistent)
                .execute(&mut *c)
                .await;
        }
        Ok(simba_core::SessionGrant {
            session,
            remaining: lease_duration,
        })
    }

    /// Renews `session` by [`Statements::renew`]: no row once it expired,
    /// else one of the lease duration (µs), the leases it owns
    /// (`name=token,…`, see [`parse_owned`]) and the live members of every
    /// group it joined (`group=HEXID,…`, see [`parse_groups`]): one
    /// statement, however many leases and groups (S10.1).
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    pub(crate) async fn renew_lists(
        &self,
        c: &mut DB::Connection,
        session: SessionId,
    ) -> Result<simba_core::Renewal, simba_core::RenewError> {
        let get = self.err("renew");
        let row = self
            .by_session(&self.s.renew, &session.to_bytes())
            .fetch_optional(&mut *c)
            .await
            .map_err(&get)?;
        let Some(row) = row else {
            return Err(simba_core::RenewError::Expired);
        };
        let lease_us: i64 = sqlx::Row::try_get(&row, 0).map_err(&get)?;
        let owned: Option<String> = sqlx::Row::try_get(&row, 1).map_err(&get)?;
        let groups: Option<String> = sqlx::Row::try_get(&row, 2).map_err(&get)?;
        Ok(simba_core::Renewal {
            groups: parse_groups(self.name, groups.as_deref())?,
            remaining: micros(lease_us),
            owned: parse_owned(self.name, owned.as_deref())?,
        })
    }

    /// Releases `name` if `session` holds it with `token`; answers the
    /// statement's result (the rows it changed, as the database counts them).
    #[cfg_attr(
        not(any(feature = "sqlite", feature = "postgres", feature = "testkit")),
        allow(dead_code)
    )]
    pub(crate) async fn release(
        &self,
        c: &mut DB::Connection,
        session: SessionId,
        name: &LeaseName,
        token: Token,
    ) -> Result<DB::QueryResult, BackendError> {
        let token = i64::try_from(token.get())
            .map_err(|_| malformed(self.name, format!("token {token} out of range")))?;
        let id = session.to_bytes();
        let mut q = self
            .by_session(&self.s.release, &id)
            .bind(name.as_str())
            .bind(token);
        if let Some(channel) = &self.s.channel {
            q = q.bind(channel.as_str());
        }
        q.execute(&mut *c).await.map_err(self.err("release"))
    }

    /// Closes `session`; answers the names of the leases it held where
    /// [`Statements::close`] lists them (without a channel), else none.
    #[cfg_attr(
        not(any(feature = "sqlite", feature = "postgres", feature = "testkit")),
        allow(dead_code)
    )]
    pub(crate) async fn close(
        &self,
        c: &mut DB::Connection,
        session: SessionId,
    ) -> Result<Vec<String>, BackendError> {
        let get = self.err("close session");
        let id = session.to_bytes();
        let mut held = None;
        if let Some(channel) = &self.s.channel {
            self.by_session(&self.s.close, &id)
                .bind(channel.as_str())
                .execute(&mut *c)
                .await
                .map_err(&get)?;
        } else {
            let row = self
                .by_session(&self.s.close, &id)
                .fetch_optional(&mut *c)
                .await
                .map_err(&get)?;
            held = row
                .map(|r| sqlx::Row::try_get::<Option<String>, _>(&r, 0))
                .transpose()
                .map_err(&get)?
                .flatten();
        }
        if let Some(tidy) = &self.s.close_tidy {
            self.by_session(tidy, &id)
                .execute(&mut *c)
                .await
                .map_err(&get)?;
        }
        Ok(held
            .map(|l| l.split(',').map(str::to_owned).collect())
            .unwrap_or_default())
    }

    /// Joins (`join`) or leaves a group: the statement's result (a join
    /// that added a membership changed a row; PostgreSQL's announced it).
    pub(crate) async fn membership(
        &self,
        c: &mut DB::Connection,
        join: bool,
        session: SessionId,
        group: &LeaseName,
    ) -> Result<DB::QueryResult, BackendError> {
        let (stmt, what) = if join {
            (&self.s.join, "join group")
        } else {
            (&self.s.leave, "leave group")
        };
        let id = session.to_bytes();
        // One statement on its own: if the server rolls it back as a
        // deadlock victim or a serialization failure, nothing it did
        // remains, so it is run again, a few times, before the error is
        // the caller's. A failed leave keeps the leaver listed while its
        // partitions are released (S10.1, S10.3).
        let mut tries = 0;
        loop {
            let done = sqlx::query(stmt)
                .persistent(self.persistent)
                .bind(group.as_str())
                .bind(&id[..])
                .execute(&mut *c)
                .await;
            match done {
                Err(e) if tries < 3 && is_deadlock_victim(&e) => tries += 1,
                other => return other.map_err(self.err(what)),
            }
        }
    }

    /// A schedule slot claim's first step (S11.1), in the claim's open
    /// transaction `tx`: [`Statements::holds`].
    pub(crate) async fn holds(
        &self,
        tx: &mut DB::Connection,
        session: SessionId,
        name: &LeaseName,
        token: i64,
    ) -> Result<bool, BackendError> {
        let id = session.to_bytes();
        let row = sqlx::query(&self.s.holds)
            .persistent(self.persistent)
            .bind(name.as_str())
            .bind(&id[..])
            .bind(token)
            .fetch_optional(&mut *tx)
            .await
            .map_err(self.err("claim slot"))?;
        Ok(row.is_some())
    }

    /// Claims a schedule slot (S11.1) by an upsert (see [`ClaimSql`]), in
    /// one transaction: the holder check, the upsert if the slot is later,
    /// else the read of the last slot.
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    pub(crate) async fn claim(
        &self,
        c: &mut DB::Connection,
        sql: &ClaimSql<'_>,
        session: SessionId,
        name: &LeaseName,
        token: Token,
        slot: u64,
    ) -> Result<simba_core::SlotClaim, BackendError> {
        use simba_core::SlotClaim;
        use sqlx::Connection as _;
        let get = self.err("claim slot");
        let slot = slot_to_i64(self.name, slot)?;
        let Some(token) = token_to_i64(token) else {
            return Ok(SlotClaim::NotHolder);
        };
        let mut tx = match sql.begin {
            Some(b) => c.begin_with(b).await,
            None => c.begin().await,
        }
        .map_err(&get)?;
        if !self.holds(&mut tx, session, name, token).await? {
            tx.rollback().await.map_err(&get)?;
            return Ok(SlotClaim::NotHolder);
        }
        let claimed = sqlx::query(sql.claim)
            .persistent(self.persistent)
            .bind(name.as_str())
            .bind(slot)
            .fetch_optional(&mut *tx)
            .await
            .map_err(&get)?;
        let answer = if claimed.is_some() {
            SlotClaim::Claimed
        } else {
            let row = sqlx::query(sql.last_slot)
                .persistent(self.persistent)
                .bind(name.as_str())
                .fetch_one(&mut *tx)
                .await
                .map_err(&get)?;
            let last: i64 = sqlx::Row::try_get(&row, 0).map_err(&get)?;
            SlotClaim::AlreadyClaimed {
                last: slot_from(self.name, name, last)?,
            }
        };
        tx.commit().await.map_err(&get)?;
        Ok(answer)
    }

    /// The answer to an acquire from the acquire routine's `rows` (one row:
    /// holder, token, the caller's remaining µs, the holder's), see
    /// [`decide`].
    #[cfg(any(feature = "postgres", feature = "mysql"))]
    pub(crate) fn decide_rows(
        &self,
        session: SessionId,
        name: &LeaseName,
        rows: &[DB::Row],
    ) -> Result<AcquireOutcome, BackendError> {
        let get = self.err("acquire");
        let [row] = rows else {
            return Err(malformed(
                self.name,
                format!("acquire of `{name}` read {} rows, expected one", rows.len()),
            ));
        };
        let judged = AcquireRead {
            holder: sqlx::Row::try_get(row, 0).map_err(&get)?,
            token: sqlx::Row::try_get(row, 1).map_err(&get)?,
            mine_us: sqlx::Row::try_get(row, 2).map_err(&get)?,
            holder_us: sqlx::Row::try_get(row, 3).map_err(&get)?,
        };
        decide(self.name, session, name, judged)
    }

    /// A test hold's pool (`max` connections with the options of `pool`)
    /// and its open transaction, begun by `begin` (`None`: the database's
    /// default).
    #[cfg(feature = "testkit")]
    pub(crate) async fn hold(
        &self,
        pool: &sqlx::Pool<DB>,
        max: u32,
        begin: Option<&'static str>,
    ) -> Result<(sqlx::Pool<DB>, sqlx::Transaction<'static, DB>), BackendError> {
        let err = self.err("test hold");
        // No reaper (BackendConfig::pool_idle_timeout says why).
        let pool = sqlx::pool::PoolOptions::<DB>::new()
            .max_connections(max)
            .idle_timeout(None)
            .max_lifetime(None)
            .connect_with((*pool.connect_options()).clone())
            .await
            .map_err(&err)?;
        let tx = match begin {
            Some(b) => pool.begin_with(b).await,
            None => pool.begin().await,
        }
        .map_err(&err)?;
        Ok((pool, tx))
    }

    /// In a test hold's transaction: locks `name`'s row
    /// ([`Statements::lock`]).
    #[cfg(feature = "testkit")]
    pub(crate) async fn lock(
        &self,
        tx: &mut DB::Connection,
        name: &LeaseName,
    ) -> Result<(), BackendError> {
        if let Some(lock) = &self.s.lock {
            sqlx::query(lock)
                .persistent(self.persistent)
                .bind(name.as_str())
                .execute(&mut *tx)
                .await
                .map_err(self.err("test hold"))?;
        }
        Ok(())
    }

    /// `inspect`: the live sessions and the leases whose names start with
    /// `prefix`, read in one transaction.
    pub(crate) async fn inspect(
        &self,
        pool: &sqlx::Pool<DB>,
        prefix: Option<&str>,
    ) -> Result<crate::Inspection, BackendError> {
        let prefix = prefix.unwrap_or("");
        crate::check_prefix(prefix)?;
        let get = self.err("inspect");
        let mut tx = pool.begin().await.map_err(&get)?;
        let srows = sqlx::query(&self.s.inspect_sessions)
            .persistent(self.persistent)
            .fetch_all(&mut *tx)
            .await
            .map_err(&get)?;
        let lrows = sqlx::query(&self.s.inspect_leases)
            .persistent(self.persistent)
            .bind(i64::try_from(prefix.len()).unwrap_or(0))
            .bind(prefix)
            .fetch_all(&mut *tx)
            .await
            .map_err(&get)?;
        tx.commit().await.map_err(&get)?;
        inspection_from_rows(self.name, srows, lrows, &get)
    }
}

/// For a test hold's `waiters`: asks `count` how many calls wait behind
/// the hold every 20 ms until it is `n` or more (`true`), for 10 s at most
/// (`false`).
#[cfg(all(feature = "testkit", any(feature = "postgres", feature = "mysql")))]
pub(crate) async fn await_waiters<F, Fut>(n: usize, mut count: F) -> Result<bool, BackendError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<i64, BackendError>>,
{
    for _ in 0..500 {
        if usize::try_from(count().await?).unwrap_or(0) >= n {
            return Ok(true);
        }
        futures_timer::Delay::new(Duration::from_millis(20)).await;
    }
    Ok(false)
}

/// For the conformance suite's `acquire_while_killed`: calls `kill` with
/// `conn` every 20 ms until it answers `true` (it found the server
/// connection serving the acquire waiting on a lock and ended it), for 5 s
/// at most (then an error: the acquire never waited).
#[cfg(all(feature = "testkit", any(feature = "postgres", feature = "mysql")))]
pub(crate) async fn kill_waiting<C>(
    conn: &mut C,
    mut kill: impl for<'c> FnMut(
        &'c mut C,
    ) -> futures::future::BoxFuture<'c, Result<bool, BackendError>>,
) -> Result<(), BackendError> {
    for _ in 0..250 {
        if kill(&mut *conn).await? {
            return Ok(());
        }
        futures_timer::Delay::new(Duration::from_millis(20)).await;
    }
    Err(BackendError::new(
        BackendErrorKind::Other,
        "test helper: the acquire never waited on the lock",
    ))
}

/// Runs `$body` (a future using the connection `$c`) on a connection of
/// `$self.pool`.
#[cfg(any(feature = "sqlite", feature = "mysql"))]
macro_rules! pool_call {
    ($self:ident, $what:expr, |$c:ident| $body:expr) => {{
        let mut conn = $self.sql.sk.conn(&$self.pool, $what).await?;
        let $c = &mut *conn;
        $body.await
    }};
}
#[cfg(any(feature = "sqlite", feature = "mysql"))]
pub(crate) use pool_call;

/// The constructors and accessor that every SQL backend has the same way,
/// for its `impl`: `$kind` names its [`BackendKind`](crate::BackendKind),
/// `$module` and `$backend` its module and type, `$pool` sqlx's pool type
/// and `$url` a URL for the example.
macro_rules! sql_backend_inherent {
    ($kind:ident, $module:ident, $backend:ident, $pool:ident, $url:literal) => {
        /// Connects to `url` with the default options (Simba's URL parameters
        /// apply, see [`BackendConfig`](crate::BackendConfig)).
        ///
        /// # Errors
        /// `Rejected` if `url` names another kind of backend or is malformed;
        #[doc = concat!("otherwise as [`", stringify!($backend), "::connect`].")]
        pub async fn connect_url(url: &str) -> Result<Self, BackendError> {
            let kind = $crate::BackendKind::$kind;
            Self::connect(&$crate::BackendConfig::parse_for(url, kind, NAME)?).await
        }

        #[doc = concat!("As [`", stringify!($backend), "::from_pool`] with the default")]
        /// [`PoolOptions`](crate::PoolOptions) (table prefix `simba_`, tables
        /// created if missing).
        ///
        /// ```no_run
        /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
        #[doc = concat!("use simba_backends::", stringify!($module), "::", stringify!($backend), ";")]
        #[doc = concat!("let pool = sqlx::", stringify!($pool), "::connect(\"", $url, "\").await?;")]
        #[doc = concat!("let backend = ", stringify!($backend), "::from_pool_default(pool.clone()).await?;")]
        /// # Ok(()) }
        /// ```
        ///
        /// # Errors
        #[doc = concat!("As [`", stringify!($backend), "::from_pool`].")]
        pub async fn from_pool_default(pool: sqlx::$pool) -> Result<Self, BackendError> {
            Self::from_pool(pool, &$crate::PoolOptions::new()).await
        }

        /// The underlying pool (for fencing tables kept in the same
        /// database, see [`fencing`](crate::fencing)).
        pub fn pool(&self) -> &sqlx::$pool {
            &self.pool
        }
    };
}
pub(crate) use sql_backend_inherent;

/// The [`Backend`](crate::Backend) calls that every SQL backend makes the
/// same way, for its `impl Backend`: the backend has `pool` and `sql.sk`
/// (its [`Skeleton`]) and, in its module, `NAME`, `renew_on` and `claim_on`.
/// `$call` runs a call on a pooled connection (see [`pool_call`]), `$tx` one
/// that runs its own transaction.
macro_rules! sql_backend_common {
    ($call:ident, $tx:ident) => {
        fn max_concurrent_calls(&self) -> Option<usize> {
            // The pool's connections (a release listener has its own).
            usize::try_from(self.pool.options().get_max_connections()).ok()
        }

        fn renew(
            &self,
            session: SessionId,
        ) -> futures::future::BoxFuture<'_, Result<simba_core::Renewal, simba_core::RenewError>> {
            futures::FutureExt::boxed(async move {
                $call!(self, "renew", |c| renew_on(&self.sql, c, session))
            })
        }

        fn inspect<'a>(
            &'a self,
            prefix: Option<&'a str>,
        ) -> futures::future::BoxFuture<'a, Result<$crate::Inspection, BackendError>> {
            futures::FutureExt::boxed(self.sql.sk.inspect(&self.pool, prefix))
        }

        fn join_group<'a>(
            &'a self,
            session: SessionId,
            group: &'a LeaseName,
        ) -> futures::future::BoxFuture<'a, Result<(), BackendError>> {
            futures::FutureExt::boxed(async move {
                let sk = &self.sql.sk;
                let done = $call!(self, "join group", |c| sk
                    .membership(c, true, session, group))?;
                if done.rows_affected() > 0 {
                    self.joined(group);
                }
                Ok(())
            })
        }

        fn leave_group<'a>(
            &'a self,
            session: SessionId,
            group: &'a LeaseName,
        ) -> futures::future::BoxFuture<'a, Result<(), BackendError>> {
            futures::FutureExt::boxed(async move {
                let sk = &self.sql.sk;
                $call!(self, "leave group", |c| sk
                    .membership(c, false, session, group))
                .map(drop)
            })
        }

        fn claim_slot<'a>(
            &'a self,
            session: SessionId,
            name: &'a LeaseName,
            token: Token,
            slot: u64,
        ) -> futures::future::BoxFuture<'a, Result<simba_core::SlotClaim, BackendError>> {
            futures::FutureExt::boxed(async move {
                $tx!(self, "claim slot", |c| claim_on(
                    &self.sql, c, session, name, token, slot
                ))
            })
        }

        fn name(&self) -> &'static str {
            NAME
        }
    };
}
pub(crate) use sql_backend_common;

/// The session and lease calls of the SQL backends whose calls are the
/// skeleton's (PostgreSQL, SQLite), for their `impl Backend`, with `$call`
/// and `$tx` as in [`sql_backend_common`]: the backend has `acquire_on` in
/// its module, and a method `freed(&self, names: &[String])` that is handed
/// the names a release or a close freed (a close's as
/// [`Skeleton::close`] answers them).
#[cfg(any(feature = "sqlite", feature = "postgres"))]
macro_rules! sql_backend_calls {
    ($call:ident, $tx:ident) => {
        fn open_session_with<'a>(
            &'a self,
            lease_duration: std::time::Duration,
            metadata: &'a $crate::SessionMetadata,
        ) -> futures::future::BoxFuture<'a, Result<simba_core::SessionGrant, BackendError>> {
            futures::FutureExt::boxed(async move {
                let sk = &self.sql.sk;
                $call!(self, "open session", |c| sk.open(
                    c,
                    lease_duration,
                    metadata
                ))
            })
        }

        fn acquire<'a>(
            &'a self,
            session: SessionId,
            name: &'a LeaseName,
        ) -> futures::future::BoxFuture<'a, Result<simba_core::AcquireOutcome, BackendError>> {
            // One statement (SQLite) or one simple query (PostgreSQL): no
            // explicit transaction is needed behind a transaction-pooling
            // proxy (see `acquire_on`).
            futures::FutureExt::boxed(async move {
                $tx!(self, "acquire", |c| acquire_on(&self.sql, c, session, name))
            })
        }

        fn release<'a>(
            &'a self,
            session: SessionId,
            name: &'a LeaseName,
            token: Token,
        ) -> futures::future::BoxFuture<'a, Result<(), BackendError>> {
            futures::FutureExt::boxed(async move {
                let sk = &self.sql.sk;
                let done = $call!(self, "release", |c| sk.release(c, session, name, token))?;
                if done.rows_affected() > 0 {
                    self.freed(&[name.as_str().to_owned()]);
                }
                Ok(())
            })
        }

        fn max_batch(&self) -> usize {
            <Sql as $crate::sql::BatchCalls>::MAX
        }

        fn execute_batch<'a>(
            &'a self,
            calls: Vec<simba_core::Command>,
            _metadata: &'a $crate::SessionMetadata,
        ) -> futures::future::BoxFuture<'a, Vec<simba_core::Input>> {
            // One connection, one transaction (S4.7, `batch_on`).
            futures::FutureExt::boxed(async move {
                if let Some(replies) = $crate::sql::only_withdraws(&calls) {
                    return replies;
                }
                let ran: Result<_, BackendError> = async {
                    $tx!(self, "batch", |c| async {
                        Ok::<_, BackendError>($crate::sql::batch_on(&self.sql, c, &calls).await)
                    })
                }
                .await;
                match ran {
                    Ok((replies, freed)) => {
                        if !freed.is_empty() {
                            self.freed(&freed);
                        }
                        replies
                    }
                    Err(e) => calls
                        .iter()
                        .map(|c| simba_core::Input::failed(c, e.clone()))
                        .collect(),
                }
            })
        }

        fn close_session(
            &self,
            session: SessionId,
        ) -> futures::future::BoxFuture<'_, Result<(), BackendError>> {
            futures::FutureExt::boxed(async move {
                let sk = &self.sql.sk;
                let freed = $call!(self, "close session", |c| sk.close(c, session))?;
                self.freed(&freed);
                Ok(())
            })
        }
    };
}
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) use sql_backend_calls;

/// The [`Hold`](crate::testkit::Hold) calls that every SQL backend's test
/// hold makes the same way, on its open transaction `tx` (with `pool` and
/// `sql.sk`, and `acquire_on` and `renew_on` in the backend's module).
#[cfg(feature = "testkit")]
macro_rules! hold_calls {
    () => {
        fn lock_lease<'a>(
            &'a mut self,
            name: &'a LeaseName,
        ) -> futures::future::BoxFuture<'a, Result<(), BackendError>> {
            futures::FutureExt::boxed(self.sql.sk.lock(&mut self.tx, name))
        }
        fn open_session(
            &mut self,
            lease_duration: std::time::Duration,
        ) -> futures::future::BoxFuture<'_, Result<simba_core::SessionGrant, BackendError>> {
            let metadata = &$crate::metadata::NO_METADATA;
            futures::FutureExt::boxed(self.sql.sk.open(&mut self.tx, lease_duration, metadata))
        }
        fn renew(
            &mut self,
            session: SessionId,
        ) -> futures::future::BoxFuture<'_, Result<simba_core::Renewal, simba_core::RenewError>> {
            futures::FutureExt::boxed(renew_on(&self.sql, &mut self.tx, session))
        }
        fn acquire<'a>(
            &'a mut self,
            session: SessionId,
            name: &'a LeaseName,
        ) -> futures::future::BoxFuture<'a, Result<simba_core::AcquireOutcome, BackendError>> {
            futures::FutureExt::boxed(acquire_on(&self.sql, &mut self.tx, session, name))
        }
        fn release<'a>(
            &'a mut self,
            session: SessionId,
            name: &'a LeaseName,
            token: Token,
        ) -> futures::future::BoxFuture<'a, Result<(), BackendError>> {
            let released = self.sql.sk.release(&mut self.tx, session, name, token);
            futures::FutureExt::boxed(async move { released.await.map(drop) })
        }
        fn close_session(
            &mut self,
            session: SessionId,
        ) -> futures::future::BoxFuture<'_, Result<(), BackendError>> {
            let closed = self.sql.sk.close(&mut self.tx, session);
            futures::FutureExt::boxed(async move { closed.await.map(drop) })
        }
        fn commit(
            self: Box<Self>,
        ) -> futures::future::BoxFuture<'static, Result<(), BackendError>> {
            futures::FutureExt::boxed(async move {
                let Self { tx, pool, sql, .. } = *self;
                tx.commit().await.map_err(sql.sk.err("test hold"))?;
                pool.close().await;
                Ok(())
            })
        }
    };
}
#[cfg(feature = "testkit")]
pub(crate) use hold_calls;

/// The statements of one SQL backend that a batch (S4.7) runs on one
/// connection: [`batch_on`] runs them in one transaction.
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "mysql"))]
pub(crate) trait BatchCalls: Sync {
    /// The database.
    type DB: sqlx::Database;
    /// The backend's name, for errors.
    const NAME: &'static str;
    /// How many calls a batch carries at most ([`Backend::max_batch`](crate::Backend::max_batch)).
    const MAX: usize;
    /// The statement that begins the batch's transaction (SQLite takes its
    /// write lock at once; MySQL turns `autocommit` off instead, so that its
    /// acquire procedure joins the transaction, and does not use it).
    #[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
    const BEGIN: &'static str;
    /// Run first in the transaction (PostgreSQL bounds each lock wait).
    #[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
    fn setup<'a>(
        &'a self,
        c: &'a mut <Self::DB as sqlx::Database>::Connection,
    ) -> futures::future::BoxFuture<'a, Result<(), BackendError>>;
    /// [`Backend::acquire`](crate::Backend::acquire) on `c`.
    fn acquire<'a>(
        &'a self,
        c: &'a mut <Self::DB as sqlx::Database>::Connection,
        session: SessionId,
        name: &'a LeaseName,
    ) -> futures::future::BoxFuture<'a, Result<AcquireOutcome, BackendError>>;
    /// [`Backend::release`](crate::Backend::release) on `c`: whether it
    /// freed the lease.
    fn release<'a>(
        &'a self,
        c: &'a mut <Self::DB as sqlx::Database>::Connection,
        session: SessionId,
        name: &'a LeaseName,
        token: Token,
    ) -> futures::future::BoxFuture<'a, Result<bool, BackendError>>;
    /// The calls of a batch in one transaction, answered as [`batch_tx`]
    /// answers them (which this runs, one round trip a call); a backend
    /// that can send them all in one round trip does so instead.
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    fn transaction<'a>(
        &'a self,
        c: &'a mut <Self::DB as sqlx::Database>::Connection,
        calls: &'a [simba_core::Command],
    ) -> futures::future::BoxFuture<'a, Batched>
    where
        Self: Sized,
    {
        futures::FutureExt::boxed(batch_tx(self, c, calls))
    }
}

/// What a batch's transaction answers: its replies by index and the names
/// its releases freed; `Err` if it failed and was rolled back (its calls
/// then run again one by one); `Ok(Err(_))` if nobody knows whether it
/// committed (see [`batch_on`]).
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "mysql"))]
pub(crate) type Batched =
    Result<Result<(Vec<simba_core::Input>, Vec<String>), BackendError>, BackendError>;

/// The [`BatchCalls`] of a SQL backend whose calls are the skeleton's
/// (PostgreSQL, SQLite), in its module (with `Sql`, `Conn`, `NAME` and
/// `acquire_on`): `$db` its database, `$max` the most calls in a batch,
/// `$begin` the statement that begins a batch, `$setup` what runs first in
/// it (`|sql, c|`, a future); or, for a backend that sends a batch its own
/// way, `transaction = f` (`f(sql, c, calls)`, as [`batch_tx`]), which
/// begins nothing and runs no setup of the skeleton's.
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "mysql"))]
macro_rules! batch_calls {
    ($db:ty, $max:expr, transaction = $tx:path) => {
        $crate::sql::batch_calls!($db, $max, "BEGIN", |_sql, _c| async { Ok(()) }, transaction = $tx);
    };
    ($db:ty, $max:expr, $begin:literal, |$sql:ident, $c:ident| $setup:expr $(, transaction = $tx:path)?) => {
        impl $crate::sql::BatchCalls for Sql {
            type DB = $db;
            const NAME: &'static str = NAME;
            const MAX: usize = $max;
            const BEGIN: &'static str = $begin;
            fn setup<'a>(
                &'a self,
                c: &'a mut Conn,
            ) -> futures::future::BoxFuture<'a, Result<(), BackendError>> {
                let ($sql, $c) = (self, c);
                futures::FutureExt::boxed($setup)
            }
            fn acquire<'a>(
                &'a self,
                c: &'a mut Conn,
                session: SessionId,
                name: &'a LeaseName,
            ) -> futures::future::BoxFuture<'a, Result<AcquireOutcome, BackendError>> {
                futures::FutureExt::boxed(acquire_on(self, c, session, name))
            }
            fn release<'a>(
                &'a self,
                c: &'a mut Conn,
                session: SessionId,
                name: &'a LeaseName,
                token: Token,
            ) -> futures::future::BoxFuture<'a, Result<bool, BackendError>> {
                let released = self.sk.release(c, session, name, token);
                futures::FutureExt::boxed(async move { Ok(released.await?.rows_affected() > 0) })
            }
            $(
            fn transaction<'a>(
                &'a self,
                c: &'a mut Conn,
                calls: &'a [simba_core::Command],
            ) -> futures::future::BoxFuture<'a, $crate::sql::Batched> {
                futures::FutureExt::boxed($tx(self, c, calls))
            }
            )?
        }
    };
}
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "mysql"))]
pub(crate) use batch_calls;

/// One call of a batch on `c`; a release that freed its lease adds the
/// name to `freed`.
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "mysql"))]
pub(crate) async fn batch_call<B: BatchCalls>(
    b: &B,
    c: &mut <B::DB as sqlx::Database>::Connection,
    call: &simba_core::Command,
    freed: &mut Vec<String>,
) -> Result<simba_core::Input, BackendError> {
    use simba_core::{Command, Input};
    Ok(match call {
        Command::Acquire { op, session, name } => Input::AcquireReplied {
            op: *op,
            result: Ok(b.acquire(c, *session, name).await?),
        },
        Command::Release {
            op,
            session,
            name,
            token,
        } => {
            if b.release(c, *session, name, *token).await? {
                freed.push(name.as_str().to_owned());
            }
            Input::ReleaseReplied {
                op: *op,
                result: Ok(()),
            }
        }
        // A SQL backend keeps nothing for a `Held` acquire (S4.5).
        Command::Withdraw { op, .. } => Input::WithdrawReplied {
            op: *op,
            result: Ok(()),
        },
        other => Input::failed(other, not_in_batch(B::NAME, other)),
    })
}

/// The error for a call no batch carries (only acquires, releases and
/// withdraws do, S4.7), found in one by `backend`.
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "mysql"))]
pub(crate) fn not_in_batch(backend: &str, call: &simba_core::Command) -> BackendError {
    BackendError::new(
        BackendErrorKind::Rejected,
        format!("{backend}: a {} call cannot go in a batch", call.label()),
    )
}

/// A token as the SQL column stores it (`BIGINT`), or a typed error.
#[cfg(any(feature = "postgres", feature = "mysql"))]
pub(crate) fn token_column(backend: &str, token: Token) -> Result<i64, BackendError> {
    token_to_i64(token).ok_or_else(|| malformed(backend, format!("token {token} out of range")))
}

/// The calls of a batch in one transaction, in name order: their replies
/// by index, and the names the releases freed; `Err` if one failed or the
/// transaction could not begin or commit (then, if it committed, the
/// error says so: `Ok(Err(_))`, see [`batch_on`]).
#[cfg(any(feature = "sqlite", feature = "postgres"))]
async fn batch_tx<B: BatchCalls>(
    b: &B,
    c: &mut <B::DB as sqlx::Database>::Connection,
    calls: &[simba_core::Command],
) -> Batched {
    use sqlx::Connection;
    let err = |e| map_err(B::NAME, "batch", e);
    let mut order: Vec<usize> = (0..calls.len()).collect();
    order.sort_by(|&i, &j| name_of(&calls[i]).cmp(name_of(&calls[j])));
    let mut tx = c.begin_with(B::BEGIN).await.map_err(err)?;
    b.setup(&mut tx).await?;
    let mut freed = Vec::new();
    let mut replies: Vec<Option<simba_core::Input>> = vec![None; calls.len()];
    for i in order {
        replies[i] = Some(batch_call(b, &mut tx, &calls[i], &mut freed).await?);
    }
    // A failed commit leaves every call's outcome unknown.
    Ok(match tx.commit().await {
        Ok(()) => Ok((replies.into_iter().flatten().collect(), freed)),
        Err(e) => Err(err(e)),
    })
}

/// Runs the calls of a batch (S4.7) on `c` in one transaction, in name
/// order, and answers their replies in the calls' order and the names the
/// releases freed (to announce now that it committed).
///
/// Name order makes every client take the rows' locks in the same order,
/// so two batches never wait on each other in a cycle. If a call fails
/// (a lock waited on too long, a malformed row) or the transaction does
/// not begin, it is rolled back and every call runs again on its own, so
/// that one call's failure is its own and not the others'. If the commit
/// fails, nobody knows whether it took effect: every call answers the
/// error (an acquire whose outcome is unknown is released once a renewal
/// lists it, S3.4). A batch dropped at its call timeout is rolled back by
/// sqlx before the connection is used again.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) async fn batch_on<B: BatchCalls>(
    b: &B,
    c: &mut <B::DB as sqlx::Database>::Connection,
    calls: &[simba_core::Command],
) -> (Vec<simba_core::Input>, Vec<String>) {
    use simba_core::Input;
    match b.transaction(c, calls).await {
        Ok(Ok(done)) => return done,
        Ok(Err(e)) => {
            return (
                calls
                    .iter()
                    .map(|call| Input::failed(call, e.clone()))
                    .collect(),
                Vec::new(),
            )
        }
        Err(_) => {}
    }
    let mut freed = Vec::new();
    let mut replies = Vec::with_capacity(calls.len());
    for call in calls {
        replies.push(match batch_call(b, c, call, &mut freed).await {
            Ok(reply) => reply,
            Err(e) => Input::failed(call, e),
        });
    }
    (replies, freed)
}

/// The replies of a batch of withdraws only, which a SQL backend answers
/// without the database: it keeps nothing for a `Held` acquire (S4.5), and
/// such a batch needs no connection, no transaction and no round trip.
/// `None` if the batch carries another call.
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "mysql"))]
pub(crate) fn only_withdraws(calls: &[simba_core::Command]) -> Option<Vec<simba_core::Input>> {
    use simba_core::{Command, Input};
    calls
        .iter()
        .map(|call| match call {
            Command::Withdraw { op, .. } => Some(Input::WithdrawReplied {
                op: *op,
                result: Ok(()),
            }),
            _ => None,
        })
        .collect()
}

/// The lease a batched call is about (for the lock order).
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "mysql"))]
pub(crate) fn name_of(call: &simba_core::Command) -> &str {
    use simba_core::Command;
    match call {
        Command::Acquire { name, .. }
        | Command::Release { name, .. }
        | Command::Withdraw { name, .. } => name.as_str(),
        _ => "",
    }
}

/// Whether `e` reports that the server rolled the statement back as a
/// deadlock victim or a serialization failure (SQLSTATE 40001, and
/// PostgreSQL's 40P01): nothing it did remains, so it may run again.
fn is_deadlock_victim(e: &sqlx::Error) -> bool {
    e.as_database_error()
        .and_then(|d| d.code())
        .is_some_and(|code| code == "40001" || code == "40P01")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::is_deadlock_victim;
    use std::borrow::Cow;

    /// A server error with SQLSTATE `code`.
    #[derive(Debug)]
    struct Server(&'static str);

    impl std::fmt::Display for Server {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "server error {}", self.0)
        }
    }

    impl std::error::Error for Server {}

    impl sqlx::error::DatabaseError for Server {
        fn message(&self) -> &str {
            "server error"
        }
        fn code(&self) -> Option<Cow<'_, str>> {
            Some(Cow::Borrowed(self.0))
        }
        fn as_error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
            self
        }
        fn as_error_mut(&mut self) -> &mut (dyn std::error::Error + Send + Sync + 'static) {
            self
        }
        fn into_error(self: Box<Self>) -> Box<dyn std::error::Error + Send + Sync + 'static> {
            self
        }
        fn kind(&self) -> sqlx::error::ErrorKind {
            sqlx::error::ErrorKind::Other
        }
    }

    /// A membership statement runs again only when the server rolled it
    /// back whole: InnoDB's deadlock victim and serialization failures
    /// (40001), PostgreSQL's deadlock (40P01); not a constraint violation,
    /// nor an error that is not the server's.
    #[test]
    fn only_a_rolled_back_statement_runs_again() {
        let server = |code| sqlx::Error::Database(Box::new(Server(code)));
        assert!(is_deadlock_victim(&server("40001")));
        assert!(is_deadlock_victim(&server("40P01")));
        assert!(!is_deadlock_victim(&server("23000")));
        assert!(!is_deadlock_victim(&sqlx::Error::PoolTimedOut));
    }
}
