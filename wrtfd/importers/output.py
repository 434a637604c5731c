"""Writing an import's single output file: refuse to overwrite, then replace atomically.

Both importers replay their samples through the recorder into a temporary directory beside the
output and rename the one file into place, so a failed import never leaves a half-written file
under the requested name.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from wrtfd.decoders.base import Sample
from wrtfd.errors import ImportFormatError, WrtfdError

__all__ = ["check_output", "replay_into_file"]


def check_output(output: Path, *, force: bool) -> None:
    """:raises ImportFormatError: ``output`` exists and ``force`` is not set."""
    if output.exists() and not force:
        raise ImportFormatError(f"{output} exists; use --force to overwrite it")


def replay_into_file(
    samples: Iterable[Sample],
    *,
    output: Path,
    source: Any,
    rate_hz: int,
    start_timestamp_us: int,
    metadata: Mapping[str, str],
    derived: Sequence[Any] = (),
    policy_options: Mapping[str, Any] | None = None,
) -> None:
    """Replay ``samples`` of one source into exactly one WRTF file at ``output``.

    :raises WrtfdError: the recorder split the import into several files.
    """
    from wrtfd.recorder import RecorderPolicy, replay

    output.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".wrtfd-import-", dir=output.parent) as tmp:
        policy = RecorderPolicy(output_dir=Path(tmp), rate_hz=rate_hz, **(policy_options or {}))
        paths = replay(
            samples,
            sources=[source],
            policy=policy,
            start_timestamp_us=start_timestamp_us,
            metadata=dict(metadata),
            derived=list(derived),
        )
        if len(paths) != 1:
            raise WrtfdError(f"the recorder wrote {len(paths)} files for one import; expected one")
        os.replace(paths[0], output)  # same directory, so same filesystem: atomic
