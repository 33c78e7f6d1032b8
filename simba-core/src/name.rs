//! Lease names (S3.1).

use std::borrow::Borrow;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

/// The longest lease name, in characters (S3.1).
pub const MAX_NAME_LEN: usize = 128;

/// A validated lease name: 1–128 characters of `[A-Za-z0-9._:-]`, neither `.`
/// nor `..` (S3.1), so one name works as a Redis key, a ZooKeeper path segment
/// and a SQL value.
///
/// Every API that takes a name takes a `LeaseName`, so an invalid name is
/// refused before any I/O. Cloning one is cheap (a shared, immutable string),
/// so commands, events and timer keys carry names without allocating.
///
/// ```
/// use simba_core::{LeaseName, NameError};
/// let name = LeaseName::new("billing.ledger:eu-1").unwrap();
/// assert_eq!(name.as_str(), "billing.ledger:eu-1");
/// assert_eq!(LeaseName::new(".."), Err(NameError::DotName));
/// assert!(matches!(LeaseName::new("a/b"), Err(NameError::InvalidChar { ch: '/', index: 1 })));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LeaseName(Arc<str>);

/// Why a string is not a valid [`LeaseName`] (S3.1).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NameError {
    /// The name is empty.
    #[error("invalid lease name: it is empty (a name is 1-128 characters of [A-Za-z0-9._:-])")]
    Empty,
    /// The name is longer than [`MAX_NAME_LEN`] characters.
    #[error("invalid lease name: {len} characters, more than the 128 allowed")]
    TooLong {
        /// The length of the rejected name.
        len: usize,
    },
    /// The name contains a character outside `[A-Za-z0-9._:-]`.
    #[error("invalid lease name: character {ch:?} at index {index} is not one of [A-Za-z0-9._:-]")]
    InvalidChar {
        /// The first offending character.
        ch: char,
        /// Its index in characters.
        index: usize,
    },
    /// The name is `.` or `..`, which cannot be a path segment.
    #[error("invalid lease name: `.` and `..` are reserved")]
    DotName,
}

/// Whether `c` may appear in a lease name (S3.1).
pub const fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-')
}

impl LeaseName {
    /// Validates `name` (S3.1).
    ///
    /// # Errors
    /// A [`NameError`] saying which part of S3.1 the name violates.
    pub fn new(name: impl AsRef<str>) -> Result<Self, NameError> {
        let s = name.as_ref();
        if s.is_empty() {
            return Err(NameError::Empty);
        }
        if let Some((index, ch)) = s.chars().enumerate().find(|&(_, c)| !is_name_char(c)) {
            return Err(NameError::InvalidChar { ch, index });
        }
        // All characters are ASCII here, so bytes == characters.
        if s.len() > MAX_NAME_LEN {
            return Err(NameError::TooLong { len: s.len() });
        }
        if s == "." || s == ".." {
            return Err(NameError::DotName);
        }
        Ok(LeaseName(s.into()))
    }

    /// The name as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for LeaseName {
    type Err = NameError;
    fn from_str(s: &str) -> Result<Self, NameError> {
        LeaseName::new(s)
    }
}

impl TryFrom<&str> for LeaseName {
    type Error = NameError;
    fn try_from(s: &str) -> Result<Self, NameError> {
        LeaseName::new(s)
    }
}

impl TryFrom<String> for LeaseName {
    type Error = NameError;
    fn try_from(s: String) -> Result<Self, NameError> {
        LeaseName::new(s)
    }
}

impl AsRef<str> for LeaseName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for LeaseName {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for LeaseName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s3_1_accepts_every_allowed_character_and_both_length_limits() {
        let all: String = ('a'..='z')
            .chain('A'..='Z')
            .chain('0'..='9')
            .chain(['.', '_', ':', '-'])
            .collect();
        assert!(LeaseName::new(&all).is_ok());
        assert!(LeaseName::new("x").is_ok());
        assert!(LeaseName::new("y".repeat(128)).is_ok());
        assert!(LeaseName::new("...").is_ok());
    }

    #[test]
    fn s3_1_rejects_bad_names_with_the_reason() {
        assert_eq!(LeaseName::new(""), Err(NameError::Empty));
        assert_eq!(
            LeaseName::new("y".repeat(129)),
            Err(NameError::TooLong { len: 129 })
        );
        assert_eq!(LeaseName::new("."), Err(NameError::DotName));
        assert_eq!(LeaseName::new(".."), Err(NameError::DotName));
        assert_eq!(
            LeaseName::new("a b"),
            Err(NameError::InvalidChar { ch: ' ', index: 1 })
        );
        assert_eq!(
            LeaseName::new("é"),
            Err(NameError::InvalidChar { ch: 'é', index: 0 })
        );
        assert!(LeaseName::new("a/b").is_err());
        assert!(LeaseName::new("a\0").is_err());
    }
}
