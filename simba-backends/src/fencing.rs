//! Fencing (S10): a resource accepts a write only with a token at least
//! as high as the highest it has seen, so a holder whose term ended (a paused
//! process, a partitioned node) is refused once a later term has written.
//!
//! The check and the write must commit together: do both in one transaction
//! on the resource's database. The fence row is locked by the check, so
//! concurrent writers serialize on it.
//!
//! * PostgreSQL: [`PgFence`] (feature `postgres`).
//! * MySQL / MariaDB and SQLite: the SQL patterns [`MYSQL_PATTERN`] and
//!   [`SQLITE_PATTERN`] (tested in this crate's `tests/fencing.rs`).

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

use simba_core::Token;

/// Anything that carries a fencing token: a [`Token`], its `u64` value, or
/// (with `simba-client`) a `Term` or `LockTerm` by reference. The fence
/// helpers take `impl AsToken`, so `fence.admit_in(&mut tx, "ledger", &term)`
/// and `…, term.token())` both work.
pub trait AsToken {
    /// The token's value. Zero is never a token: the helpers refuse it.
    fn token_value(&self) -> u64;
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

#[cfg(feature = "postgres")]
pub use pg::PgFence;

#[cfg(feature = "postgres")]
mod pg {
    use super::AsToken;
    use crate::sql::map_err;
    use simba_core::{BackendError, BackendErrorKind};
    use sqlx::postgres::PgPool;
    use sqlx::PgConnection;

    /// A fence table on PostgreSQL: `admit` accepts a token at least as high
    /// as the highest seen for a resource, and records it.
    ///
    /// ```no_run
    /// # async fn demo(pool: sqlx::PgPool, token: simba_core::Token) -> Result<(), Box<dyn std::error::Error>> {
    /// // `token`: a term's token (`term.token()`), or the term itself (`&term`)
    /// use simba_backends::fencing::PgFence;
    /// let fence = PgFence::create(pool.clone(), "app_fence").await?;
    /// let mut tx = pool.begin().await?;
    /// if fence.admit_in(&mut tx, "ledger", token).await? {
    ///     sqlx::query("UPDATE ledger SET balance = balance + 1").execute(&mut *tx).await?;
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
        /// `Rejected` for a bad table name or missing privileges; the
        /// driver's error otherwise.
        pub async fn create(pool: PgPool, table: &str) -> Result<PgFence, BackendError> {
            let ok = !table.is_empty()
                && table.len() <= 63
                && table.starts_with(|c: char| c.is_ascii_lowercase())
                && table
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
            if !ok {
                return Err(BackendError::new(
                    BackendErrorKind::Rejected,
                    format!("invalid fence table name {table:?}"),
                ));
            }
            sqlx::query(&format!(
                "CREATE TABLE IF NOT EXISTS {table} \
                 (resource text PRIMARY KEY, token bigint NOT NULL CHECK (token > 0))"
            ))
            .execute(&pool)
            .await
            .map_err(|e| map_err("postgres", "create fence table", e))?;
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
        /// The driver's error, typed.
        pub async fn admit_in(
            &self,
            conn: &mut PgConnection,
            resource: &str,
            token: impl AsToken,
        ) -> Result<bool, BackendError> {
            let token = token.token_value();
            let t = i64::try_from(token)
                .ok()
                .filter(|t| *t > 0)
                .ok_or_else(|| {
                    BackendError::new(
                        BackendErrorKind::Rejected,
                        format!("{token} is not a fencing token (1 ..= 2^63 - 1)"),
                    )
                })?;
            let row: Option<i64> = sqlx::query_scalar(&self.admit_sql)
                .bind(resource)
                .bind(t)
                .fetch_optional(conn)
                .await
                .map_err(|e| map_err("postgres", "fence", e))?;
            Ok(row.is_some())
        }

        /// Like [`PgFence::admit_in`] in a transaction of its own, for a
        /// resource whose write happens elsewhere (it then only records the
        /// highest token seen).
        ///
        /// # Errors
        /// The driver's error, typed.
        pub async fn admit(
            &self,
            resource: &str,
            token: impl AsToken,
        ) -> Result<bool, BackendError> {
            let mut conn = self
                .pool
                .acquire()
                .await
                .map_err(|e| map_err("postgres", "fence", e))?;
            self.admit_in(&mut conn, resource, token).await
        }
    }
}
