"""The streamed reply cut into sentences to speak (llamachat/voice/sentences.py)."""

from __future__ import annotations

import pytest

from llamachat.voice.sentences import CODE_BLOCK, SentenceSplitter, spoken

REPLY = """# Paris
Hello **world**! The value is 3.5 today. Dr. Smith said e.g. this works.
1. First item
2. Second [link](http://x.y) and `code` too
```python
print("not read")
```
Done? Yes… really. Visit https://example.com now.
| a | b |
|---|---|
Last bit without a stop"""

SENTENCES = [
    "Paris",
    "Hello world!",
    "The value is 3.5 today.",
    "Dr. Smith said e.g. this works.",
    "First item",
    "Second link and code too",
    CODE_BLOCK,
    "Done?",
    "Yes…",
    "really.",
    "Visit a link now.",
    "a, b",
    "Last bit without a stop",
]


def split(text: str, size: int) -> list[str]:
    splitter = SentenceSplitter()
    out: list[str] = []
    for start in range(0, len(text), size):
        out += splitter.feed(text[start : start + size])
    return out + splitter.finish()


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 64, 10_000])
def test_sentences_are_the_same_whatever_the_deltas(size: int) -> None:
    assert split(REPLY, size) == SENTENCES


def test_a_sentence_comes_as_soon_as_the_character_after_its_stop_does() -> None:
    splitter = SentenceSplitter()
    assert splitter.feed("The first one is here.") == []
    assert splitter.feed(" The sec") == ["The first one is here."]
    assert splitter.feed("ond!\n") == ["The second!"]


def test_a_number_dot_or_abbreviation_at_a_delta_end_waits() -> None:
    splitter = SentenceSplitter()
    assert splitter.feed("It costs 3.") == []
    assert splitter.feed("50 euros, see Mr. ") == []
    assert splitter.feed("Brown. Then") == ["It costs 3.50 euros, see Mr. Brown."]


def test_code_is_never_read_only_announced() -> None:
    text = "Run this:\n```\nrm -rf / # not read\n```\nThat is all.\n"
    assert split(text, 4) == ["Run this:", CODE_BLOCK, "That is all."]


def test_markdown_marks_links_and_rules_are_not_read() -> None:
    assert spoken("> **Note:** see [the docs](https://x.org/a).") == "Note: see the docs."
    assert spoken("---") == ""
    assert spoken("### Install it") == "Install it"
    assert spoken("- **Bold** item") == "Bold item"
