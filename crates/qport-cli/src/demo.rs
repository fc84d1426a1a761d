//! `qport demo`: the mission in miniature on the bundled PP-OCR
//! text-direction classifier and its bundled text-line crops, embedded in
//! the binary (no files, no network). It classifies each crop in FP32,
//! then runs the whole study (`qport study`, [`qport_study::study`]) on
//! the crops and their 180° rotations (16 labelled samples): quantize for
//! j6m and j6p, agreement across every arithmetic profile, localization
//! of the first divergence, a host benchmark, layouts, migration and lint.
//! It writes `./qport-demo/` (or `--out DIR`): the artifacts,
//! `report.json` and the self-contained `report.html`, and prints the
//! verdict and the report's path.
//!
//! Preprocessing follows `assets/demo/README.md` (the recipe onnxruntime's
//! reference predictions were made with): RGB, Pillow-exact bilinear resize
//! to height 48 and width `min(192, ceil(48 * w / h))`, `(x / 255 - 0.5) /
//! 0.5`, zero padding on the right to width 192, NCHW `[1, 3, 48, 192]`.
//! The model's output is already a softmax over {0°, 180°}.
//!
//! # JSON schema (`--format json`), `"schema": "qport.demo/2"`
//!
//! ```text
//! {
//!   "schema": "qport.demo/1",
//!   "qport_version": str,
//!   "model": { "name": "ppocr-cls.onnx", "size_bytes": int, "sha256": str, "load_ms": float },
//!   "classes_degrees": [0, 180],                 // class index -> rotation
//!   "crops": [ {
//!       "file": str, "width": int, "height": int,
//!       "expected_degrees": int | null,          // from the file name, null if it has none
//!       "predicted_degrees": int, "predicted_class": int,
//!       "confidence": float,                     // probability of the predicted class
//!       "probabilities": [float, float],
//!       "correct": bool | null,                  // null when nothing is expected
//!       "latency_ms": float                      // one engine run, preprocessing excluded
//!   } ],
//!   "summary": { "crops": int, "labelled": int, "correct": int,
//!                "accuracy": float | null, "mean_latency_ms": float | null },
//!   "study": { "dir": str, "report_json": str, "report_html": str,
//!              "samples": int,                   // crops and their rotations
//!              "verdict": [str] }                // the report's claims
//! }
//! ```

use crate::model_file::sha256_hex;
use crate::output::{self, fmt_ms, Format, Style, Table, Ui};
use crate::report::{emit, Header, Render};
use crate::ExitStatus;
use anyhow::{anyhow, bail, Context, Result};
use qport_core::Tensor;
use qport_data::image::{decode_png, pad_right, resize_bilinear, to_chw, RgbImage};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

mod assets {
    include!(concat!(env!("OUT_DIR"), "/demo_assets.rs"));
}

/// Examples shown by `qport demo --help`.
pub const AFTER_HELP: &str = "\
Examples:
  qport demo                      writes ./qport-demo/report.html
  qport demo --out /tmp/demo      anywhere else
  qport demo --format json | jq '.study.verdict'

The model and crops are compiled into the binary; onnxruntime's predictions
for the same inputs are listed in assets/demo/README.md. After the FP32
predictions it runs `qport study` on the crops and their 180° rotations
(16 labelled samples; calibration and measurement on the same samples):
platforms j6m and j6p, every arithmetic profile, 4 localized samples, 10
benchmark rounds. --out is created if missing; qport's own files in it are
replaced, others are left alone.";

/// Model input height.
pub const HEIGHT: usize = 48;
/// Model input width (crops are padded to it).
pub const WIDTH: usize = 192;
/// Rotation of each output class.
pub const CLASSES_DEGREES: [u32; 2] = [0, 180];
const MODEL_NAME: &str = "ppocr-cls.onnx";

/// Arguments of `qport demo`.
#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Directory the study writes (artifacts, report.json, report.html).
    #[arg(long, short, value_name = "DIR", default_value = "qport-demo")]
    pub out: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

/// `qport.demo/1`: the JSON document of `qport demo --format json`.
#[derive(Debug, Serialize)]
pub struct DemoJson {
    /// `schema`, `qport_version`.
    #[serde(flatten)]
    pub header: Header,
    /// The bundled model.
    pub model: DemoModelJson,
    /// Rotation in degrees of each class index.
    pub classes_degrees: [u32; 2],
    /// One entry per bundled crop, sorted by file name.
    pub crops: Vec<CropJson>,
    /// Totals.
    pub summary: SummaryJson,
    /// The study and where its report is.
    pub study: DemoStudyJson,
    /// Each crop's latency, their mean and the load time, for the human
    /// form.
    #[serde(skip)]
    pub times: DemoTimes,
}

/// The exact times behind `qport demo`'s millisecond fields.
#[derive(Debug)]
pub struct DemoTimes {
    /// Each crop's latency, in crop order.
    pub latencies: Vec<Duration>,
    /// Their mean (`None` without crops).
    pub mean: Option<Duration>,
    /// Loading and planning the model.
    pub load: Duration,
}

impl Render for DemoJson {
    fn human(&self, ui: &Ui) -> String {
        let t = &self.times;
        render_human(self, &t.latencies, t.mean, t.load, ui)
    }
}

/// The demo's study.
#[derive(Debug, Serialize)]
pub struct DemoStudyJson {
    /// The study directory.
    pub dir: PathBuf,
    /// Its `report.json`.
    pub report_json: PathBuf,
    /// Its `report.html`.
    pub report_html: PathBuf,
    /// Samples studied (the crops and their rotations).
    pub samples: usize,
    /// The verdict's sentences.
    pub verdict: Vec<String>,
}

/// The bundled model.
#[derive(Debug, Serialize)]
pub struct DemoModelJson {
    /// File name in `assets/demo`.
    pub name: &'static str,
    /// Size in bytes.
    pub size_bytes: u64,
    /// Lower-case hex sha256.
    pub sha256: String,
    /// Time to decode the model and build the plan.
    pub load_ms: f64,
}

/// The prediction for one crop.
#[derive(Debug, Serialize)]
pub struct CropJson {
    /// File name in `assets/demo`.
    pub file: String,
    /// Width in pixels.
    pub width: usize,
    /// Height in pixels.
    pub height: usize,
    /// True rotation from the file name (`..._180deg.png`), if present.
    pub expected_degrees: Option<u32>,
    /// Predicted rotation.
    pub predicted_degrees: u32,
    /// Predicted class index.
    pub predicted_class: usize,
    /// Probability of the predicted class.
    pub confidence: f64,
    /// Probability of each class.
    pub probabilities: Vec<f64>,
    /// Whether the prediction matches the file name (`null` if unlabelled).
    pub correct: Option<bool>,
    /// Time of one engine run in milliseconds.
    pub latency_ms: f64,
}

/// Totals over the crops.
#[derive(Debug, Serialize)]
pub struct SummaryJson {
    /// Number of crops.
    pub crops: usize,
    /// Crops whose file name gives the true rotation.
    pub labelled: usize,
    /// Labelled crops predicted correctly.
    pub correct: usize,
    /// `correct / labelled`, `null` when nothing is labelled.
    pub accuracy: Option<f64>,
    /// Mean engine time per crop.
    pub mean_latency_ms: Option<f64>,
}

/// The true rotation encoded in a crop name such as `line_03_180deg.png`.
pub fn expected_degrees(file: &str) -> Option<u32> {
    let stem = file.strip_suffix(".png")?;
    let deg = stem.strip_suffix("deg")?;
    let digits: String = deg
        .chars()
        .rev()
        .take_while(|c| c.is_ascii_digit())
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    digits.parse().ok()
}

/// The classifier input `[1, 3, 48, 192]` for an image (see module docs).
pub fn preprocess(img: &RgbImage) -> Result<Tensor> {
    let (w, h) = (img.width(), img.height());
    if w == 0 || h == 0 {
        bail!("image is empty ({w}x{h})");
    }
    // ceil(48 * w / h) in integers (exact, as Python's float ceil is here).
    let rw = (HEIGHT * w).div_ceil(h).clamp(1, WIDTH);
    let resized = resize_bilinear(img, rw, HEIGHT)?;
    let chw = to_chw(&resized, [0.5; 3], [0.5; 3])?;
    let padded = pad_right(&chw, WIDTH)?;
    Ok(padded.reshape(vec![1, 3, HEIGHT, WIDTH])?)
}

/// Class probabilities from the model output: used as they are when they
/// already form a distribution, otherwise passed through a softmax.
fn probabilities(out: &Tensor) -> Result<Vec<f64>> {
    let v = out
        .to_f32_vec()
        .context("the model output is not numeric")?;
    if v.len() != CLASSES_DEGREES.len() {
        bail!(
            "expected {} class scores, the model gave shape {:?}",
            CLASSES_DEGREES.len(),
            out.shape()
        );
    }
    let sum: f32 = v.iter().sum();
    let is_dist = v.iter().all(|&p| (0.0..=1.0).contains(&p)) && (sum - 1.0).abs() < 1e-3;
    let p = if is_dist {
        v
    } else {
        qport_core::metrics::softmax(&v)
    };
    Ok(p.into_iter().map(f64::from).collect())
}

/// Runs `qport demo`.
pub fn run(args: &DemoArgs, ui: &Ui) -> Result<ExitStatus> {
    let model_bytes = assets::MODEL
        .ok_or_else(|| anyhow!("this build of qport has no bundled demo model (assets/demo/{MODEL_NAME} was missing at build time)"))?;
    if assets::CROPS.is_empty() {
        bail!("this build of qport has no bundled demo crops (assets/demo/*.png were missing at build time)");
    }
    let t0 = Instant::now();
    let model = qport_onnx::from_bytes(model_bytes, None)
        .with_context(|| format!("cannot load the bundled {MODEL_NAME}"))?;
    let plan = qport_engine::Plan::new(&model)
        .with_context(|| format!("cannot run the bundled {MODEL_NAME}"))?;
    let load_time = t0.elapsed();
    let input_name = plan
        .inputs()
        .next()
        .map(|v| v.name.clone())
        .ok_or_else(|| anyhow!("the bundled model has no inputs"))?;

    let out = args.out.as_path();
    crate::out_dir::check(out, true, &["report.json", "report.html", "j6m/", "j6p/"])?;
    let pb = ui.progress(assets::CROPS.len() as u64, "crops", "classifying");
    let mut crops = vec![];
    let mut samples = vec![];
    let mut latencies = vec![];
    for (name, bytes) in assets::CROPS {
        pb.set_message(name.to_string());
        let img = decode_png(bytes, Path::new(name))?;
        let x = preprocess(&img).with_context(|| format!("cannot preprocess {name}"))?;
        samples.push((name.to_string(), x.clone(), expected_degrees(name)));
        let rotated = preprocess(&qport_data::image::rotate180(&img))
            .with_context(|| format!("cannot preprocess {name} rotated"))?;
        let flipped = expected_degrees(name).map(|d| (d + 180) % 360);
        samples.push((format!("{name} rotated 180°"), rotated, flipped));
        let t = Instant::now();
        let out = plan
            .run(vec![(input_name.clone(), x)])
            .with_context(|| format!("running the classifier on {name} failed"))?;
        let latency = t.elapsed();
        latencies.push(latency);
        let first = out
            .first()
            .ok_or_else(|| anyhow!("the model produced no output"))?;
        let p = probabilities(&first.1).with_context(|| format!("bad output for {name}"))?;
        let class = if p[1] > p[0] { 1 } else { 0 };
        let expected = expected_degrees(name);
        crops.push(CropJson {
            file: name.to_string(),
            width: img.width(),
            height: img.height(),
            expected_degrees: expected,
            predicted_degrees: CLASSES_DEGREES[class],
            predicted_class: class,
            confidence: p[class],
            probabilities: p,
            correct: expected.map(|e| e == CLASSES_DEGREES[class]),
            latency_ms: output::ms(latency),
        });
        pb.inc(1);
    }
    drop(pb);

    let labelled = crops.iter().filter(|c| c.correct.is_some()).count();
    let correct = crops.iter().filter(|c| c.correct == Some(true)).count();
    let mean_latency = (!latencies.is_empty())
        .then(|| latencies.iter().sum::<Duration>() / latencies.len() as u32);
    let study = study(model_bytes, &model, &input_name, samples, out, ui)?;
    let report = DemoJson {
        header: Header::new("qport.demo/2"),
        model: DemoModelJson {
            name: MODEL_NAME,
            size_bytes: model_bytes.len() as u64,
            sha256: sha256_hex(model_bytes),
            load_ms: output::ms(load_time),
        },
        classes_degrees: CLASSES_DEGREES,
        summary: SummaryJson {
            crops: crops.len(),
            labelled,
            correct,
            accuracy: (labelled > 0).then(|| correct as f64 / labelled as f64),
            mean_latency_ms: mean_latency.map(output::ms),
        },
        crops,
        study,
        times: DemoTimes {
            latencies,
            mean: mean_latency,
            load: load_time,
        },
    };
    emit(&report, args.format, ui)?;
    Ok(ExitStatus::Success)
}

fn render_human(
    r: &DemoJson,
    latencies: &[Duration],
    mean: Option<Duration>,
    load: Duration,
    ui: &Ui,
) -> String {
    let mut s = format!(
        "{} PP-OCR text-direction classifier ({}, {} bundled crops)\n\n",
        ui.paint("qport demo:", Style::Bold),
        r.model.name,
        r.crops.len()
    );
    let mut t = Table::new(
        &[
            "crop",
            "size",
            "expected",
            "predicted",
            "confidence",
            "ok",
            "latency",
        ],
        "lrrrrlr",
    );
    for (c, lat) in r.crops.iter().zip(latencies) {
        let (mark, style) = match c.correct {
            Some(true) => ("✓", Style::Good),
            Some(false) => ("✗", Style::Bad),
            None => ("-", Style::Dim),
        };
        t.styled_row(vec![
            (c.file.clone(), Style::Plain),
            (format!("{}x{}", c.width, c.height), Style::Plain),
            (
                c.expected_degrees
                    .map(|d| format!("{d}°"))
                    .unwrap_or_else(|| "?".into()),
                Style::Plain,
            ),
            (format!("{}°", c.predicted_degrees), Style::Plain),
            (format!("{:.4}", c.confidence), Style::Plain),
            (mark.to_string(), style),
            (fmt_ms(*lat), Style::Plain),
        ]);
    }
    s.push_str(&t.render(ui, ""));
    s.push('\n');
    let acc = match r.summary.accuracy {
        Some(a) => format!(
            "{}/{} ({:.1}%)",
            r.summary.correct,
            r.summary.labelled,
            a * 100.0
        ),
        None => "n/a (no labelled crops)".into(),
    };
    s.push_str(&format!(
        "accuracy {acc}   mean latency {}   model load {}\n",
        mean.map(fmt_ms).unwrap_or_else(|| "-".into()),
        fmt_ms(load)
    ));
    s.push_str(&format!(
        "\n{} quantized for j6m and j6p, every arithmetic profile, {} samples (the crops and their 180° rotations)\n",
        ui.paint("study:", Style::Bold),
        r.study.samples
    ));
    for v in &r.study.verdict {
        s.push_str(&format!("  - {v}\n"));
    }
    s.push_str(&format!(
        "\nreport: {}\n        {}\n",
        r.study.report_html.display(),
        r.study.report_json.display()
    ));
    s
}

/// Runs the study on the demo's `samples` (name, input, true rotation)
/// and writes its report into `out`.
fn study(
    model_bytes: &[u8],
    model: &qport_onnx::Model,
    input_name: &str,
    samples: Vec<(String, Tensor, Option<u32>)>,
    out: &Path,
    ui: &Ui,
) -> Result<DemoStudyJson> {
    use qport_study::report::{self, DataRef, Inputs};
    use qport_study::study::{self, StudyData, StudyOptions};
    let reg = qport_platform::Registry::builtin();
    let platforms = vec![reg.get("j6m")?.clone(), reg.get("j6p")?.clone()];
    let profiles = qport_core::arith::ProfileRegistry::builtin()
        .profiles()
        .to_vec();
    let labels: Vec<usize> = samples
        .iter()
        .map(|(_, _, d)| d.map_or(0, |d| usize::from(d == CLASSES_DEGREES[1])))
        .collect();
    let labelled = samples.iter().all(|(_, _, d)| d.is_some());
    let samples: Vec<qport_quant::ptq::Sample> = samples
        .into_iter()
        .enumerate()
        .map(|(index, (origin, x, _))| qport_quant::ptq::Sample {
            index,
            origin,
            inputs: vec![(input_name.to_string(), x)],
        })
        .collect();
    let data = StudyData {
        calib: &samples,
        eval: &samples,
        labels: labelled.then_some(labels.as_slice()),
    };
    let opts = StudyOptions::new(platforms, profiles);
    let mut header = report::Header::new(crate::study::command_line());
    header.git_commit = crate::study::git_commit();
    let bundled = DataRef {
        path: "<bundled crops and their 180° rotations>".into(),
        samples: samples.len(),
        sha256: report::samples_sha256(&samples),
    };
    let inputs = Inputs {
        model: qport_core::report::FileJson {
            path: format!("<bundled>/{MODEL_NAME}"),
            size_bytes: model_bytes.len() as u64,
            sha256: sha256_hex(model_bytes),
        },
        data: bundled.clone(),
        eval: Some(bundled),
        seeds: vec![],
    };
    let r = crate::study::run_stages(model, header, inputs, &opts, &data, out, ui)?;
    let (json, html) = study::write_report(out, &r)
        .with_context(|| format!("cannot write the report into '{}'", out.display()))?;
    Ok(DemoStudyJson {
        dir: out.to_path_buf(),
        report_json: json,
        report_html: html,
        samples: samples.len(),
        verdict: r.verdict.claims.iter().map(|c| c.text.clone()).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expected_degrees_from_names() {
        assert_eq!(expected_degrees("line_00_0deg.png"), Some(0));
        assert_eq!(expected_degrees("line_03_180deg.png"), Some(180));
        assert_eq!(expected_degrees("photo.png"), None);
        assert_eq!(expected_degrees("deg.png"), None);
    }

    #[test]
    fn assets_are_embedded() {
        assert!(assets::MODEL.is_some());
        assert!(assets::CROPS.len() >= 8);
        let mut names: Vec<&str> = assets::CROPS.iter().map(|(n, _)| *n).collect();
        let sorted = names.clone();
        names.sort();
        assert_eq!(names, sorted);
    }

    #[test]
    fn preprocess_shape_and_padding() {
        let img = RgbImage::new(4, 2, vec![255; 24]).unwrap();
        let x = preprocess(&img).unwrap();
        assert_eq!(x.shape(), &[1, 3, 48, 192]);
        let v = x.as_slice::<f32>().unwrap();
        // width ceil(48*4/2) = 96 of 1.0, then zeros
        assert_eq!(v[95], 1.0);
        assert_eq!(v[96], 0.0);
        // very wide crops are clamped to 192
        let wide = RgbImage::new(400, 10, vec![0; 12000]).unwrap();
        assert_eq!(
            preprocess(&wide).unwrap().as_slice::<f32>().unwrap()[191],
            -1.0
        );
    }

    /// sha256 of the float32 little-endian bytes of
    /// `ppocr_cls_preprocess(Image.open(crop))` from scripts/qport_fixtures
    /// (Pillow 13, numpy 2.4): our preprocessing is bit-identical.
    #[test]
    fn preprocess_matches_reference_bit_for_bit() {
        for (name, want) in REFERENCE_INPUT_SHA256 {
            let bytes = assets::CROPS
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, b)| *b)
                .unwrap_or_else(|| panic!("{name} not bundled"));
            let img = decode_png(bytes, Path::new(name)).unwrap();
            let x = preprocess(&img).unwrap();
            let raw: Vec<u8> = x
                .as_slice::<f32>()
                .unwrap()
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect();
            assert_eq!(sha256_hex(&raw), *want, "{name}");
        }
    }

    const REFERENCE_INPUT_SHA256: &[(&str, &str)] = &[
        (
            "line_00_0deg.png",
            "6be82ec0791bcdd3fab65d46b3312b8ed88e46103cd941957223dd58b309513c",
        ),
        (
            "line_01_180deg.png",
            "cc137bbca231df77fd27eab8d233df8c23c20d5c796e4c6966f0c02fafdcd7a0",
        ),
        (
            "line_02_0deg.png",
            "d1d797b3e4da03040d3af8ba110774a311d72318cdcbe6b11847bb7e92047ca3",
        ),
        (
            "line_03_180deg.png",
            "3f0693b7875b4fab37b8212f64a03ad9b2214d9184598168d536f13d05fc25da",
        ),
        (
            "line_04_0deg.png",
            "8610c9d4322c6b9020c90df24bd34b60b4657e0384197e819b7ee4f9a4644f1f",
        ),
        (
            "line_05_180deg.png",
            "ced9cb12a4afe9b31269a99ebf46277021f5f6de715901ab4e8b5f3c2b65dedc",
        ),
        (
            "line_06_0deg.png",
            "4391fdcd1bb0c1cbe0d35db6ba76a94cf24646592b720ad1fccc7826cc0cc67a",
        ),
        (
            "line_07_180deg.png",
            "6b84e5030e359ab5abd20d27eb4f62f38dd23943f784fb5ced642c7bc6ebe190",
        ),
    ];
}
