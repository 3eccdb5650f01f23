"""A stateful code interpreter in a sandbox (docs/api.md, Code): cells run
in a context that keeps its state between calls, with the last
expression's value and rich results (HTML, PNG, JSON...) returned, as
Jupyter does. Python, bash, sh and javascript; the template needs python3
(``base`` has it), javascript node (``code-interpreter`` has it)."""

from __future__ import annotations

from dataclasses import dataclass, field
import json as _json
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Union

from .errors import ConnectionFailed, error_for

if TYPE_CHECKING:  # pragma: no cover
    from .sandbox import Sandbox


@dataclass(frozen=True)
class Result:
    """One result of a cell: the last expression's value (is_main_result)
    or a figure it drew, in each representation it has."""
    text: Optional[str] = None
    html: Optional[str] = None
    markdown: Optional[str] = None
    png: Optional[str] = None       # base64
    svg: Optional[str] = None
    json: Any = None
    is_main_result: bool = False

    @classmethod
    def from_json(cls, j: Mapping[str, Any]) -> "Result":
        return cls(text=j.get("text"), html=j.get("html"), markdown=j.get("markdown"), png=j.get("png"),
                   svg=j.get("svg"), json=j.get("json"), is_main_result=bool(j.get("is_main_result")))


@dataclass(frozen=True)
class ExecutionError:
    """The exception a cell raised: its class name, message and traceback."""
    name: str
    value: str
    traceback: str


@dataclass(frozen=True)
class Execution:
    """What a cell did: its output, results and error (None if it raised
    nothing)."""
    stdout: str
    stderr: str
    results: List[Result] = field(default_factory=list)
    error: Optional[ExecutionError] = None
    execution_count: int = 0
    truncated: bool = False

    @property
    def text(self) -> Optional[str]:
        """The last expression's value as text, as E2B's Execution.text."""
        for r in self.results:
            if r.is_main_result:
                return r.text
        return None

    @classmethod
    def from_json(cls, j: Mapping[str, Any]) -> "Execution":
        e = j.get("error")
        return cls(stdout=str(j.get("stdout", "")), stderr=str(j.get("stderr", "")),
                   results=[Result.from_json(r) for r in j.get("results", [])],
                   error=ExecutionError(str(e["name"]), str(e["value"]), str(e["traceback"])) if e else None,
                   execution_count=int(j.get("execution_count", 0)), truncated=bool(j.get("truncated")))


@dataclass(frozen=True)
class CodeContext:
    """A context: its own state, in its own interpreter process (python,
    bash, sh or javascript)."""
    id: str
    language: str = "python"
    cwd: Optional[str] = None


ContextLike = Union[CodeContext, str]


def _cid(context: ContextLike) -> str:
    return context.id if isinstance(context, CodeContext) else str(context)


# The languages of cells and contexts; the aliases are E2B's. javascript
# runs in node (the code-interpreter template has it): top-level ``await``
# works, the cell's value is what the last expression awaited, and its
# declarations (``let``, ``const``, ``class``) last to the next cell.
LANGUAGES: Dict[str, str] = {
    "python": "python", "python3": "python",
    "bash": "bash", "sh": "sh",
    "javascript": "javascript", "js": "javascript", "node": "javascript",
}


def language_of(language: Optional[str]) -> Optional[str]:
    """``language``'s canonical name (``js`` is javascript), None for None;
    ValueError naming the languages for one kiln does not run."""
    if language is None:
        return None
    lang = LANGUAGES.get(language.lower()) if isinstance(language, str) else None
    if lang is None:
        raise ValueError(f"unknown language {language!r}; kiln runs: " + ", ".join(sorted(LANGUAGES)))
    return lang


class Code:
    """``sandbox.code``: run cells in contexts that keep their state."""

    def __init__(self, sandbox: "Sandbox") -> None:
        self._sb = sandbox

    def run(self, code: str, *, context: Optional[ContextLike] = None, timeout: Optional[int] = None,
            language: Optional[str] = None, envs: Optional[Mapping[str, str]] = None,
            on_stdout: Optional[Callable[[str], None]] = None, on_stderr: Optional[Callable[[str], None]] = None,
            on_result: Optional[Callable[[Result], None]] = None,
            on_error: Optional[Callable[[ExecutionError], None]] = None) -> Execution:
        """Run a cell in ``context`` (default: the sandbox's default
        context); ``timeout`` (seconds) interrupts it (TimeoutError in
        execution.error, variables kept). With callbacks, output and
        results reach them while the cell runs (a stream); the Execution
        returned at the end holds all of it either way. ``language``
        (python, bash, sh, javascript; the aliases of ``LANGUAGES``):
        without a context, that language's default context; with one, it
        must be the context's. javascript cells may ``await`` at top level
        (the value is the awaited one). ``envs`` are
        environment variables of this cell only (os.environ, process.env,
        exported shell variables; what it starts inherits them), undone
        after it."""
        if not isinstance(code, str):
            raise TypeError("code must be a string")
        body: dict = {"code": code}
        lang = language_of(language)
        if lang is not None:
            body["language"] = lang
        if context is not None:
            body["context"] = _cid(context)
        if timeout is not None:
            body["timeout_seconds"] = timeout
        if envs is not None:
            body["envs"] = dict(envs)
        if on_stdout or on_stderr or on_result or on_error:
            return self._stream(body, on_stdout, on_stderr, on_result, on_error)
        wait = None if not timeout else timeout + 90.0
        return Execution.from_json(self._sb._post("/code", body, timeout=wait).json())

    def _stream(self, body: dict, on_stdout: Any, on_stderr: Any, on_result: Any, on_error: Any) -> Execution:
        from .sandbox import STREAM_SILENCE_S, sse_events
        out: dict = {"stdout": [], "stderr": []}
        results: List[Result] = []
        error: Optional[ExecutionError] = None
        with self._sb._client.transport.open("POST", self._sb._path + "/code/stream", json_body=body,
                                             timeout=STREAM_SILENCE_S, ok=(200,),
                                             headers={"Accept": "text/event-stream"}) as r:
            for event, data in sse_events(r.chunks()):
                j = _json.loads(data)
                if event in out:
                    out[event].append(j["text"])
                    cb = on_stdout if event == "stdout" else on_stderr
                    if cb:
                        cb(j["text"])
                elif event == "result":
                    res = Result.from_json(j)
                    results.append(res)
                    if on_result:
                        on_result(res)
                elif event == "error":
                    error = ExecutionError(str(j["name"]), str(j["value"]), str(j["traceback"]))
                    if on_error:
                        on_error(error)
                elif event == "end":
                    return Execution(stdout="".join(out["stdout"]), stderr="".join(out["stderr"]), results=results,
                                     error=error, execution_count=int(j.get("execution_count", 0)),
                                     truncated=bool(j.get("truncated")))
                elif event == "fail":
                    raise error_for(None, str(j.get("code", "error")), str(j.get("message", "")))
        raise ConnectionFailed("the cell's stream ended before the cell did", "stream_ended")

    def create_context(self, *, cwd: Optional[str] = None, language: Optional[str] = None) -> CodeContext:
        """A new context of ``language`` (python, the default; bash, sh,
        javascript, or an alias: js, node) starting in ``cwd``; its own
        interpreter process, so its state is its own."""
        body: dict = {}
        if cwd:
            body["cwd"] = cwd
        lang = language_of(language)
        if lang is not None:
            body["language"] = lang
        j = self._sb._post("/code/contexts", body).json()
        return CodeContext(id=str(j["id"]), language=str(j.get("language", "python")), cwd=j.get("cwd"))

    def list_contexts(self) -> List[CodeContext]:
        return [CodeContext(id=str(c["id"]), language=str(c.get("language", "python")), cwd=c.get("cwd"))
                for c in self._sb._get("/code/contexts").json()["contexts"]]

    def restart_context(self, context: ContextLike) -> None:
        """Its variables are gone; the context stays."""
        self._sb._post(f"/code/contexts/{_cid(context)}/restart")

    def delete_context(self, context: ContextLike) -> None:
        self._sb._client.transport.request("DELETE", f"{self._sb._path}/code/contexts/{_cid(context)}")
