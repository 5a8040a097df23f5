"""A local, deterministic OpenAI Responses API emulator (standard library only).

The real `openai` client talks to it over loopback HTTP. It keeps the API's state semantics
(`store`, `previous_response_id`, `conversation`, item references, reasoning items with opaque
`encrypted_content`, function-call pairing) and its "model" answers only from the context it
actually received, so an application that loses context gets a visibly wrong answer.

Model rules (case-insensitive; "current text" = last user message of this request's input):
- facts: `marker is <M>` in any user message of the context, the latest wins;
- the last input item is a `function_call_output` -> `Tool <name> returned <output>.`;
- else an offered function tool whose name is in the current text -> a `function_call` item (a model that
  returns `phase` first emits a progress update, `phase: commentary`, "Looking that up with <tool>."); its
  arguments: a `backtick-quoted` span of the text in the tool's first required string parameter, else
  `{"query": <the text>}`;
- an assistant progress update replayed without its `phase` reads as a final answer: the model then
  believes its tool turn ended there and answers `tool=unknown`;
- else `choose a code word` -> `I have chosen a code word.` (the code word lives only in reasoning);
- else `summary` without a `?` (a client compacting its own history asks for one) -> `Summary: the marker is <M>.`
  (`Summary: nothing to carry over.` without one): a summary carries the context it was made from;
- else a `?` -> `marker=..; tool=..; constraints=..; code_word=..` for the keywords asked, or `I don't know.`;
- else `Noted marker <M>.` / `Noted.`; instructions containing `uppercase` upper-case the reply.

Fidelity to recorded traffic of the real API: every serialisation of an opaque payload (`encrypted_content`)
encrypts afresh (other bytes, same length: a stream's `output_item.done` and `response.completed` differ, as do
retrieves and listings); `phase` only from the models that have it (`EmulatorConfig.phase_models`); the model
alone decides whether it reasons (a `reasoning` parameter does not); items written without an id get one;
`EmulatorConfig.store_default` is the organisation's `store` for requests that omit it (the body reports the
effective one); `text.format` JSON schemas are answered with JSON that fits them; replayed items are held to the
API's rules on their ids and reasoning pairs, one table of them (`replay_rules`), each answered as the API does.

Endpoints (under `/v1`; errors are `{"error": {message, type, param, code}}` with the API's status):
- `POST /responses` (`stream: true` -> SSE; `background: true` -> `queued` at once, needs `store`; each
  `GET` of it then advances it: `EmulatorConfig.background_polls` retrieves see `in_progress`, the next one
  the finished response, produced from the context as it was at creation), `GET /responses/{id}`
  (`stream=true` replays the events), `DELETE /responses/{id}`, `POST /responses/{id}/cancel` (an
  unfinished background response becomes `cancelled`; a finished one comes back unchanged; a foreground
  one is a 400), `GET /responses/{id}/input_items`, `POST /responses/compact`, `POST /responses/input_tokens`
  (the `usage.input_tokens` a create of the same body would report; stores nothing);
- `POST /conversations`, `GET|POST|DELETE /conversations/{id}` (POST replaces `metadata`),
  `GET|POST /conversations/{id}/items` (added items are context of later responses in the conversation),
  `GET|DELETE /conversations/{id}/items/{item_id}` (DELETE answers the conversation);
- Azure OpenAI's paths (`/openai/v1/...`, `/openai/...`, `/openai/deployments/<name>/...`) reach the same
  endpoints (`Emulator.azure_endpoint`); the request log keeps the path as sent;
- WebSocket mode (`client.responses.connect()`): `GET /responses` with `Upgrade: websocket` on the same
  port, served with the optional `websockets` package (501 without it). `response.create` events get the
  SSE event sequence back as JSON text frames, one response at a time; errors come as `error` events;
  the connection's most recent response can be continued even when `store: false`, any other parent
  must be stored; `response.steer` is answered `response.steer.failed`. Each client event is logged as
  a `WEBSOCKET` request.

Usage::

    with Emulator() as emu:
        client = emu.client()
        client.responses.create(model="gpt-4.1", input="The marker is X.")
"""

from __future__ import annotations

import threading
from types import TracebackType
from typing import TYPE_CHECKING, Any

from .config import EmulatorConfig
from .recording import RecordedRequest, RequestLog
from .server import EmulatorHTTPServer
from .service import Service

if TYPE_CHECKING:
    import openai

__all__ = ["Emulator", "EmulatorConfig", "RecordedRequest", "RequestLog"]

LOOPBACK_HOSTS = ("127.0.0.1", "localhost")


class Emulator:
    """Serves the emulated API on 127.0.0.1 from a daemon thread; use as a context manager."""

    def __init__(
        self, config: EmulatorConfig | None = None, *, port: int = 0, host: str = "127.0.0.1", verbose: bool = False
    ) -> None:
        if host not in LOOPBACK_HOSTS:
            raise ValueError(f"the emulator only binds to loopback, not {host!r}")
        self.config = config if config is not None else EmulatorConfig()
        self._host = "127.0.0.1"
        self._requested_port = port
        self._verbose = verbose
        self._service = Service(self.config)
        self._server: EmulatorHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._log = RequestLog()

    def start(self) -> Emulator:
        """Bind the socket and serve in a background daemon thread; returns self."""
        if self._server is not None:
            return self
        server = EmulatorHTTPServer((self._host, self._requested_port), self._service, self._log, verbose=self._verbose)
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="otel-responses-emulator", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, end open keep-alive connections and close the listening socket."""
        server, thread = self._server, self._thread
        if server is None:
            return
        self._server, self._thread = None, None
        server.shutdown()
        server.close_connections()
        server.server_close()
        if thread is not None:
            thread.join(timeout=5)

    def __enter__(self) -> Emulator:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _running(self) -> EmulatorHTTPServer:
        if self._server is None:
            raise RuntimeError("the emulator is not running; call start() or use it as a context manager")
        return self._server

    @property
    def port(self) -> int:
        """The bound TCP port (the free port chosen when constructed with port=0)."""
        return int(self._running().server_address[1])

    @property
    def base_url(self) -> str:
        """What to pass as `openai.OpenAI(base_url=...)`, e.g. `http://127.0.0.1:PORT/v1`."""
        return f"http://{self._host}:{self.port}/v1"

    @property
    def azure_endpoint(self) -> str:
        """What to pass as `openai.AzureOpenAI(azure_endpoint=...)` (or litellm's Azure `api_base`): the emulator
        answers Azure's paths (`/openai/...`, `/openai/v1/...`, `/openai/deployments/<name>/...`) as `/v1/...`."""
        return f"http://{self._host}:{self.port}"

    @property
    def requests(self) -> RequestLog:
        """Every request received so far (method, path, parsed JSON body, query, headers)."""
        return self._log

    def reset(self) -> None:
        """Forget responses, conversations and logged requests; ids start over."""
        self._service.reset()
        self._log.clear()

    def client(self, **kwargs: Any) -> openai.OpenAI:
        """An `openai.OpenAI` pointed at this emulator (no retries, a dummy key)."""
        import openai

        options: dict[str, Any] = {"base_url": self.base_url, "api_key": "emulator-key", "max_retries": 0}
        options.update(kwargs)
        return openai.OpenAI(**options)

    def async_client(self, **kwargs: Any) -> openai.AsyncOpenAI:
        """An `openai.AsyncOpenAI` pointed at this emulator (no retries, a dummy key)."""
        import openai

        options: dict[str, Any] = {"base_url": self.base_url, "api_key": "emulator-key", "max_retries": 0}
        options.update(kwargs)
        return openai.AsyncOpenAI(**options)
