//! Colours for terminal output. Text is written through `anstream`, which
//! strips the styling when stdout is not a terminal (or `NO_COLOR` is set).

use anstyle::{AnsiColor, Style};
use std::io::IsTerminal;
use std::time::Duration;

fn paint(style: Style, text: &str) -> String {
    format!("{}{text}{}", style.render(), style.render_reset())
}

/// Whether stdout is a terminal.
pub fn stdout_is_terminal() -> bool {
    std::io::stdout().is_terminal()
}

/// Bold text.
pub fn bold(text: &str) -> String {
    paint(Style::new().bold(), text)
}

/// Dimmed text (timestamps, details).
pub fn dim(text: &str) -> String {
    paint(Style::new().dimmed(), text)
}

/// Good news: a node elected, a step that worked.
pub fn good(text: &str) -> String {
    paint(
        Style::new().fg_color(Some(AnsiColor::Green.into())).bold(),
        text,
    )
}

/// Bad news: a crash, a lost term.
pub fn bad(text: &str) -> String {
    paint(
        Style::new().fg_color(Some(AnsiColor::Red.into())).bold(),
        text,
    )
}

/// A notable value: a token, a measured time.
pub fn value(text: &str) -> String {
    paint(
        Style::new().fg_color(Some(AnsiColor::Cyan.into())).bold(),
        text,
    )
}

/// A warning.
pub fn warn(text: &str) -> String {
    paint(Style::new().fg_color(Some(AnsiColor::Yellow.into())), text)
}

/// An error line's text, as printed on stderr.
pub fn error(text: &str) -> String {
    format!("{} {text}", bad("error:"))
}

/// Formats a duration humanely with three significant digits at most:
/// `2s`, `2.95s`, `950ms`, `1m 30s`, `12ms`, `0s`. A `--wait 2s` prints
/// as `2s` (never as `1s 996ms 863us 846ns`).
pub fn human(d: Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 {
        return "0s".to_owned();
    }
    if ms < 1_000 {
        return format!("{ms}ms");
    }
    if ms < 60_000 {
        // Seconds with at most two decimals, trailing zeros dropped.
        let centis = (ms + 5) / 10;
        let text = format!("{}.{:02}", centis / 100, centis % 100);
        let text = text.trim_end_matches('0').trim_end_matches('.');
        return format!("{text}s");
    }
    let secs = u64::try_from((ms + 500) / 1_000).unwrap_or(u64::MAX);
    humantime::format_duration(Duration::from_secs(secs)).to_string()
}
