"""What the status endpoints say: ``/metrics`` text and ``/healthz`` judgement (pure).

The payloads are built elsewhere (``app``) as a plain snapshot dict; this module only renders it
(:func:`render_metrics`) and judges it (:func:`health_problems`). They are served, with the
pit-wall page, by :mod:`wrtfd.daemon.web`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = ["UP_STATES", "health_problems", "render_metrics"]

#: Source states that count as "up" (bound and able to receive).
UP_STATES = frozenset({"listening", "receiving"})


# --- judging and rendering (pure) --------------------------------------------------------------


def health_problems(snapshot: Mapping[str, Any]) -> list[str]:
    """Why the daemon is unhealthy (empty: healthy), from a status snapshot.

    Unhealthy when a required source has been silent longer than its ``silent_after_s`` (a source
    that never received counts from daemon start), a source reports a problem (a receiver that
    refused a setting), the recorder is failing or stuck, or free disk
    is below the threshold.
    """
    problems: list[str] = []
    uptime_s = float(snapshot.get("uptime_s", 0.0))
    for name, src in snapshot.get("sources", {}).items():
        if not src.get("required"):
            continue
        limit = float(src.get("silent_after_s", math.inf))
        age = src.get("last_sample_age_s")
        silent_s = uptime_s if age is None else float(age)
        if silent_s > limit:
            problems.append(f"source {name} silent for {silent_s:.1f} s (limit {limit:g} s)")
    for name, src in snapshot.get("sources", {}).items():
        problems.extend(f"source {name}: {p}" for p in src.get("problems") or ())
    rec = snapshot.get("recorder", {})
    if rec.get("state") in ("failing", "stalled"):
        problems.append(f"recorder {rec.get('state')}: {rec.get('error') or 'write pending too long'}")
    disk = snapshot.get("disk", {})
    free = disk.get("free_bytes")
    minimum = disk.get("min_free_bytes", 0)
    if free is not None and free < minimum:
        problems.append(f"free disk {free // (1 << 20)} MiB below {minimum // (1 << 20)} MiB")
    return problems


def _label(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _metric_name(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in text.lower())


def _num(value: object) -> str | None:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int | float):
        if isinstance(value, float) and math.isnan(value):
            return "NaN"
        return repr(value) if isinstance(value, float) else str(value)
    return None


#: Source snapshot key -> (metric name, type, help).
_SOURCE_METRICS: tuple[tuple[str, str, str, str], ...] = (
    ("received", "wrtfd_source_received_total", "counter", "Datagrams, lines or frames received"),
    ("samples", "wrtfd_source_samples_total", "counter", "Samples handed to the recorder"),
    ("bytes", "wrtfd_source_bytes_total", "counter", "Bytes received"),
    ("restarts", "wrtfd_source_restarts_total", "counter", "Restarts after a failure"),
    ("rate_hz", "wrtfd_source_sample_rate_hz", "gauge", "Samples per second, recent"),
    ("last_sample_age_s", "wrtfd_source_last_sample_age_seconds", "gauge", "Seconds since the last sample"),
)

#: Recorder snapshot key -> (metric name, type, help); keys the recorder does not report are skipped.
_RECORDER_METRICS: tuple[tuple[str, str, str, str], ...] = (
    ("frames", "wrtfd_recorder_frames_total", "counter", "Frames produced"),
    ("frames_written", "wrtfd_recorder_frames_written_total", "counter", "Frames written to files"),
    ("frames_lost", "wrtfd_recorder_frames_lost_total", "counter", "Frames lost to disk errors or backlog"),
    ("dropped_ticks", "wrtfd_recorder_dropped_ticks_total", "counter", "Ticks without data (gaps)"),
    ("bytes_written", "wrtfd_recorder_bytes_written_total", "counter", "Bytes written to all files"),
    ("bytes", "wrtfd_recorder_file_bytes", "gauge", "Size of the current file"),
    ("sessions", "wrtfd_recorder_sessions_total", "counter", "Sessions started"),
    ("files", "wrtfd_recorder_files_total", "counter", "Files opened"),
    ("errors", "wrtfd_recorder_errors_total", "counter", "Write errors"),
    ("samples", "wrtfd_recorder_samples_total", "counter", "Samples taken in"),
    ("intake_dropped", "wrtfd_recorder_intake_dropped_total", "counter", "Samples refused: intake full"),
    ("intake_queued", "wrtfd_recorder_intake_queued", "gauge", "Samples waiting in the intake"),
    ("fsync_lag_s", "wrtfd_recorder_fsync_lag_seconds", "gauge", "Seconds since data was last made durable"),
    ("write_pending_s", "wrtfd_recorder_write_pending_seconds", "gauge", "Age of the write in progress"),
    ("frame_rate_hz", "wrtfd_recorder_frame_rate_hz", "gauge", "Frames per second, recent"),
)


def render_metrics(snapshot: Mapping[str, Any]) -> str:
    """The snapshot in the Prometheus text exposition format (version 0.0.4)."""
    out: list[str] = []

    def family(name: str, kind: str, help_text: str, samples: list[tuple[str, str]]) -> None:
        if not samples:
            return
        out.append(f"# HELP {name} {help_text}")
        out.append(f"# TYPE {name} {kind}")
        out.extend(f"{name}{labels} {value}" for labels, value in samples)

    sources: Mapping[str, Mapping[str, Any]] = snapshot.get("sources", {})
    family(
        "wrtfd_source_up",
        "gauge",
        "1 when the source is bound and receiving or waiting",
        [
            (f'{{source="{_label(n)}"}}', "1" if s.get("state") in UP_STATES else "0")
            for n, s in sources.items()
        ],
    )
    for key, name, kind, help_text in _SOURCE_METRICS:
        samples = []
        for n, s in sources.items():
            value = _num(s.get(key))
            if value is not None:
                samples.append((f'{{source="{_label(n)}"}}', value))
        family(name, kind, help_text, samples)
    drops = [
        (f'{{source="{_label(n)}",reason="{_label(reason)}"}}', str(count))
        for n, s in sources.items()
        for reason, count in sorted(s.get("dropped", {}).items())
    ]
    family("wrtfd_source_dropped_total", "counter", "Inputs dropped, by reason", drops)

    rec: Mapping[str, Any] = snapshot.get("recorder", {})
    for key, name, kind, help_text in _RECORDER_METRICS:
        value = _num(rec.get(key))
        if value is not None:
            family(name, kind, help_text, [("", value)])
    per_source: Mapping[str, Mapping[str, Any]] = rec.get("per_source") or {}
    counters = sorted({k for c in per_source.values() for k in c})
    for counter in counters:
        samples = []
        for n, c in per_source.items():
            value = _num(c.get(counter))
            if value is not None:
                samples.append((f'{{source="{_label(n)}"}}', value))
        family(
            f"wrtfd_recorder_source_{_metric_name(counter)}_total",
            "counter",
            f"Per-source scheduler counter {counter}",
            samples,
        )
    family(
        "wrtfd_recorder_up",
        "gauge",
        "1 while the recorder writes normally",
        [("", "1" if rec.get("state") == "ok" else "0")],
    )

    disk: Mapping[str, Any] = snapshot.get("disk", {})
    free = _num(disk.get("free_bytes"))
    if free is not None:
        family("wrtfd_disk_free_bytes", "gauge", "Free bytes on the recording file system", [("", free)])
    family(
        "wrtfd_healthy",
        "gauge",
        "1 when /healthz answers 200",
        [("", "1" if snapshot.get("healthy") else "0")],
    )
    uptime = _num(snapshot.get("uptime_s"))
    if uptime is not None:
        family("wrtfd_uptime_seconds", "gauge", "Seconds since the daemon started", [("", uptime)])
    return "\n".join(out) + "\n"
