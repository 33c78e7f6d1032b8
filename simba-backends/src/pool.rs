//! Options for a backend built on an application's own `sqlx` pool
//! (`PgBackend::from_pool`, `MysqlBackend::from_pool`, `SqliteBackend::from_pool`).

use crate::config::{check_table_prefix, ConfigError, DEFAULT_TABLE_PREFIX};

/// How a backend uses a pool it did not open: the prefix of its table names
/// and whether it may create them.
///
/// ```
/// use simba_backends::PoolOptions;
/// let options = PoolOptions::new().table_prefix("jobs_")?.create_schema(false);
/// assert_eq!(options.get_table_prefix(), "jobs_");
/// assert!(!options.get_create_schema());
/// assert!(PoolOptions::new().table_prefix("Bad-Prefix").is_err());
/// # Ok::<(), simba_backends::ConfigError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolOptions {
    table_prefix: String,
    create_schema: bool,
    listen: bool,
    transaction_pooling: bool,
}

impl Default for PoolOptions {
    fn default() -> Self {
        PoolOptions {
            table_prefix: DEFAULT_TABLE_PREFIX.to_owned(),
            create_schema: true,
            listen: true,
            transaction_pooling: false,
        }
    }
}

impl PoolOptions {
    /// The defaults: prefix [`DEFAULT_TABLE_PREFIX`], tables created if missing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the prefix of Simba's table names (`[a-z][a-z0-9_]{0,31}` or empty).
    ///
    /// # Errors
    /// [`ConfigError::InvalidPrefix`].
    pub fn table_prefix(mut self, prefix: &str) -> Result<Self, ConfigError> {
        check_table_prefix(prefix)?;
        prefix.clone_into(&mut self.table_prefix);
        Ok(self)
    }

    /// Sets whether the backend creates missing tables (the default). With
    /// `false` no DDL runs at start: the tables must exist (for instance
    /// created from the SQL files in `simba-backends/migrations/` by your own
    /// migration tool), and a missing one is a `Rejected` error.
    pub fn create_schema(mut self, create: bool) -> Self {
        self.create_schema = create;
        self
    }

    /// PostgreSQL only: sets whether the backend listens for release
    /// broadcasts on a connection of its own (default `true`); see
    /// [`crate::BackendConfig::listen`].
    ///
    /// ```
    /// use simba_backends::PoolOptions;
    /// assert!(!PoolOptions::new().listen(false).get_listen());
    /// ```
    pub fn listen(mut self, listen: bool) -> Self {
        self.listen = listen;
        self
    }

    /// PostgreSQL only: sets whether the pool's connections go through a
    /// transaction-pooling proxy such as PgBouncer (default `false`): no
    /// statement is prepared under a name, every call runs in one
    /// transaction, and the release listener is off. See
    /// [`crate::BackendConfig::transaction_pooling`]; the pool's own
    /// connect options (e.g. `extra_float_digits`) stay the application's.
    ///
    /// ```
    /// use simba_backends::PoolOptions;
    /// let o = PoolOptions::new().transaction_pooling(true);
    /// assert!(o.get_transaction_pooling());
    /// assert!(!o.get_listen());
    /// ```
    pub fn transaction_pooling(mut self, on: bool) -> Self {
        self.transaction_pooling = on;
        self
    }

    /// Whether the PostgreSQL release listener runs (never behind a
    /// transaction-pooling proxy).
    pub fn get_listen(&self) -> bool {
        self.listen && !self.transaction_pooling
    }

    /// Whether the pool goes through a transaction-pooling proxy.
    pub fn get_transaction_pooling(&self) -> bool {
        self.transaction_pooling
    }

    /// The prefix of Simba's table names.
    pub fn get_table_prefix(&self) -> &str {
        &self.table_prefix
    }

    /// Whether missing tables are created at start.
    pub fn get_create_schema(&self) -> bool {
        self.create_schema
    }
}
