"""Pre-trigger capture: keep the last seconds of frames in memory, write only once triggered.

A group with ``record = "triggered"`` puts a :class:`TriggerGate` between the recorder's engine
and its file sink. The gate sees the engine's operations (:mod:`wrtfd.recorder.ops`):

* **armed**: frames are kept in a buffer of the last ``pre_s`` seconds (bounded in bytes by
  ``max_buffer_bytes``; the oldest frames go first) and nothing reaches the sink;
* a **trigger** (the condition true in a frame, a marker placed in a frame, or a session the game
  started) at tick T: the sink gets a session that begins with the buffered frames from tick
  ``T - pre_ticks`` on, then every live frame after them. The ticks are renumbered from 0 and the
  session's ``start_timestamp`` is the time of its first frame (N9), so frame times are exact
  and ticks run on without a gap or a duplicate across the buffer boundary;
* **recording** lasts until ``post_s`` after the last frame in which the condition held (or after
  the last marker / session start); then the session ends (``end_reason = "trigger"``) and the
  gate is armed again. A session the engine ends itself (idle, stop) ends the recording too.

The condition is a small expression over the frame's channels, parsed here (never ``eval``):
``speed > 5``, ``forza.gear >= 1 and (rpm > 3000 or throttle > 0.5)``, ``not is_race_on == 0``.
Names are a source's channel (``forza.speed``) or, when only one source has it, the bare channel
(``speed``). Comparisons of a NaN (a stale value) are false. Pure: no clock, no I/O.
"""

from __future__ import annotations

import math
import re
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from wrtfd.errors import ConfigError
from wrtfd.recorder.files import join_records
from wrtfd.recorder.ops import BeginOp, EndOp, FramesOp, Op, PlacedMarker

__all__ = [
    "Condition",
    "TriggerGate",
    "TriggerPolicy",
    "channel_paths",
    "parse_condition",
]

#: Longest condition text accepted, and deepest nesting.
MAX_CONDITION_CHARS = 512
MAX_DEPTH = 32

_TOKEN = re.compile(
    r"\s*(?:(?P<num>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)"
    r"|(?P<op><=|>=|==|!=|<|>)"
    r"|(?P<paren>[()]))"
)
_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "<": np.less,
    "<=": np.less_equal,
    ">": np.greater,
    ">=": np.greater_equal,
    "==": np.equal,
    "!=": np.not_equal,
}
_KEYWORDS = frozenset({"and", "or", "not", "true", "false"})

Evaluator = Callable[[np.ndarray], np.ndarray]


def channel_paths(frame_dtype: np.dtype[Any]) -> dict[str, tuple[str, ...]]:
    """Every scalar numeric or bool leaf of a frame, ``"forza.speed" -> ("forza", "speed")``."""
    out: dict[str, tuple[str, ...]] = {}

    def walk(dt: np.dtype[Any], prefix: tuple[str, ...]) -> None:
        for name in dt.names or ():
            sub = dt[name]
            path = (*prefix, name)
            if sub.names:
                walk(sub, path)
            elif sub.shape == () and sub.kind in "biuf":
                out[".".join(path)] = path

    walk(frame_dtype, ())
    out.pop("tick", None)
    return out


@dataclass(frozen=True, slots=True)
class Condition:
    """A parsed condition: ``evaluate(frames)`` is one bool per frame."""

    text: str
    channels: tuple[str, ...]
    evaluate: Evaluator


class _Parser:
    def __init__(self, text: str, paths: Mapping[str, tuple[str, ...]]) -> None:
        self.text = text
        self.paths = paths
        self.tokens = self._tokenize(text)
        self.pos = 0
        self.used: list[str] = []

    def _tokenize(self, text: str) -> list[tuple[str, str]]:
        tokens: list[tuple[str, str]] = []
        i = 0
        while i < len(text):
            if text[i].isspace():
                i += 1
                continue
            m = _TOKEN.match(text, i)
            if m is None or m.end() == i:
                raise ConfigError(f"trigger {text!r}: unexpected {text[i : i + 12]!r} at character {i + 1}")
            kind = m.lastgroup or ""
            value = m.group(kind)
            if kind == "name" and value in _KEYWORDS:
                kind = value
            tokens.append((kind, value))
            i = m.end()
        return tokens

    def _peek(self) -> tuple[str, str] | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def _take(self, kind: str | None = None) -> tuple[str, str]:
        tok = self._peek()
        if tok is None:
            raise ConfigError(f"trigger {self.text!r}: ends too early")
        if kind is not None and tok[0] != kind:
            raise ConfigError(f"trigger {self.text!r}: expected {kind!r}, got {tok[1]!r}")
        self.pos += 1
        return tok

    def parse(self) -> Evaluator:
        if not self.tokens:
            raise ConfigError("trigger: empty condition")
        ev = self._or(0)
        if self._peek() is not None:
            raise ConfigError(f"trigger {self.text!r}: unexpected {self._peek()[1]!r}")  # type: ignore[index]
        return ev

    def _or(self, depth: int) -> Evaluator:
        left = self._and(depth)
        while (tok := self._peek()) is not None and tok[0] == "or":
            self.pos += 1
            right = self._and(depth)
            left = _binary(np.logical_or, left, right)
        return left

    def _and(self, depth: int) -> Evaluator:
        left = self._not(depth)
        while (tok := self._peek()) is not None and tok[0] == "and":
            self.pos += 1
            right = self._not(depth)
            left = _binary(np.logical_and, left, right)
        return left

    def _not(self, depth: int) -> Evaluator:
        if depth > MAX_DEPTH:
            raise ConfigError(f"trigger {self.text!r}: nested too deeply")
        tok = self._peek()
        if tok is not None and tok[0] == "not":
            self.pos += 1
            inner = self._not(depth + 1)
            return lambda frames: np.logical_not(inner(frames))
        return self._comparison(depth)

    def _comparison(self, depth: int) -> Evaluator:
        tok = self._peek()
        if tok is not None and tok[0] == "paren" and tok[1] == "(":
            self.pos += 1
            inner = self._or(depth + 1)
            close = self._take("paren")
            if close[1] != ")":
                raise ConfigError(f"trigger {self.text!r}: expected ')'")
            return inner
        left = self._operand()
        tok = self._peek()
        if tok is None or tok[0] != "op":
            if isinstance(left, float):
                raise ConfigError(f"trigger {self.text!r}: a number alone is not a condition")
            getter = left
            return lambda frames: np.not_equal(getter(frames), 0)
        op = self._take("op")[1]
        right = self._operand()
        if isinstance(left, float) and isinstance(right, float):
            raise ConfigError(f"trigger {self.text!r}: compares two numbers, no channel")
        fn = _COMPARE[op]
        return _compare(fn, left, right)

    def _operand(self) -> float | Evaluator:
        kind, value = self._take()
        if kind == "num":
            number = float(value)
            if not math.isfinite(number):
                raise ConfigError(f"trigger {self.text!r}: {value} is not a finite number")
            return number
        if kind in ("true", "false"):
            return 1.0 if kind == "true" else 0.0
        if kind != "name":
            raise ConfigError(f"trigger {self.text!r}: expected a channel or a number, got {value!r}")
        path = self._resolve(value)
        self.used.append(".".join(path))
        return _getter(path)

    def _resolve(self, name: str) -> tuple[str, ...]:
        if name in self.paths:
            return self.paths[name]
        matches = sorted(full for full in self.paths if full.endswith("." + name))
        if len(matches) == 1:
            return self.paths[matches[0]]
        if matches:
            raise ConfigError(f"trigger {self.text!r}: {name!r} is ambiguous: {', '.join(matches)}")
        known = ", ".join(sorted(self.paths)[:12]) + (" ..." if len(self.paths) > 12 else "")
        raise ConfigError(f"trigger {self.text!r}: no channel {name!r} (channels: {known})")


def _getter(path: tuple[str, ...]) -> Evaluator:
    def get(frames: np.ndarray) -> np.ndarray:
        value: Any = frames
        for part in path:
            value = value[part]
        return np.asarray(value)

    return get


def _binary(fn: Callable[[Any, Any], Any], a: Evaluator, b: Evaluator) -> Evaluator:
    return lambda frames: fn(a(frames), b(frames))


def _compare(fn: Callable[[Any, Any], Any], left: float | Evaluator, right: float | Evaluator) -> Evaluator:
    def side(x: float | Evaluator, frames: np.ndarray) -> Any:
        return x if isinstance(x, float) else x(frames)

    def ev(frames: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            return np.asarray(fn(side(left, frames), side(right, frames)), dtype=bool)

    return ev


def parse_condition(text: str, frame_dtype: np.dtype[Any]) -> Condition:
    """Parse a trigger condition against a frame's channels.

    :raises ConfigError: a syntax error, an unknown or ambiguous channel, text too long.
    """
    if not isinstance(text, str):
        raise ConfigError(f"trigger: expected text, got {type(text).__name__}")
    if len(text) > MAX_CONDITION_CHARS:
        raise ConfigError(f"trigger: longer than {MAX_CONDITION_CHARS} characters")
    parser = _Parser(text, channel_paths(frame_dtype))
    evaluate = parser.parse()
    return Condition(text, tuple(dict.fromkeys(parser.used)), evaluate)


@dataclass(frozen=True, slots=True)
class TriggerPolicy:
    """How a triggered group records (times in seconds, sizes in bytes)."""

    pre_s: float = 10.0
    post_s: float = 10.0
    condition: str | None = None
    on_marker: bool = True
    on_session: bool = True
    max_buffer_bytes: int = 16 << 20

    def check(self) -> None:
        """:raises ConfigError: a value out of range."""
        if not 0 <= self.pre_s <= 3600:
            raise ConfigError(f"pre_trigger_s: from 0 to 3600, got {self.pre_s!r}")
        if not 0 <= self.post_s <= 86400:
            raise ConfigError(f"post_trigger_s: from 0 to 86400, got {self.post_s!r}")
        if self.max_buffer_bytes < 4096:
            raise ConfigError(f"pre_trigger_max_bytes: at least 4096, got {self.max_buffer_bytes}")
        if self.condition is None and not self.on_marker and not self.on_session:
            raise ConfigError("a triggered group needs a trigger: a condition, markers or session starts")


class TriggerGate:
    """Between the engine and the sink (see the module docstring)."""

    def __init__(
        self,
        policy: TriggerPolicy,
        *,
        rate_hz: int,
        frame_dtype: np.dtype[Any],
        summaries: Callable[[], Mapping[str, Any]] | None = None,
    ) -> None:
        policy.check()
        self.policy = policy
        self.rate_hz = rate_hz
        self.condition = None if policy.condition is None else parse_condition(policy.condition, frame_dtype)
        self._pre_ticks = round(policy.pre_s * rate_hz)
        self._post_ticks = round(policy.post_s * rate_hz)
        self._itemsize = np.dtype(frame_dtype).itemsize
        self._summaries = summaries
        # the engine's session in progress
        self._header: Mapping[str, Any] | None = None
        self._metadata: Mapping[str, str] | None = None
        self._start_us = 0
        self._session_trigger = False
        # armed: the buffer of frame blocks (oldest first)
        self._buffer: deque[np.ndarray] = deque()
        self.buffer_bytes = 0
        self.buffer_peak_bytes = 0
        # recording: the tick offset of the session written, and until which tick it lasts
        self.recording = False
        self._offset = 0
        self._until = -1
        self.triggers = 0
        self.last_trigger: str | None = None
        self.frames_trimmed = 0
        self.frames_released = 0

    # -- status ----------------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        frames = self.buffer_bytes // self._itemsize if self._itemsize else 0
        return {
            "record": "triggered",
            "state": "recording" if self.recording else "armed",
            "pre_trigger_s": self.policy.pre_s,
            "post_trigger_s": self.policy.post_s,
            "condition": self.policy.condition,
            "buffer_bytes": self.buffer_bytes,
            "buffer_max_bytes": self.policy.max_buffer_bytes,
            "buffer_peak_bytes": self.buffer_peak_bytes,
            "buffer_frames": frames,
            "buffer_s": round(self._buffered_span() / self.rate_hz, 3),
            "triggers": self.triggers,
            "last_trigger": self.last_trigger,
            "frames_trimmed": self.frames_trimmed,
        }

    def _buffered_span(self) -> int:
        if not self._buffer:
            return 0
        return int(self._buffer[-1]["tick"][-1]) - int(self._buffer[0]["tick"][0]) + 1

    # -- operations ------------------------------------------------------------------------------

    def feed(self, ops: list[Op]) -> list[Op]:
        """The operations the sink gets for ``ops`` of the engine."""
        out: list[Op] = []
        for op in ops:
            if isinstance(op, FramesOp):
                if self._header is not None:
                    self._frames(op, out)
            elif isinstance(op, BeginOp):
                self._clear()
                self._header = op.header
                self._start_us = op.start_us
                self._metadata = op.metadata
                reason = str(op.header.get("start_reason", ""))
                self._session_trigger = self.policy.on_session and reason == "new_session"
            else:
                if self.recording:
                    out.append(op)
                    self.recording = False
                self._clear()
                self._header = None
        return out

    def _clear(self) -> None:
        self._buffer.clear()
        self.buffer_bytes = 0

    def _hot(self, op: FramesOp) -> np.ndarray | None:
        """Per frame: does it trigger (or keep the recording going)? None: none does."""
        frames = op.frames
        hot: np.ndarray | None = None
        if self.condition is not None:
            hot = np.asarray(self.condition.evaluate(frames), dtype=bool).reshape(-1)
            if len(hot) != len(frames):  # pragma: no cover - a scalar from a constant expression
                hot = np.broadcast_to(hot, len(frames)).copy()
        extra: list[int] = []
        if self.policy.on_marker and op.marks:
            extra.extend(m.tick for m in op.marks)
        if self._session_trigger:
            self._session_trigger = False
            extra.append(int(frames["tick"][0]))
        if extra:
            hot = np.zeros(len(frames), dtype=bool) if hot is None else hot.copy()
            idx = np.searchsorted(frames["tick"], np.asarray(extra, dtype=np.int64), side="left")
            hot[np.minimum(idx, len(frames) - 1)] = True
        if hot is not None and not hot.any():
            return None
        return hot

    def _frames(self, op: FramesOp, out: list[Op]) -> None:
        frames = op.frames
        hot = self._hot(op)
        ticks = frames["tick"]
        i = 0
        n = len(frames)
        while i < n:
            if not self.recording:
                j = n
                if hot is not None and hot[i:].any():
                    j = i + int(np.argmax(hot[i:]))
                if j >= n:
                    self._keep(frames[i:] if i else frames)
                    return
                self._keep(frames[i:j])  # the frames just before the trigger are pre-trigger too
                self._start(frames, j, op, out, hot)
                i = j
            # recording: until `post` after the last hot frame
            k = self._stop_index(ticks, hot, i)
            if k > i:
                self._emit(frames, op, out, i, k)
            if k >= n:
                return
            self._end(out)
            i = k

    def _stop_index(self, ticks: np.ndarray, hot: np.ndarray | None, i: int) -> int:
        """The first frame from ``i`` on that is past the recording's end (len: none)."""
        n = len(ticks)
        t = ticks[i:].astype(np.int64)
        if hot is None:
            limit = np.full(len(t), self._until, dtype=np.int64)
        else:
            hot_ticks = np.where(hot[i:], t + self._post_ticks, -1)
            limit = np.maximum(np.maximum.accumulate(hot_ticks), self._until)
        past = np.flatnonzero(t > limit)
        if len(past) == 0:
            self._until = int(limit[-1]) if len(limit) else self._until
            return n
        k = int(past[0])
        return i + k

    def _keep(self, frames: np.ndarray) -> None:
        """Buffer frames (a private copy when they are a slice: the block's memory is freed)."""
        if len(frames) == 0:
            return
        if frames.base is not None and frames.nbytes < getattr(frames.base, "nbytes", frames.nbytes):
            frames = join_records([frames])
        self._buffer.append(frames)
        self.buffer_bytes += frames.nbytes
        self._trim(int(frames["tick"][-1]))
        self.buffer_peak_bytes = max(self.buffer_peak_bytes, self.buffer_bytes)

    def _trim(self, last_tick: int) -> None:
        """Drop what is older than ``pre_s`` before ``last_tick``, then what passes the byte cap."""
        cutoff = last_tick - self._pre_ticks
        buf = self._buffer
        while buf and int(buf[0]["tick"][-1]) < cutoff:
            old = buf.popleft()
            self.buffer_bytes -= old.nbytes
            self.frames_trimmed += len(old)
        cap = self.policy.max_buffer_bytes
        while buf and self.buffer_bytes > cap:
            old = buf[0]
            excess = self.buffer_bytes - cap
            if old.nbytes <= excess or (len(buf) > 1 and old.nbytes - excess < self._itemsize):
                buf.popleft()
                self.buffer_bytes -= old.nbytes
                self.frames_trimmed += len(old)
                continue
            drop = -(-excess // self._itemsize)
            kept = join_records([old[drop:]])
            buf[0] = kept
            self.buffer_bytes += kept.nbytes - old.nbytes
            self.frames_trimmed += drop

    def _start(self, frames: np.ndarray, j: int, op: FramesOp, out: list[Op], hot: np.ndarray | None) -> None:
        """Triggered at ``frames[j]``: a new session with the buffered frames of the last pre_s."""
        tick = int(frames["tick"][j])
        self.triggers += 1
        self.last_trigger = self._reason(op, tick)
        first_kept = tick - self._pre_ticks
        released = [b for b in self._buffer if int(b["tick"][-1]) >= first_kept]
        if released:
            head = released[0]
            released[0] = head[np.searchsorted(head["tick"], first_kept, side="left") :]
        released = [b for b in released if len(b)]
        first_tick = int(released[0]["tick"][0]) if released else tick
        self._clear()
        self._offset = first_tick
        self._until = tick + self._post_ticks
        header = dict(self._header or {})
        header["start_reason"] = "trigger"
        start_us = self._start_us + round(first_tick * 1e6 / self.rate_hz)
        out.append(BeginOp(header, start_us, self._metadata))
        self.recording = True
        for block in released:
            out.append(FramesOp(self._renumber(block)))
            self.frames_released += len(block)

    def _reason(self, op: FramesOp, tick: int) -> str:
        if any(m.tick <= tick for m in op.marks) and self.policy.on_marker:
            return "marker"
        if self.condition is not None:
            return "condition"
        return "session"

    def _emit(self, frames: np.ndarray, op: FramesOp, out: list[Op], i: int, k: int) -> None:
        """``frames[i:k]`` go to the sink, with the markers whose first frame is among them."""
        marks: tuple[PlacedMarker, ...] = ()
        if op.marks:
            at = np.searchsorted(frames["tick"], [m.tick for m in op.marks], side="left")
            marks = tuple(
                PlacedMarker(m.tick - self._offset, m.wall_us, m.note)
                for m, idx in zip(op.marks, at.tolist(), strict=True)
                if i <= idx < k or (idx >= len(frames) and k == len(frames))
            )
        part = frames if i == 0 and k == len(frames) else frames[i:k]
        out.append(FramesOp(self._renumber(part), op.summary, marks))

    def _renumber(self, frames: np.ndarray) -> np.ndarray:
        if self._offset == 0:
            return frames
        moved = join_records([frames])
        moved["tick"] -= np.uint64(self._offset)
        return moved

    def _end(self, out: list[Op]) -> None:
        footer: dict[str, Any] = {"end_reason": "trigger"}
        if self._summaries is not None:
            footer.update(self._summaries())
        out.append(EndOp(footer))
        self.recording = False
        self._until = -1
