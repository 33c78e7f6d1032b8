//! `simba status` and `simba watch`: what [`Backend::inspect`] sees.

use crate::error::CliError;
use crate::status_json::to_json;
use crate::style;
use crate::style::human;
use simba_backends::{Backend, Inspection};
use std::io::Write;
use std::time::Duration;

/// Renders an inspection as two aligned tables (coloured by the writer).
pub fn render_table(i: &Inspection) -> String {
    let mut rows = vec![[
        "LEASE".to_owned(),
        "HOLDER".to_owned(),
        "TOKEN".to_owned(),
        "REMAINING".to_owned(),
    ]];
    for l in &i.leases {
        rows.push([
            l.name.as_str().to_owned(),
            l.holder
                .map(|s| s.to_string())
                .unwrap_or_else(|| "-".to_owned()),
            l.token
                .map(|t| t.to_string())
                .unwrap_or_else(|| "-".to_owned()),
            l.remaining.map(human).unwrap_or_else(|| "free".to_owned()),
        ]);
    }
    let mut out = String::new();
    if i.leases.is_empty() {
        out.push_str("no leases\n");
    } else {
        out.push_str(&table(&rows, true));
    }
    out.push('\n');
    let mut rows = vec![[
        "SESSION".to_owned(),
        "REMAINING".to_owned(),
        "LEASE DURATION".to_owned(),
        "METADATA".to_owned(),
    ]];
    for s in &i.sessions {
        rows.push([
            s.session.to_string(),
            human(s.remaining),
            human(s.lease_duration),
            s.metadata.to_string(),
        ]);
    }
    if i.sessions.is_empty() {
        out.push_str("no live sessions\n");
    } else {
        out.push_str(&table(&rows, true));
    }
    out
}

fn table(rows: &[[String; 4]], header: bool) -> String {
    let mut widths = [0usize; 4];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for (n, row) in rows.iter().enumerate() {
        let mut line = String::new();
        for (k, (w, cell)) in widths.iter().zip(row).enumerate() {
            if k > 0 && *w > 0 {
                line.push_str("  ");
            }
            line.push_str(cell);
            line.extend(std::iter::repeat_n(' ', w - cell.chars().count()));
        }
        let line = line.trim_end();
        if header && n == 0 {
            out.push_str(&style::bold(line));
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

/// Runs `simba status`: one inspection, printed as a table or JSON.
///
/// # Errors
/// The backend's error, or an I/O error writing stdout.
pub async fn status(
    backend: &dyn Backend,
    prefix: Option<&str>,
    json: bool,
) -> Result<(), CliError> {
    let inspection = backend
        .inspect(prefix)
        .await
        .map_err(|e| CliError::from_backend(&e))?;
    let mut out = anstream::stdout();
    if json {
        let text = serde_json::to_string_pretty(&to_json(backend.name(), &inspection))
            .map_err(|e| CliError::Internal(e.to_string()))?;
        writeln!(out, "{text}")?;
    } else {
        write!(out, "{}", render_table(&inspection))?;
    }
    out.flush()?;
    Ok(())
}

/// Runs `simba watch`: the status table, refreshed in place every `interval`
/// until Ctrl-C or SIGTERM. A failed inspection is shown and retried.
///
/// # Errors
/// An I/O error writing stdout.
pub async fn watch(
    backend: &dyn Backend,
    prefix: Option<&str>,
    interval: Duration,
    redacted_url: &str,
) -> Result<(), CliError> {
    let mut stop = std::pin::pin!(crate::signals::shutdown());
    let terminal = style::stdout_is_terminal();
    loop {
        if crate::events::json() {
            let event = match backend.inspect(prefix).await {
                Ok(i) => crate::events::Event::Status(to_json(backend.name(), &i)),
                Err(e) => crate::events::Event::InspectFailed {
                    message: simba_backends::redact(&e.to_string()),
                },
            };
            crate::events::emit(crate::events::To::Stdout, &event)?;
            tokio::select! {
                _ = tokio::time::sleep(interval) => continue,
                _ = &mut stop => return Ok(()),
            }
        }
        let body = match backend.inspect(prefix).await {
            Ok(i) => render_table(&i),
            Err(e) => format!(
                "{}\n",
                style::error(&simba_backends::redact(&e.to_string()))
            ),
        };
        let mut out = anstream::stdout();
        if terminal {
            // Home the cursor and clear the screen: refresh in place.
            write!(out, "\x1b[H\x1b[2J")?;
        }
        writeln!(
            out,
            "{} every {}  (Ctrl-C to stop)\n",
            style::bold(&format!("simba watch {redacted_url}")),
            human(interval)
        )?;
        write!(out, "{body}")?;
        if !terminal {
            writeln!(out, "---")?;
        }
        out.flush()?;
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = &mut stop => return Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use simba_backends::{LeaseInfo, SessionInfo};
    use simba_core::{LeaseName, SessionId, Token};

    fn sample() -> Inspection {
        Inspection {
            leases: vec![
                LeaseInfo {
                    name: LeaseName::new("billing").unwrap(),
                    holder: Some(SessionId::from_u128(0xab)),
                    token: Token::new(7),
                    remaining: Some(Duration::from_millis(2500)),
                },
                LeaseInfo {
                    name: LeaseName::new("reports").unwrap(),
                    holder: None,
                    token: Token::new(3),
                    remaining: None,
                },
            ],
            sessions: vec![SessionInfo {
                session: SessionId::from_u128(0xab),
                remaining: Duration::from_millis(2500),
                lease_duration: Duration::from_secs(3),
                metadata: {
                    let mut m = simba_backends::SessionMetadata::new();
                    m.insert("host", "ledger-1").unwrap();
                    m.insert("pid", "4242").unwrap();
                    m
                },
            }],
        }
    }

    #[test]
    fn the_table_shows_name_holder_token_remaining() {
        let t = render_table(&sample());
        assert!(t.contains("billing"), "{t}");
        assert!(t.contains("000000000000000000000000000000ab"), "{t}");
        assert!(t.contains("2.5s"), "{t}");
        assert!(t.contains("free"), "{t}");
        assert!(t.contains("host=ledger-1 pid=4242"), "{t}");
    }

    #[test]
    fn the_json_is_stable() {
        let v = serde_json::to_value(to_json("memory", &sample())).unwrap();
        assert_eq!(v["leases"][0]["token"], 7);
        assert_eq!(v["leases"][0]["remaining_ms"], 2500);
        assert_eq!(v["leases"][1]["holder"], serde_json::Value::Null);
        assert_eq!(v["sessions"][0]["lease_duration_ms"], 3000);
        assert_eq!(v["sessions"][0]["metadata"]["host"], "ledger-1");
    }
}
