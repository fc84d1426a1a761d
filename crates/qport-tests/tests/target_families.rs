//! The target-side tools (issue 15) on every model family's onnxruntime
//! QDQ artifact, not only on the EfficientNet and PP-OCR models they were
//! developed on: an NCHW classifier (MobileNetV2), the NHWC classifier, the
//! YOLO-style detector (two outputs, dynamic H/W), the transformer encoder
//! (two inputs with an attention mask) and the gated CNN.
//!
//! Per family, on the first sample of its onnxruntime default-session
//! reference (`parity/<family>.qdq-u8s8.ort-default/`):
//! - `verify`: onnxruntime's outputs are consistent with qport's run under
//!   the profile that models onnxruntime on this host; declared under
//!   `gemmlowp` instead, every output that differs is explained as
//!   arithmetic: that profile reproduces it bit for bit (alone, or tied
//!   with profiles that compute the same bits on this model);
//! - `dump`: qport's dump of the artifact holds every graph input and
//!   output, reads back, and localizing it against itself finds no
//!   departure;
//! - `lint` for j6m and j6p: the census counts the file's Q/DQ nodes,
//!   every quantized activation is flagged as an external scale (both
//!   platforms re-calibrate a QDQ graph), and exactly the graph inputs and
//!   outputs with a symbolic dimension are flagged as dynamic.

use qport_core::arith::ArithProfile;
use qport_onnx::{Dim, Model};
use qport_study::bench::isa::IsaFeatures;
use qport_study::dump::{self, DumpIndex, DumpMeta, TargetDump, Tolerance};
use qport_study::verify::{self, Execution, Options, TargetOutput, Verdict};
use qport_tests::fixture;
use qport_tests::parity::samples;

const FAMILIES: [&str; 5] = [
    "mobilenetv2",
    "nhwc-classifier",
    "yolo-detector",
    "text-encoder",
    "gated-cnn",
];

fn artifact(family: &str) -> Model {
    qport_onnx::load(fixture(&format!("models/families/{family}.qdq-u8s8.onnx"))).unwrap()
}

/// The preset that models onnxruntime's integer kernels on this host.
fn onnxruntime_profile() -> ArithProfile {
    let class = IsaFeatures::detect().class();
    let name = verify::onnxruntime_profile(class)
        .unwrap_or_else(|| panic!("no profile models onnxruntime on this host ({class:?})"));
    ArithProfile::preset(name).unwrap()
}

#[test]
fn verify_reads_onnxruntime_outputs_of_every_family() {
    let ort = onnxruntime_profile();
    for family in FAMILIES {
        let model = artifact(family);
        let sample = samples(&fixture(&format!("parity/{family}.qdq-u8s8.ort-default"))).remove(0);
        let dumps: Vec<TargetOutput> = sample
            .reference
            .iter()
            .map(|(name, t)| TargetOutput {
                name: name.clone(),
                tensor: t.clone(),
                source: format!("onnxruntime {family} {name}"),
            })
            .collect();
        let same =
            verify::verify(&model, &sample.inputs, &dumps, &Options::new(ort.clone())).unwrap();
        assert!(same.consistent, "{family}: {:#?}", same.outputs);
        assert_eq!(same.outputs.len(), sample.reference.len(), "{family}");

        let other = verify::verify(
            &model,
            &sample.inputs,
            &dumps,
            &Options::new(ArithProfile::preset("gemmlowp").unwrap()),
        )
        .unwrap();
        for o in other.outputs.iter().filter(|o| !o.consistent) {
            let d = &o.diagnosis;
            assert_eq!(
                d.verdict,
                Verdict::Explained,
                "{family} {}: {}",
                o.name,
                d.summary
            );
            assert_eq!(d.causes, ["arithmetic"], "{family} {}", o.name);
            // onnxruntime's profile reproduces it, alone or tied with
            // profiles that compute the same bits on this model
            let best = d.best.as_ref().unwrap();
            let want = Execution::Profile {
                profile: ort.name.clone(),
            };
            let tied_ort = d
                .tied
                .iter()
                .any(|c| c.execution == want && c.residual.bit_exact);
            assert!(
                best.execution == want || tied_ort,
                "{family} {}: {}",
                o.name,
                d.summary
            );
            assert!(best.residual.bit_exact, "{family} {}", o.name);
        }
        println!(
            "{family}: {} outputs consistent under {}; under gemmlowp {} of them differ, each reproduced bit for bit by {}",
            same.outputs.len(),
            ort.name,
            other.outputs.iter().filter(|o| !o.consistent).count(),
            ort.name
        );
    }
}

#[test]
fn dumps_of_every_family_hold_each_interface_value_and_localize_to_nothing() {
    let ort = onnxruntime_profile();
    for family in FAMILIES {
        let model = artifact(family);
        let sample = samples(&fixture(&format!("parity/{family}.qdq-u8s8.ort-default"))).remove(0);
        let dir = qport_tests::cli::temp_dir(&format!("dump-{family}"));
        let meta = DumpMeta {
            model_path: format!("{family}.qdq-u8s8.onnx"),
            model_sha256: String::new(),
            profile: ort.name.clone(),
        };
        let summary =
            dump::dump_integer_run(&model, &ort, sample.inputs.clone(), dir.as_ref(), meta, &[])
                .unwrap();
        let index = DumpIndex::read(dir.as_ref()).unwrap();
        assert_eq!(index.values.len(), summary.index.values.len(), "{family}");
        let graph = &model.graph;
        for v in graph.inputs.iter().chain(&graph.outputs) {
            let t = index
                .load(&v.name)
                .unwrap_or_else(|e| panic!("{family}: {} not dumped: {e}", v.name));
            if let Some((_, r)) = sample.reference.iter().find(|(n, _)| *n == v.name) {
                assert_eq!(t.shape(), r.shape(), "{family} {}", v.name);
            }
        }
        let own = TargetDump::open(dir.as_ref()).unwrap();
        let loc = dump::localize(&index, &own, &Tolerance::default()).unwrap();
        assert_eq!(loc.values.len(), index.values.len(), "{family}");
        assert!(loc.first().is_none(), "{family}: {:?}", loc.first());
        assert!(
            loc.missing_in_target.is_empty() && loc.target_only.is_empty(),
            "{family}"
        );
        println!(
            "{family}: {} values dumped under {}, {} bytes",
            index.values.len(),
            ort.name,
            summary.bytes
        );
    }
}

fn symbolic(v: &qport_onnx::ValueInfo) -> bool {
    v.shape
        .as_ref()
        .is_none_or(|s| s.iter().any(|d| !matches!(d, Dim::Known(_))))
}

#[test]
fn lint_of_every_family_counts_what_the_file_holds() {
    let registry = qport_platform::Registry::builtin();
    for family in FAMILIES {
        let model = artifact(family);
        let count = |op: &str| model.graph.nodes.iter().filter(|n| n.op_type == op).count();
        let graph = &model.graph;
        let dynamic = graph
            .inputs
            .iter()
            .chain(&graph.outputs)
            .filter(|v| symbolic(v))
            .count();
        for platform in ["j6m", "j6p"] {
            let p = registry.get(platform).unwrap();
            let r = qport_study::lint::lint(&model, p).unwrap();
            assert!(r.census.imported, "{family} {platform}: {:?}", r.notes);
            assert_eq!(r.census.quantize_nodes, count("QuantizeLinear"), "{family}");
            assert_eq!(
                r.census.dequantize_nodes,
                count("DequantizeLinear"),
                "{family}"
            );
            assert!(r.census.quantized_activations > 0, "{family}");
            assert_eq!(
                r.count_rule("external-scales"),
                r.census.quantized_activations,
                "{family} {platform}"
            );
            assert_eq!(r.count_rule("dynamic-dim"), dynamic, "{family} {platform}");
            println!("{family} {platform}: {:?}", r.counts_by_rule());
        }
    }
}
