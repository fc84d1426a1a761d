//! Running a `qport` command inside another program (the Python package):
//! [`execute`] parses a command line exactly as the binary does, runs the
//! same command code, and hands back what the binary would have printed
//! with `--format json` (the document, byte for byte), the warnings it
//! would have printed on stderr, and the exit code's meaning, instead of
//! printing them. Phases and progress reach an [`Observer`]; nothing is
//! drawn on the terminal. A panic is caught here and comes back as an
//! internal error (exit code 101), never unwinding into the host.
//!
//! The document, warnings and observer are kept per thread, so commands
//! may run on several threads of one process at once.

use crate::{dispatch, error_exit_code, error_lines, output::Ui, Cli, ExitStatus};
use anyhow::Context;
use clap::Parser;
use std::cell::RefCell;
use std::sync::Arc;

/// Something a running command reports to its [`Observer`].
#[derive(Debug, Clone, Copy)]
pub enum Event<'a> {
    /// A new phase began (the label the binary shows on its spinner).
    Phase(&'a str),
    /// The current progress bar moved: `done` of `total` units.
    Progress {
        /// Units done.
        done: u64,
        /// Units in all, when known.
        total: Option<u64>,
    },
}

/// Receives a command's [`Event`]s, from whichever thread makes them.
pub type Observer = Arc<dyn Fn(Event<'_>) + Send + Sync>;

/// What a command that ran to its end produced.
#[derive(Debug)]
pub struct Outcome {
    /// Success, or a check that ran and failed its threshold (exit 1).
    pub status: ExitStatus,
    /// The JSON document `--format json` prints, as printed (`None` for a
    /// command that prints none).
    pub document: Option<String>,
    /// The warnings the binary prints as `qport: warning: TEXT`.
    pub warnings: Vec<String>,
}

/// A command that failed: the exit code the binary returns and the lines
/// of the message it prints (`qport: error: LINE0`, `  cause: LINE1`, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// `2` usage or input error, `1` a compared output holds NaN or an
    /// infinity, `101` a bug in qport (a panic).
    pub exit_code: u8,
    /// The headline, then one line per cause.
    pub lines: Vec<String>,
    /// The warnings printed before the failure.
    pub warnings: Vec<String>,
}

impl Failure {
    /// The message as the binary prints it, without the `qport: error: `
    /// prefix: the headline, then `  cause: ...` lines.
    pub fn message(&self) -> String {
        let mut s = String::new();
        for (i, l) in self.lines.iter().enumerate() {
            if i > 0 {
                s.push_str("\n  cause: ");
            }
            s.push_str(l);
        }
        s
    }
}

#[derive(Default)]
struct Capture {
    document: Option<String>,
    warnings: Vec<String>,
    observer: Option<Observer>,
}

std::thread_local! {
    static CAPTURE: RefCell<Option<Capture>> = const { RefCell::new(None) };
}

/// Runs the command line `argv` (`argv[0]` is the program name, `qport`)
/// in-process, as the binary would with `--quiet`, and returns what it
/// produced. The command line is what the reports record as `command`.
pub fn execute(argv: &[String], observer: Option<Observer>) -> Result<Outcome, Failure> {
    let cli = match Cli::try_parse_from(argv) {
        Ok(cli) => cli,
        Err(e) => {
            return Err(Failure {
                exit_code: if e.use_stderr() { crate::EXIT_ERROR } else { 0 },
                lines: vec![e
                    .render()
                    .to_string()
                    .trim_end()
                    .trim_start_matches("error: ")
                    .to_string()],
                warnings: vec![],
            })
        }
    };
    let previous = CAPTURE.with(|c| {
        c.borrow_mut().replace(Capture {
            observer,
            ..Capture::default()
        })
    });
    let ui = Ui::new(true);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        qport_core::report::with_command_line(argv.to_vec(), || dispatch(&cli, &ui))
    }));
    let capture = CAPTURE
        .with(|c| std::mem::replace(&mut *c.borrow_mut(), previous))
        .unwrap_or_default();
    match result {
        Ok(Ok(status)) => Ok(Outcome {
            status,
            document: capture.document,
            warnings: capture.warnings,
        }),
        Ok(Err(err)) => Err(Failure {
            exit_code: error_exit_code(&err),
            lines: error_lines(&err),
            warnings: capture.warnings,
        }),
        Err(panic) => Err(Failure {
            exit_code: 101,
            lines: vec![internal_error(panic.as_ref())],
            warnings: capture.warnings,
        }),
    }
}

/// The message of a caught panic, as the binary's panic hook words it.
pub fn internal_error(payload: &(dyn std::any::Any + Send)) -> String {
    let msg = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into());
    format!(
        "internal error: {msg}; this is a bug in qport {}, please report it with the call you made",
        env!("CARGO_PKG_VERSION")
    )
}

/// Inside [`execute`], keeps `doc` and returns `None`; else gives it back
/// to be printed.
pub(crate) fn keep_document(doc: String) -> Option<String> {
    CAPTURE.with(|c| match c.borrow_mut().as_mut() {
        Some(cap) => {
            cap.document = Some(doc);
            None
        }
        None => Some(doc),
    })
}

/// Inside [`execute`], keeps the warning and returns true.
pub(crate) fn keep_warning(text: &str) -> bool {
    CAPTURE.with(|c| match c.borrow_mut().as_mut() {
        Some(cap) => {
            cap.warnings.push(text.to_string());
            true
        }
        None => false,
    })
}

/// The observer of the command running on this thread, if any.
pub(crate) fn observer() -> Option<Observer> {
    CAPTURE.with(|c| c.borrow().as_ref().and_then(|cap| cap.observer.clone()))
}

/// Reports `event` to the observer of the command running on this thread.
pub(crate) fn notify(event: Event<'_>) {
    if let Some(o) = observer() {
        o(event);
    }
}

/// A failure of a library call made on a host's behalf (always an input
/// error, exit code 2, or a NaN/infinity, exit code 1).
fn failure(err: &anyhow::Error) -> Failure {
    Failure {
        exit_code: error_exit_code(err),
        lines: error_lines(err),
        warnings: vec![],
    }
}

/// Runs `f`, turning a panic into an internal-error [`Failure`].
fn guarded<T>(f: impl FnOnce() -> anyhow::Result<T>) -> Result<T, Failure> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(failure(&e)),
        Err(panic) => Err(Failure {
            exit_code: 101,
            lines: vec![internal_error(panic.as_ref())],
            warnings: vec![],
        }),
    }
}

pub use crate::model_file::LoadedModel;

/// Reads and converts the ONNX model at `path`, as every command does
/// (errors name the file).
pub fn load_model(path: &std::path::Path) -> Result<LoadedModel, Failure> {
    guarded(|| crate::model_file::load(path))
}

/// The `qport.info/1` document of a loaded model, exactly as `qport info
/// --format json` prints it.
pub fn info_document(m: &LoadedModel) -> Result<String, Failure> {
    guarded(|| {
        let doc = crate::info::describe(&m.model, &m.facts);
        Ok(serde_json::to_string_pretty(&doc)? + "\n")
    })
}

/// A model made executable as `qport run MODEL [--profile P]` runs it: the
/// float graph (fused), or under an arithmetic profile its quantized groups
/// lowered to integer operators.
pub struct Runner {
    plan: Runnable,
    path: String,
    profile: String,
}

enum Runnable {
    Float(Box<qport_engine::Plan>),
    Integer(Box<qport_engine::IntegerPlan>),
}

impl Runner {
    /// Builds the plan of `m` under `profile` (a preset name; `None` or
    /// `fp32` is the float graph); errors as `qport run`'s.
    pub fn new(m: &LoadedModel, profile: Option<&str>) -> Result<Runner, Failure> {
        let path = m.facts.path.display().to_string();
        guarded(|| {
            let registry = qport_core::arith::ProfileRegistry::builtin();
            let profile = crate::run::profile_named(&registry, profile)?;
            let plan = match &profile {
                Some(p) => Runnable::Integer(Box::new(
                    qport_engine::IntegerPlan::with_fusion(&m.model, p, true).with_context(
                        || format!("cannot run model '{path}' under profile `{}`", p.name),
                    )?,
                )),
                None => Runnable::Float(Box::new(
                    qport_engine::Plan::with_options(&m.model, Default::default())
                        .with_context(|| format!("cannot run model '{path}'"))?,
                )),
            };
            Ok(Runner {
                plan,
                profile: profile.map_or_else(|| "fp32".to_string(), |p| p.name),
                path: path.clone(),
            })
        })
    }

    fn plan(&self) -> &qport_engine::Plan {
        match &self.plan {
            Runnable::Float(p) => p,
            Runnable::Integer(ip) => ip.plan(),
        }
    }

    /// The profile's name (`fp32` for the float graph).
    pub fn profile(&self) -> &str {
        &self.profile
    }

    /// The inputs a caller feeds, in the model's order.
    pub fn inputs(&self) -> Vec<qport_onnx::ValueInfo> {
        self.plan().inputs().cloned().collect()
    }

    /// Runs the model on `feed` (name, tensor); `how(name)` tells how to
    /// pass a missing input. Unknown and missing inputs are named as `qport
    /// run` names them; dtype and shape errors are the engine's.
    pub fn run(
        &self,
        feed: Vec<(String, qport_core::Tensor)>,
        how: impl Fn(&str) -> String,
    ) -> Result<Vec<(String, qport_core::Tensor)>, Failure> {
        guarded(|| {
            let declared: Vec<&qport_onnx::ValueInfo> = self.plan().inputs().collect();
            let named: Vec<(&str, &str)> = feed
                .iter()
                .map(|(n, _)| (n.as_str(), "the inputs given"))
                .collect();
            crate::run::check_feed(&declared, &named, &how)?;
            let out = match &self.plan {
                Runnable::Float(p) => p.run(feed),
                Runnable::Integer(ip) => ip.run(feed),
            };
            out.with_context(|| format!("cannot run model '{}'", self.path))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    fn argv(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn captures_the_json_document() {
        let out = execute(&argv(&["qport", "profiles", "--format", "json"]), None).unwrap();
        let doc: serde_json::Value =
            serde_json::from_str(out.document.as_deref().unwrap()).unwrap();
        assert_eq!(doc["schema"], "qport.profiles/1");
        assert_eq!(out.status, ExitStatus::Success);
    }

    #[test]
    fn input_errors_carry_the_message_and_exit_code() {
        let err = execute(&argv(&["qport", "info", "/nonexistent/m.onnx"]), None).unwrap_err();
        assert_eq!(err.exit_code, 2);
        assert!(
            err.lines[0].contains("cannot read model '/nonexistent/m.onnx'"),
            "{err:?}"
        );
        let err = execute(&argv(&["qport", "layout", "x.onnx", "-p", "nope"]), None).unwrap_err();
        assert_eq!(err.exit_code, 2);
        let err = execute(&argv(&["qport", "no-such-command"]), None).unwrap_err();
        assert_eq!(err.exit_code, 2);
        assert!(err.message().contains("no-such-command"), "{err:?}");
    }

    #[test]
    fn reports_record_the_given_command_line() {
        let line = argv(&["qport", "--quiet", "profiles", "--format", "json"]);
        let seen =
            qport_core::report::with_command_line(line.clone(), qport_core::report::command_line);
        assert_eq!(seen, line);
        assert_ne!(qport_core::report::command_line(), line);
    }

    #[test]
    fn phases_reach_the_observer() {
        let events: Arc<Mutex<Vec<String>>> = Arc::default();
        let sink = events.clone();
        let observer: Observer = Arc::new(move |e| {
            if let Event::Phase(p) = e {
                sink.lock().unwrap().push(p.to_string());
            }
        });
        let ui = Ui::new(true);
        CAPTURE.with(|c| {
            *c.borrow_mut() = Some(Capture {
                observer: Some(observer),
                ..Capture::default()
            })
        });
        let sp = ui.spinner("loading");
        sp.phase(&ui, "running");
        drop(sp);
        CAPTURE.with(|c| *c.borrow_mut() = None);
        assert_eq!(*events.lock().unwrap(), ["loading", "running"]);
    }
}
