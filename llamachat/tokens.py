"""The one estimate of tokens from characters, for text no server has counted.

`context.Tokenizer` refines the ratio once the server has counted enough text; the
meter's draft, MCP tool schemas, skill chips and the skills catalog's budget use it
as it is. Qt-free and import-free, so every layer can use it without a cycle.
"""

TOKENS_PER_CHAR = 0.3
"""Tokens per character: generous for English prose and code, so an estimate warns a
little early rather than too late."""


def estimate_tokens(text: str) -> int:
    """A token estimate for `text` from its length alone."""
    return round(len(text) * TOKENS_PER_CHAR)


def chars_for_tokens(tokens: float) -> int:
    """The characters that fit in `tokens` tokens at the same estimate."""
    return int(tokens / TOKENS_PER_CHAR)
