//! Colours for terminal output. Text is written through `anstream`, which
//! strips the styling when stdout is not a terminal (or `NO_COLOR` is set).

use anstyle::{AnsiColor, Style};
use std::io::IsTerminal;

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
