//! The PNG plot: one pair of bars (Simba, peer) per timed row, medians on a
//! log scale, with the p99 as a thin whisker.

use crate::report::{Figure, Row};
use plotters::prelude::*;
use std::path::Path;

/// Where a TrueType font is looked for (Debian: fonts-dejavu-core).
const FONTS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
];

/// Why the plot was not drawn.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// No font to label the plot with.
    #[error("no TrueType font found (looked for {0}); install fonts-dejavu-core")]
    NoFont(String),
    /// Drawing or encoding failed.
    #[error("drawing the plot failed: {0}")]
    Draw(String),
}

fn register_font() -> Result<(), PlotError> {
    for path in FONTS {
        if let Ok(bytes) = std::fs::read(path) {
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                return Ok(());
            }
        }
    }
    Err(PlotError::NoFont(FONTS.join(", ")))
}

fn p99(f: &Figure) -> Option<f64> {
    match f {
        Figure::Time(s) => Some(s.p99),
        _ => None,
    }
}

/// Draws the timed rows of `rows` into `path` (PNG) under `title`.
///
/// # Errors
/// [`PlotError`] when no font is found or drawing fails.
pub fn draw(rows: &[Row], title: &str, path: &Path) -> Result<(), PlotError> {
    register_font()?;
    let timed: Vec<&Row> = rows
        .iter()
        .filter(|r| {
            r.simba.median_secs().is_some()
                || r.peer.as_ref().and_then(|p| p.1.median_secs()).is_some()
        })
        .collect();
    let all: Vec<f64> = timed
        .iter()
        .flat_map(|r| {
            [
                r.simba.median_secs(),
                p99(&r.simba),
                r.peer.as_ref().and_then(|p| p.1.median_secs()),
                r.peer.as_ref().and_then(|p| p99(&p.1)),
            ]
        })
        .flatten()
        .filter(|v| *v > 0.0)
        .collect();
    let lo = all.iter().copied().fold(f64::INFINITY, f64::min).max(1e-7);
    let hi = all.iter().copied().fold(0.0, f64::max).max(lo * 10.0);
    let (lo, hi) = (lo.log10().floor(), hi.log10().ceil());
    let (label_w, bar_w, row_h, top, bottom) = (470i32, 760i32, 26i32, 60i32, 50i32);
    let width = (label_w + bar_w + 30) as u32;
    let height = (top + bottom + row_h * timed.len().max(1) as i32) as u32;
    let root = BitMapBackend::new(path, (width, height)).into_drawing_area();
    let draw_err = |e: &dyn std::fmt::Display| PlotError::Draw(e.to_string());
    root.fill(&WHITE).map_err(|e| draw_err(&e))?;
    let x_of = |secs: f64| -> i32 {
        let f = ((secs.max(1e-9).log10() - lo) / (hi - lo)).clamp(0.0, 1.0);
        label_w + (f * f64::from(bar_w)) as i32
    };
    let font = |size: f64| ("sans-serif", size).into_font();
    root.draw(&Text::new(title.to_owned(), (10, 10), font(18.0)))
        .map_err(|e| draw_err(&e))?;
    root.draw(&Text::new(
        "median (bar) and p99 (whisker), log scale; blue: Simba or floor, orange: peer".to_owned(),
        (10, 34),
        font(13.0),
    ))
    .map_err(|e| draw_err(&e))?;
    // Decade grid lines and labels.
    let y_end = top + row_h * timed.len() as i32;
    let mut d = lo;
    while d <= hi {
        let x = x_of(10f64.powf(d));
        root.draw(&PathElement::new(
            vec![(x, top), (x, y_end)],
            RGBColor(200, 200, 200),
        ))
        .map_err(|e| draw_err(&e))?;
        root.draw(&Text::new(
            crate::stats::fmt_secs(10f64.powf(d)),
            (x - 15, y_end + 8),
            font(12.0),
        ))
        .map_err(|e| draw_err(&e))?;
        d += 1.0;
    }
    let blue = RGBColor(52, 101, 164);
    let orange = RGBColor(230, 126, 34);
    for (i, r) in timed.iter().enumerate() {
        let y = top + row_h * i as i32;
        let mut label = format!("{}: {}", r.backend, r.what);
        if let Some((peer, _)) = &r.peer {
            label.push_str(&format!(" / {peer}"));
        }
        if label.chars().count() > 70 {
            label = label.chars().take(68).collect::<String>() + "…";
        }
        root.draw(&Text::new(label, (6, y + 6), font(12.0)))
            .map_err(|e| draw_err(&e))?;
        let bars = [
            (r.simba.median_secs(), p99(&r.simba), blue, 3),
            (
                r.peer.as_ref().and_then(|p| p.1.median_secs()),
                r.peer.as_ref().and_then(|p| p99(&p.1)),
                orange,
                14,
            ),
        ];
        for (median, p99, color, dy) in bars {
            if let Some(m) = median {
                root.draw(&Rectangle::new(
                    [(label_w, y + dy), (x_of(m), y + dy + 9)],
                    color.filled(),
                ))
                .map_err(|e| draw_err(&e))?;
                if let Some(p) = p99 {
                    root.draw(&PathElement::new(
                        vec![(x_of(m), y + dy + 4), (x_of(p), y + dy + 4)],
                        color.stroke_width(1),
                    ))
                    .map_err(|e| draw_err(&e))?;
                }
            }
        }
    }
    root.present().map_err(|e| draw_err(&e))?;
    Ok(())
}
