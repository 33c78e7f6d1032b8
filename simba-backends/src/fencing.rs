//! Fencing (S9): a resource accepts a write only with a token at least
//! as high as the highest it has seen, so a holder whose term ended (a paused
//! process, a partitioned node) is refused once a later term has written.
//!
//! The check and the write must commit together: do both in one transaction
//! on the resource's database. The fence row is locked by the check, so
//! concurrent writers serialize on it.
//!
//! * SQL, in Rust: [`PgFence`] (feature `postgres`), [`MysqlFence`] (feature
//!   `mysql`, MySQL and MariaDB) and [`SqliteFence`] (feature `sqlite`), all
//!   with the same calls: `create(pool, table)`, `admit_in(&mut tx,
//!   resource, token)` and `admit(resource, token)`. Their errors are a
//!   [`FenceError`], which `?` turns into a `sqlx::Error` (the driver's own
//!   error comes back unchanged), a `Box<dyn Error>`, an `anyhow::Error` or a
//!   [`BackendError`](simba_core::BackendError).
//! * The same as SQL text: [`MYSQL_PATTERN`] and [`SQLITE_PATTERN`].
//! * Resources outside SQL: [`REDIS_FENCED_SET`] (one Lua script),
//!   [`ETCD_RECIPE`] (one transaction) and [`ZOOKEEPER_RECIPE`] (one
//!   multi-op with a version check), each tested against a real server in
//!   this crate's `tests/fencing.rs`.
//!
//! A token binds to SQL as an `i64` without a cast: `term.token_i64()`
//! (`simba-client`), or [`AsToken::token_i64`] on anything that carries one.

/// The fencing pattern for MySQL / MariaDB, inside the transaction that
/// writes the resource. The write is allowed iff the final `SELECT` returns
/// the caller's own token.
///
/// The admission read **must be a locking read** (`FOR UPDATE`): at InnoDB's
/// default REPEATABLE READ a plain `SELECT` answers from the transaction's
/// read view, fixed by its *first* plain read. If the application read
/// anything earlier in the same transaction, a newer token committed since
/// (which the upsert's `GREATEST` leaves unchanged, so the row is not this
/// transaction's own change) is invisible to a plain read and a stale token
/// would be admitted. A locking read always sees the latest committed row
/// (tested in `tests/fencing.rs`).
pub const MYSQL_PATTERN: &str = "\
CREATE TABLE IF NOT EXISTS fence (resource VARCHAR(255) PRIMARY KEY, token BIGINT NOT NULL);
START TRANSACTION;
INSERT INTO fence (resource, token) VALUES (?, ?)
  ON DUPLICATE KEY UPDATE token = GREATEST(token, VALUES(token)); -- locks the row
SELECT token FROM fence WHERE resource = ? FOR UPDATE;             -- == my token? else ROLLBACK
-- ... the guarded write ...
COMMIT;";

/// The fencing pattern for SQLite, inside the transaction that writes the
/// resource (`BEGIN IMMEDIATE`). The write is allowed iff `changes()` is 1
/// after the upsert.
pub const SQLITE_PATTERN: &str = "\
CREATE TABLE IF NOT EXISTS fence (resource TEXT PRIMARY KEY, token INTEGER NOT NULL);
BEGIN IMMEDIATE;
INSERT INTO fence (resource, token) VALUES (?1, ?2)
  ON CONFLICT (resource) DO UPDATE SET token = excluded.token
  WHERE excluded.token >= fence.token;
SELECT changes();                                                  -- 1? else ROLLBACK
-- ... the guarded write ...
COMMIT;";

/// A fenced `SET` on Redis, as one Lua script (atomic on the server):
/// `EVAL REDIS_FENCED_SET 2 fence_key key token value` sets `key` to
/// `value` and returns 1 iff `token` is at least the highest token recorded
/// in `fence_key` (which it then records); otherwise it writes nothing and
/// returns 0. Tokens are compared as decimal strings (length, then bytes),
/// so every 64-bit token compares exactly (Lua numbers are doubles). On a
/// Redis Cluster both keys need one hash tag (`{ledger}:fence`,
/// `{ledger}:value`).
///
/// ```no_run
/// # #[cfg(feature = "redis")]
/// # async fn demo(mut conn: redis::aio::MultiplexedConnection, token: i64) -> redis::RedisResult<()> {
/// use simba_backends::fencing::REDIS_FENCED_SET;
/// let admitted: i64 = redis::Script::new(REDIS_FENCED_SET)
///     .key("{ledger}:fence")
///     .key("{ledger}:value")
///     .arg(token)
///     .arg("new balance")
///     .invoke_async(&mut conn)
///     .await?;
/// # Ok(()) }
/// ```
pub const REDIS_FENCED_SET: &str = r"
local seen = redis.call('GET', KEYS[1])
local mine = ARGV[1]
if seen and (#seen > #mine or (#seen == #mine and seen > mine)) then
  return 0
end
redis.call('SET', KEYS[1], mine)
redis.call('SET', KEYS[2], ARGV[2])
return 1
";

/// The fencing recipe for a key in etcd: one transaction.
///
/// The fence key holds the highest token seen as 20 decimal digits
/// (zero-padded, so etcd's byte comparison is the numeric one;
/// [`etcd_token`] formats it). The transaction's guard is
/// `value(fence) > mine`; its *else* branch writes the fence and the
/// resource. etcd fails a value comparison on a missing key, so the first
/// writer is admitted too. The write happened iff the transaction reports
/// the guard **not** succeeded.
///
/// ```text
/// TXN  IF   value("ledger/fence") > "00000000000000000007"
///      THEN (nothing)                        -- a later term has written: refused
///      ELSE put("ledger/fence", "00000000000000000007"), put("ledger", value)
/// ```
pub const ETCD_RECIPE: &str = r#"TXN  IF   value(fence) > etcd_token(mine)
     THEN (nothing)
     ELSE put(fence, etcd_token(mine)), put(resource, value)
admitted = !txn_response.succeeded()"#;

/// A token as the fixed-width text of [`ETCD_RECIPE`]: 20 decimal digits,
/// so that byte order is numeric order.
///
/// ```
/// assert_eq!(simba_backends::fencing::etcd_token(7u64), "00000000000000000007");
/// assert!(simba_backends::fencing::etcd_token(10u64) > simba_backends::fencing::etcd_token(9u64));
/// ```
pub fn etcd_token(token: impl AsToken) -> String {
    format!("{:020}", token.token_value())
}

/// The fencing recipe for a znode in ZooKeeper: a read, then one multi-op
/// whose version check makes it a compare-and-set.
///
/// The fence znode holds the highest token seen (decimal). Read it with its
/// `Stat`; refuse if it is above your token; else commit one multi-op:
/// `set_data(fence, mine, stat.version)` (a versioned write: a check and a
/// set) and the write to the resource. A concurrent writer changes the
/// fence's version, so the
/// multi-op fails as a whole (`BadVersion`): read again and decide again. A
/// missing fence is created in the multi-op (`create(fence, mine)`; a
/// `NodeExists` failure means another writer came first: read again).
pub const ZOOKEEPER_RECIPE: &str = "loop {
  (seen, stat) = get_data(fence)            -- or NoNode: seen = none
  if seen > mine: refused
  multi [ seen is none ? create(fence, mine) : set_data(fence, mine, stat.version),
          set_data(resource, value) ]
  ok: admitted; BadVersion / NodeExists: again
}";

use simba_core::Token;

/// Why a fence could not run its check (not a refusal: a refused token is
/// `Ok(false)`). It converts with `?` into `sqlx::Error` (a database
/// error comes back as the driver's own error), into
/// [`BackendError`](simba_core::BackendError), and, as a
/// `std::error::Error + Send + Sync`, into `Box<dyn Error>` and
/// `anyhow::Error`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FenceError {
    /// The fence table's name is not `[a-z][a-z0-9_]*` of at most 63 characters.
    #[error("invalid fence table name {0:?}: expected [a-z][a-z0-9_]*, at most 63 characters")]
    InvalidTable(String),
    /// Zero or above `i64::MAX`: not a token any backend hands out.
    #[error("{0} is not a fencing token (1 ..= 2^63 - 1)")]
    InvalidToken(u64),
    /// The database refused or failed the fence's statement.
    #[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
    #[error("fence: {0}")]
    Database(#[source] sqlx::Error),
}

#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
impl From<sqlx::Error> for FenceError {
    fn from(e: sqlx::Error) -> Self {
        FenceError::Database(e)
    }
}

#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
impl From<FenceError> for sqlx::Error {
    /// The driver's error itself for [`FenceError::Database`]; a bad table
    /// name as `Configuration`, a bad token as `Encode`.
    fn from(e: FenceError) -> Self {
        match e {
            FenceError::Database(e) => e,
            e @ FenceError::InvalidTable(_) => sqlx::Error::Configuration(Box::new(e)),
            e @ FenceError::InvalidToken(_) => sqlx::Error::Encode(Box::new(e)),
        }
    }
}

impl From<FenceError> for simba_core::BackendError {
    fn from(e: FenceError) -> Self {
        use simba_core::BackendErrorKind;
        let kind = match &e {
            FenceError::InvalidTable(_) | FenceError::InvalidToken(_) => BackendErrorKind::Rejected,
            #[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
            FenceError::Database(_) => BackendErrorKind::Unavailable,
        };
        simba_core::BackendError::new(kind, crate::redact(&e.to_string()))
    }
}

/// Checks a fence table name (`[a-z][a-z0-9_]*`, at most 63 characters).
#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
fn check_table(table: &str) -> Result<(), FenceError> {
    let ok = !table.is_empty()
        && table.len() <= 63
        && table.starts_with(|c: char| c.is_ascii_lowercase())
        && table
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(FenceError::InvalidTable(table.to_owned()))
    }
}

/// Creates the fence table `table` (a checked name, see [`check_table`])
/// with `columns` (and table options) if it is missing.
#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
async fn create_table<DB>(
    pool: &sqlx::Pool<DB>,
    table: &str,
    columns: &str,
) -> Result<(), FenceError>
where
    DB: sqlx::Database,
    for<'q> DB::Arguments<'q>: sqlx::IntoArguments<'q, DB>,
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
{
    check_table(table)?;
    sqlx::query(&format!("CREATE TABLE IF NOT EXISTS {table} {columns}"))
        .execute(pool)
        .await?;
    Ok(())
}

/// The token as the `BIGINT` the fence tables hold.
#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))]
fn sql_token(token: &impl AsToken) -> Result<i64, FenceError> {
    let t = token.token_value();
    i64::try_from(t)
        .ok()
        .filter(|t| *t > 0)
        .ok_or(FenceError::InvalidToken(t))
}

/// Anything that carries a fencing token: a [`Token`], its `u64` value, or
/// (with `simba-client`) a `Term` or `LockTerm` by reference. The fence
/// helpers take `impl AsToken`, so `fence.admit_in(&mut tx, "ledger", &term)`
/// and `…, term.token())` both work.
pub trait AsToken {
    /// The token's value. Zero is never a token: the helpers refuse it.
    fn token_value(&self) -> u64;

    /// The token as the `i64` SQL drivers bind (`BIGINT`), no cast needed.
    /// Every backend hands out tokens of at most `i64::MAX`; a larger value
    /// (never a token) saturates.
    ///
    /// ```
    /// use simba_backends::fencing::AsToken;
    /// assert_eq!(7u64.token_i64(), 7_i64);
    /// ```
    fn token_i64(&self) -> i64 {
        i64::try_from(self.token_value()).unwrap_or(i64::MAX)
    }
}

impl AsToken for Token {
    fn token_value(&self) -> u64 {
        self.get()
    }
}

impl AsToken for u64 {
    fn token_value(&self) -> u64 {
        *self
    }
}

impl<T: AsToken + ?Sized> AsToken for &T {
    fn token_value(&self) -> u64 {
        (**self).token_value()
    }
}

#[cfg(feature = "sqlite")]
pub use lite::SqliteFence;
#[cfg(feature = "mysql")]
pub use my::MysqlFence;
#[cfg(feature = "postgres")]
pub use pg::PgFence;

#[cfg(feature = "postgres")]
mod pg {
    use super::{create_table, sql_token, AsToken, FenceError};
    use sqlx::postgres::PgPool;
    use sqlx::PgConnection;

    /// A fence table on PostgreSQL: `admit` accepts a token at least as high
    /// as the highest seen for a resource, and records it.
    ///
    /// ```no_run
    /// # async fn demo(pool: sqlx::PgPool, token: simba_core::Token) -> Result<(), sqlx::Error> {
    /// // `token`: a term's token (`term.token()`), or the term itself (`&term`)
    /// use simba_backends::fencing::{AsToken, PgFence};
    /// let fence = PgFence::create(pool.clone(), "app_fence").await?; // `?` into sqlx::Error
    /// let mut tx = pool.begin().await?;
    /// if fence.admit_in(&mut tx, "ledger", token).await? {
    ///     sqlx::query("UPDATE ledger SET writer = $1").bind(token.token_i64()).execute(&mut *tx).await?;
    ///     tx.commit().await?;
    /// } // else: a later term has written; drop the transaction (rollback)
    /// # Ok(()) }
    /// ```
    #[derive(Clone, Debug)]
    pub struct PgFence {
        pool: PgPool,
        admit_sql: String,
    }

    impl PgFence {
        /// Uses (creating if missing) the fence table `table`
        /// (`[a-z][a-z0-9_]*`, at most 63 characters).
        ///
        /// # Errors
        /// [`FenceError::InvalidTable`] for a bad table name; the driver's
        /// error (missing privileges, …) as [`FenceError::Database`].
        pub async fn create(pool: PgPool, table: &str) -> Result<PgFence, FenceError> {
            let columns = "(resource text PRIMARY KEY, token bigint NOT NULL CHECK (token > 0))";
            create_table(&pool, table, columns).await?;
            Ok(PgFence {
                pool,
                admit_sql: format!(
                    "INSERT INTO {table} AS f (resource, token) VALUES ($1, $2) \
                     ON CONFLICT (resource) DO UPDATE SET token = EXCLUDED.token \
                     WHERE f.token <= EXCLUDED.token RETURNING token"
                ),
            })
        }

        /// The conditional write, for use in your own SQL: parameters
        /// `$1` = resource, `$2` = token; one row back iff admitted.
        pub fn admit_sql(&self) -> &str {
            &self.admit_sql
        }

        /// Inside the caller's transaction: records `token` for `resource`
        /// and answers `true` iff it is at least the highest seen. The fence
        /// row stays locked until the transaction ends, so the guarded write
        /// commits (or not) together with the check.
        ///
        /// # Errors
        /// [`FenceError::InvalidToken`] for zero; the driver's error.
        pub async fn admit_in(
            &self,
            conn: &mut PgConnection,
            resource: &str,
            token: impl AsToken,
        ) -> Result<bool, FenceError> {
            let t = sql_token(&token)?;
            let row: Option<i64> = sqlx::query_scalar(&self.admit_sql)
                .bind(resource)
                .bind(t)
                .fetch_optional(conn)
                .await?;
            Ok(row.is_some())
        }

        /// Like [`PgFence::admit_in`] in a transaction of its own, for a
        /// resource whose write happens elsewhere (it then only records the
        /// highest token seen).
        ///
        /// # Errors
        /// As [`PgFence::admit_in`].
        pub async fn admit(&self, resource: &str, token: impl AsToken) -> Result<bool, FenceError> {
            let mut conn = self.pool.acquire().await?;
            self.admit_in(&mut conn, resource, token).await
        }
    }
}

#[cfg(feature = "mysql")]
mod my {
    use super::{create_table, sql_token, AsToken, FenceError};
    use sqlx::mysql::MySqlPool;
    use sqlx::MySqlConnection;

    /// A fence table on MySQL or MariaDB ([`super::MYSQL_PATTERN`] as calls):
    /// `admit_in` accepts a token at least as high as the highest seen for a
    /// resource, and records it; the fence row stays locked until the
    /// caller's transaction ends. Its admission read is a locking read, so
    /// an earlier plain read in the same REPEATABLE READ transaction cannot
    /// make it admit a stale token.
    ///
    /// ```no_run
    /// # async fn demo(pool: sqlx::MySqlPool, token: simba_core::Token) -> Result<(), sqlx::Error> {
    /// use simba_backends::fencing::{AsToken, MysqlFence};
    /// let fence = MysqlFence::create(pool.clone(), "app_fence").await?;
    /// let mut tx = pool.begin().await?;
    /// if fence.admit_in(&mut tx, "ledger", token).await? {
    ///     sqlx::query("UPDATE ledger SET writer = ?").bind(token.token_i64()).execute(&mut *tx).await?;
    ///     tx.commit().await?;
    /// } // else: a later term has written; drop the transaction (rollback)
    /// # Ok(()) }
    /// ```
    #[derive(Clone, Debug)]
    pub struct MysqlFence {
        pool: MySqlPool,
        upsert_sql: String,
        read_sql: String,
    }

    impl MysqlFence {
        /// Uses (creating if missing) the InnoDB fence table `table`
        /// (`[a-z][a-z0-9_]*`, at most 63 characters).
        ///
        /// # Errors
        /// [`FenceError::InvalidTable`] for a bad table name; the driver's error.
        pub async fn create(pool: MySqlPool, table: &str) -> Result<MysqlFence, FenceError> {
            let columns =
                "(resource VARCHAR(255) PRIMARY KEY, token BIGINT NOT NULL) ENGINE=InnoDB";
            create_table(&pool, table, columns).await?;
            Ok(MysqlFence {
                pool,
                upsert_sql: format!(
                    "INSERT INTO {table} (resource, token) VALUES (?, ?) \
                     ON DUPLICATE KEY UPDATE token = GREATEST(token, VALUES(token))"
                ),
                read_sql: format!("SELECT token FROM {table} WHERE resource = ? FOR UPDATE"),
            })
        }

        /// Inside the caller's transaction: records `token` for `resource`
        /// and answers `true` iff it is at least the highest seen (then
        /// write and commit; else roll back).
        ///
        /// # Errors
        /// [`FenceError::InvalidToken`] for zero; the driver's error.
        pub async fn admit_in(
            &self,
            conn: &mut MySqlConnection,
            resource: &str,
            token: impl AsToken,
        ) -> Result<bool, FenceError> {
            let t = sql_token(&token)?;
            sqlx::query(&self.upsert_sql)
                .bind(resource)
                .bind(t)
                .execute(&mut *conn)
                .await?;
            let seen: i64 = sqlx::query_scalar(&self.read_sql)
                .bind(resource)
                .fetch_one(&mut *conn)
                .await?;
            Ok(seen == t)
        }

        /// Like [`MysqlFence::admit_in`] in a transaction of its own (it
        /// then only records the highest token seen).
        ///
        /// # Errors
        /// As [`MysqlFence::admit_in`].
        pub async fn admit(&self, resource: &str, token: impl AsToken) -> Result<bool, FenceError> {
            let mut tx = self.pool.begin().await?;
            let admitted = self.admit_in(&mut tx, resource, token).await?;
            tx.commit().await?;
            Ok(admitted)
        }
    }
}

#[cfg(feature = "sqlite")]
mod lite {
    use super::{create_table, sql_token, AsToken, FenceError};
    use sqlx::sqlite::SqlitePool;
    use sqlx::SqliteConnection;

    /// A fence table on SQLite ([`super::SQLITE_PATTERN`] as calls). Begin
    /// the guarding transaction with `BEGIN IMMEDIATE` (`pool.begin_with("BEGIN
    /// IMMEDIATE")`), so that it holds the write lock from its first read.
    ///
    /// ```no_run
    /// # async fn demo(pool: sqlx::SqlitePool, token: simba_core::Token) -> Result<(), sqlx::Error> {
    /// use simba_backends::fencing::{AsToken, SqliteFence};
    /// let fence = SqliteFence::create(pool.clone(), "app_fence").await?;
    /// let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
    /// if fence.admit_in(&mut tx, "ledger", token).await? {
    ///     sqlx::query("UPDATE ledger SET writer = ?").bind(token.token_i64()).execute(&mut *tx).await?;
    ///     tx.commit().await?;
    /// }
    /// # Ok(()) }
    /// ```
    #[derive(Clone, Debug)]
    pub struct SqliteFence {
        pool: SqlitePool,
        admit_sql: String,
    }

    impl SqliteFence {
        /// Uses (creating if missing) the fence table `table`
        /// (`[a-z][a-z0-9_]*`, at most 63 characters).
        ///
        /// # Errors
        /// [`FenceError::InvalidTable`] for a bad table name; the driver's error.
        pub async fn create(pool: SqlitePool, table: &str) -> Result<SqliteFence, FenceError> {
            let columns = "(resource TEXT PRIMARY KEY, token INTEGER NOT NULL CHECK (token > 0))";
            create_table(&pool, table, columns).await?;
            Ok(SqliteFence {
                pool,
                admit_sql: format!(
                    "INSERT INTO {table} (resource, token) VALUES (?1, ?2) \
                     ON CONFLICT (resource) DO UPDATE SET token = excluded.token \
                     WHERE excluded.token >= {table}.token"
                ),
            })
        }

        /// Inside the caller's transaction: records `token` for `resource`
        /// and answers `true` iff it is at least the highest seen.
        ///
        /// # Errors
        /// [`FenceError::InvalidToken`] for zero; the driver's error.
        pub async fn admit_in(
            &self,
            conn: &mut SqliteConnection,
            resource: &str,
            token: impl AsToken,
        ) -> Result<bool, FenceError> {
            let t = sql_token(&token)?;
            let done = sqlx::query(&self.admit_sql)
                .bind(resource)
                .bind(t)
                .execute(conn)
                .await?;
            Ok(done.rows_affected() == 1)
        }

        /// Like [`SqliteFence::admit_in`] in a transaction of its own.
        ///
        /// # Errors
        /// As [`SqliteFence::admit_in`].
        pub async fn admit(&self, resource: &str, token: impl AsToken) -> Result<bool, FenceError> {
            let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
            let admitted = self.admit_in(&mut tx, resource, token).await?;
            tx.commit().await?;
            Ok(admitted)
        }
    }
}
