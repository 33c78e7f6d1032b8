//! What the SQL backends share: error mapping, row decoding, schema checks.

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
    } else if expected == SESSION_COLUMNS && is_legacy_sessions(found) {
        Err(BackendError::new(
            BackendErrorKind::Rejected,
            format!(
                "{backend}: table `{table}` was created by an older Simba without the \
                 `metadata` column; let Simba migrate it (create_schema) or run \
                 `{}`",
                add_metadata_sql(table)
            ),
        ))
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
/// The columns of a sessions table created before session metadata.
const LEGACY_SESSION_COLUMNS: &[&str] = &["id", "lease_us", "expires_us"];

/// Whether `found` are the columns of a sessions table of an older Simba,
/// which `migrate()` upgrades with [`add_metadata_sql`].
pub(crate) fn is_legacy_sessions(found: &[String]) -> bool {
    let mut f: Vec<String> = found.iter().map(|c| c.to_ascii_lowercase()).collect();
    f.sort();
    let mut e: Vec<&str> = LEGACY_SESSION_COLUMNS.to_vec();
    e.sort_unstable();
    f == e
}

/// The statement that adds the `metadata` column to an older sessions table
/// (the same on PostgreSQL, MySQL/MariaDB and SQLite).
pub(crate) fn add_metadata_sql(table: &str) -> String {
    format!("ALTER TABLE {table} ADD COLUMN metadata TEXT")
}
/// The columns of the leases table.
pub(crate) const LEASE_COLUMNS: &[&str] = &["name", "session", "token", "acquired_us"];
/// The columns of the group members table (S10.1).
pub(crate) const MEMBER_COLUMNS: &[&str] = &["name", "session"];
/// The columns of the schedule slots table (S11.1).
pub(crate) const SLOT_COLUMNS: &[&str] = &["name", "slot"];

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
pub(crate) struct Judged {
    pub(crate) mine_us: Option<i64>,
    pub(crate) holder: Option<Vec<u8>>,
    pub(crate) token: i64,
    pub(crate) holder_us: Option<i64>,
}

/// The answer to an acquire from the acquire routine's reply ([`Judged`]),
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
    j: Judged,
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

    /// What is wrong with it, for a `Rejected` error that names the routine.
    pub(crate) fn why(self) -> &'static str {
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
