"""The zerodds ``.zddsrec`` 1.0 record format, CDR decoding and the topic-to-channel mapping.

Pure code: no sockets, no clocks. The live TCP source is :mod:`wrtfd.sources.dds`, the file
importer :mod:`wrtfd.importers.zddsrec`.
"""

from wrtfd.zddsrec.format import (
    Frame,
    Header,
    Limits,
    ParticipantEntry,
    SampleKind,
    StreamDecoder,
    TopicEntry,
    ZddsrecError,
    ZddsrecReader,
    ZddsrecWriter,
    encode_frame,
    encode_header,
)

__all__ = [
    "Frame",
    "Header",
    "Limits",
    "ParticipantEntry",
    "SampleKind",
    "StreamDecoder",
    "TopicEntry",
    "ZddsrecError",
    "ZddsrecReader",
    "ZddsrecWriter",
    "encode_frame",
    "encode_header",
]
