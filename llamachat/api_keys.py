"""API keys: hiding them in any text shown or written, and refusing those no header can carry.

A key only ever travels in an Authorization header. `mask_secret` hides it, or any
SECRET_FRAGMENT-character piece of it, in any quoting, from a text received from a server
(an error message, a log line); `key_problem` names a key that a header cannot carry
(non-ASCII, control characters) so a request fails with a sentence instead of with the key
quoted in an HTTP library's error.
"""

from __future__ import annotations

import json
import urllib.parse

# The shortest piece of a secret that is masked on its own: a server that cuts a key
# short, or wraps it over two lines, still must not show most of it.
SECRET_FRAGMENT = 8


def _quotings(secret: str) -> set[str]:
    """`secret` as it may appear in a message: raw, JSON-, repr- and URL-quoted."""
    forms = {
        secret,
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
        repr(secret)[1:-1],
        repr(secret.encode("utf-8", "backslashreplace"))[2:-1],
        urllib.parse.quote(secret, safe=""),
    }
    return {form for form in forms if form}


def mask_secret(text: str, secret: str | None) -> str:
    """`text` with `secret`, and every piece of it SECRET_FRAGMENT+ characters long, as ***."""
    if not secret or not text:
        return text
    for form in sorted(_quotings(secret), key=len, reverse=True):
        if len(form) < SECRET_FRAGMENT:
            text = text.replace(form, "***")
            continue
        grams = {form[i : i + SECRET_FRAGMENT] for i in range(len(form) - SECRET_FRAGMENT + 1)}
        parts: list[str] = []
        start = i = 0
        while i <= len(text) - SECRET_FRAGMENT:
            if text[i : i + SECRET_FRAGMENT] not in grams:
                i += 1
                continue
            end = i + SECRET_FRAGMENT
            while end < len(text) and text[i : end + 1] in form:
                end += 1
            parts += [text[start:i], "***"]
            start = i = end
        text = "".join(parts) + text[start:]
    return text


def key_problem(key: str | None, variable: str = "") -> str:
    """Why `key` cannot go in an Authorization header ("" when it can), naming `variable`."""
    if not key:
        return ""
    if not key.isascii():
        what = "a character that is not ASCII"
    elif any(ord(c) < 0x20 or ord(c) == 0x7F for c in key):
        what = "a control character (a line break, tab or similar)"
    else:
        return ""
    where = f"the environment variable {variable}" if variable else "the configured API key"
    return (
        f"The API key in {where} cannot be sent: it contains {what}. "
        f"Set {variable or 'it'} to the key alone."
    )
