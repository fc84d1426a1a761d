//! The argument groups commands share, each with one type everywhere:
//! `--overrides` (platforms), `--profile-file` and `--profiles`
//! (arithmetic profiles), the layout and deployment flags, the data
//! group (`--data`, `--preprocess`, `--pp`) and `--input-shape`. The
//! output-comparison group ([`OutputArgs`]) lives in [`crate::compare`].
//! `--out`/`--force` live in
//! [`crate::out_dir`], `--format` is [`crate::output::Format`].

pub use crate::compare::OutputArgs;
use crate::data::{self, Source};
use crate::model_file::FileFacts;
use crate::output::Ui;
use crate::platform_report::OptionsJson;
use crate::report::FileJson;
use anyhow::{bail, Context, Result};
use qport_core::arith::{ArithProfile, ProfileFormat, ProfileRegistry};
use qport_data::dataset::InputSpec;
use qport_onnx::shapes::{fix_input_shapes, infer_shapes, InputShape, Origin};
use qport_onnx::{Dim, Model, ValueInfo};
use qport_platform::{
    model_layout, parse_runtime_l2m, DeployRequest, InputSource, InputType, Ip, LayoutOptions,
    ModelLayout, Platform, Registry,
};
use qport_study::coverage::{integer_profiles, CoverageJson};
use std::path::{Path, PathBuf};

/// `--profiles`: comma-separated profile names, or `all` (`qport profiles`
/// lists them). The same type on every command; each says how many it
/// needs ([`ProfileList::select`], [`ProfileList::pair`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileList(pub String);

impl std::str::FromStr for ProfileList {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(ProfileList(s.to_string()))
    }
}

impl ProfileList {
    /// Every profile for `all`, else the named ones in order (no repeats).
    pub fn select(&self, reg: &ProfileRegistry) -> Result<Vec<ArithProfile>> {
        select_profiles(&self.0, reg)
    }

    /// Exactly two named profiles, `A,B`.
    pub fn pair(&self, reg: &ProfileRegistry) -> Result<(ArithProfile, ArithProfile)> {
        let names: Vec<&str> = self
            .0
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        let [a, b] = names.as_slice() else {
            bail!(
                "--profiles needs exactly two profiles, A,B (e.g. --profiles avx2-u8s8,f32-rne), got {}: {}; valid: {}",
                names.len(),
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                },
                reg.names().join(", ")
            );
        };
        Ok((reg.get(a)?.clone(), reg.get(b)?.clone()))
    }
}

/// Resolves `--profiles` (`all`, or names separated by commas) against the
/// presets and profile files.
pub fn select_profiles(spec: &str, reg: &ProfileRegistry) -> Result<Vec<ArithProfile>> {
    if spec.trim().eq_ignore_ascii_case("all") {
        return Ok(reg.profiles().to_vec());
    }
    let mut out: Vec<ArithProfile> = vec![];
    for name in spec.split(',').map(str::trim) {
        if name.is_empty() {
            bail!(
                "--profiles '{spec}' has an empty name; valid: all, {}",
                reg.names().join(", ")
            );
        }
        let p = reg.get(name)?;
        if out.iter().any(|q| q.name == p.name) {
            bail!("--profiles lists `{}` twice", p.name);
        }
        out.push(p.clone());
    }
    Ok(out)
}

/// `--preprocess` with its `--pp` overrides, for image folders (`--data`,
/// and `quantize`'s `--calib`/`--eval`).
#[derive(Debug, Clone, clap::Args)]
pub struct PreprocessArgs {
    /// Image preprocessing: a preset (imagenet, effnet-lite, ppocr, yolo)
    /// or a TOML file.
    #[arg(long)]
    pub preprocess: Option<String>,
    /// Change one preprocessing field, e.g. `--pp color=bgr` (repeatable).
    #[arg(long = "pp", value_name = "KEY=VALUE")]
    pub pp: Vec<String>,
}

/// Fails with the model's unsupported ops, each with its count, when it
/// has any.
pub fn check_supported(model: &qport_onnx::Model) -> Result<()> {
    let unsupported = qport_engine::unsupported_ops(model);
    if unsupported.is_empty() {
        return Ok(());
    }
    let list: Vec<String> = unsupported
        .iter()
        .map(|(o, n)| format!("{o} ({n})"))
        .collect();
    anyhow::bail!(
        "the model uses ops qport cannot run yet: {}",
        list.join(", ")
    )
}

/// A config error, its messages prefixed with the config file's path when
/// the user gave one (as parse errors are).
pub fn config_error(
    config: Option<&std::path::Path>,
    e: qport_quant::config::ConfigError,
) -> anyhow::Error {
    match (config, e) {
        (Some(p), qport_quant::config::ConfigError::Invalid { errors }) => anyhow::anyhow!(errors
            .iter()
            .map(|m| format!("{}: {m}", p.display()))
            .collect::<Vec<_>>()
            .join("\n")),
        (_, e) => anyhow::anyhow!(e),
    }
}

impl PreprocessArgs {
    /// The preprocessing asked for; `None` when neither flag is given.
    pub fn load(&self) -> Result<Option<qport_data::preprocess::Preprocess>> {
        data::preprocess(self.preprocess.as_deref(), &self.pp)
    }
}

/// Preprocessing and sample limits of the commands that read calibration
/// and evaluation data (`quantize`, `sensitivity`, `tune`).
#[derive(Debug, Clone, clap::Args)]
pub struct CalibEvalArgs {
    #[command(flatten)]
    pub pre: PreprocessArgs,
    /// Use at most this many calibration samples.
    #[arg(long)]
    pub calib_limit: Option<usize>,
    /// Use at most this many evaluation samples.
    #[arg(long)]
    pub eval_limit: Option<usize>,
}

/// The data group: `--data` with `--preprocess`/`--pp` for image folders.
#[derive(Debug, Clone, clap::Args)]
pub struct DataArgs {
    /// Input data: a folder of images, a .npy or a .npz.
    #[arg(long)]
    pub data: PathBuf,
    #[command(flatten)]
    pub pre: PreprocessArgs,
}

impl DataArgs {
    /// Opens `--data` for `inputs` with at most `limit` samples;
    /// `--preprocess` with a tensor file is an input error.
    pub fn open(&self, inputs: &[InputSpec], limit: Option<usize>, ui: &Ui) -> Result<Source> {
        let preprocess = self.pre.load()?;
        if preprocess.is_some() {
            data::check_preprocess(&[("--data", &self.data)], ui)?;
        }
        Source::open(&self.data, inputs, preprocess, limit)
    }

    /// The data path as given.
    pub fn path(&self) -> &Path {
        &self.data
    }
}

/// `--input-shape NAME=D0,D1,...` (repeatable): fixes dynamic input
/// dimensions, as onnxruntime's `make_dynamic_shape_fixed` and vendor
/// compilers' `input_shape` do, for every command that needs static shapes
/// or runs a model.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct InputShapeArgs {
    /// Fix a model input's shape, e.g. `--input-shape images=1,3,640,640`
    /// (repeatable, one per input; `qport info` shows the inputs and their
    /// dynamic dimensions). Every output and intermediate shape is then
    /// inferred statically from it.
    #[arg(
        long = "input-shape",
        value_name = "NAME=D0,D1,...",
        requires = "model"
    )]
    pub input_shape: Vec<InputShape>,
}

impl InputShapeArgs {
    /// Fixes the given input shapes in `model` and writes the inferred
    /// output shapes into it; a shape that does not fit the model is an
    /// input error naming the flag. Without `--input-shape`, a model whose
    /// inputs and outputs are already static is left as it is, and one
    /// with dynamic dimensions gets the output shapes inference can derive.
    pub fn apply(&self, model: &mut Model, path: &Path) -> Result<()> {
        if self.input_shape.is_empty() {
            let g = &model.graph;
            if g.inputs.iter().chain(&g.outputs).all(is_static) {
                return Ok(());
            }
            if let Ok((fixed, _)) = fix_input_shapes(model, &[]) {
                *model = fixed;
            }
            return Ok(());
        }
        let given: Vec<String> = self.input_shape.iter().map(|s| s.to_string()).collect();
        let (fixed, _) = fix_input_shapes(model, &self.input_shape).with_context(|| {
            format!(
                "--input-shape {} does not fit model '{}'",
                given.join(" --input-shape "),
                path.display()
            )
        })?;
        *model = fixed;
        Ok(())
    }

    /// [`InputShapeArgs::apply`], then requires every input dimension
    /// (and with `outputs`, every output dimension) to be static, except a
    /// first (batch) dimension, which the command sets. The error names
    /// the first dynamic dimension and, for an output, the node that stops
    /// shape inference, says `need` (why static shapes are needed and any
    /// other way out, e.g. `synthetic inputs need static sizes: give --data
    /// or`) and shows the `--input-shape` to give.
    pub fn apply_static(
        &self,
        model: &mut Model,
        path: &Path,
        outputs: bool,
        need: &str,
    ) -> Result<()> {
        self.apply(model, path)?;
        let g = &model.graph;
        for v in g
            .inputs
            .iter()
            .filter(|v| !g.initializers.contains_key(&v.name))
        {
            if let Some(axis) = dynamic_axis(v) {
                bail!(
                    "model '{}': input `{}` {} {}; {need} --input-shape {}",
                    path.display(),
                    v.name,
                    describe_axis(v, axis),
                    v.shape_string(),
                    suggestion(v)
                );
            }
        }
        if !outputs {
            return Ok(());
        }
        let inferred = infer_shapes(model);
        for v in &g.outputs {
            let Some(axis) = dynamic_axis(v) else {
                continue;
            };
            let why = match inferred.origin(&v.name) {
                Some(o @ Origin::Node { .. }) => format!(": {o}"),
                _ => String::new(),
            };
            bail!(
                "model '{}': output `{}` {} {} is not known statically{why}; {need} --input-shape NAME=D0,D1,... for the inputs",
                path.display(),
                v.name,
                describe_axis(v, axis),
                v.shape_string(),
            );
        }
        Ok(())
    }

    /// One assumption line per fixed input, for reports.
    pub fn notes(&self) -> Vec<String> {
        self.input_shape
            .iter()
            .map(|s| format!("`{}`: shape fixed by --input-shape {s}", s.name))
            .collect()
    }
}

fn is_static(v: &ValueInfo) -> bool {
    qport_onnx::infer::concrete_shape(v).is_some()
}

/// The first dynamic dimension of `v` after the batch (`Some(0)` when the
/// rank itself is unknown).
fn dynamic_axis(v: &ValueInfo) -> Option<usize> {
    match &v.shape {
        None => Some(0),
        Some(d) => d
            .iter()
            .enumerate()
            .skip(1)
            .find(|(_, d)| !matches!(d, Dim::Known(_)))
            .map(|(a, _)| a),
    }
}

fn describe_axis(v: &ValueInfo, axis: usize) -> String {
    match v.shape.as_ref().and_then(|d| d.get(axis)) {
        Some(d) => format!("has dynamic dimension {axis} (`{d}`) in"),
        None => "has no declared rank:".into(),
    }
}

/// `images=1,3,<height>,<width>`: the flag's value with the fixed sizes
/// filled in.
fn suggestion(v: &ValueInfo) -> String {
    let dims: Vec<String> = match &v.shape {
        None => vec!["D0".into(), "D1".into(), "...".into()],
        Some(d) => d
            .iter()
            .enumerate()
            .map(|(i, d)| match d {
                Dim::Known(k) => k.to_string(),
                Dim::Param(p) if p != "?" => format!("<{p}>"),
                _ => format!("<D{i}>"),
            })
            .collect(),
    };
    format!("{}={}", v.name, dims.join(","))
}

/// `--overrides`, shared by every platform command.
#[derive(Debug, Clone, clap::Args)]
pub struct OverridesArg {
    /// Platform overrides: a TOML file of [[platform]] tables that patch or
    /// add registry entries (see `qport platforms --help`).
    #[arg(long, value_name = "FILE.toml")]
    pub overrides: Option<PathBuf>,
}

/// The registry with the user's overrides applied, and the override file's
/// facts for reports.
pub struct LoadedRegistry {
    /// Built-in registry plus overrides.
    pub registry: Registry,
    /// Size and hash of the override file, when one was given.
    pub overrides: Option<FileFacts>,
}

impl OverridesArg {
    /// Loads the built-in registry and applies `--overrides`.
    pub fn load(&self) -> Result<LoadedRegistry> {
        let mut registry = Registry::builtin();
        let Some(path) = &self.overrides else {
            return Ok(LoadedRegistry {
                registry,
                overrides: None,
            });
        };
        let (bytes, facts) = crate::model_file::read(path, "platform overrides")?;
        let text = String::from_utf8(bytes)
            .map_err(|_| anyhow::anyhow!("platform overrides '{}': not UTF-8", path.display()))?;
        registry.apply_overrides_str(&text, &path.display().to_string())?;
        Ok(LoadedRegistry {
            registry,
            overrides: Some(facts),
        })
    }
}

impl LoadedRegistry {
    /// Looks up `name` (registry name or march alias); the error lists the
    /// valid names.
    pub fn get(&self, name: &str) -> Result<&Platform> {
        Ok(self.registry.get(name)?)
    }

    /// The override file for JSON reports.
    pub fn overrides_json(&self) -> Option<FileJson> {
        self.overrides.as_ref().map(FileJson::from)
    }
}

/// Lower-case name of an IP (`bpu`, `dsp`, ...).
pub fn ip_name(ip: Ip) -> String {
    format!("{ip:?}").to_ascii_lowercase()
}

/// The IPs, for parsing and help.
pub const IPS: [Ip; 7] = [
    Ip::Bpu,
    Ip::Dsp,
    Ip::Gdc,
    Ip::Jpu,
    Ip::Vpu,
    Ip::Pyramid,
    Ip::Isp,
];

/// Parses an IP name (clap value parser).
pub fn parse_ip(s: &str) -> Result<Ip, String> {
    let want = s.trim().to_ascii_lowercase();
    IPS.iter()
        .copied()
        .find(|&ip| ip_name(ip) == want)
        .ok_or_else(|| {
            let valid: Vec<String> = IPS.iter().map(|&i| ip_name(i)).collect();
            format!("unknown IP `{s}`; valid: {}", valid.join(", "))
        })
}

/// `"24 MiB"`, or the byte count when it is not whole MiB.
pub fn fmt_mib(bytes: u64) -> String {
    const MIB: u64 = 1024 * 1024;
    if bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else {
        format!("{bytes} B")
    }
}

/// `--profile-file`, for every command that takes an arithmetic profile.
#[derive(Debug, Clone, clap::Args)]
pub struct ProfileFilesArg {
    /// A TOML or JSON file of user arithmetic profiles (repeatable; see
    /// `qport profiles --help`).
    #[arg(long = "profile-file", value_name = "FILE")]
    pub profile_file: Vec<PathBuf>,
}

/// The presets plus the user's profile files, and those files' facts for
/// reports.
pub struct LoadedProfiles {
    /// Presets and user profiles.
    pub registry: ProfileRegistry,
    /// Size and hash of each profile file, in the order given.
    pub files: Vec<FileFacts>,
}

impl ProfileFilesArg {
    /// Loads the presets and adds every `--profile-file`, in order.
    pub fn load(&self) -> Result<LoadedProfiles> {
        let mut registry = ProfileRegistry::builtin();
        let mut files = Vec::with_capacity(self.profile_file.len());
        for path in &self.profile_file {
            let (bytes, facts) = crate::model_file::read(path, "profile file")?;
            let text = std::str::from_utf8(&bytes)
                .map_err(|_| anyhow::anyhow!("profile file '{}': not UTF-8", path.display()))?;
            let format = ProfileFormat::guess(path, text);
            registry.add_str(text, format, &path.display().to_string())?;
            files.push(facts);
        }
        Ok(LoadedProfiles { registry, files })
    }
}

/// `--no-padding` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum NoPaddingArg {
    /// input_no_padding: dense inputs.
    In,
    /// output_no_padding: dense outputs.
    Out,
    /// Both.
    Both,
}

/// The layout flags, shared by `layout`, `migrate` and `deploy-check`.
#[derive(Debug, Clone, clap::Args)]
pub struct LayoutFlags {
    #[command(flatten)]
    pub shapes: InputShapeArgs,
    /// Runtime type of every model input (input_type_rt).
    #[arg(long, value_enum, default_value_t = InputType::Featuremap)]
    pub input_type: InputType,
    /// Where image inputs come from (featuremaps are always ddr).
    #[arg(long, value_enum, default_value_t = InputSource::Ddr)]
    pub input_source: InputSource,
    /// Dense, unpadded inputs, outputs or both (input_no_padding /
    /// output_no_padding).
    #[arg(long, value_enum, value_name = "in|out|both")]
    pub no_padding: Option<NoPaddingArg>,
}

impl LayoutFlags {
    /// The library options; rejects a pyramid/resizer source for featuremaps.
    pub fn options(&self) -> Result<LayoutOptions> {
        let input_type = self.input_type;
        let source = self.input_source;
        if input_type == InputType::Featuremap && source != InputSource::Ddr {
            bail!(
                "--input-source {} needs an image --input-type (nv12, gray, rgb, bgr, yuv444); featuremap inputs always come from ddr",
                self.input_source.name()
            );
        }
        let (i, o) = match self.no_padding {
            None => (false, false),
            Some(NoPaddingArg::In) => (true, false),
            Some(NoPaddingArg::Out) => (false, true),
            Some(NoPaddingArg::Both) => (true, true),
        };
        Ok(LayoutOptions {
            input_type,
            input_source: Some(source),
            input_no_padding: i,
            output_no_padding: o,
        })
    }

    /// The options as recorded in JSON reports.
    pub fn json(&self) -> Result<OptionsJson> {
        let o = self.options()?;
        Ok(OptionsJson {
            input_type: self.input_type.name(),
            input_source: self.input_source.name(),
            input_no_padding: o.input_no_padding,
            output_no_padding: o.output_no_padding,
        })
    }

    /// The layout of `model` on `platform`, with `--input-shape` applied
    /// (every non-batch dimension must be static); errors name the model
    /// and platform.
    pub fn compute(&self, model: &Model, platform: &Platform, path: &str) -> Result<ModelLayout> {
        let opts = self.options()?;
        let mut model = model.clone();
        let need = "a layout needs static shapes: give";
        self.shapes
            .apply_static(&mut model, Path::new(path), true, need)?;
        let mut layout = model_layout(&model.graph, platform, &opts).with_context(|| {
            format!(
                "cannot lay out model '{path}' on {} with --input-type {}",
                platform.name,
                self.input_type.name()
            )
        })?;
        layout.assumptions.splice(0..0, self.shapes.notes());
        Ok(layout)
    }
}

/// Parses a byte count: digits with an optional `KiB`/`MiB` (or `K`/`M`)
/// suffix.
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    let (num, mul) = [
        ("kib", 1u64 << 10),
        ("k", 1 << 10),
        ("mib", 1 << 20),
        ("m", 1 << 20),
    ]
    .iter()
    .find_map(|(suf, m)| lower.strip_suffix(suf).map(|n| (n.trim().to_string(), *m)))
    .unwrap_or((lower.clone(), 1));
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mul))
        .ok_or_else(|| format!("`{s}` is not a byte count (e.g. 25165824, 6MiB or 512KiB)"))
}

/// Deployment settings, shared by `deploy-check` and `migrate`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct DeployFlags {
    /// Compile-time core_num (default: the number of --cores, else 1).
    #[arg(long, value_name = "N")]
    pub core_num: Option<u32>,
    /// BPU cores the model is bound to at runtime, comma-separated.
    #[arg(long, value_delimiter = ',', value_name = "0,1,...")]
    pub cores: Vec<u32>,
    /// Compile-time max_l2m_size in bytes (or with a KiB/MiB suffix).
    #[arg(long, value_parser = parse_bytes, value_name = "BYTES")]
    pub max_l2m_size: Option<u64>,
    /// Runtime L2M per core in MiB (HB_DNN_USER_DEFINED_L2M_SIZES), e.g. "6:6:6:6".
    #[arg(long, value_name = "MIB:MIB:..")]
    pub runtime_l2m: Option<String>,
    /// IPs the application schedules tasks on, comma-separated.
    #[arg(long, value_delimiter = ',', value_parser = parse_ip, value_name = "bpu,dsp,...")]
    pub ips: Vec<Ip>,
    /// Tasks are scheduled with HB_UCP_BPU_CORE_ANY.
    #[arg(long)]
    pub core_any: bool,
}

impl DeployFlags {
    /// Whether any deployment setting was given.
    pub fn given(&self) -> bool {
        self.core_num.is_some()
            || !self.cores.is_empty()
            || self.max_l2m_size.is_some()
            || self.runtime_l2m.is_some()
            || !self.ips.is_empty()
            || self.core_any
    }

    /// The library request; an unparsable runtime L2M string is an error.
    pub fn request(&self) -> Result<DeployRequest> {
        if let Some(s) = &self.runtime_l2m {
            parse_runtime_l2m(s).context("invalid --runtime-l2m")?;
        }
        let compiled = self.core_num.or_else(|| {
            (!self.cores.is_empty()).then(|| u32::try_from(self.cores.len()).unwrap_or(u32::MAX))
        });
        Ok(DeployRequest {
            compiled_cores: compiled,
            bind: self.cores.clone(),
            max_l2m_size: self.max_l2m_size,
            runtime_l2m: self.runtime_l2m.clone(),
            ips: self.ips.clone(),
            core_any: self.core_any,
        })
    }

    /// A one-line summary of the settings for people.
    pub fn describe(&self, req: &DeployRequest) -> String {
        let n = req.compiled_cores.unwrap_or(1);
        let mut parts = vec![format!("core_num {n}")];
        if !req.bind.is_empty() {
            let c: Vec<String> = req.bind.iter().map(|c| c.to_string()).collect();
            parts.push(format!("cores {}", c.join(",")));
        }
        if let Some(b) = req.max_l2m_size {
            parts.push(format!("max_l2m_size {b} B ({})", fmt_mib(b)));
        }
        if let Some(s) = &req.runtime_l2m {
            parts.push(format!("runtime L2M {s}"));
        }
        if !req.ips.is_empty() {
            let i: Vec<String> = req.ips.iter().map(|&i| ip_name(i)).collect();
            parts.push(format!("ips {}", i.join(",")));
        }
        if req.core_any {
            parts.push("CORE_ANY".into());
        }
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profile_lists_resolve() {
        let reg = ProfileRegistry::builtin();
        let all = select_profiles("all", &reg).unwrap();
        assert_eq!(all.len(), reg.profiles().len());
        let two = select_profiles("exact, gemmlowp", &reg).unwrap();
        assert_eq!(two[1].name, "gemmlowp");
        let e = select_profiles("exact,nope", &reg).unwrap_err().to_string();
        assert!(e.contains("nope") && e.contains("f32-rne"), "{e}");
        assert!(select_profiles("exact,exact", &reg).is_err());
        assert!(select_profiles("exact,", &reg).is_err());
    }

    #[test]
    fn profile_pairs_are_two_known_names() {
        let reg = ProfileRegistry::builtin();
        for (list, want) in [
            ("exact,gemmlowp", ("exact", "gemmlowp")),
            ("gemmlowp, f32-rne", ("gemmlowp", "f32-rne")),
        ] {
            let (a, b) = ProfileList(list.into()).pair(&reg).unwrap();
            assert_eq!((a.name.as_str(), b.name.as_str()), want);
        }
        for (list, want) in [
            ("exact", &["exactly two", "got 1"][..]),
            ("gemmlowp", &["exactly two", "got 1"]),
            ("a,b,c", &["got 3"]),
            ("gemmlowp,nope", &["nope", "avx2-u8s8"]),
        ] {
            let e = ProfileList(list.into()).pair(&reg).unwrap_err().to_string();
            assert!(want.iter().all(|w| e.contains(w)), "{list}: {e}");
        }
    }
}

/// `--min-integer-coverage`, shared by the commands that run an artifact in
/// integers.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct CoverageArg {
    /// Fail (exit 1) when less than this fraction (0 to 1) of the model's
    /// multiply-accumulates (Conv, MatMul, Gemm) ran in integers: a study
    /// of a model that ran mostly in float says little about integer
    /// portability.
    #[arg(long, value_name = "X", value_parser = parse_fraction)]
    pub min_integer_coverage: Option<f64>,
}

impl CoverageArg {
    /// Exit 1 (with a message on stderr) when the integer coverage of some
    /// profile in `c` is below the threshold or was not measured. Profiles
    /// that lower nothing (unfused float execution) are left out; with no
    /// other profile, nothing ran in integers and the check fails.
    pub fn status(&self, c: &[CoverageJson]) -> crate::ExitStatus {
        let Some(min) = self.min_integer_coverage else {
            return crate::ExitStatus::Success;
        };
        let mut integer = integer_profiles(c).peekable();
        if integer.peek().is_none() {
            eprintln!(
                "qport: check failed: no profile ran the artifact in integers (lowering `none` is unfused float execution), below --min-integer-coverage {min}"
            );
            return crate::ExitStatus::Failure;
        }
        let mut status = crate::ExitStatus::Success;
        for c in integer {
            let share = c.mac_share;
            if share.is_none_or(|v| v < min) {
                eprintln!(
                    "qport: check failed: under `{}`, {} of the multiply-accumulates ran in integers, below --min-integer-coverage {min}",
                    c.profile,
                    share.map_or("an unknown share".into(), |v| format!("{:.1}%", 100.0 * v))
                );
                status = crate::ExitStatus::Failure;
            }
        }
        status
    }
}

/// A number between 0 and 1 (`--min-agreement`, `--min-integer-coverage`).
pub fn parse_fraction(s: &str) -> Result<f64, String> {
    let x: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a number"))?;
    if !(0.0..=1.0).contains(&x) {
        return Err(format!("{s} is not a fraction between 0 and 1"));
    }
    Ok(x)
}
