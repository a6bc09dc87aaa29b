"""Redaction of secrets in text that reaches the log or stderr (server error bodies, URLs).

An endpoint may echo the request (including the ``Authorization`` header) in its error
body, and a user may put credentials in ``--base-url`` (``https://user:key@host/v1`` or
``?api_key=...``). :func:`redact` replaces, in any text:

* every given secret (the API key) wherever it occurs;
* ``Bearer <token>`` / ``Basic <token>`` values and ``Authorization:`` header values;
* the user-info part of URLs (``scheme://user:pass@host`` -> ``scheme://***@host``);
* values of query parameters and JSON/header fields named like a credential
  (``api_key``, ``apikey``, ``key``, ``token``, ``access_token``, ``secret``, ``password``,
  ``x-api-key``, ``api-key``);
* strings shaped like provider keys (``sk-...``, ``sk-ant-...``, ``hf_...``, ``AIza...``,
  ``ghp_...``/``github_pat_...``, ``xoxb-...``).

Redacted parts become ``***``. The rules are deliberately broad: a redacted error message
loses a little detail, a leaked key cannot be taken back.
"""
from __future__ import annotations

import re
from collections.abc import Iterable

MASK = "***"

_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^/\s@'\"<>]+@")
_AUTH_SCHEME = re.compile(r"(?i)\b(bearer|basic|token)(\s+)[A-Za-z0-9._~+/=\-]{4,}")
_AUTH_HEADER = re.compile(r"(?i)\b(authorization|proxy-authorization)(['\"]?\s*[:=]\s*['\"]?)([^'\"\r\n,}]+)")
_CRED_NAMES = r"api[_-]?key|apikey|x-api-key|access[_-]?token|refresh[_-]?token|token|secret|password|passwd|key"
_QUERY_PARAM = re.compile(rf"(?i)([?&;](?:{_CRED_NAMES})=)[^&#\s'\"<>]+")
_FIELD = re.compile(rf"(?i)(['\"]?\b(?:{_CRED_NAMES})\b['\"]?\s*[:=]\s*['\"]?)([^'\"\s,;&}}]{{4,}})")
_KEY_SHAPES = re.compile(r"\b(?:sk-(?:ant-|proj-)?[A-Za-z0-9_\-]{8,}|hf_[A-Za-z0-9]{8,}|AIza[0-9A-Za-z_\-]{20,}"
                         r"|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|xox[abposr]-[A-Za-z0-9\-]{8,})")


def redact(text: object, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with the API key(s) in ``secrets`` and anything credential-shaped replaced by ``***``."""
    s = "" if text is None else str(text)
    for sec in sorted({x for x in secrets if x and len(x) >= 4}, key=len, reverse=True):
        s = s.replace(sec, MASK)
    s = _URL_USERINFO.sub(lambda m: f"{m.group(1)}{MASK}@", s)
    s = _AUTH_HEADER.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", s)
    s = _AUTH_SCHEME.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", s)
    s = _QUERY_PARAM.sub(lambda m: f"{m.group(1)}{MASK}", s)
    s = _FIELD.sub(lambda m: f"{m.group(1)}{MASK}" if m.group(2) != MASK else m.group(0), s)
    s = _KEY_SHAPES.sub(MASK, s)
    return s


def url_secrets(url: str) -> list[str]:
    """The credentials inside a URL: its user-info (``user:pass``) and credential-named query values."""
    from urllib.parse import parse_qsl, urlsplit

    out: list[str] = []
    try:
        parts = urlsplit(url)
    except ValueError:
        return out
    if parts.username:
        out.append(parts.username)
    if parts.password:
        out.append(parts.password)
    for k, v in parse_qsl(parts.query, keep_blank_values=False):
        if re.fullmatch(_CRED_NAMES, k, flags=re.IGNORECASE):
            out.append(v)
    return [x for x in out if len(x) >= 4]
