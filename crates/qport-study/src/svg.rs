//! Small, dependency-free SVG charts for reports: an x/y [`Chart`] of
//! line and marker [`Series`] with a linear or log x axis, shaded x
//! [`Band`]s and a legend, and [`render_panels`] to stack several charts in
//! one document (an HTML report can inline the same string); horizontal
//! bars ([`render_bars`]), stacked share bars ([`render_stacked`]) and a
//! heatmap ([`render_heatmap`]). Output is deterministic: the same chart
//! gives the same bytes.
//!
//! ```
//! use qport_study::svg::{render_panels, Chart, Series};
//! let mut c = Chart::new("scaling", "output bytes", "x");
//! c.log_x = true;
//! c.series.push(Series::line("model", vec![(1e3, 3.0), (1e6, 1.0)]));
//! let svg = render_panels(&[c]);
//! assert!(svg.starts_with("<svg") && svg.contains("<polyline"));
//! ```

use std::fmt::Write;

mod bars;

pub use bars::{
    fit, render_bars, render_heatmap, render_stacked, scale_color, text_in, Bar, BarChart, Heatmap,
    StackedBars, StackedRow,
};

/// Colours given to series in order.
const PALETTE: [&str; 6] = [
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#7f7f7f",
];
const W: f64 = 972.0;
const H: f64 = 320.0;
const LEFT: f64 = 76.0;
/// The legend's column, right of the plot (so it never covers data).
const RIGHT: f64 = 256.0;
const TOP: f64 = 32.0;
const BOTTOM: f64 = 48.0;

/// How a series is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    /// A polyline through the points.
    Line,
    /// A dashed polyline.
    Dashed,
    /// A circle at each point.
    Dots,
}

/// One named set of points.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Legend text.
    pub name: String,
    /// `(x, y)` points, in drawing order.
    pub points: Vec<(f64, f64)>,
    /// How the points are drawn.
    pub mark: Mark,
}

impl Series {
    /// A solid line.
    pub fn line(name: &str, points: Vec<(f64, f64)>) -> Series {
        Series {
            name: name.into(),
            points,
            mark: Mark::Line,
        }
    }

    /// A dashed line.
    pub fn dashed(name: &str, points: Vec<(f64, f64)>) -> Series {
        Series {
            mark: Mark::Dashed,
            ..Series::line(name, points)
        }
    }

    /// Markers only.
    pub fn dots(name: &str, points: Vec<(f64, f64)>) -> Series {
        Series {
            mark: Mark::Dots,
            ..Series::line(name, points)
        }
    }
}

/// A shaded range of x.
#[derive(Debug, Clone, PartialEq)]
pub struct Band {
    /// Lower x.
    pub from: f64,
    /// Upper x.
    pub to: f64,
    /// Text at the band's foot.
    pub label: String,
}

/// One chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    /// Title above the plot.
    pub title: String,
    /// x axis label.
    pub x_label: String,
    /// y axis label.
    pub y_label: String,
    /// Log-scaled x axis (points with x <= 0 are dropped).
    pub log_x: bool,
    /// Fixed y range; `None` fits the data (with 0 included).
    pub y_range: Option<(f64, f64)>,
    /// What is drawn, in order.
    pub series: Vec<Series>,
    /// Shaded x ranges drawn under the series.
    pub bands: Vec<Band>,
}

impl Chart {
    /// An empty chart.
    pub fn new(title: &str, x_label: &str, y_label: &str) -> Chart {
        Chart {
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            log_x: false,
            y_range: None,
            series: vec![],
            bands: vec![],
        }
    }
}

/// Text escaped for XML.
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A number with an SI suffix (`256k`, `1.5M`), for tick labels.
pub fn si(v: f64) -> String {
    let a = v.abs();
    let (d, s) = if a >= 1e9 {
        (1e9, "G")
    } else if a >= 1e6 {
        (1e6, "M")
    } else if a >= 1e3 {
        (1e3, "k")
    } else {
        (1.0, "")
    };
    let t = format!("{:.2}", v / d);
    let t = t.trim_end_matches('0').trim_end_matches('.');
    format!("{t}{s}")
}

/// A tick label of `v` on an axis with ticks `step` apart: [`si`] for
/// steps of 0.01 and more, else enough decimals to tell neighbouring
/// ticks apart (scientific notation below 1e-6).
///
/// ```
/// use qport_study::svg::tick_label;
/// assert_eq!(tick_label(2000.0, 500.0), "2k");
/// assert_eq!(tick_label(0.99995, 0.00005), "0.99995");
/// assert_eq!(tick_label(2e-8, 1e-8), "2.0e-8");
/// ```
pub fn tick_label(v: f64, step: f64) -> String {
    if !(step.is_finite() && step > 0.0) || step >= 0.01 {
        return si(v);
    }
    if step < 1e-6 {
        return format!("{v:.1e}");
    }
    let d = (-step.log10()).ceil() as usize;
    let t = format!("{v:.d$}");
    if t.contains('.') {
        t.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        t
    }
}

/// Stacks `charts` vertically in one SVG document.
pub fn render_panels(charts: &[Chart]) -> String {
    let mut s = String::new();
    let total = H * charts.len() as f64;
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{total}" viewBox="0 0 {W} {total}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(s, r#"<rect width="{W}" height="{total}" fill="white"/>"#);
    for (i, c) in charts.iter().enumerate() {
        let _ = writeln!(s, r#"<g transform="translate(0,{})">"#, H * i as f64);
        render_chart(&mut s, c);
        s.push_str("</g>\n");
    }
    s.push_str("</svg>\n");
    s
}

/// Maps data to pixels.
struct Scale {
    x: (f64, f64),
    y: (f64, f64),
    log_x: bool,
}

impl Scale {
    fn tx(&self, v: f64) -> f64 {
        let v = if self.log_x { v.log10() } else { v };
        LEFT + (v - self.x.0) / (self.x.1 - self.x.0) * (W - LEFT - RIGHT)
    }
    fn ty(&self, v: f64) -> f64 {
        H - BOTTOM - (v - self.y.0) / (self.y.1 - self.y.0) * (H - TOP - BOTTOM)
    }
}

fn extent(vals: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    vals.filter(|v| v.is_finite())
        .fold(None, |acc, v| match acc {
            None => Some((v, v)),
            Some((a, b)) => Some((a.min(v), b.max(v))),
        })
}

/// A step of 1, 2 or 5 times a power of ten giving about `n` ticks.
fn nice_step(span: f64, n: f64) -> f64 {
    let raw = span / n;
    let p = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * p)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * p)
}

/// Tick values of a `nice_step` over `range` (computed from an integer
/// index, so no drift and no `-0`).
fn ticks(range: (f64, f64), n: f64) -> impl Iterator<Item = f64> {
    let st = nice_step(range.1 - range.0, n);
    let first = (range.0 / st - 1e-9).ceil() as i64;
    let last = (range.1 / st + 1e-9).floor() as i64;
    (first..=last).map(move |i| i as f64 * st + 0.0)
}

fn scale_of(c: &Chart) -> Scale {
    let keep = |x: f64| !c.log_x || x > 0.0;
    let xs = c
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .chain(c.bands.iter().flat_map(|b| [b.from, b.to]))
        .filter(|&x| keep(x))
        .map(|x| if c.log_x { x.log10() } else { x });
    let (mut x0, mut x1) = extent(xs).unwrap_or((0.0, 1.0));
    if c.log_x {
        (x0, x1) = (x0.floor(), x1.ceil());
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    let y = c.y_range.unwrap_or_else(|| {
        let ys = c.series.iter().flat_map(|s| s.points.iter().map(|p| p.1));
        let (a, b) = extent(ys.chain([0.0])).unwrap_or((0.0, 1.0));
        let b = if b <= a { a + 1.0 } else { b };
        let step = nice_step(b - a, 5.0);
        ((a / step).floor() * step, (b / step).ceil() * step)
    });
    Scale {
        x: (x0, x1),
        y,
        log_x: c.log_x,
    }
}

fn render_chart(s: &mut String, c: &Chart) {
    let sc = scale_of(c);
    let (px0, px1, py0, py1) = (LEFT, W - RIGHT, TOP, H - BOTTOM);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="18" text-anchor="middle" font-size="13" font-weight="bold">{}</text>"#,
        (px0 + px1) / 2.0,
        escape(&c.title)
    );
    for b in &c.bands {
        if c.log_x && (b.from <= 0.0 || b.to <= 0.0) {
            continue;
        }
        let (a, z) = (sc.tx(b.from).max(px0), sc.tx(b.to).min(px1));
        let _ = writeln!(
            s,
            r##"<rect x="{a:.1}" y="{py0}" width="{:.1}" height="{}" fill="#fdd49e" fill-opacity="0.5"/>"##,
            (z - a).max(0.0),
            py1 - py0
        );
        let _ = writeln!(
            s,
            r##"<text x="{:.1}" y="{}" text-anchor="middle" fill="#7f2704">{}</text>"##,
            (a + z) / 2.0,
            py1 - 6.0,
            escape(&b.label)
        );
    }
    // axes, grid and ticks
    let _ = writeln!(
        s,
        r#"<rect x="{px0}" y="{py0}" width="{}" height="{}" fill="none" stroke="black"/>"#,
        px1 - px0,
        py1 - py0
    );
    let xticks: Vec<(f64, String)> = if c.log_x {
        (sc.x.0 as i32..=sc.x.1 as i32)
            .map(|e| (10f64.powi(e), si(10f64.powi(e))))
            .collect()
    } else {
        ticks(sc.x, 6.0).map(|t| (t, si(t))).collect()
    };
    for (v, label) in xticks {
        let x = sc.tx(v);
        let _ = writeln!(
            s,
            r##"<line x1="{x:.1}" y1="{py0}" x2="{x:.1}" y2="{py1}" stroke="#ddd"/><text x="{x:.1}" y="{}" text-anchor="middle">{}</text>"##,
            py1 + 14.0,
            escape(&label)
        );
    }
    let y_step = nice_step(sc.y.1 - sc.y.0, 5.0);
    for t in ticks(sc.y, 5.0) {
        let y = sc.ty(t);
        let _ = writeln!(
            s,
            r##"<line x1="{px0}" y1="{y:.1}" x2="{px1}" y2="{y:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            px0 - 4.0,
            y + 4.0,
            tick_label(t, y_step)
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
        (px0 + px1) / 2.0,
        H - 12.0,
        escape(&c.x_label)
    );
    let _ = writeln!(
        s,
        r#"<text transform="translate(14,{}) rotate(-90)" text-anchor="middle">{}</text>"#,
        (py0 + py1) / 2.0,
        escape(&c.y_label)
    );
    // series and legend
    for (i, se) in c.series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let pts: Vec<(f64, f64)> = se
            .points
            .iter()
            .filter(|p| p.0.is_finite() && p.1.is_finite() && (!c.log_x || p.0 > 0.0))
            .map(|&(x, y)| (sc.tx(x), sc.ty(y)))
            .collect();
        match se.mark {
            Mark::Line | Mark::Dashed => {
                let list: Vec<String> = pts.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
                let dash = if se.mark == Mark::Dashed {
                    r#" stroke-dasharray="6,4""#
                } else {
                    ""
                };
                let _ = writeln!(
                    s,
                    r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="2"{dash}/>"#,
                    list.join(" ")
                );
            }
            Mark::Dots => {
                for (x, y) in &pts {
                    let _ = writeln!(
                        s,
                        r#"<circle cx="{x:.1}" cy="{y:.1}" r="4" fill="{color}"/>"#
                    );
                }
            }
        }
        let ly = py0 + 10.0 + 16.0 * i as f64;
        let (kx, tx) = (px1 + 12.0, px1 + 34.0);
        let _ = match se.mark {
            // a round key that is not a `<circle>`: circles are data points
            Mark::Dots => writeln!(
                s,
                r#"<rect x="{}" y="{}" width="8" height="8" rx="4" fill="{color}"/>"#,
                kx + 4.0,
                ly - 8.0
            ),
            Mark::Line | Mark::Dashed => writeln!(
                s,
                r#"<line x1="{kx}" y1="{}" x2="{}" y2="{}" stroke="{color}" stroke-width="2"{}/>"#,
                ly - 4.0,
                kx + 16.0,
                ly - 4.0,
                if se.mark == Mark::Dashed {
                    r#" stroke-dasharray="6,4""#
                } else {
                    ""
                }
            ),
        };
        s.push_str(&text_in(
            &format!(r#"x="{tx}" y="{ly}""#),
            &se.name,
            W - tx - 4.0,
        ));
        s.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn si_labels() {
        assert_eq!(si(1000.0), "1k");
        assert_eq!(si(256_368.0), "256.37k");
        assert_eq!(si(2.5), "2.5");
        assert_eq!(si(1e6), "1M");
    }

    /// The `x` attribute of the `<text>` element whose content is `text`.
    fn text_x(svg: &str, text: &str) -> f64 {
        let end = svg.find(&format!(">{text}</text>")).expect(text);
        let tag = &svg[svg[..end].rfind("<text").unwrap()..end];
        let x = &tag[tag.find(" x=\"").unwrap() + 4..];
        x[..x.find('"').unwrap()].parse().unwrap()
    }

    #[test]
    fn the_legend_sits_right_of_the_plot() {
        let mut c = Chart::new("t", "x", "y");
        // data in the plot's top-right corner, where a legend inside would sit
        c.series
            .push(Series::line("solid", vec![(0.0, 0.0), (1.0, 1.0)]));
        c.series
            .push(Series::dashed("dashed", vec![(0.0, 1.0), (1.0, 1.0)]));
        let long = "a series name far too long for the legend column";
        c.series.push(Series::dots(long, vec![(1.0, 1.0)]));
        let svg = render_panels(&[c]);
        let frame = W - RIGHT;
        for name in ["solid", "dashed"] {
            assert!(text_x(&svg, name) > frame + 20.0, "{name}");
        }
        // cut to the column, whole in its tooltip
        assert!(svg.contains(&format!("<title>{long}</title>")));
        assert_eq!(svg.matches(long).count(), 1, "shown cut: {svg}");
        // the legend's keys: a dashed line, and a round key that is no data point
        assert_eq!(svg.matches("stroke-dasharray").count(), 2);
        assert_eq!(svg.matches("<circle").count(), 1);
        assert!(svg.contains(r#"rx="4""#));
    }

    #[test]
    fn chart_is_deterministic_and_escaped() {
        let mut c = Chart::new("a<b", "x", "y");
        c.log_x = true;
        c.series
            .push(Series::dots("m&n", vec![(1e3, 1.0), (1e5, 2.0)]));
        c.bands.push(Band {
            from: 2e3,
            to: 5e4,
            label: "band".into(),
        });
        let a = render_panels(&[c.clone(), c.clone()]);
        assert_eq!(a, render_panels(&[c.clone(), c]));
        assert!(a.contains("a&lt;b") && a.contains("m&amp;n"));
        assert_eq!(a.matches("<circle").count(), 4);
        assert_eq!(a.matches("<g transform").count(), 2);
        // log ticks at every decade from 1k to 100k
        for t in [">1k<", ">10k<", ">100k<"] {
            assert!(a.contains(t), "{t}");
        }
    }
}
