"""The console's ASGI routes (Starlette).

Three shapes per view: the page (`/topics/orders/0`), its live fragment
(`/live/topics/orders/0`, what the page's script polls) and its JSON
(`/api/topics/orders/0`, for scripts and tests). Gathering blocks on the cluster, so
every handler runs it in Starlette's thread pool; the event loop stays free to answer
the other pollers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from strandline.console import render
from strandline.console.gather import Gatherer, TimelineFilter
from strandline.console.messages import MessageQuery, parse_query
from strandline.console.sources import BadRequestError, ConsoleError, NotFoundError

# The state-change timeline rereads every broker's log: not every second.
TIMELINE_REFRESH_MS = 3000


@dataclasses.dataclass(frozen=True)
class View:
    """One page: what it asks the cluster, and how it draws the answer."""

    key: str  # the nav entry it highlights
    title: Callable[[Request], str]
    gather: Callable[[Gatherer, Request], Any]
    fragment: Callable[[Any], str]
    every_ms: int = 1000
    above: Callable[[Request], str] | None = None  # static, outside the live part
    live: bool = True  # False: drawn once (a message being read must not scroll away)


def _topic(request: Request) -> str:
    return str(request.path_params["topic"])


def _partition_number(request: Request) -> int:
    return int(request.path_params["partition"])


def _message_query(request: Request) -> MessageQuery:
    try:
        return parse_query(dict(request.query_params))
    except ValueError as exc:
        raise BadRequestError(str(exc)) from exc


def _messages_form(request: Request) -> str:
    try:
        query = _message_query(request)
    except BadRequestError:
        query = MessageQuery()
    return render.messages_form(
        _topic(request), _partition_number(request), query, dict(request.query_params)
    )


def _number(request: Request, name: str) -> int | None:
    text = request.query_params.get(name, "").strip()
    if text and not text.isdigit():
        raise NotFoundError(f"{name} must be a number, got {text!r}")
    return int(text) if text else None


def _timeline_filter(request: Request) -> TimelineFilter:
    q = request.query_params
    return TimelineFilter(
        topic=q.get("topic", "").strip() or None,
        partition=_number(request, "partition"),
        broker=_number(request, "broker"),
        event=q.get("event", "").strip() or None,
        internal=q.get("internal", "") in ("1", "true", "on", "yes"),
    )


VIEWS: dict[str, View] = {
    "cluster": View(
        "cluster", lambda r: "Cluster", lambda g, r: g.cluster(), render.cluster_fragment
    ),
    "broker": View(
        "cluster",
        lambda r: f"Broker {r.path_params['broker']}",
        lambda g, r: g.broker(int(r.path_params["broker"])),
        render.broker_fragment,
        every_ms=2000,
    ),
    "topics": View("topics", lambda r: "Topics", lambda g, r: g.topics(), render.topics_fragment),
    "topic": View(
        "topics",
        lambda r: f"Topic {_topic(r)}",
        lambda g, r: g.topic(_topic(r)),
        render.topic_fragment,
        above=lambda r: render.topic_links(_topic(r)),
    ),
    "topic-configs": View(
        "topics",
        lambda r: f"Topic {_topic(r)}: configs and ACLs",
        lambda g, r: g.topic_configs(_topic(r)),
        render.topic_configs_fragment,
        every_ms=5000,
    ),
    "acls": View(
        "acls", lambda r: "ACLs", lambda g, r: g.acls(), render.acls_fragment, every_ms=5000
    ),
    "partition": View(
        "topics",
        lambda r: f"Partition {_topic(r)}-{_partition_number(r)}",
        lambda g, r: g.partition(_topic(r), _partition_number(r)),
        render.partition_fragment,
    ),
    "messages": View(
        "topics",
        lambda r: f"Messages of {_topic(r)}-{_partition_number(r)}",
        lambda g, r: g.messages(_topic(r), _partition_number(r), _message_query(r)),
        render.messages_fragment,
        above=_messages_form,
        live=False,
    ),
    "groups": View(
        "groups", lambda r: "Consumer groups", lambda g, r: g.groups(), render.groups_fragment
    ),
    "reassignments": View(
        "reassignments",
        lambda r: "Reassignments in progress",
        lambda g, r: g.reassignments(),
        render.reassignments_fragment,
    ),
    "timeline": View(
        "timeline",
        lambda r: "State changes",
        lambda g, r: g.timeline(_timeline_filter(r)),
        render.timeline_fragment,
        every_ms=TIMELINE_REFRESH_MS,
        above=lambda r: render.timeline_form(_timeline_filter(r)),
    ),
}

# path (after the /, /live or /api prefix) -> view
PATHS = (
    ("/", "cluster"),
    ("/brokers/{broker:int}", "broker"),
    ("/topics", "topics"),
    ("/topics/{topic}", "topic"),
    ("/topics/{topic}/configs", "topic-configs"),
    ("/topics/{topic}/{partition:int}", "partition"),
    ("/topics/{topic}/{partition:int}/messages", "messages"),
    ("/groups", "groups"),
    ("/reassignments", "reassignments"),
    ("/timeline", "timeline"),
    ("/acls", "acls"),
)


async def _gather(gatherer: Gatherer, view: View, request: Request) -> tuple[Any, int, str | None]:
    """(data, HTTP status, error message)."""
    try:
        data = await run_in_threadpool(view.gather, gatherer, request)
    except NotFoundError as exc:
        return None, 404, str(exc)
    except BadRequestError as exc:
        return None, 400, str(exc)
    except ConsoleError as exc:
        # The cluster (or all of it we can reach) did not answer: 503, and say why.
        return None, 503, str(exc)
    return data, 200, None


def _page_handler(gatherer: Gatherer, name: str, path: str) -> Callable[..., Any]:
    view = VIEWS[name]

    async def page(request: Request) -> Response:
        data, status, error = await _gather(gatherer, view, request)
        title = view.title(request)
        live: str | None = "/live" if path == "/" else "/live" + request.url.path
        if request.url.query:
            live = f"{live}?{request.url.query}"
        if not view.live:
            live = None
        if status == 404:
            # Nothing to poll for: a topic that does not exist stays a plain 404.
            return HTMLResponse(
                render.layout("Not found", view.key, render.error_fragment(error or "")), 404
            )
        fragment = render.error_fragment(error) if error is not None else view.fragment(data)
        above = view.above(request) if view.above is not None else ""
        return HTMLResponse(
            render.layout(title, view.key, fragment, live, view.every_ms, above), status
        )

    return page


def _live_handler(gatherer: Gatherer, name: str) -> Callable[..., Any]:
    view = VIEWS[name]

    async def live(request: Request) -> Response:
        data, status, error = await _gather(gatherer, view, request)
        if error is not None:
            return HTMLResponse(render.error_fragment(error), status)
        return HTMLResponse(view.fragment(data), headers={"Cache-Control": "no-store"})

    return live


def _api_handler(gatherer: Gatherer, name: str) -> Callable[..., Any]:
    view = VIEWS[name]

    async def api(request: Request) -> Response:
        data, status, error = await _gather(gatherer, view, request)
        if error is not None:
            return JSONResponse({"error": error}, status)
        return JSONResponse(jsonable(data))

    return api


def jsonable(data: Any) -> Any:
    if dataclasses.is_dataclass(data) and not isinstance(data, type):
        return dataclasses.asdict(data)
    if isinstance(data, list):
        return [jsonable(x) for x in data]
    return data


async def _healthz(request: Request) -> Response:
    return JSONResponse({"ok": True})


def create_app(gatherer: Gatherer) -> Starlette:
    """The ASGI app over an already started Gatherer (the caller closes it)."""
    routes: list[Route] = [Route("/healthz", _healthz)]
    for path, name in PATHS:
        routes.append(Route(path, _page_handler(gatherer, name, path)))
        live_path = "/live" if path == "/" else "/live" + path
        routes.append(Route(live_path, _live_handler(gatherer, name)))
        api_path = "/api/cluster" if path == "/" else "/api" + path
        routes.append(Route(api_path, _api_handler(gatherer, name)))

    async def not_found(request: Request, exc: Exception) -> Response:
        message = f"no page at {request.url.path}"
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": message}, 404)
        return HTMLResponse(render.layout("Not found", "", render.error_fragment(message)), 404)

    return Starlette(routes=routes, exception_handlers={404: not_found})
