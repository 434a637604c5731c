"""What a Foxglove WebSocket client needs in the tests, written from the protocol's description.

The server speaks JSON text messages (``serverInfo``, ``advertise``, ``status``...) and binary
``messageData`` records: opcode 0x01, the subscription id (uint32), the log time (uint64 ns),
then the message, little-endian. The client subscribes with ``{"op": "subscribe",
"subscriptions": [{"id": ..., "channelId": ...}]}``.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from typing import Any

import jsonschema

#: The subprotocol the Foxglove SDK's server accepts (the protocol once named foxglove.websocket.v1).
SUBPROTOCOL = "foxglove.sdk.v1"
MESSAGE_DATA = 0x01
_HEADER = struct.Struct("<BIQ")


@dataclass(frozen=True, slots=True)
class Channel:
    id: int
    topic: str
    schema_name: str
    schema: dict[str, Any]
    validator: Any = field(repr=False, compare=False)


def channels_of(advertise: dict[str, Any]) -> dict[str, Channel]:
    """Topic -> channel of an ``advertise`` message; each schema is checked to be JSON Schema."""
    assert advertise["op"] == "advertise", advertise
    out = {}
    for c in advertise["channels"]:
        assert c["encoding"] == "json" and c["schemaEncoding"] == "jsonschema", c
        schema = json.loads(c["schema"])
        jsonschema.Draft202012Validator.check_schema(schema)
        v = jsonschema.Draft202012Validator(schema)
        out[c["topic"]] = Channel(int(c["id"]), c["topic"], c["schemaName"], schema, v)
    return out


def subscribe(subscriptions: dict[int, Channel]) -> str:
    """The subscribe message for {subscription id: channel}."""
    subs = [{"id": sid, "channelId": ch.id} for sid, ch in subscriptions.items()]
    return json.dumps({"op": "subscribe", "subscriptions": subs})


def message_data(data: bytes) -> tuple[int, int, dict[str, Any]]:
    """``(subscription id, log time ns, decoded JSON message)`` of a binary messageData record."""
    op, sub, log_time_ns = _HEADER.unpack_from(data)
    assert op == MESSAGE_DATA, f"binary opcode {op}"
    return sub, log_time_ns, json.loads(data[_HEADER.size :])
