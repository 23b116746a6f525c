"""A scripted OpenAI-compatible chat server on 127.0.0.1 for tests (standard library only).

Usage:
    with FakeLLMServer() as server:
        server.push(ok('{"choice": 1}'), status(429), hang(2.0))
        ... litellm.completion(model="openai/fake-model", api_base=server.url, api_key="sk-dummy", ...)
        server.requests  # the JSON bodies received, in order

Each request consumes the next scripted step; when the script is empty the `default` responder (a function of the
request body returning a step) answers, and without one the server replies 400 so a test fails fast, never hangs.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable


@dataclass(frozen=True)
class Step:
    """One scripted response: a chat reply (optionally delayed, to trigger client timeouts) or an HTTP error."""

    kind: str  # "ok" | "status"
    content: str = ""
    status: int = 200
    seconds: float = 0.0  # delay before answering
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


def ok(content: str, prompt_tokens: int = 10, completion_tokens: int = 5, delay: float = 0.0) -> Step:
    """A successful chat completion whose message content is `content`, reporting the given usage."""
    return Step("ok", content=content, seconds=delay, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)


def status(code: int, message: str = "scripted error") -> Step:
    """An HTTP error response with an OpenAI-style error body."""
    return Step("status", content=message, status=code)


def hang(seconds: float) -> Step:
    """Sleep before replying (longer than the client timeout, so the client gives up)."""
    return ok('{"late": true}', delay=seconds)


class FakeLLMServer:
    """An OpenAI-compatible `/v1/chat/completions` endpoint that replays scripted steps and counts requests."""

    def __init__(self, default: Callable[[dict], Step] | None = None, lifetime: float = 120.0):
        self.default = default
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.in_flight = 0
        self.max_in_flight = 0  # the most requests handled at once (to check client concurrency limits)
        self._script: list[Step] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        # A safety net so a forgotten server never outlives the test session.
        self._timer = threading.Timer(lifetime, self.stop)
        self._timer.daemon = True

    @property
    def url(self) -> str:
        """The api_base to give LiteLLM."""
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def push(self, *steps: Step) -> None:
        """Append steps to the script."""
        with self._lock:
            self._script.extend(steps)

    def pending(self) -> int:
        """How many scripted steps are still unconsumed."""
        with self._lock:
            return len(self._script)

    def start(self) -> "FakeLLMServer":
        """Serve in a background thread."""
        self._thread.start()
        self._timer.start()
        return self

    def stop(self) -> None:
        """Stop serving and wake any hanging handler."""
        if self._stopping.is_set():
            return
        self._stopping.set()
        self._timer.cancel()
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> "FakeLLMServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _next_step(self, body: dict) -> Step:
        with self._lock:
            self.requests.append(body)
            if self._script:
                return self._script.pop(0)
        if self.default is not None:
            return self.default(body)
        return status(400, "no scripted reply left")

    def _enter(self) -> None:
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def _leave(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go out separately; Nagle would add ~40 ms per reply

            def log_message(self, *args: object) -> None:  # keep test output quiet
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with server._lock:
                    server.headers.append(dict(self.headers))
                step = server._next_step(body)
                server._enter()
                try:
                    if step.seconds:
                        server._stopping.wait(step.seconds)  # stop() wakes it, so a hang never outlives the server
                finally:
                    server._leave()
                if step.kind == "status":
                    error = {"message": step.content, "type": "scripted", "code": step.status}
                    self._send(step.status, {"error": error})
                    return
                self._send(200, _completion(body, step))

            def _send(self, code: int, payload: dict) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client already timed out
                    pass

        return Handler


def _completion(body: dict, step: Step) -> dict:
    """An OpenAI chat.completion object for a scripted reply."""
    prompt, completion = step.prompt_tokens or 0, step.completion_tokens or 0
    return {
        "id": f"chatcmpl-fake-{time.monotonic_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "fake-model"),
        "choices": [{"index": 0, "message": {"role": "assistant", "content": step.content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
    }
