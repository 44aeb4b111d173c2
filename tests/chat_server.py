"""A real chat-completions HTTP server on 127.0.0.1 for the API tests (standard library only).

Each request takes the next scripted action from a queue, or answers normally when the queue is
empty. Actions:
  "ok"                                  a normal completion (text from `responder`)
  {"status": 429, "retry_after": "0.2"}  any status with an error body (and Retry-After)
  {"hang": True}                        hold the request, sending nothing, until the test ends
  {"stall": True}                       send the headers and a few bytes, then hold
  {"drop": True}                        close the connection half way through the body
  {"trickle": 0.05}                     send the body one byte per interval
  {"malformed": True}                   200 with a body that is not JSON
  {"inband": 502}                       200 whose body is an error object (as gateways do)
  {"json": {...}}                       200 with exactly this body
The server also enforces a key (401, echoing the key it got, as careless servers do) and a set
of known models (404 otherwise), records every request with its arrival time, and tracks how
many were in flight at once.
"""
from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable


@dataclass
class Seen:
    time: float  # time.monotonic() on arrival
    path: str
    authorization: str | None
    body: dict | None
    action: object

    @property
    def model(self):
        return (self.body or {}).get("model")

    @property
    def user_text(self) -> str:
        messages = (self.body or {}).get("messages") or []
        return "\n".join(m.get("content", "") for m in messages if m.get("role") == "user")


def default_responder(body: dict):
    return "The answer is \\boxed{42}"


class ChatServer:
    def __init__(self, *, key: str | None = None, models: set[str] | None = None,
                 responder: Callable[[dict], object] = default_responder,
                 cost_per_call: float | None = 0.001, report_usage: bool = True,
                 finish_reason: str = "stop"):
        self.key = key
        self.models = models
        self.responder = responder
        self.cost_per_call = cost_per_call
        self.report_usage = report_usage
        self.finish_reason = finish_reason
        self.seen: list[Seen] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.release = threading.Event()  # ends every hang
        self.hanging = threading.Event()  # set while a request is being held
        self._script: deque = deque()
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.02,),
                                        daemon=True)  # a short poll makes shutdown quick

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    @property
    def count(self) -> int:
        return len(self.seen)

    def script(self, *actions) -> None:
        with self._lock:
            self._script.extend(actions)

    def gaps(self) -> list[float]:
        """Seconds between consecutive request arrivals."""
        times = [s.time for s in self.seen]
        return [b - a for a, b in zip(times, times[1:])]

    def __enter__(self) -> "ChatServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.release.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    # -- called by the handler ----------------------------------------------------------------
    def _next_action(self, record: Seen):
        with self._lock:
            self.seen.append(record)
            return self._script.popleft() if self._script else "ok"

    def _enter(self) -> None:
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def _leave(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def completion(self, body: dict) -> dict:
        reply = self.responder(body)  # a string, or {"text": ..., "finish_reason": ...}
        text = reply["text"] if isinstance(reply, dict) else reply
        finish = reply.get("finish_reason", self.finish_reason) if isinstance(reply, dict) \
            else self.finish_reason
        prompt_words = sum(len(str(m.get("content", "")).split()) for m in body["messages"])
        usage = {"prompt_tokens": prompt_words, "completion_tokens": len(text.split()),
                 "total_tokens": prompt_words + len(text.split())}
        if self.cost_per_call is not None:
            usage["cost"] = self.cost_per_call
        reply = {"id": "chatcmpl-test", "object": "chat.completion", "model": body["model"],
                 "choices": [{"index": 0, "finish_reason": finish,
                              "message": {"role": "assistant", "content": text}}]}
        if self.report_usage:
            reply["usage"] = usage
        return reply


def _error(message: str, code: int) -> dict:
    return {"error": {"message": message, "code": code}}


def _handler_for(server: ChatServer):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # keep test output clean
            pass

        def do_POST(self):
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw)
            except json.JSONDecodeError:
                body = None
            auth = self.headers.get("Authorization")
            record = Seen(time.monotonic(), self.path, auth, body, None)
            record.action = action = server._next_action(record)
            server._enter()
            try:
                self._answer(action, body, auth)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up first, as it should after its timeout
            finally:
                server._leave()

        def _answer(self, action, body, auth):
            if not self.path.endswith("/chat/completions") or body is None:
                return self._send(404, _error(f"no route {self.path}", 404))
            if server.key is not None and auth != f"Bearer {server.key}":
                got = (auth or "").removeprefix("Bearer ")
                return self._send(401, _error(f"Incorrect API key provided: {got}", 401))
            if server.models is not None and body.get("model") not in server.models:
                return self._send(404, _error(f"model {body.get('model')} not found", 404))
            if action == "ok":
                return self._send(200, server.completion(body))
            if action.get("hang"):
                server.hanging.set()
                server.release.wait(60)
                return self._send(200, server.completion(body))
            if action.get("stall") or action.get("drop"):
                payload = json.dumps(server.completion(body)).encode()
                self._start(200, len(payload))
                self.wfile.write(payload[:10])
                self.wfile.flush()
                if action.get("stall"):  # headers and a little body, then nothing
                    server.hanging.set()
                    server.release.wait(60)
                self.close_connection = True  # the rest never comes
                return None
            if "trickle" in action:
                payload = json.dumps(server.completion(body)).encode() + b" " * 4096
                self._start(200, len(payload))
                for i in range(len(payload)):
                    if server.release.wait(action["trickle"]):
                        break
                    self.wfile.write(payload[i:i + 1])
                    self.wfile.flush()
                return None
            if action.get("malformed"):
                return self._send_raw(200, b'{"choices": [{"message": ')
            if "json" in action:
                return self._send(200, action["json"])
            if "inband" in action:
                return self._send(200, _error("upstream provider failed", action["inband"]))
            status = action["status"]
            headers = {"Retry-After": str(action["retry_after"])} if "retry_after" in action else {}
            return self._send(status, _error(action.get("message", f"scripted {status}"), status),
                              headers)

        def _start(self, status: int, length: int, headers: dict | None = None):
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(length))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()

        def _send(self, status: int, obj: dict, headers: dict | None = None):
            self._send_raw(status, json.dumps(obj).encode(), headers)

        def _send_raw(self, status: int, payload: bytes, headers: dict | None = None):
            self._start(status, len(payload), headers)
            self.wfile.write(payload)
            self.wfile.flush()

    return Handler
