//! `qport._qport`: the extension module behind the `qport` Python package.
//!
//! It is a thin layer over the library the `qport` binary is built from:
//! a model is loaded and described by the same functions as `qport info`
//! ([`qport_cli::embed::load_model`], [`qport_cli::embed::info_document`]),
//! run by the same plans as `qport run` ([`qport_cli::embed::Runner`]), and
//! every other call (`quantize`, `agree`, `diverge`, `layout`, `profiles`,
//! `platforms`) is the command itself run in-process
//! ([`qport_cli::embed::execute`]) with its JSON document handed back. The
//! Python part (`python/qport/`) turns keyword arguments into the command
//! line and the documents into Python objects.
//!
//! Errors become `qport.Error` subclasses carrying the CLI's message and
//! exit code; a panic is caught at this boundary and becomes
//! `qport.InternalError`. The GIL is released while a model or command
//! runs.

use numpy::{Element, PyArrayDyn, PyArrayMethods, PyUntypedArrayMethods};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use qport_cli::embed::{self, Event, Failure, LoadedModel, Observer, Runner};
use qport_core::{Tensor, TensorData};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

create_exception!(
    _qport,
    Error,
    PyException,
    "Base class of every error qport raises; `exit_code` is the CLI's exit code for it."
);
create_exception!(
    _qport,
    InputError,
    Error,
    "Bad input (the CLI's exit code 2): a missing or malformed file, an unknown name, a wrong dtype or shape."
);
create_exception!(
    _qport,
    CheckFailed,
    Error,
    "A check ran and failed (the CLI's exit code 1)."
);
create_exception!(
    _qport,
    NonFiniteError,
    CheckFailed,
    "A compared model output holds NaN or an infinity (the CLI's exit code 1)."
);
create_exception!(
    _qport,
    InternalError,
    Error,
    "A bug in qport (the CLI's exit code 101): please report it with the call you made."
);

/// The Python exception for a [`Failure`], with `exit_code`, `lines`
/// (headline, then causes) and `warnings` set on it.
fn to_py_err(py: Python<'_>, f: Failure) -> PyErr {
    let msg = f.message();
    let err = match f.exit_code {
        1 => NonFiniteError::new_err(msg),
        101 => InternalError::new_err(msg),
        _ => InputError::new_err(msg),
    };
    let value = err.value(py);
    let _ = value.setattr("exit_code", f.exit_code);
    let _ = value.setattr("lines", f.lines);
    let _ = value.setattr("warnings", f.warnings);
    err
}

/// A loaded ONNX model (`qport._qport.Model`; wrapped by `qport.Model`).
#[pyclass(frozen, module = "qport._qport", name = "Model")]
struct PyModel {
    loaded: Arc<LoadedModel>,
}

#[pymethods]
impl PyModel {
    /// The `qport.info/1` document, exactly as `qport info --format json`
    /// prints it.
    fn info_json(&self, py: Python<'_>) -> PyResult<String> {
        embed::info_document(&self.loaded).map_err(|f| to_py_err(py, f))
    }

    /// The path the model was loaded from, as given.
    #[getter]
    fn path(&self) -> String {
        self.loaded.facts.path.display().to_string()
    }

    /// A session running the model as `qport run` does: `profile` None or
    /// "fp32" for the float graph, else an arithmetic profile's name.
    #[pyo3(signature = (profile=None))]
    fn session(&self, py: Python<'_>, profile: Option<String>) -> PyResult<PySession> {
        let loaded = self.loaded.clone();
        let runner = py
            .detach(move || Runner::new(&loaded, profile.as_deref()))
            .map_err(|f| to_py_err(py, f))?;
        Ok(PySession {
            runner: Arc::new(runner),
        })
    }
}

/// A model made executable (`qport._qport.Session`).
#[pyclass(frozen, module = "qport._qport", name = "Session")]
struct PySession {
    runner: Arc<Runner>,
}

/// One input array converted to a tensor: a C-contiguous array's data is
/// copied once into the tensor; any other layout (strided views, Fortran
/// order) is gathered in logical (C) order.
fn tensor_of<T: Element + Copy>(
    arr: &Bound<'_, PyArrayDyn<T>>,
    wrap: fn(Vec<T>) -> TensorData,
) -> Result<Tensor, String> {
    let view = arr.readonly();
    let shape = view.shape().to_vec();
    // `as_slice` also accepts a Fortran-contiguous array, whose memory
    // order is not the tensor's: only C order is copied as is
    let data: Vec<T> = match view.as_slice() {
        Ok(s) if arr.is_c_contiguous() => s.to_vec(),
        _ => view.as_array().iter().copied().collect(),
    };
    Tensor::new(shape, wrap(data)).map_err(|e| e.to_string())
}

/// Converts `value` (a numpy array of a supported dtype) to a tensor.
fn input_tensor(name: &str, value: &Bound<'_, PyAny>) -> Result<Tensor, String> {
    macro_rules! try_dtypes {
        ($($t:ty => $variant:ident),* $(,)?) => {
            $(
                if let Ok(a) = value.cast::<PyArrayDyn<$t>>() {
                    return tensor_of(a, TensorData::$variant);
                }
            )*
        };
    }
    try_dtypes!(
        f32 => F32, f64 => F64, half::f16 => F16, i8 => I8, u8 => U8, i16 => I16,
        u16 => U16, i32 => I32, u32 => U32, i64 => I64, u64 => U64, bool => Bool,
    );
    let what = match value.cast::<numpy::PyUntypedArray>() {
        Ok(a) => format!("a numpy array of dtype {}", a.dtype()),
        Err(_) => format!(
            "a {}",
            value
                .get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_else(|_| "?".into())
        ),
    };
    Err(format!(
        "input '{name}' is {what}; give a numpy array of float32, float64, float16, \
         int8, uint8, int16, uint16, int32, uint32, int64, uint64 or bool"
    ))
}

/// The numpy array of an output tensor (its data moved, not copied).
fn output_array<'py>(py: Python<'py>, name: &str, t: Tensor) -> PyResult<Bound<'py, PyAny>> {
    let dtype = t.dtype();
    let (shape, data) = t.into_parts();
    macro_rules! arr {
        ($v:expr) => {
            numpy::PyArray::from_vec(py, $v)
                .reshape(shape)
                .map(|a| a.into_any())
        };
    }
    match data {
        TensorData::F32(v) => arr!(v),
        TensorData::F64(v) => arr!(v),
        TensorData::F16(v) => arr!(v),
        TensorData::I8(v) => arr!(v),
        TensorData::U8(v) => arr!(v),
        TensorData::I16(v) => arr!(v),
        TensorData::U16(v) => arr!(v),
        TensorData::I32(v) => arr!(v),
        TensorData::U32(v) => arr!(v),
        TensorData::I64(v) => arr!(v),
        TensorData::U64(v) => arr!(v),
        TensorData::Bool(v) => arr!(v),
        _ => Err(InputError::new_err(format!(
            "output '{name}' has dtype {}, which numpy cannot hold",
            dtype.name()
        ))),
    }
}

#[pymethods]
impl PySession {
    /// The arithmetic profile's name (`fp32` for the float graph).
    #[getter]
    fn profile(&self) -> String {
        self.runner.profile().to_string()
    }

    /// The inputs to feed: `[(name, dtype or None, shape or None)]`, a
    /// dimension an int, a symbolic name or None.
    fn inputs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        for v in self.runner.inputs() {
            let shape = match &v.shape {
                None => py.None().into_bound(py),
                Some(dims) => {
                    let list = PyList::empty(py);
                    for d in dims {
                        match d {
                            qport_onnx::Dim::Known(n) => list.append(*n)?,
                            qport_onnx::Dim::Param(p) => list.append(p)?,
                            qport_onnx::Dim::Unknown => list.append(py.None())?,
                        }
                    }
                    list.into_any()
                }
            };
            out.append((v.name.clone(), v.dtype.map(|d| d.name().to_string()), shape))?;
        }
        Ok(out)
    }

    /// Runs the model on `feed` ({name: numpy array}) with `threads`
    /// intra-op threads (process-wide; results do not depend on it) and
    /// returns {name: numpy array} in the model's output order.
    fn run<'py>(
        &self,
        py: Python<'py>,
        feed: &Bound<'py, PyDict>,
        threads: usize,
    ) -> PyResult<Bound<'py, PyDict>> {
        let mut tensors = Vec::with_capacity(feed.len());
        for (k, v) in feed.iter() {
            let name: String = k
                .extract()
                .map_err(|_| InputError::new_err("input names must be strings"))?;
            let t = input_tensor(&name, &v).map_err(InputError::new_err)?;
            tensors.push((name, t));
        }
        let runner = self.runner.clone();
        let outputs = py
            .detach(move || {
                qport_kernels::par::set_threads(threads);
                runner.run(tensors, |name| {
                    format!("give it in the dict passed to Session.run, as {{'{name}': array}}")
                })
            })
            .map_err(|f| to_py_err(py, f))?;
        let out = PyDict::new(py);
        for (name, t) in outputs {
            let a = output_array(py, &name, t)?;
            out.set_item(name, a)?;
        }
        Ok(out)
    }
}

/// Loads the ONNX model at `path`.
#[pyfunction]
fn load(py: Python<'_>, path: PathBuf) -> PyResult<PyModel> {
    let loaded = py
        .detach(move || embed::load_model(&path))
        .map_err(|f| to_py_err(py, f))?;
    Ok(PyModel {
        loaded: Arc::new(loaded),
    })
}

/// Runs the `qport` command line `argv` in-process (as `qport --quiet
/// ...`); returns `(exit_status, document or None, warnings)`, where
/// `exit_status` is 0, or 1 for a check that failed its threshold.
/// `progress(phase: str | None, done: int | None, total: int | None)` is
/// called as the command moves on (with the GIL; an exception it raises is
/// re-raised when the command returns).
#[pyfunction]
#[pyo3(signature = (argv, progress=None))]
fn execute(
    py: Python<'_>,
    argv: Vec<String>,
    progress: Option<Py<PyAny>>,
) -> PyResult<(u8, Option<String>, Vec<String>)> {
    let callback_error: Arc<Mutex<Option<PyErr>>> = Arc::default();
    let observer: Option<Observer> = progress.map(|cb| {
        let failed = callback_error.clone();
        let cb = Arc::new(cb);
        Arc::new(move |e: Event<'_>| {
            Python::attach(|py| {
                let mut slot = failed.lock().unwrap_or_else(|p| p.into_inner());
                if slot.is_some() {
                    return;
                }
                let args = match e {
                    Event::Phase(p) => (Some(p.to_string()), None, None),
                    Event::Progress { done, total } => (None, Some(done), total),
                };
                if let Err(err) = cb.call1(py, args) {
                    *slot = Some(err);
                }
            })
        }) as Observer
    });
    let result = py.detach(move || embed::execute(&argv, observer));
    if let Some(err) = callback_error
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take()
    {
        return Err(err);
    }
    match result {
        Ok(o) => Ok((
            match o.status {
                qport_cli::ExitStatus::Success => 0,
                qport_cli::ExitStatus::Failure => 1,
            },
            o.document,
            o.warnings,
        )),
        Err(f) => Err(to_py_err(py, f)),
    }
}

/// The extension's blocks of 1 KiB and more (its tensors among them)
/// start on a cache line, as in the `qport` binary
/// ([`qport_kernels::aligned::LineAligned`]).
#[global_allocator]
static ALLOC: qport_kernels::aligned::LineAligned = qport_kernels::aligned::LineAligned;

/// The extension module.
#[pymodule]
fn _qport(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("Error", py.get_type::<Error>())?;
    m.add("InputError", py.get_type::<InputError>())?;
    m.add("CheckFailed", py.get_type::<CheckFailed>())?;
    m.add("NonFiniteError", py.get_type::<NonFiniteError>())?;
    m.add("InternalError", py.get_type::<InternalError>())?;
    m.add_class::<PyModel>()?;
    m.add_class::<PySession>()?;
    m.add_function(wrap_pyfunction!(load, m)?)?;
    m.add_function(wrap_pyfunction!(execute, m)?)?;
    Ok(())
}
