"""A minimal OpenAI-compatible chat-completions client with bounded retries.

``POST {base_url}/chat/completions`` with ``{"model", "messages", ...sampling}``;
works with OpenAI, vLLM, llama.cpp server, Ollama (``/v1``) and any endpoint
speaking the same protocol. Retries 408, 429 and 5xx responses and transport
errors with exponential backoff and jitter
(``min(backoff_max, backoff_base * 2**(k-1)) * U(0.5, 1.5)``, at least the
server's ``Retry-After``), at most ``max_attempts`` attempts; then the outcome
is ``failed``. Other 4xx responses fail at once; 401/403/404 raise
:class:`EndpointError` because every request would fail the same way.
The API key only goes into the ``Authorization`` header, as the bearer token: a ``user:password@``
in ``--base-url`` is stripped from the URL with a warning (httpx would send it as Basic auth in place of
the key, so the key would never be sent); every error text (a server's body,
an exception) is passed through :func:`mrcstats.query.redact.redact` first, so neither the key nor
credentials inside ``--base-url`` reach the log or stderr.
"""
from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field
from typing import Any, Self

from mrcstats.errors import InputError

RETRY_STATUS = frozenset({408, 409, 425, 429}) | frozenset(range(500, 600))
FATAL_STATUS = frozenset({401, 403, 404})


class EndpointError(InputError):
    """The endpoint refuses every request (bad URL, key or model name)."""


@dataclass(frozen=True)
class Outcome:
    """The result of one prompt: ``ok`` with the response text, or ``failed`` with the last error."""

    status: str
    attempts: int
    response: str | None = None
    error: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    finish_reason: str | None = None
    response_model: str | None = None


def completions_url(base_url: str) -> str:
    """``http://host:8000/v1`` -> ``http://host:8000/v1/chat/completions`` (a full URL is kept)."""
    from urllib.parse import urlsplit, urlunsplit

    from mrcstats.query.redact import redact, url_secrets

    url = base_url.strip().rstrip("/")
    how = "give e.g. http://127.0.0.1:8000/v1 or https://api.openai.com/v1"
    shown = redact(base_url, url_secrets(base_url))
    if not url.startswith(("http://", "https://")):
        raise InputError(f"--base-url {shown!r} must start with http:// or https://; {how}")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError as exc:
        raise InputError(f"--base-url {shown!r} is not a valid URL ({redact(exc)}); {how}") from None
    if not parts.hostname or any(c.isspace() for c in url):
        raise InputError(f"--base-url {shown!r} has no host or contains spaces; {how}")
    if "@" in parts.netloc:   # user:password@ would be sent as Basic auth in place of the key: never sent
        url = urlunsplit((parts.scheme, parts.netloc.rsplit("@", 1)[1], parts.path, parts.query, parts.fragment))
    return url if url.endswith("/chat/completions") else url + "/chat/completions"


def url_credentials(base_url: str) -> bool:
    """True when ``base_url`` holds ``user:password@`` (which :func:`completions_url` strips)."""
    from urllib.parse import urlsplit

    try:
        return "@" in urlsplit(base_url.strip()).netloc
    except ValueError:
        return False


class ChatClient:
    """Thread-safe client; one :class:`httpx.Client` shared by all worker threads."""

    def __init__(self, base_url: str, api_key: str | None = None, *, timeout: float = 120.0,
                 max_attempts: int = 6, backoff_base: float = 1.0, backoff_max: float = 60.0,
                 stop: threading.Event | None = None) -> None:
        import httpx

        if max_attempts < 1:
            raise InputError(f"--max-attempts must be at least 1, got {max_attempts}")
        from mrcstats.query.redact import redact, url_secrets

        self.url = completions_url(base_url)
        if url_credentials(base_url):
            import warnings

            warnings.warn("the user:password@ in --base-url is not sent (it would replace the API key with Basic "
                          "auth); the API key goes as the bearer token: remove the credentials from the URL",
                          UserWarning, stacklevel=2)
        #: the key and URL credentials: redacted from every error text this client produces
        self.secrets = [s for s in (api_key, *url_secrets(base_url)) if s]
        self._redact = lambda text: redact(text, self.secrets)
        #: the URL as shown in messages (credentials redacted)
        self.shown_url = self._redact(self.url)
        headers = {"Content-Type": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._httpx = httpx
        self._client = httpx.Client(headers=headers, timeout=timeout)
        self.max_attempts = max_attempts
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.stop = stop or threading.Event()

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        d = min(self.backoff_max, self.backoff_base * 2 ** (attempt - 1)) * (0.5 + random.random())
        if retry_after is not None:
            d = max(d, min(retry_after, self.backoff_max))
        return d

    def complete(self, payload: dict[str, Any]) -> Outcome:
        """Send one request (with retries) and return its :class:`Outcome`."""
        httpx = self._httpx
        error = "not sent"
        attempt = 0
        for attempt in range(1, self.max_attempts + 1):
            retry_after = None
            try:
                r = self._client.post(self.url, json=payload)
            except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:
                raise EndpointError(self._redact(f"cannot send to {self.shown_url}: {exc}; check --base-url")) \
                    from None
            except httpx.TransportError as exc:  # connection refused/reset, timeouts
                error = self._redact(f"{type(exc).__name__}: {exc}")
            else:
                if r.status_code == 200:
                    out = _parse(r, attempt)
                    if out is not None:
                        return out
                    error = self._redact(f"HTTP 200 with a body that is not a chat completion: {r.text[:200]!r}")
                elif r.status_code in FATAL_STATUS:
                    raise EndpointError(self._redact(f"{self.shown_url} answered HTTP {r.status_code} ({_brief(r)}); "
                                                     f"check --base-url, --model and --api-key-env"))
                elif r.status_code in RETRY_STATUS:
                    error = self._redact(f"HTTP {r.status_code}: {_brief(r)}")
                    retry_after = _retry_after(r)
                else:
                    return Outcome("failed", attempt, error=self._redact(f"HTTP {r.status_code}: {_brief(r)}"))
            if attempt < self.max_attempts and self.stop.wait(self._delay(attempt, retry_after)):
                break
        return Outcome("failed", attempt, error=error)


def _brief(r: Any) -> str:
    try:
        body = r.json()
        msg = body.get("error", body) if isinstance(body, dict) else body
        if isinstance(msg, dict):
            msg = msg.get("message", msg)
        return str(msg)[:200]
    except ValueError:  # not JSON
        return r.text[:200]


def _retry_after(r: Any) -> float | None:
    try:
        return float(r.headers.get("retry-after"))
    except (TypeError, ValueError):
        return None


def _parse(r: Any, attempt: int) -> Outcome | None:
    try:
        body = r.json()
        choice = body["choices"][0]
        content = choice["message"].get("content")
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        return None
    usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
    return Outcome("ok", attempt, response=content if content is not None else "",
                   usage={k: usage.get(k) for k in ("prompt_tokens", "completion_tokens", "total_tokens")},
                   finish_reason=choice.get("finish_reason"), response_model=body.get("model"))
