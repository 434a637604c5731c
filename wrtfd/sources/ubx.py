"""A u-blox receiver that wrtfd sets up itself: find the baud rate, ask MON-VER, configure, record.

After every (re)open, before streaming:

1. Baud: poll MON-VER at each candidate rate (the target ``baud`` and the configured
   ``baudrate`` first, then :data:`~wrtfd.decoders.ubx_config.UBX_BAUD_RATES`) until one
   answers. Bytes read at a wrong rate are noise: their drops are not counted. A receiver that
   answers at no rate is recorded at the first rate where whole frames or sentences came.
2. The generation from MON-VER picks the messages (:mod:`wrtfd.decoders.ubx_config`).
3. Each message waits, bounded, for its ACK-ACK. A NAK or no answer is one warning line and a
   status problem; the rest of the set-up and the recording go on with what the receiver sends.
4. A baud change: the source follows the receiver to the new rate and checks the link with a
   MON-VER poll; if the receiver is not there, it goes back to the old rate (one line, a problem).
5. The rate reached: NAV-PVT are counted for ``rate_check_s``; fewer than 80 % of ``rate_hz``
   is a problem (a UART too slow for the rate drops messages).

NAV-PVT frames that arrive during the set-up are recorded like the rest. docs/gnss.md.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import anyio

from wrtfd.decoders.base import DropCounter
from wrtfd.decoders.ubx import ACK_ACK, ACK_NAK, MON_VER, UbxDecoder, UbxFeed, parse_mon_ver
from wrtfd.decoders.ubx_config import (
    DYNAMIC_MODELS,
    PORTS,
    UBX_BAUD_RATES,
    ReceiverInfo,
    config_steps,
    mon_ver_poll,
    receiver_info,
)
from wrtfd.errors import DecodeError
from wrtfd.sources.base import SampleSink
from wrtfd.sources.serial import FeedSourceBase, SerialLink, SerialSettings

__all__ = ["UbxSource"]

log = logging.getLogger("wrtfd.sources.ubx")


class UbxSource(FeedSourceBase[UbxFeed]):
    """Serial u-blox receiver: set it up on connect, then record NAV-PVT (and HNR-PVT).

    ``configure`` False records what the receiver sends without talking to it.
    ``port``: the receiver's port the device is wired to; ``auto`` is ``usb`` for a ttyACM device
    (a receiver's own USB) and ``uart1`` otherwise (a USB-serial adapter or a Pi's UART).
    """

    protocol_name = "ubx"

    def __init__(
        self,
        name: str,
        settings: SerialSettings,
        decoder: UbxDecoder,
        *,
        configure: bool = True,
        rate_hz: int = 10,
        baud: int | None = None,
        nmea_off: bool = False,
        dynamic_model: str = "automotive",
        port: str = "auto",
        ack_timeout_s: float = 1.0,
        probe_timeout_s: float = 1.0,
        probe_bauds: tuple[int, ...] = UBX_BAUD_RATES,
        rate_check_s: float = 2.0,
    ) -> None:
        super().__init__(name, settings)
        if not 1 <= rate_hz <= 25:
            raise ValueError(f"rate_hz must be 1..25, got {rate_hz}")
        if port != "auto" and port not in PORTS:
            raise ValueError(f"port must be auto or one of {sorted(PORTS)}, got {port!r}")
        if dynamic_model not in DYNAMIC_MODELS:
            raise ValueError(f"dynamic_model must be one of {sorted(DYNAMIC_MODELS)}, got {dynamic_model!r}")
        if baud is not None and baud not in UBX_BAUD_RATES:
            raise ValueError(f"baud must be one of {sorted(UBX_BAUD_RATES)}, got {baud}")
        self.decoder = decoder
        self.configure = configure
        self.rate_hz = rate_hz
        self.baud = baud
        self.nmea_off = nmea_off
        self.dynamic_model = dynamic_model
        self.port = port
        self.ack_timeout_s = ack_timeout_s
        self.probe_timeout_s = probe_timeout_s
        self.probe_bauds = tuple(probe_bauds)
        self.rate_check_s = rate_check_s
        #: NAV-PVT a second measured after the last set-up (None: not measured).
        self.rate_reached_hz: float | None = None
        self.feed = UbxFeed(name, decoder, drops=self.stats.dropped, control=self._on_control)
        self._control: list[tuple[int, int, bytes]] = []
        self._control_event = anyio.Event()
        #: The last receiver identified (None before the first MON-VER answer).
        self.receiver: ReceiverInfo | None = None
        #: The baud rate the link runs at now.
        self.current_baud = settings.baudrate
        #: Each step of the last set-up and how it went: ("CFG-RATE 10 Hz", "ack" | "nak" |
        #: "timeout"; a baud change also "stayed" or "lost": not found at the new rate).
        self.steps: list[tuple[str, str]] = []
        #: True once the set-up of the current connection is over (whatever its outcome).
        self.set_up = False

    # -- receiving ---------------------------------------------------------------------------

    def _on_control(self, msg_class: int, msg_id: int, payload: bytes) -> None:
        if len(self._control) < 64:
            self._control.append((msg_class, msg_id, payload))
        self._control_event.set()

    # -- the conversation --------------------------------------------------------------------

    async def _wait_control(self, want: Any, timeout_s: float) -> tuple[int, int, bytes] | None:
        """The first control frame ``want`` accepts, read from what arrives within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while True:
            while self._control:
                frame = self._control.pop(0)
                if want(frame):
                    return frame
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self._control_event = anyio.Event()
            with anyio.move_on_after(left):
                await self._control_event.wait()

    async def _poll_version(self, link: SerialLink, timeout_s: float) -> tuple[int, int, bytes] | None:
        self._control.clear()
        link.write(mon_ver_poll())
        return await self._wait_control(lambda f: (f[0], f[1]) == MON_VER, timeout_s)

    def _set_baud(self, link: SerialLink, baud: int) -> None:
        link.set_baudrate(baud)
        self.current_baud = baud
        self.feed.framer.reset()

    async def _find_baud(self, link: SerialLink) -> tuple[int, int, bytes] | None:
        """Poll MON-VER at each candidate rate; the answer, the link left at its rate."""
        first = self.settings.baudrate
        order = [b for b in (self.baud, first) if b is not None]
        candidates = list(dict.fromkeys([*order, *self.probe_bauds]))
        counted = self.stats.dropped
        scratch = DropCounter()  # noise read at a wrong rate is not the receiver's fault
        self.feed.drops = self.feed.framer.drops = scratch
        talking: int | None = None  # the first rate at which whole frames or sentences came
        try:
            for baud in candidates:
                if link.closed:
                    return None
                if baud != self.current_baud:
                    self._set_baud(link, baud)
                framer = self.feed.framer
                heard = framer.frames + framer.nmea_lines
                answer = await self._poll_version(link, self.probe_timeout_s)
                if answer is not None:
                    return answer
                if talking is None and framer.frames + framer.nmea_lines > heard:
                    talking = baud
            self._set_baud(link, talking if talking is not None else first)
            return None
        finally:
            self.feed.drops = self.feed.framer.drops = counted

    async def _step(self, link: SerialLink, message: bytes, cls: int, mid: int) -> str:
        self._control.clear()
        link.write(message)

        def is_ack(frame: tuple[int, int, bytes]) -> bool:
            c, i, payload = frame
            return (c, i) in (ACK_ACK, ACK_NAK) and payload[:2] == bytes((cls, mid))

        frame = await self._wait_control(is_ack, self.ack_timeout_s)
        if frame is None:
            return "timeout"
        return "ack" if (frame[0], frame[1]) == ACK_ACK else "nak"

    def _problem(self, text: str) -> None:
        log.warning("%s (%s): %s", self.name, self.settings.path, text)
        self.stats.problems.append(text)

    async def _configure(self, link: SerialLink) -> None:
        self.steps = []
        self.receiver = None
        self.stats.problems.clear()
        answer = await self._find_baud(link)
        if answer is None:
            if link.closed:
                return
            order = [b for b in (self.baud, self.settings.baudrate) if b is not None]
            tried = ", ".join(str(b) for b in dict.fromkeys([*order, *self.probe_bauds]))
            self._problem(
                f"no answer to MON-VER at {tried} baud: not set up, recording what it sends at"
                f" {self.current_baud} baud"
            )
            return
        try:
            info = receiver_info(*parse_mon_ver(answer[2]))
        except DecodeError as exc:
            self._problem(f"MON-VER unreadable ({exc}): not set up")
            return
        self.receiver = info
        port = self.port if self.port != "auto" else ("usb" if "ttyACM" in link.device else "uart1")
        steps = config_steps(
            info,
            rate_hz=self.rate_hz,
            port=port,
            current_baud=self.current_baud,
            dynamic_model=self.dynamic_model,
            nmea_off=self.nmea_off,
            baud=self.baud,
        )
        found_at = self.current_baud
        for step in steps:
            if link.closed:
                return  # unplugged during the set-up: the next connect starts over
            result = await self._step(link, step.message, step.msg_class, step.msg_id)
            if step.baud is not None and result != "nak":
                result = await self._follow_baud(link, step.baud)
            self.steps.append((step.what, result))
            if result == "nak":
                self._problem(f"{info.generation} refused {step.what} (NAK); recording what it sends")
            elif result in ("stayed", "lost"):
                where = f"still at {self.current_baud} baud" if result == "stayed" else "lost"
                self._problem(f"{info.generation} is not at {step.baud} baud after {step.what}: {where}")
            elif result == "timeout":
                self._problem(
                    f"{info.generation} did not answer {step.what} within {self.ack_timeout_s:g} s;"
                    " recording what it sends"
                )
        refused = sum(1 for _, r in self.steps if r != "ack")
        log.info(
            "%s (%s): %s (%s, PROTVER %s) found at %d baud: %s; %d of %d settings taken%s",
            self.name,
            self.settings.path,
            info.generation,
            info.software,
            f"{info.protocol_version:.2f}" if info.protocol_version is not None else "?",
            found_at,
            "CFG-VALSET" if info.valset else "legacy CFG messages",
            len(self.steps) - refused,
            len(self.steps),
            f", now at {self.current_baud} baud" if self.current_baud != found_at else "",
        )

    async def _follow_baud(self, link: SerialLink, baud: int) -> str:
        """Switch to ``baud`` after the receiver took the change (or said nothing: the ACK may
        be lost in the switch); ``ack`` when it answers there, else back at the old rate:
        ``stayed`` (it answers there) or ``lost``."""
        old = self.current_baud
        self._set_baud(link, baud)
        if await self._poll_version(link, self.probe_timeout_s) is not None:
            return "ack"
        self._set_baud(link, old)
        if await self._poll_version(link, self.probe_timeout_s) is not None:
            return "stayed"
        return "lost"

    async def _check_rate(self) -> None:
        """Count NAV-PVT for ``rate_check_s`` after the set-up: fewer than asked is a problem
        (a UART too slow for the rate is the usual cause: a receiver drops what does not fit)."""
        if self.receiver is None or any(r != "ack" for what, r in self.steps if "RATE" in what):
            return
        # the new rate starts at the receiver's next epoch on the old one: up to a second away
        seen = self.feed.navigation
        with anyio.move_on_after(1.5):
            while self.feed.navigation == seen:  # noqa: ASYNC110 - set by the transport callback
                await anyio.sleep(0.01)
        before = self.feed.navigation
        await anyio.sleep(self.rate_check_s)
        self.rate_reached_hz = (self.feed.navigation - before) / self.rate_check_s
        log.info("%s (%s): NAV-PVT at %.1f Hz", self.name, self.settings.path, self.rate_reached_hz)
        if self.rate_reached_hz < 0.8 * self.rate_hz:
            fits = self.current_baud / 10 / 100  # NAV-PVT is 100 bytes on the wire
            self._problem(
                f"NAV-PVT at {self.rate_reached_hz:.1f} Hz, {self.rate_hz} Hz asked"
                f" ({self.current_baud} baud carries at most {fits:.0f} a second; see `baud`, `nmea_off`)"
            )

    async def _session(self, link: SerialLink, sink: SampleSink) -> str:
        self._link = link
        self.current_baud = self.settings.baudrate
        self.set_up = False
        self.rate_reached_hz = None
        try:
            if self.configure:
                await self._configure(link)
                if self.rate_check_s > 0:
                    await self._check_rate()
            self.set_up = True
            return await link.wait_lost(self.settings.idle_timeout_s)
        finally:
            self._link = None
