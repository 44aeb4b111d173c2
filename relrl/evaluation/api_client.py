"""A small client for OpenAI-compatible chat-completions endpoints (OpenRouter by default).

Remote calls cost money and fail: every request has a bounded time, transient failures (429,
5xx, timeouts, dropped connections, garbled bodies) are retried with exponential backoff and
jitter, a server's Retry-After is honoured and pauses every worker, and token counts and cost
come from the response's `usage`. Errors that no retry can fix (missing or rejected key, unknown
model, no credits) are `FatalAPIError`, a `UsageError`, so scripts stop with exit status 2.

The API key is read from the environment only. It is sent in one header and never stored in a
result, a log line or an exception message: server text is redacted before it is shown.
"""
from __future__ import annotations

import email.utils
import ipaddress
import json
import os
import random
import re
import sys
import threading
import time
from dataclasses import dataclass
from typing import Callable
from urllib.parse import urlparse

import requests
import urllib3
from tqdm import tqdm

from relrl.runtime.cli import UsageError, env_default, number_type, positive_int
from relrl.untrusted import UntrustedInputError, loads_json

DEFAULT_BASE_URL = "https://openrouter.ai/api/v1"
DEFAULT_KEY_ENV = "OPENROUTER_API_KEY"
MAX_REPLY_BYTES = 16 * 1024 * 1024  # a chat completion is kilobytes; a bigger body is refused
NO_KEY = "none"  # --api-key-env none: a local server that wants no key
RETRY_STATUSES = {408, 409, 425, 429}  # plus every 5xx
REDACTED = "[REDACTED]"


def log(message: str) -> None:
    """One plain line on stderr that does not break a tqdm bar."""
    tqdm.write(message, file=sys.stderr)


class APIError(Exception):
    """A request that failed for this item; retrying the run later may succeed."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class FatalAPIError(APIError, UsageError):
    """No request can succeed (key, model, credits): stop the run, exit status 2."""


class MalformedResponse(APIError):
    """The server answered 200 with a body that is not a chat completion."""


class _Retryable(Exception):
    """Internal: one attempt failed in a way worth retrying."""

    def __init__(self, message: str, retry_after: float | None = None, status: int | None = None):
        super().__init__(message)
        self.retry_after = retry_after
        self.status = status


@dataclass
class ChatResult:
    text: str
    finish_reason: str | None
    model: str
    prompt_tokens: int
    completion_tokens: int
    reasoning_tokens: int
    cost_usd: float | None
    attempts: int
    seconds: float

    @property
    def truncated(self) -> bool:
        return self.finish_reason == "length"

    def usage(self) -> dict:
        """What a progress record keeps, so spending is known across restarts."""
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "reasoning_tokens": self.reasoning_tokens,
            "cost_usd": self.cost_usd,
            "attempts": self.attempts,
        }


class UsageTotals:
    """Thread-safe running totals of requests, tokens and cost."""

    def __init__(self):
        self._lock = threading.Lock()
        self.requests = 0  # HTTP attempts, failed ones included
        self.calls = 0  # successful completions
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.cost_usd = 0.0
        self.cost_unknown = 0  # calls whose cost neither the server nor a price told us

    def count_request(self) -> None:
        with self._lock:
            self.requests += 1

    def add(self, usage: dict) -> None:
        with self._lock:
            self.calls += 1
            self.prompt_tokens += int(usage.get("prompt_tokens") or 0)
            self.completion_tokens += int(usage.get("completion_tokens") or 0)
            if usage.get("cost_usd") is None:
                self.cost_unknown += 1
            else:
                self.cost_usd += float(usage["cost_usd"])

    def as_dict(self) -> dict:
        return {
            "requests": self.requests,
            "calls": self.calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost_usd": round(self.cost_usd, 6),
            "calls_without_cost": self.cost_unknown,
        }

    def line(self) -> str:
        cost = f"${self.cost_usd:.4f}"
        if self.cost_unknown:
            cost += f" (+ {self.cost_unknown} calls of unknown cost)"
        return (f"{self.calls} completions in {self.requests} requests, "
                f"{self.prompt_tokens:,} prompt + {self.completion_tokens:,} completion tokens, "
                f"cost {cost}")


def read_api_key(env_name: str) -> str | None:
    """The key from environment variable `env_name` (None for `none`), or a FatalAPIError."""
    if env_name.lower() == NO_KEY:
        return None
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", env_name):
        # Never echo it: a key pasted here by mistake would land in the log.
        raise UsageError("--api-key-env takes the NAME of an environment variable holding the "
                         "key (for example OPENROUTER_API_KEY), not the key itself")
    key = os.environ.get(env_name, "").strip()
    if not key:
        raise FatalAPIError(f"environment variable {env_name} is not set: export your API key "
                            f"there (keys are read from the environment only)")
    return key


def backoff_delay(retry: int, base: float, max_wait: float, rng: random.Random) -> float:
    """Wait before retry number `retry` (0-based): base * 2**retry capped at max_wait, times a
    jitter in [0.5, 1) so that workers hit by the same failure do not return in step."""
    return min(max_wait, base * 2 ** retry) * (0.5 + 0.5 * rng.random())


def parse_retry_after(value: str | None, now: Callable[[], float] = time.time) -> float | None:
    """Seconds from a Retry-After header (seconds or an HTTP date), None when absent or bad;
    `now` is the wall clock an HTTP date is measured from (tests pass a fixed one)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - now())


def _is_loopback(host: str | None) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host or "").is_loopback
    except ValueError:
        return False


class ChatClient:
    """Chat completions for one model. Safe to call from several threads at once."""

    def __init__(self, model: str, *, base_url: str = DEFAULT_BASE_URL,
                 key_env: str = DEFAULT_KEY_ENV, timeout: float = 180.0,
                 connect_timeout: float = 10.0, max_retries: int = 5, backoff: float = 2.0,
                 max_wait: float = 120.0, extra_body: dict | None = None,
                 price_in: float | None = None, price_out: float | None = None,
                 workers: int = 4, seed: int = 0,
                 sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic):
        parsed = urlparse(base_url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise UsageError(f"--base-url: expected http(s)://host/path, got {base_url!r}")
        self.model = model
        self.base_url = base_url.rstrip("/")
        self._key = read_api_key(key_env)
        if self._key and parsed.scheme == "http" and not _is_loopback(parsed.hostname):
            log(f"warning: the API key goes to {parsed.hostname} over plain http (unencrypted)")
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_wait = max_wait
        self.extra_body = dict(extra_body or {})
        self.price_in, self.price_out = price_in, price_out
        self.totals = UsageTotals()
        self._rng = random.Random(seed)
        # every wait and deadline goes through these, so tests can run them on a fake clock
        self._sleep, self._clock = sleep, clock
        self._pause_lock = threading.Lock()
        self._not_before = 0.0  # a Retry-After pauses every worker, not just the one told
        self._session = requests.Session()
        adapter = requests.adapters.HTTPAdapter(pool_maxsize=max(1, workers))
        self._session.mount("http://", adapter)
        self._session.mount("https://", adapter)

    def __repr__(self) -> str:
        return f"ChatClient(model={self.model!r}, base_url={self.base_url!r})"

    def redact(self, text: str) -> str:
        return text.replace(self._key, REDACTED) if self._key else text

    # -- one call -------------------------------------------------------------------------------
    def chat(self, messages: list[dict], **params) -> ChatResult:
        """One completion. Params left None are not sent (the provider's default applies)."""
        body = {"model": self.model, "messages": messages}
        body.update({k: v for k, v in params.items() if v is not None})
        body.update(self.extra_body)
        start = self._clock()
        attempt = 0
        while True:
            self._wait_for_pause()
            try:
                data = self._attempt(body)
                return self._result(data, attempt + 1, self._clock() - start)
            except _Retryable as exc:
                if attempt == self.max_retries:
                    kind = MalformedResponse if exc.status == 200 else APIError
                    raise kind(f"{self.model}: gave up after {attempt + 1} attempts: {exc}",
                               status=exc.status) from None
                delay = self._delay(attempt, exc.retry_after)
                log(f"{self.model}: {exc}; retry {attempt + 1}/{self.max_retries} "
                    f"in {delay:.2f} s")
                self._sleep(delay)
                attempt += 1

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is None:
            return backoff_delay(attempt, self.backoff, self.max_wait, self._rng)
        if retry_after > self.max_wait:
            raise APIError(f"{self.model}: the server asks to wait {retry_after:.0f} s "
                           f"(more than --max-wait {self.max_wait:g} s); rerun later", 429)
        with self._pause_lock:
            self._not_before = max(self._not_before, self._clock() + retry_after)
        return retry_after

    def _wait_for_pause(self) -> None:
        with self._pause_lock:
            remaining = self._not_before - self._clock()
        if remaining > 0:
            self._sleep(remaining)

    def _attempt(self, body: dict) -> dict:
        """One HTTP request: the decoded body, or _Retryable / APIError."""
        url = f"{self.base_url}/chat/completions"
        headers = {"Content-Type": "application/json"}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        self.totals.count_request()
        deadline = self._clock() + self.timeout
        try:
            response = self._session.post(url, json=body, headers=headers, stream=True,
                                          timeout=(self.connect_timeout, self.timeout))
            try:
                chunks = []
                # The read timeout bounds each socket read; the deadline bounds the whole body,
                # so a server trickling bytes cannot hold a worker forever. read1 returns
                # whatever has arrived instead of waiting for a full buffer.
                size = 0
                while chunk := response.raw.read1(65536, decode_content=True):
                    chunks.append(chunk)
                    size += len(chunk)
                    if size > MAX_REPLY_BYTES:
                        raise _Retryable(f"a reply of more than {MAX_REPLY_BYTES} bytes",
                                         status=200)
                    if self._clock() > deadline:
                        raise _Retryable(f"no complete answer within {self.timeout:g} s")
                raw = b"".join(chunks)
            finally:
                response.close()
        except (requests.Timeout, urllib3.exceptions.TimeoutError):
            raise _Retryable(f"no complete answer within {self.timeout:g} s") from None
        except (requests.ConnectionError, requests.exceptions.ChunkedEncodingError,
                urllib3.exceptions.HTTPError) as exc:
            # Refused, reset, or closed half way through the body.
            raise _Retryable(f"connection to {self.base_url} failed ({type(exc).__name__})"
                             ) from None
        except requests.RequestException as exc:
            raise APIError(f"{self.model}: request failed ({type(exc).__name__})") from None
        status = response.status_code
        text = raw.decode("utf-8", "replace")
        if status != 200:
            self._raise_for_status(status, text, response.headers.get("Retry-After"))
        try:  # relrl.untrusted: nesting, integer length and NaN bounded, as for any input
            data = loads_json(text, self._request_name())
        except UntrustedInputError as exc:
            raise _Retryable(f"{exc.problem} in a 200 response ({len(raw)} bytes)",
                             status=200) from None
        if not isinstance(data, dict):
            raise _Retryable("malformed response (not a JSON object)", status=200)
        error = data.get("error")
        if error and not data.get("choices"):
            # Gateways such as OpenRouter report some upstream failures in a 200 body.
            code = error.get("code") if isinstance(error, dict) else None
            self._raise_for_status(code if isinstance(code, int) else 502, json.dumps(error),
                                   None)
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise _Retryable("response without choices", status=200)
        return data

    def _request_name(self) -> str:
        return f"reply of {self.model} to {self.base_url}/chat/completions"

    def _raise_for_status(self, status: int, text: str, retry_after: str | None):
        message = self._server_message(text)
        if status in RETRY_STATUSES or status >= 500:
            raise _Retryable(f"HTTP {status}{message}", parse_retry_after(retry_after), status)
        if status in (401, 403):
            # The body is not shown: servers often echo part of the key they rejected.
            raise FatalAPIError(f"HTTP {status} from {self.base_url}: the API key was rejected "
                                f"or lacks access to {self.model!r}", status)
        if status == 402:
            raise FatalAPIError(f"HTTP 402 from {self.base_url}: out of credits{message}", status)
        if status == 404 or (status == 400 and re.search(
                r"model.*(not a valid|not found|does not exist)", message, re.I | re.S)):
            raise FatalAPIError(f"HTTP {status}: unknown model {self.model!r} at "
                                f"{self.base_url} (or a wrong --base-url){message}", status)
        raise APIError(f"{self.model}: HTTP {status}{message}", status)

    def _server_message(self, text: str) -> str:
        """': <the server's reason>' from an error body, redacted and short."""
        try:
            data = loads_json(text, self._request_name())
            error = data.get("error", data) if isinstance(data, dict) else data
            text = error.get("message", text) if isinstance(error, dict) else str(error)
        except (UntrustedInputError, AttributeError):
            pass
        text = " ".join(self.redact(str(text)).split())[:300]
        return f": {text}" if text else ""

    def _result(self, data: dict, attempts: int, seconds: float) -> ChatResult:
        choices = data["choices"]
        message = choices[0].get("message") or {}
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):  # some providers return content parts
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        prompt_tokens = _count(usage.get("prompt_tokens"))
        completion_tokens = _count(usage.get("completion_tokens"))
        details = usage.get("completion_tokens_details")
        cost = usage.get("cost")
        if not _is_number(cost):
            cost = None
            if self.price_in is not None and self.price_out is not None and usage:
                cost = (prompt_tokens * self.price_in + completion_tokens * self.price_out) / 1e6
        result = ChatResult(
            text=content if isinstance(content, str) else "",
            finish_reason=choices[0].get("finish_reason"),
            model=str(data.get("model") or self.model),
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            reasoning_tokens=_count(details.get("reasoning_tokens"))
            if isinstance(details, dict) else 0,
            cost_usd=None if cost is None else float(cost),
            attempts=attempts,
            seconds=round(seconds, 3),
        )
        self.totals.add(result.usage())
        return result


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _count(value) -> int:
    """A token count from a usage field; anything else (missing, garbled) counts as 0."""
    return int(value) if _is_number(value) and value >= 0 else 0


# -- command line -------------------------------------------------------------------------------
def add_api_arguments(parser, *, workers: int = 4, note: str | None = None) -> None:
    """The flags every API script shares."""
    group = parser.add_argument_group("API", note)
    group.add_argument("--base-url", default=env_default("API_BASE_URL", DEFAULT_BASE_URL),
                       help="OpenAI-compatible endpoint (env API_BASE_URL; default %(default)s)")
    group.add_argument("--api-key-env", default=DEFAULT_KEY_ENV, metavar="NAME",
                       help="environment variable holding the key, or 'none' for a server "
                            "without one (default %(default)s)")
    group.add_argument("--workers", type=positive_int("--workers"), default=workers,
                       help="concurrent requests (default %(default)s)")
    group.add_argument("--timeout", type=_positive_float("--timeout"), default=180.0,
                       help="seconds allowed for one request (default %(default)s)")
    group.add_argument("--max-retries", type=_non_negative_int("--max-retries"), default=5,
                       help="retries on 429/5xx/timeouts (default %(default)s)")
    group.add_argument("--backoff", type=_positive_float("--backoff"), default=2.0,
                       help="first backoff wait in seconds, doubled each retry "
                            "(default %(default)s)")
    group.add_argument("--max-wait", type=_positive_float("--max-wait"), default=120.0,
                       help="longest single wait, Retry-After included (default %(default)s)")
    group.add_argument("--extra-body", type=_json_object, default={}, metavar="JSON",
                       help="JSON object merged into every request body, e.g. "
                            "'{\"reasoning\": {\"effort\": \"high\"}}'")
    group.add_argument("--price-in", type=_non_negative_float("--price-in"), default=None,
                       metavar="USD", help="USD per million prompt tokens, for cost when the "
                                           "server reports none")
    group.add_argument("--price-out", type=_non_negative_float("--price-out"), default=None,
                       metavar="USD", help="USD per million completion tokens")
    group.add_argument("--max-cost", type=_non_negative_float("--max-cost"), default=None,
                       metavar="USD", help="stop sending once this run has spent this much")


def client_from_args(args, model: str) -> ChatClient:
    if (args.price_in is None) != (args.price_out is None):
        raise UsageError("--price-in and --price-out go together")
    return ChatClient(model, base_url=args.base_url, key_env=args.api_key_env,
                      timeout=args.timeout, max_retries=args.max_retries, backoff=args.backoff,
                      max_wait=args.max_wait, extra_body=args.extra_body,
                      price_in=args.price_in, price_out=args.price_out, workers=args.workers)


def over_budget(args, *clients: ChatClient) -> bool:
    """True once this run's known spending reaches --max-cost."""
    if args.max_cost is None:
        return False
    return sum(c.totals.cost_usd for c in clients) >= args.max_cost


def _positive_float(flag: str):
    return number_type(flag, float, "> 0")  # finite: --timeout inf would wait for ever


def _non_negative_float(flag: str):
    return number_type(flag, float, ">= 0")


def _non_negative_int(flag: str):
    return number_type(flag, int, ">= 0")


def _json_object(text: str) -> dict:
    import argparse

    try:
        value = loads_json(text, "--extra-body")
    except UntrustedInputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("--extra-body must be a JSON object")
    return value
