//! What a session tells observers about its owner: host, process, an
//! application label, an address to forward requests to.

use std::collections::BTreeMap;
use std::fmt;

/// The most bytes a [`SessionMetadata`] may take once encoded
/// ([`SessionMetadata::encode`]).
pub const MAX_METADATA_LEN: usize = 1024;

/// The most characters of one metadata key.
pub const MAX_METADATA_KEY_LEN: usize = 64;

/// Key–value pairs a client attaches to its session when it opens it
/// ([`Backend::open_session_with`](crate::Backend::open_session_with)), so
/// that anyone watching a lease can tell who holds it and, say, where to
/// forward requests ([`Backend::holder`](crate::Backend::holder)).
///
/// Keys are 1–64 characters of `[a-z0-9_.-]`; values are any text without
/// control characters; the whole, encoded as `key=value` lines in key
/// order, is at most [`MAX_METADATA_LEN`] bytes. Backends store the encoded
/// text with the session and drop it with the session.
///
/// ```
/// use simba_backends::SessionMetadata;
///
/// let mut m = SessionMetadata::new();
/// m.insert("host", "ledger-1").unwrap();
/// m.insert("addr", "10.0.0.7:8443").unwrap();
/// assert_eq!(m.get("addr"), Some("10.0.0.7:8443"));
/// assert_eq!(m.encode(), "addr=10.0.0.7:8443\nhost=ledger-1");
/// assert_eq!(SessionMetadata::decode(&m.encode()), m);
/// assert!(m.insert("Bad Key", "x").is_err());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct SessionMetadata {
    entries: BTreeMap<String, String>,
}

/// Why a [`SessionMetadata`] entry was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MetadataError {
    /// The key is empty, too long or holds a character outside `[a-z0-9_.-]`.
    #[error("invalid metadata key {0:?}: 1-64 characters of [a-z0-9_.-]")]
    InvalidKey(String),
    /// The value holds a control character (a line break, say).
    #[error("invalid metadata value for {0:?}: control characters are not allowed")]
    InvalidValue(String),
    /// The encoded metadata would exceed [`MAX_METADATA_LEN`] bytes.
    #[error("session metadata longer than {MAX_METADATA_LEN} bytes once encoded")]
    TooLong,
}

/// An empty metadata, for [`Backend::open_session`](crate::Backend::open_session).
pub(crate) static NO_METADATA: SessionMetadata = SessionMetadata {
    entries: BTreeMap::new(),
};

fn valid_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= MAX_METADATA_KEY_LEN
        && key
            .bytes()
            .all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'_' | b'.' | b'-'))
}

impl SessionMetadata {
    /// No entries.
    pub fn new() -> SessionMetadata {
        SessionMetadata::default()
    }

    /// Sets `key` to `value` (replacing an earlier value).
    ///
    /// # Errors
    /// [`MetadataError`] for a bad key or value, or if the whole would be
    /// longer than [`MAX_METADATA_LEN`]; the metadata is then unchanged.
    pub fn insert(
        &mut self,
        key: impl Into<String>,
        value: impl Into<String>,
    ) -> Result<(), MetadataError> {
        let (key, value) = (key.into(), value.into());
        if !valid_key(&key) {
            return Err(MetadataError::InvalidKey(key));
        }
        if value.chars().any(char::is_control) {
            return Err(MetadataError::InvalidValue(key));
        }
        let old = self.entries.insert(key.clone(), value);
        if self.encoded_len() > MAX_METADATA_LEN {
            match old {
                Some(v) => self.entries.insert(key, v),
                None => self.entries.remove(&key),
            };
            return Err(MetadataError::TooLong);
        }
        Ok(())
    }

    /// Removes `key`, returning its value.
    pub fn remove(&mut self, key: &str) -> Option<String> {
        self.entries.remove(key)
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.entries.get(key).map(String::as_str)
    }

    /// The entries, by key.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// How many entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn encoded_len(&self) -> usize {
        self.entries
            .iter()
            .map(|(k, v)| k.len() + v.len() + 2)
            .sum::<usize>()
            .saturating_sub(1)
    }

    /// The stored form: one `key=value` line per entry, in key order, no
    /// trailing line break (empty for no entries).
    pub fn encode(&self) -> String {
        let mut out = String::with_capacity(self.encoded_len());
        for (i, (k, v)) in self.entries.iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            out.push_str(k);
            out.push('=');
            out.push_str(v);
        }
        out
    }

    /// Reads the stored form back. Lenient: a line that is not a valid
    /// `key=value` entry (written by someone else) is skipped, never an error.
    pub fn decode(text: &str) -> SessionMetadata {
        let mut out = SessionMetadata::new();
        for line in text.split('\n') {
            if let Some((k, v)) = line.split_once('=') {
                let _ = out.insert(k, v);
            }
        }
        out
    }
}

impl fmt::Display for SessionMetadata {
    /// `key=value` pairs separated by spaces (`-` for none).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.entries.is_empty() {
            return f.write_str("-");
        }
        for (i, (k, v)) in self.entries.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{k}={v}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn round_trip_and_limits() {
        let mut m = SessionMetadata::new();
        assert_eq!(m.encode(), "");
        assert_eq!(SessionMetadata::decode(""), m);
        m.insert("host", "a=b c").unwrap();
        m.insert("pid", "42").unwrap();
        assert_eq!(SessionMetadata::decode(&m.encode()), m);
        assert_eq!(m.to_string(), "host=a=b c pid=42");
        assert!(matches!(
            m.insert("x", "line\nbreak"),
            Err(MetadataError::InvalidValue(_))
        ));
        assert!(matches!(
            m.insert("", "v"),
            Err(MetadataError::InvalidKey(_))
        ));
        let big = "v".repeat(MAX_METADATA_LEN);
        assert_eq!(m.insert("big", big), Err(MetadataError::TooLong));
        assert_eq!(m.len(), 2, "a refused entry leaves the metadata unchanged");
        m.insert("fill", "v".repeat(MAX_METADATA_LEN - m.encode().len() - 6))
            .unwrap();
        assert_eq!(m.encode().len(), MAX_METADATA_LEN);
        assert_eq!(
            SessionMetadata::decode("junk\nok=1\nBAD=2"),
            SessionMetadata::decode("ok=1")
        );
    }
}
