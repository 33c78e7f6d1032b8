//! Identifiers: sessions, fencing tokens, commands and terms.

use std::fmt;
use std::num::NonZeroU64;
use std::str::FromStr;

/// One session incarnation on the backend (S1.3): 128 random bits on SQL and
/// Redis, the ZooKeeper session id on ZooKeeper, the lease id on etcd. Never
/// reused: a restarted process is a new owner.
///
/// Displayed as 32 lowercase hex digits.
///
/// ```
/// use simba_core::SessionId;
/// let id = SessionId::from_u128(0xabc);
/// assert_eq!(id.to_string(), "00000000000000000000000000000abc");
/// assert_eq!(id.to_string().parse::<SessionId>(), Ok(id));
/// ```
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SessionId(u128);

impl SessionId {
    /// Wraps raw bits.
    pub const fn from_u128(bits: u128) -> Self {
        SessionId(bits)
    }

    /// The raw bits.
    pub const fn as_u128(self) -> u128 {
        self.0
    }

    /// A session id from 16 big-endian bytes.
    pub const fn from_bytes(bytes: [u8; 16]) -> Self {
        SessionId(u128::from_be_bytes(bytes))
    }

    /// The id as 16 big-endian bytes.
    pub const fn to_bytes(self) -> [u8; 16] {
        self.0.to_be_bytes()
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

impl fmt::Debug for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SessionId({:032x})", self.0)
    }
}

/// Why a string is not a [`SessionId`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid session id {0:?}: expected 1-32 hex digits")]
pub struct ParseSessionIdError(pub String);

impl FromStr for SessionId {
    type Err = ParseSessionIdError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.is_empty() || s.len() > 32 {
            return Err(ParseSessionIdError(s.to_owned()));
        }
        u128::from_str_radix(s, 16)
            .map(SessionId)
            .map_err(|_| ParseSessionIdError(s.to_owned()))
    }
}

/// A fencing token (S3.2): greater than zero, constant within a term, strictly
/// increasing across the terms of one name, kept by the backend forever.
///
/// ```
/// use simba_core::Token;
/// assert!(Token::new(0).is_none());
/// let t = Token::new(7).unwrap();
/// assert_eq!(t.get(), 7);
/// assert!(Token::new(8).unwrap() > t);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Token(NonZeroU64);

impl Token {
    /// A token, or `None` for zero (which no backend may hand out).
    pub const fn new(value: u64) -> Option<Token> {
        match NonZeroU64::new(value) {
            Some(v) => Some(Token(v)),
            None => None,
        }
    }

    /// The token's value.
    pub const fn get(self) -> u64 {
        self.0.get()
    }
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The id of one backend command; its reply echoes it back, so a stale or
/// duplicate reply is recognised and dropped, never trusted by arrival order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OpId(pub u64);

impl fmt::Display for OpId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "op#{}", self.0)
    }
}

/// One term of this engine (S3.2), unique for the engine's lifetime even if a
/// backend that lost its state hands out the same token twice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TermId(pub u64);

impl fmt::Display for TermId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "term#{}", self.0)
    }
}

/// One election, lock or group started on this engine, unique for the
/// engine's lifetime: a name stopped and started again is a new entry. The
/// start call returns it, and every term, event and task order of the entry
/// carries it (a partition's, its group's), so a driver finds what the
/// application handed in for it without keeping any state of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EntryId(pub u64);

impl fmt::Display for EntryId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "entry#{}", self.0)
    }
}
