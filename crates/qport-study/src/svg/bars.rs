//! Bar charts and a heatmap for reports: horizontal bars with a value text
//! ([`BarChart`]), stacked share bars with a legend ([`StackedBars`]) and
//! a labelled square matrix coloured by value ([`Heatmap`]). Every chart
//! has an explicit size and a `viewBox`, and every label is cut to the
//! room it has, its full text kept in a `<title>` tooltip ([`fit`]).

use super::{escape, nice_step, tick_label, PALETTE};
use std::fmt::Write;

/// Chart width in pixels.
const W: f64 = 720.0;
/// Pixels per character assumed for 11 px sans-serif text (wide enough
/// for mixed-case names).
const CHAR_PX: f64 = 7.0;
/// Width of the label column.
const LABEL_W: f64 = 190.0;
/// Longest a heatmap's rotated column label may be.
const COLUMN_LABEL_PX: f64 = 150.0;

/// `s` cut to at most `max` characters (the last one an ellipsis) and
/// whether it was cut.
///
/// ```
/// use qport_study::svg::fit;
/// assert_eq!(fit("conv", 10), ("conv".to_string(), false));
/// assert_eq!(fit("abcdefgh", 5), ("abcd…".to_string(), true));
/// ```
pub fn fit(s: &str, max: usize) -> (String, bool) {
    if s.chars().count() <= max {
        return (s.to_string(), false);
    }
    let keep: String = s.chars().take(max.saturating_sub(1)).collect();
    (format!("{keep}…"), true)
}

/// An SVG `<text>` element with escaped content fitted to `width_px`
/// (a `<title>` tooltip holds the full text when cut). `attrs` are the
/// element's attributes.
pub fn text_in(attrs: &str, s: &str, width_px: f64) -> String {
    let max = ((width_px / CHAR_PX).floor() as usize).max(2);
    let (shown, cut) = fit(s, max);
    if cut {
        format!(
            "<text {attrs}><title>{}</title>{}</text>",
            escape(s),
            escape(&shown)
        )
    } else {
        format!("<text {attrs}>{}</text>", escape(&shown))
    }
}

/// The opening `<svg>` tag of a `w` × `h` chart, with a white background.
fn open(s: &mut String, w: f64, h: f64, label: &str) {
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="11" role="img" aria-label="{}">"#,
        escape(label)
    );
    let _ = writeln!(s, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
}

fn title(s: &mut String, t: &str, w: f64) {
    s.push_str(&text_in(
        &format!(
            r#"x="{}" y="18" text-anchor="middle" font-size="13" font-weight="bold""#,
            w / 2.0
        ),
        t,
        w - 20.0,
    ));
    s.push('\n');
}

/// One horizontal bar.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    /// Label left of the bar.
    pub label: String,
    /// Its length (non-negative; negative and non-finite values draw no
    /// bar).
    pub value: f64,
    /// Text right of the bar (the value in words).
    pub text: String,
    /// Fill colour (`#rrggbb`); `None` takes the palette's in order.
    pub color: Option<String>,
}

/// Horizontal bars on a common linear axis from 0.
#[derive(Debug, Clone, PartialEq)]
pub struct BarChart {
    /// Title above the bars.
    pub title: String,
    /// Axis label below the bars.
    pub x_label: String,
    /// The bars, top to bottom.
    pub bars: Vec<Bar>,
}

/// Renders a bar chart as one SVG document.
///
/// ```
/// use qport_study::svg::{render_bars, Bar, BarChart};
/// let c = BarChart {
///     title: "latency".into(),
///     x_label: "ms".into(),
///     bars: vec![Bar { label: "fp32".into(), value: 2.0, text: "2 ms".into(), color: None }],
/// };
/// let svg = render_bars(&c);
/// assert!(svg.contains(r#"width="720""#) && svg.contains("2 ms"));
/// ```
pub fn render_bars(c: &BarChart) -> String {
    const ROW: f64 = 24.0;
    const TOP: f64 = 32.0;
    const TEXT_W: f64 = 210.0;
    let h = TOP + ROW * c.bars.len().max(1) as f64 + 40.0;
    let (x0, x1) = (LABEL_W, W - TEXT_W);
    let max = c
        .bars
        .iter()
        .map(|b| b.value)
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max);
    let span = if max > 0.0 { max } else { 1.0 };
    let step = nice_step(span, 5.0);
    let top_tick = (span / step).ceil() * step;
    let tx = |v: f64| x0 + v / top_tick * (x1 - x0);
    let mut s = String::new();
    open(&mut s, W, h, &c.title);
    title(&mut s, &c.title, W);
    let axis_y = TOP + ROW * c.bars.len().max(1) as f64;
    let mut k = 0;
    while k as f64 * step <= top_tick + step * 1e-9 {
        let v = k as f64 * step;
        let x = tx(v);
        let _ = writeln!(
            s,
            r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{axis_y}" stroke="#ddd"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            axis_y + 14.0,
            tick_label(v, step)
        );
        k += 1;
    }
    for (i, b) in c.bars.iter().enumerate() {
        let y = TOP + ROW * i as f64;
        let color = b
            .color
            .clone()
            .unwrap_or_else(|| PALETTE[i % PALETTE.len()].to_string());
        s.push_str(&text_in(
            &format!(r#"x="{}" y="{:.1}" text-anchor="end""#, x0 - 6.0, y + 16.0),
            &b.label,
            x0 - 12.0,
        ));
        let len = if b.value.is_finite() && b.value > 0.0 {
            tx(b.value) - x0
        } else {
            0.0
        };
        let _ = write!(
            s,
            r#"<rect x="{x0}" y="{:.1}" width="{len:.1}" height="{}" fill="{}"/>"#,
            y + 4.0,
            ROW - 8.0,
            escape(&color)
        );
        s.push_str(&text_in(
            &format!(r#"x="{:.1}" y="{:.1}""#, x0 + len + 6.0, y + 16.0),
            &b.text,
            W - (x0 + len + 6.0) - 4.0,
        ));
        s.push('\n');
    }
    let _ = writeln!(
        s,
        r#"<line x1="{x0}" y1="{TOP}" x2="{x0}" y2="{axis_y}" stroke="black"/>"#
    );
    s.push_str(&text_in(
        &format!(
            r#"x="{:.1}" y="{:.1}" text-anchor="middle""#,
            (x0 + x1) / 2.0,
            h - 8.0
        ),
        &c.x_label,
        x1 - x0,
    ));
    s.push_str("\n</svg>\n");
    s
}

/// One row of stacked bars: shares of a whole.
#[derive(Debug, Clone, PartialEq)]
pub struct StackedRow {
    /// Label left of the bar.
    pub label: String,
    /// One share per key of the chart, in key order (each in `[0, 1]`).
    pub shares: Vec<f64>,
}

/// Rows of bars split into shares of one whole, with a legend.
#[derive(Debug, Clone, PartialEq)]
pub struct StackedBars {
    /// Title above the bars.
    pub title: String,
    /// The parts' names, in stacking order (the legend).
    pub keys: Vec<String>,
    /// The rows, top to bottom.
    pub rows: Vec<StackedRow>,
}

/// Renders stacked share bars as one SVG document; a segment wide enough
/// shows its percentage.
pub fn render_stacked(c: &StackedBars) -> String {
    const ROW: f64 = 28.0;
    const TOP: f64 = 54.0;
    let h = TOP + ROW * c.rows.len().max(1) as f64 + 16.0;
    let (x0, x1) = (LABEL_W, W - 20.0);
    let mut s = String::new();
    open(&mut s, W, h, &c.title);
    title(&mut s, &c.title, W);
    let slot = (x1 - x0) / c.keys.len().max(1) as f64;
    for (k, key) in c.keys.iter().enumerate() {
        let x = x0 + slot * k as f64;
        let _ = write!(
            s,
            r#"<rect x="{x:.1}" y="28" width="12" height="12" fill="{}"/>"#,
            PALETTE[k % PALETTE.len()]
        );
        s.push_str(&text_in(
            &format!(r#"x="{:.1}" y="38""#, x + 16.0),
            key,
            slot - 20.0,
        ));
        s.push('\n');
    }
    for (i, r) in c.rows.iter().enumerate() {
        let y = TOP + ROW * i as f64;
        s.push_str(&text_in(
            &format!(r#"x="{}" y="{:.1}" text-anchor="end""#, x0 - 6.0, y + 18.0),
            &r.label,
            x0 - 12.0,
        ));
        let mut x = x0;
        for (k, &v) in r.shares.iter().enumerate() {
            let v = if v.is_finite() {
                v.clamp(0.0, 1.0)
            } else {
                0.0
            };
            let w = v * (x1 - x0);
            let _ = write!(
                s,
                r#"<rect x="{x:.1}" y="{:.1}" width="{w:.1}" height="{}" fill="{}"><title>{}: {:.1}%</title></rect>"#,
                y + 4.0,
                ROW - 8.0,
                PALETTE[k % PALETTE.len()],
                escape(c.keys.get(k).map_or("", String::as_str)),
                100.0 * v
            );
            let label = format!("{:.1}%", 100.0 * v);
            if w >= CHAR_PX * label.len() as f64 + 6.0 {
                let _ = write!(
                    s,
                    r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" fill="white">{label}</text>"#,
                    x + w / 2.0,
                    y + 18.0
                );
            }
            x += w;
        }
        let _ = writeln!(
            s,
            r#"<rect x="{x0}" y="{:.1}" width="{:.1}" height="{}" fill="none" stroke="black"/>"#,
            y + 4.0,
            x1 - x0,
            ROW - 8.0
        );
    }
    s.push_str("</svg>\n");
    s
}

/// A square matrix of cells coloured by value, with text in each cell.
#[derive(Debug, Clone, PartialEq)]
pub struct Heatmap {
    /// Title above the matrix.
    pub title: String,
    /// Row and column names.
    pub labels: Vec<String>,
    /// Cell values (`None`: not measured, drawn grey), row by row.
    pub values: Vec<Vec<Option<f64>>>,
    /// Cell texts, row by row.
    pub texts: Vec<Vec<String>>,
    /// Values mapped to the ends of the colour scale (low: red, high:
    /// green); values outside are clamped.
    pub domain: (f64, f64),
    /// Text of the colour legend (`top-1 agreement rate`).
    pub legend: String,
}

/// The colour of `t` in `[0, 1]` on a red–yellow–green scale.
///
/// ```
/// assert_eq!(qport_study::svg::scale_color(0.0), "#d73027");
/// assert_eq!(qport_study::svg::scale_color(1.0), "#1a9850");
/// ```
pub fn scale_color(t: f64) -> String {
    const STOPS: [(f64, [f64; 3]); 3] = [
        (0.0, [215.0, 48.0, 39.0]),
        (0.5, [254.0, 224.0, 139.0]),
        (1.0, [26.0, 152.0, 80.0]),
    ];
    let t = if t.is_finite() {
        t.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let (a, b) = if t <= 0.5 {
        (STOPS[0], STOPS[1])
    } else {
        (STOPS[1], STOPS[2])
    };
    let u = (t - a.0) / (b.0 - a.0);
    let c: Vec<String> = (0..3)
        .map(|i| format!("{:02x}", (a.1[i] + u * (b.1[i] - a.1[i])).round() as u8))
        .collect();
    format!("#{}", c.concat())
}

/// Renders a heatmap as one SVG document.
pub fn render_heatmap(c: &Heatmap) -> String {
    let n = c.labels.len();
    let longest = c
        .texts
        .iter()
        .flatten()
        .map(|t| t.chars().count())
        .max()
        .unwrap_or(1);
    let cell = (CHAR_PX * longest as f64 + 10.0).clamp(44.0, 90.0);
    let label_px = c
        .labels
        .iter()
        .map(|l| CHAR_PX * l.chars().count() as f64)
        .fold(0.0, f64::max)
        .min(COLUMN_LABEL_PX);
    let left = 170.0;
    let top = 40.0 + label_px * std::f64::consts::FRAC_1_SQRT_2 + 10.0;
    let w = (left + cell * n as f64 + 20.0).max(560.0);
    let h = top + cell * n as f64 + 70.0;
    let mut s = String::new();
    open(&mut s, w, h, &c.title);
    title(&mut s, &c.title, w);
    let (lo, hi) = c.domain;
    let unit = |v: f64| {
        if hi > lo {
            (v - lo) / (hi - lo)
        } else {
            1.0
        }
    };
    for (j, l) in c.labels.iter().enumerate() {
        // column labels, rotated
        let x = left + cell * (j as f64 + 0.5);
        s.push_str(&text_in(
            &format!(r#"transform="translate({x:.1},{}) rotate(-45)""#, top - 6.0),
            l,
            COLUMN_LABEL_PX,
        ));
        s.push('\n');
    }
    for (i, l) in c.labels.iter().enumerate() {
        let y = top + cell * i as f64;
        s.push_str(&text_in(
            &format!(
                r#"x="{}" y="{:.1}" text-anchor="end""#,
                left - 6.0,
                y + cell / 2.0 + 4.0
            ),
            l,
            left - 12.0,
        ));
        for j in 0..n {
            let x = left + cell * j as f64;
            let v = c.values.get(i).and_then(|r| r.get(j)).copied().flatten();
            let fill = v.map_or("#cccccc".to_string(), |v| scale_color(unit(v)));
            let text = c
                .texts
                .get(i)
                .and_then(|r| r.get(j))
                .map_or("", String::as_str);
            let _ = write!(
                s,
                r#"<rect x="{x:.1}" y="{y:.1}" width="{cell:.1}" height="{cell:.1}" fill="{fill}" stroke="white"><title>{} × {}: {}</title></rect>"#,
                escape(l),
                escape(&c.labels[j]),
                escape(text)
            );
            s.push_str(&text_in(
                &format!(
                    r#"x="{:.1}" y="{:.1}" text-anchor="middle""#,
                    x + cell / 2.0,
                    y + cell / 2.0 + 4.0
                ),
                text,
                cell - 4.0,
            ));
        }
        s.push('\n');
    }
    // legend: ten steps of the scale over the domain
    let ly = top + cell * n as f64 + 16.0;
    for k in 0..10 {
        let _ = write!(
            s,
            r#"<rect x="{:.1}" y="{ly:.1}" width="16" height="10" fill="{}"/>"#,
            left + 16.0 * k as f64,
            scale_color((k as f64 + 0.5) / 10.0)
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}">{}</text><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
        left,
        ly + 24.0,
        escape(&format!("{lo:.3}")),
        left + 160.0,
        ly + 24.0,
        escape(&format!("{hi:.3}"))
    );
    s.push_str(&text_in(
        &format!(r#"x="{:.1}" y="{:.1}""#, left, ly + 42.0),
        &c.legend,
        w - left - 10.0,
    ));
    s.push_str("\n</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_labels_are_cut_with_a_tooltip() {
        let long = "/features/features.13/conv/conv.0/conv.0.0/Conv<&>";
        let c = BarChart {
            title: "t".into(),
            x_label: "x".into(),
            bars: vec![Bar {
                label: long.into(),
                value: 3.0,
                text: "3".into(),
                color: None,
            }],
        };
        let svg = render_bars(&c);
        // the full (escaped) name only in the tooltip, the shown text cut
        assert!(svg.contains(
            "<title>/features/features.13/conv/conv.0/conv.0.0/Conv&lt;&amp;&gt;</title>"
        ));
        assert!(svg.contains("…</text>"));
        assert!(!svg.contains("<&>"));
    }

    #[test]
    fn heatmap_cells_and_colors() {
        let c = Heatmap {
            title: "agreement".into(),
            labels: vec!["a".into(), "b".into()],
            values: vec![vec![Some(1.0), Some(0.9)], vec![Some(0.9), None]],
            texts: vec![vec!["10".into(), "9".into()], vec!["9".into(), "-".into()]],
            domain: (0.9, 1.0),
            legend: "rate".into(),
        };
        let svg = render_heatmap(&c);
        assert_eq!(svg.matches("<rect").count(), 1 + 4 + 10);
        // the ends of the domain take the ends of the scale
        assert!(svg.contains(&format!(r#"fill="{}""#, scale_color(1.0))));
        assert!(svg.contains(&format!(r#"fill="{}""#, scale_color(0.0))));
        assert!(svg.contains(r##"fill="#cccccc""##));
        assert_eq!(svg, render_heatmap(&c));
    }

    #[test]
    fn scale_midpoint_is_yellow() {
        assert_eq!(scale_color(0.5), "#fee08b");
        assert_eq!(scale_color(f64::NAN), scale_color(0.0));
    }

    #[test]
    fn stacked_shares_fill_the_bar() {
        let c = StackedBars {
            title: "mix".into(),
            keys: vec!["int8".into(), "int16".into()],
            rows: vec![StackedRow {
                label: "j6m".into(),
                shares: vec![0.75, 0.25],
            }],
        };
        let svg = render_stacked(&c);
        assert!(svg.contains(">75.0%<") && svg.contains(">25.0%<"));
        // segment widths add up to the bar's width
        let widths: Vec<f64> = svg
            .split("<rect ")
            .filter(|r| r.contains("<title>int"))
            .map(|r| {
                let w = r.split("width=\"").nth(1).unwrap();
                w[..w.find('"').unwrap()].parse().unwrap()
            })
            .collect();
        assert_eq!(widths.len(), 2);
        assert!((widths.iter().sum::<f64>() - (W - 20.0 - LABEL_W)).abs() < 0.2);
    }
}
