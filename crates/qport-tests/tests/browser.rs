//! The browser test of the HTML study report (issue 16): the page
//! `qport_study::report::render_html` makes of a real study (the report of
//! `support/study.rs`, shared with `study_report.rs`) is opened in headless
//! Chromium by `scripts/browser_check.py` at a 1280 x 800 laptop viewport
//! and as an A4 print, and must show no console error, request nothing
//! but local files, render every SVG chart at a nonzero size and overflow
//! no box; its screenshot is kept at `target/browser/study-report.png`.
//!
//! Small hand-written pages check that the script catches each failure it
//! claims to (console error, uncaught exception, remote image, zero-size
//! SVG, overflowing text, a page without charts under `--expect-svg`) and
//! passes a clean page with intentional scrolling and clipping; and that a
//! missing Chromium is an error naming `scripts/ensure-chromium`.
//!
//! Needs Chromium (`bash scripts/ensure-chromium`, run by
//! `bash scripts/test`); without it these tests fail, they never skip.

// the shared builder also serves study_report.rs, which uses the rest
#[allow(dead_code)]
#[path = "support/study.rs"]
mod study;

use qport_study::report;
use qport_tests::browser::{check, failure_kinds, failures, png_size, run_script};
use qport_tests::cli::temp_dir;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// `<workspace target dir>/browser`: screenshots kept for a look.
fn kept() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("target dir")
        .join("browser");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes the study report's page next to its screenshots.
fn report_page() -> PathBuf {
    let path = kept().join("study-report.html");
    std::fs::write(&path, report::render_html(study::built())).unwrap();
    path
}

/// The number of `<svg` tags in a page's source.
fn svg_tags(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .unwrap()
        .matches("<svg")
        .count()
}

/// Every chart the page has was drawn at a nonzero size, and the
/// screenshot is a PNG of the whole page.
fn assert_charts_and_screenshot(v: &Value, page: &Path, png: &Path, width: u64) {
    let tags = svg_tags(page);
    assert_eq!(
        tags, 6,
        "speed, heatmap, precision mix, sensitivity, tuning, regime"
    );
    assert_eq!(v["svg_count"], tags);
    for s in v["svgs"].as_array().unwrap() {
        let (w, h) = (s["width"].as_f64().unwrap(), s["height"].as_f64().unwrap());
        assert!(w >= 100.0 && h >= 100.0, "a chart drawn at {w} x {h}: {s}");
    }
    assert_eq!(v["page"]["width"], width, "no horizontal scrolling");
    let (pw, ph) = png_size(png);
    assert_eq!(
        (u64::from(pw), u64::from(ph)),
        (width, v["page"]["height"].as_u64().unwrap())
    );
    assert!(
        ph > 2000,
        "a full-page screenshot, not the viewport: {ph} px"
    );
    assert!(std::fs::metadata(png).unwrap().len() > 50_000);
}

#[test]
fn the_report_of_a_real_study_renders_cleanly_on_a_laptop_screen() {
    let page = report_page();
    let png = kept().join("study-report.png");
    let v = check(&page, &png, &["--expect-svg"]);
    assert_eq!(failures(&v), vec![], "{v:#}");
    assert_eq!(v["viewport"]["width"], 1280);
    assert_eq!(v["media"], "screen");
    assert_charts_and_screenshot(&v, &page, &png, 1280);
}

#[test]
fn the_report_of_a_real_study_prints_on_a4_without_overflow() {
    // A4 at 96 px per inch less 1 cm margins: 718 CSS px
    let page = report_page();
    let png = kept().join("study-report-print.png");
    let v = check(
        &page,
        &png,
        &["--expect-svg", "--media", "print", "--width", "718"],
    );
    assert_eq!(failures(&v), vec![], "{v:#}");
    assert_eq!(v["media"], "print");
    assert_charts_and_screenshot(&v, &page, &png, 718);
    // the charts shrink to the page instead of overflowing it
    for s in v["svgs"].as_array().unwrap() {
        assert!(s["width"].as_f64().unwrap() <= 718.0, "{s}");
    }
}

/// A hand-written page: `body` inside a minimal document.
fn page(dir: &Path, name: &str, head: &str, body: &str) -> PathBuf {
    let p = dir.join(format!("{name}.html"));
    std::fs::write(
        &p,
        format!(
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
             <title>{name}</title>{head}</head>\n<body>\n{body}\n</body></html>\n"
        ),
    )
    .unwrap();
    p
}

/// Checks a hand-written page; returns its summary.
fn check_page(name: &str, head: &str, body: &str, extra: &[&str]) -> Value {
    let dir = temp_dir("browser");
    let p = page(&dir, name, head, body);
    let png = dir.join("shots").join(format!("{name}.png"));
    let v = check(&p, &png, extra);
    // a screenshot of the whole page whether or not it passed
    let (w, h) = png_size(&png);
    let size = |k: &str| v["page"][k].as_u64().unwrap();
    assert_eq!(
        (u64::from(w), u64::from(h)),
        (size("width"), size("height")),
        "{name}"
    );
    v
}

/// The page fails with exactly one failure, of `kind`, whose message has
/// every one of `words`.
fn assert_fails_with(v: &Value, kind: &str, words: &[&str]) {
    let f = failures(v);
    assert_eq!(failure_kinds(v), [kind], "{f:#?}");
    for w in words {
        assert!(f[0].1.contains(w), "{w:?} not in {:?}", f[0].1);
    }
}

#[test]
fn a_clean_page_passes_with_intended_scrolling_and_clipping() {
    let v = check_page(
        "clean",
        "<style>.scroll { overflow-x: auto; width: 200px; } td { white-space: nowrap; }\
         .clip { width: 100px; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }\
         </style>",
        "<h1>A clean page</h1><p>A paragraph that wraps across the width of the page.</p>\n\
         <svg width=\"120\" height=\"60\" viewBox=\"0 0 120 60\"><rect width=\"120\" height=\"60\" \
         fill=\"#1f77b4\"/></svg>\n\
         <img alt=\"\" src=\"data:image/gif;base64,R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7\">\n\
         <div class=\"scroll\"><table><tr><td>a wide cell that scrolls in its box on purpose</td>\
         </tr></table></div>\n\
         <div class=\"clip\">clipped on purpose, with an ellipsis</div>",
        &["--expect-svg"],
    );
    assert_eq!(failures(&v), vec![], "{v:#}");
    assert_eq!(
        (&v["page"]["width"], &v["page"]["height"]),
        (&1280.into(), &800.into())
    );
    assert_eq!(v["svg_count"], 1);
    assert_eq!(v["svgs"][0]["width"], 120.0);
    assert_eq!(v["svgs"][0]["height"], 60.0);
}

#[test]
fn a_console_error_fails() {
    let v = check_page(
        "console",
        "",
        "<p>text</p><script>console.error('probe: bad value', 42)</script>",
        &[],
    );
    assert_fails_with(
        &v,
        "console",
        &["console.error: probe: bad value 42", "console.html"],
    );
}

#[test]
fn an_uncaught_exception_fails() {
    let v = check_page("exception", "", "<p>text</p><script>null.x</script>", &[]);
    assert_fails_with(
        &v,
        "exception",
        &["uncaught exception: TypeError", "exception.html"],
    );
}

#[test]
fn a_remote_image_fails_and_is_not_fetched() {
    let v = check_page(
        "remote",
        "",
        "<p>text</p><img src=\"http://example.invalid/x.png\" alt=\"x\">",
        &[],
    );
    assert_fails_with(
        &v,
        "network",
        &[
            "http://example.invalid/x.png",
            "scheme http:",
            "self-contained",
        ],
    );
}

#[test]
fn a_missing_local_file_is_a_logged_error() {
    let v = check_page("missing", "", "<img src=\"no-such.png\" alt=\"x\">", &[]);
    assert_fails_with(&v, "log", &["ERR_FILE_NOT_FOUND", "no-such.png"]);
}

#[test]
fn a_zero_size_svg_fails() {
    let v = check_page(
        "svg",
        "",
        "<svg id=\"drawn\" width=\"100\" height=\"50\"><rect width=\"100\" height=\"50\"/></svg>\
         <svg id=\"empty\" width=\"0\" height=\"50\"></svg>",
        &[],
    );
    assert_eq!(v["svg_count"], 2);
    assert_fails_with(&v, "svg", &["svg 2 of 2", "0 x 50 px", "svg#empty"]);
}

#[test]
fn a_page_without_charts_fails_only_when_charts_are_expected() {
    let body = "<p>no charts here</p>";
    let v = check_page("nosvg", "", body, &[]);
    assert_eq!(failures(&v), vec![]);
    assert_eq!(v["svg_count"], 0);
    let v = check_page("nosvg", "", body, &["--expect-svg"]);
    assert_fails_with(&v, "svg", &["no <svg>", "--expect-svg"]);
}

#[test]
fn text_overflowing_a_fixed_width_box_fails() {
    let v = check_page(
        "overflow",
        "",
        "<div id=\"box\" class=\"cell narrow\" style=\"width: 120px\">\
         supercalifragilisticexpialidocious-and-some-more-of-the-same-word</div>",
        &[],
    );
    assert_fails_with(
        &v,
        "overflow",
        &[
            "in a 120 px box",
            "div#box.cell.narrow \"supercalifragilisticexpialidocious-and-some-more-of-the-same…\"",
        ],
    );
    // a box wider than the viewport makes the page scroll sideways too
    let v = check_page(
        "wide",
        "",
        "<div id=\"wide\" style=\"width: 2000px\">wide</div>",
        &[],
    );
    assert_fails_with(
        &v,
        "overflow",
        &["the page is 2008 px wide in a 1280 px viewport"],
    );
    assert_eq!(v["page"]["width"], 2008, "the screenshot shows all of it");
}

#[test]
fn usage_errors_exit_2_without_starting_a_browser() {
    let dir = temp_dir("browser-usage");
    let png = dir.join("x.png");
    let missing = dir.join("missing.html");
    let r = run_script(
        &[
            missing.as_os_str(),
            "--screenshot".as_ref(),
            png.as_os_str(),
        ],
        &[],
    );
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("no such file") && r.stderr.contains("missing.html"),
        "{r:?}"
    );
    let p = page(&dir, "plain", "", "<p>text</p>");
    let r = run_script(&[p.as_os_str()], &[]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("--screenshot"), "{r:?}");
    assert!(!png.exists());
}

#[test]
fn without_chromium_the_check_fails_naming_the_install_script() {
    let dir = temp_dir("browser-none");
    let p = page(&dir, "plain", "", "<p>text</p>");
    let png = dir.join("plain.png");
    let args = [p.as_os_str(), "--screenshot".as_ref(), png.as_os_str()];
    let r = run_script(&args, &[("QPORT_CHROMIUM", "/nonexistent/chromium")]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("QPORT_CHROMIUM='/nonexistent/chromium'"),
        "{}",
        r.stderr
    );

    // no QPORT_CHROMIUM and nothing on PATH: the interpreter by its full path
    let exe = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .unwrap();
    let exe = String::from_utf8(exe.stdout).unwrap();
    let out = std::process::Command::new(exe.trim())
        .arg(qport_tests::repo_root().join("scripts/browser_check.py"))
        .args(args)
        .env("PATH", &*dir)
        .env_remove("QPORT_CHROMIUM")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    for w in [
        "no Chromium found",
        "QPORT_CHROMIUM",
        "chromium, chromium-browser, google-chrome",
        "bash scripts/ensure-chromium",
        "bash scripts/test",
    ] {
        assert!(stderr.contains(w), "{w:?} not in {stderr}");
    }
    assert!(!png.exists(), "no screenshot without a browser");
}
