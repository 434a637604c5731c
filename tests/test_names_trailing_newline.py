"""A name that ends in a newline is not a name: Python's ``$`` matches before a final newline, so
every name check of untrusted input uses ``fullmatch`` (a config's source names, a struct
layout's fields, a WRC structure's ids, a service instance, an object name from the fleet)."""

from __future__ import annotations

import pytest

from wrtfd.daemon.toml_out import _key
from wrtfd.decoders.struct_decoder import _NAME as STRUCT_NAME
from wrtfd.decoders.wrc import _ID as WRC_ID
from wrtfd.fleet.collect import _COMPONENT
from wrtfd.fleet.config import _RIG_RE
from wrtfd.recorder.compose import _NAME as CHANNEL_NAME
from wrtfd.service.install import INSTANCE_PATTERN


@pytest.mark.parametrize(
    ("pattern", "good"),
    [
        (CHANNEL_NAME, "speed"),
        (STRUCT_NAME, "rpm"),
        (WRC_ID, "vehicle_speed"),
        (INSTANCE_PATTERN, "car1"),
        (_COMPONENT, "rig-1"),
        (_RIG_RE, "rig-1"),
    ],
)
def test_a_trailing_newline_is_refused(pattern: object, good: str) -> None:
    import re

    assert isinstance(pattern, re.Pattern)
    assert pattern.fullmatch(good)
    assert pattern.match(good + "\n")  # what .match() would have let through
    assert not pattern.fullmatch(good + "\n")


def test_a_toml_key_with_a_newline_is_quoted() -> None:
    assert _key("speed") == "speed"
    assert _key("0\n") == '"0\\u000a"'
