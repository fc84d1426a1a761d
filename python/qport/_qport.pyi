"""Type stubs of the extension module ``qport._qport`` (see ``qport``)."""

from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import numpy as np

__version__: str

class Error(Exception):
    """Base class of every error qport raises."""

    exit_code: int
    lines: List[str]
    warnings: List[str]

class InputError(Error):
    """Bad input (the CLI's exit code 2)."""

class CheckFailed(Error):
    """A check ran and failed (the CLI's exit code 1)."""

class NonFiniteError(CheckFailed):
    """A compared model output holds NaN or an infinity (exit code 1)."""

class InternalError(Error):
    """A bug in qport (exit code 101)."""

Dim = Union[int, str, None]

class Session:
    @property
    def profile(self) -> str: ...
    def inputs(self) -> List[Tuple[str, Optional[str], Optional[List[Dim]]]]: ...
    def run(self, feed: Dict[str, np.ndarray], threads: int) -> Dict[str, np.ndarray]: ...

class Model:
    @property
    def path(self) -> str: ...
    def info_json(self) -> str: ...
    def session(self, profile: Optional[str] = None) -> Session: ...

def load(path: str) -> Model: ...
def execute(
    argv: List[str],
    progress: Optional[Callable[[Optional[str], Optional[int], Optional[int]], Any]] = None,
) -> Tuple[int, Optional[str], List[str]]: ...
