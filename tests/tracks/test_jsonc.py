"""The comment-stripping JSON parser: every comment style, strings that look like comments, errors."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wrtfd.errors import TrackError
from wrtfd.tracks import jsonc


def test_block_line_and_inline_comments() -> None:
    text = '/* head\n * more */\n{ // line\n "a" : [1, /* one */ 2], /* x */ "b": "c" }\n// tail'
    assert jsonc.loads(text) == {"a": [1, 2], "b": "c"}


def test_comment_markers_inside_strings_are_text() -> None:
    text = '{"url": "http://x/*y*/", "q": "say \\"//\\" twice"} // end'
    assert jsonc.loads(text) == {"url": "http://x/*y*/", "q": 'say "//" twice'}


def test_stripping_keeps_lines_and_columns() -> None:
    text = '/* a\n b */ {"k":\n 1}'
    stripped = jsonc.strip_comments(text)
    assert len(stripped) == len(text)
    assert stripped.count("\n") == text.count("\n")
    assert stripped.endswith('{"k":\n 1}')


def test_error_line_is_the_original_line() -> None:
    text = '/* one\n two\n three */\n{\n  "a": 1,\n  "b": ,\n}'
    with pytest.raises(TrackError, match=r"line 6 column"):
        jsonc.loads(text)


def test_unclosed_block_comment() -> None:
    with pytest.raises(TrackError, match=r"line 2 column 3: block comment '/\*' is never closed"):
        jsonc.loads('{"a": 1}\n  /* open')


@pytest.mark.parametrize("text", ['{"a": 1, "a": 2}', '{"a": NaN}', '{"a": Infinity}', "[" * 100_000])
def test_rejected_documents(text: str) -> None:
    with pytest.raises(TrackError):
        jsonc.loads(text)


def test_size_limit() -> None:
    with pytest.raises(TrackError, match="limit"):
        jsonc.loads(" " * (jsonc.MAX_TEXT_CHARS + 1))


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**9), 10**9) | st.text(max_size=12),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=20,
)
_comment_text = st.text(
    alphabet=st.characters(blacklist_characters="\n*", blacklist_categories=["Cs"]), max_size=15
)


@given(doc=_json, comments=st.lists(st.tuples(st.booleans(), _comment_text), min_size=1, max_size=40))
def test_commented_documents_parse_like_plain_json(doc: object, comments: list[tuple[bool, str]]) -> None:
    lines = json.dumps(doc, indent=1).split("\n")
    out = []
    for i, line in enumerate(lines):
        block, words = comments[i % len(comments)]
        # a block comment before the line, or a line comment after it (both with hostile content)
        out.append(f'/* {words} "// */{line}' if block else f'{line} // {words} /* "')
    assert jsonc.loads("\n".join(out)) == doc
