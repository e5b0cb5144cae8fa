"""`foxhunt serve`: the REST + WebSocket API over one FOXHUNT_HOME, and the dashboard.

Every route but `/api/v1/health`, `/api/v1/auth/token` and the dashboard's own files needs a
token (`Authorization: Bearer ...`; a WebSocket sends it as its first message, so it never
appears in a URL or an access log). Each route names the least role it needs; the table of
them, `app.state.route_roles`, is what the tests check every route against. Every mutating call
is written to the audit trail with its caller and status.

Answers are the same documents the CLI prints with `--json` (the account views are the
pydantic models of `foxhunt.paper.accounts`), and errors are one line: `{"error": "..."}`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, HTTPException, Query, Request, WebSocket
from fastapi import Path as PathParam
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.websockets import WebSocketDisconnect

from foxhunt import telemetry
from foxhunt.errors import FoxhuntError
from foxhunt.jobs.model import JobKind, UnknownJobError
from foxhunt.jobs.store import JobStore
from foxhunt.paper.accounts import OrdersDoc, PositionsDoc, RiskDoc
from foxhunt.server.accounts import OpenAccounts
from foxhunt.server.auth import (
    AuthError,
    AuthStore,
    CallerCache,
    LoginThrottle,
    Principal,
    Role,
    TokenError,
    TokenIssuer,
)
from foxhunt.server.config import ServerConfig
from foxhunt.server.streams import StreamHub
from foxhunt.server.views import HomeViews, NotFound

log = logging.getLogger("foxhunt.server")
API = "/api/v1"
STATIC = Path(__file__).parent / "static"
PUBLIC = {f"{API}/health", f"{API}/auth/token", "/", "/static"}
"""Paths anyone may call: the health check, signing in, the dashboard's page and files."""
MUTATING = {"POST", "PUT", "PATCH", "DELETE"}
MAX_INT = 2**62
"""The largest number a query takes: it fits every database's 64-bit integer."""
JobId = Annotated[int, PathParam(ge=1, le=MAX_INT)]


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TokenRequest(Body):
    username: str | None = Field(None, max_length=64)
    password: str | None = Field(None, max_length=1024)
    api_key: str | None = Field(None, max_length=200)


class TokenResponse(BaseModel):
    token: str
    expires: int
    user: str
    role: str


class NewUser(Body):
    name: str = Field(max_length=64)
    role: Literal["viewer", "trader", "admin"]
    password: str | None = Field(None, max_length=1024)


class UserChange(Body):
    role: Literal["viewer", "trader", "admin"] | None = None
    password: str | None = Field(None, max_length=1024)


class NewKey(Body):
    user: str = Field(max_length=64)
    label: str = Field(max_length=100)


class NewJob(Body):
    kind: Literal["train", "backtest", "tune", "paper", "live"]
    args: list[str] = Field(max_length=200, description="the command's arguments, as on the "
                            "command line after `foxhunt KIND`")
    gpus: int | None = Field(None, ge=0, le=64)


class RiskCommand(Body):
    reason: str = Field("", max_length=500)


class ApiMetrics:
    """The server's OpenTelemetry instruments, made on first use (telemetry may be configured
    after the app is built): request duration by route and status."""

    def __init__(self):
        self._duration = None

    def request(self, method: str, route: str, status: int, elapsed_ms: float) -> None:
        if self._duration is None:
            self._duration = telemetry.meter("foxhunt.server").create_histogram(
                "foxhunt.api.request.duration", unit="ms",
                description="time from a request's arrival to its response, by route")
        self._duration.record(elapsed_ms, {"http.request.method": method, "http.route": route,
                                           "http.response.status_code": status})


@dataclass
class ServerState:
    home: Path
    config: ServerConfig
    auth: AuthStore
    tokens: TokenIssuer
    throttle: LoginThrottle
    views: HomeViews
    hub: StreamHub
    jobs: Any
    metrics: ApiMetrics
    callers: CallerCache
    accounts: OpenAccounts | None = None


def _one_line(text: str, limit: int = 300) -> str:
    return " ".join(str(text).split())[:limit]


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": _one_line(message)}, status_code=status, headers=headers)


def create_app(home: Path, config: ServerConfig | None = None, *, db_url: str | None = None,
               store_path: Path | None = None, instruments_file: Path | None = None) -> FastAPI:
    """The app over `home` (FOXHUNT_HOME). `db_url` overrides `config.database`."""
    from foxhunt.db import default_db_url, open_db

    config = config or ServerConfig()
    engine = open_db(db_url or config.database or default_db_url(home))
    auth = AuthStore(engine, config.argon2)
    state = ServerState(
        home=home, config=config, auth=auth,
        tokens=TokenIssuer(auth.signing_key(), config.token_ttl_s),
        throttle=LoginThrottle(config.login_failures, config.login_window_s),
        views=HomeViews(home, store_path or home / "store.duckdb",
                        instruments_file or home / "instruments.toml"),
        hub=StreamHub(config.stream_poll_s), jobs=JobStore(engine), metrics=ApiMetrics(),
        callers=CallerCache(auth, config.recheck_s))

    @asynccontextmanager
    async def lifespan(_app: FastAPI):
        yield
        await state.hub.close()
        state.accounts.close()
        engine.dispose()

    app = FastAPI(title="foxhunt", version=_version(), lifespan=lifespan, openapi_url=None,
                  docs_url=None, redoc_url=None,
                  description="Train, validate and trade deep-RL futures agents: the REST and "
                              "WebSocket API of `foxhunt serve`.")
    app.state.foxhunt = state
    state.accounts = OpenAccounts(
        lambda account: _open_account(state, account),
        lambda account: state.home / "trading" / f"{account}.paper.json")
    if config.cors_origins:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(CORSMiddleware, allow_origins=list(config.cors_origins),
                           allow_methods=["*"], allow_headers=["Authorization", "Content-Type"])
    _install_handlers(app, state)
    _routes(app, state)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    return app


def _version() -> str:
    from foxhunt import __version__

    return __version__


# ------------------------------------------------------------------------- auth dependencies

def _bearer(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def require(role: Role):
    """A dependency: the caller, who must hold `role` or above (401 without a valid token,
    403 with too small a role)."""

    def dependency(request: Request) -> Principal:
        state: ServerState = request.app.state.foxhunt
        token = _bearer(request)
        if token is None:
            raise HTTPException(401, "sign in first: no token (Authorization: Bearer ...)",
                                headers={"WWW-Authenticate": "Bearer"})
        try:
            who = state.tokens.check(token)
        except TokenError as exc:
            raise HTTPException(401, str(exc), headers={"WWW-Authenticate": "Bearer"}) from None
        now = state.callers.current(who)
        if now is None:
            raise HTTPException(401, f"{who.name}: the user was removed or the API key revoked; "
                                "sign in again", headers={"WWW-Authenticate": "Bearer"})
        who = now
        request.state.principal = who
        if not who.may(role):
            raise HTTPException(403, f"{who.name} is a {who.role.name}; this needs {role.name}")
        return who

    dependency.role = role
    return Depends(dependency)


Viewer = Annotated[Principal, require(Role.viewer)]
Trader = Annotated[Principal, require(Role.trader)]
Admin = Annotated[Principal, require(Role.admin)]


def _install_handlers(app: FastAPI, state: ServerState) -> None:
    @app.middleware("http")
    async def observe(request: Request, call_next):
        started = time.perf_counter()
        with telemetry.span(f"HTTP {request.method}", {"http.request.method": request.method,
                                                       "url.path": request.url.path}) as span:
            response = await call_next(request)
            route = request.scope.get("route")
            template = getattr(route, "path", "unmatched")
            elapsed_ms = 1e3 * (time.perf_counter() - started)
            if telemetry.enabled():
                span.update_name(f"HTTP {request.method} {template}")
                span.set_attribute("http.route", template)
                span.set_attribute("http.response.status_code", response.status_code)
                who = getattr(request.state, "principal", None)
                if who is not None:
                    span.set_attribute("enduser.id", who.name)
                state.metrics.request(request.method, template, response.status_code, elapsed_ms)
        if request.method in MUTATING and request.url.path.startswith(API):
            who = getattr(request.state, "principal", None)
            actor = who.name if who is not None else "anonymous"
            detail = getattr(request.state, "audit_detail", "")
            await asyncio.to_thread(state.auth.record, actor,
                                    f"{request.method} {request.url.path}",
                                    response.status_code, detail)
        log.debug("%s %s %s %.1f ms", request.method, request.url.path, response.status_code,
                  elapsed_ms)
        return response

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, exc: StarletteHTTPException):
        return _error(exc.status_code, str(exc.detail), getattr(exc, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def invalid(_request: Request, exc: RequestValidationError):
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or "request"
        return _error(422, f"{where}: {first.get('msg', 'invalid')}")

    @app.exception_handler(NotFound)
    async def not_found(_request: Request, exc: NotFound):
        return _error(404, str(exc))

    @app.exception_handler(UnknownJobError)
    async def unknown_job(_request: Request, exc: UnknownJobError):
        return _error(404, str(exc))

    @app.exception_handler(AuthError)
    async def auth_error(_request: Request, exc: AuthError):
        text = str(exc)
        return _error(404 if text.startswith("no ") else 400, text)

    @app.exception_handler(FoxhuntError)
    async def foxhunt_error(_request: Request, exc: FoxhuntError):
        from foxhunt.paper.account_files import AccountBusyError

        return _error(409 if isinstance(exc, AccountBusyError) else 400, str(exc))

    @app.exception_handler(Exception)
    async def crash(request: Request, exc: Exception):
        log.exception("%s %s failed", request.method, request.url.path)
        return _error(500, "internal error; the server's log has the details")


# ------------------------------------------------------------------------------------ routes

def _routes(app: FastAPI, state: ServerState) -> None:
    views = state.views
    state_ = state
    roles: dict[tuple[str, str], Role] = {}
    app.state.route_roles = roles
    """(method, path) -> the least role a route needs, filled as the routes are declared."""

    def route(method: str, path: str, role: Role | None, **kw):
        full = API + path
        if role is not None:
            roles[(method, full)] = role
        return app.api_route(full, methods=[method], **kw)

    # --- public ------------------------------------------------------------------------------
    @route("GET", "/health", None)
    def health() -> dict[str, Any]:
        return {"status": "ok", "version": _version()}

    @route("POST", "/auth/token", None, response_model=TokenResponse)
    def token(body: TokenRequest, request: Request):
        client = request.client.host if request.client else "?"
        if body.api_key:
            keys = (f"key:{body.api_key[:16]}", f"ip:{client}")
        elif body.username and body.password:
            keys = (f"user:{body.username}", f"ip:{client}")
        else:
            raise HTTPException(422, "give username and password, or api_key")
        wait = state.throttle.retry_after(keys)
        if wait > 0:
            raise HTTPException(429, f"too many failed sign-ins: try again in {wait:.0f} s",
                                headers={"Retry-After": str(int(wait) + 1)})
        who = (state.auth.check_key(body.api_key) if body.api_key
               else state.auth.check_password(body.username, body.password))
        if who is None:
            state.throttle.failed(keys)
            state.auth.record(body.username or "api key", "sign-in", 401)
            raise HTTPException(401, "wrong user name, password or API key")
        state.throttle.succeeded(keys)
        request.state.principal = who
        text, expires = state.tokens.issue(who)
        return TokenResponse(token=text, expires=expires, user=who.name, role=who.role.name)

    @app.get("/", include_in_schema=False)
    def dashboard() -> FileResponse:
        return FileResponse(STATIC / "index.html", media_type="text/html")

    # --- viewer: reading ---------------------------------------------------------------------
    @route("GET", "/me", Role.viewer)
    def me(who: Viewer) -> dict[str, Any]:
        return {"user": who.name, "role": who.role.name, "via": who.via}

    @route("GET", "/openapi.json", Role.viewer)
    def openapi(who: Viewer) -> dict[str, Any]:
        return app.openapi()

    @route("GET", "/instruments", Role.viewer)
    def instruments(who: Viewer) -> list[dict[str, Any]]:
        return views.instruments()

    @route("GET", "/series", Role.viewer)
    def series(who: Viewer) -> list[dict[str, Any]]:
        return views.series()

    @route("GET", "/series/{symbol}/bars", Role.viewer)
    def series_bars(who: Viewer, symbol: str, bars: str = "1min",
                    start_ns: Annotated[int | None, Query(ge=0, le=MAX_INT)] = None,
                    end_ns: Annotated[int | None, Query(ge=0, le=MAX_INT)] = None,
                    last: Annotated[int, Query(ge=0, le=100_000)] = 500) -> dict[str, Any]:
        return views.bars(symbol, bars, start_ns, end_ns, last)

    @route("GET", "/runs", Role.viewer)
    def runs(who: Viewer) -> list[dict[str, Any]]:
        return views.runs()

    @route("GET", "/runs/{run}", Role.viewer)
    def run(who: Viewer, run: str) -> dict[str, Any]:
        return views.run(run)

    @route("GET", "/runs/{run}/curves", Role.viewer)
    def curves(who: Viewer, run: str) -> list[dict[str, Any]]:
        return views.curves(run)

    @route("GET", "/runs/{run}/report", Role.viewer, response_class=HTMLResponse)
    def report(who: Viewer, run: str):
        return FileResponse(views.report(run), media_type="text/html")

    @route("GET", "/studies", Role.viewer)
    def studies(who: Viewer) -> list[dict[str, Any]]:
        return views.studies()

    @route("GET", "/studies/{study}", Role.viewer)
    def study(who: Viewer, study: str) -> dict[str, Any]:
        return views.study(study)

    @route("GET", "/sessions", Role.viewer)
    def sessions(who: Viewer) -> list[dict[str, Any]]:
        return views.sessions()

    def _open(account: str):
        return _open_account(state, account)

    def _with_account(account: str, fn):
        from foxhunt.paper.accounts import check_account

        check_account(account)
        return state.accounts.use(account, fn)

    @route("GET", "/accounts", Role.viewer)
    def accounts(who: Viewer) -> list[str]:
        from foxhunt.paper.accounts import accounts as listed

        return listed(state.home)

    @route("GET", "/accounts/{account}/orders", Role.viewer, response_model=OrdersDoc)
    def orders(who: Viewer, account: str, status: str = "all",
               last: Annotated[int, Query(ge=0, le=1_000_000)] = 50):
        from foxhunt.paper.accounts import orders_doc

        return _with_account(account, lambda e, u: orders_doc(e, account, u, status, last))

    @route("GET", "/accounts/{account}/positions", Role.viewer, response_model=PositionsDoc)
    def positions(who: Viewer, account: str):
        from foxhunt.paper.accounts import positions_doc

        return _with_account(account, lambda e, u: positions_doc(e, account, u))

    @route("GET", "/accounts/{account}/risk", Role.viewer, response_model=RiskDoc,
           response_model_exclude_none=False)
    def risk(who: Viewer, account: str):
        from foxhunt.paper.accounts import risk_doc

        return JSONResponse(_with_account(account, lambda e, u: risk_doc(e, account, u)).document())

    @route("GET", "/accounts/{account}/events", Role.viewer)
    def events(who: Viewer, account: str, after: Annotated[int, Query(ge=0, le=MAX_INT)] = 0,
               limit: Annotated[int, Query(ge=1, le=10_000)] = 1000) -> list[dict[str, Any]]:
        from itertools import islice

        from foxhunt.server.streams import event_json

        return _with_account(account, lambda e, u: [
            event_json(seq, ev, e.contracts) for seq, ev in islice(e.store.read(after), limit)])

    @route("GET", "/accounts/{account}/equity", Role.viewer)
    def equity(who: Viewer, account: str,
               points: Annotated[int, Query(ge=10, le=100_000)] = 2000) -> dict[str, Any]:
        from foxhunt.paper.accounts import equity_curve

        return equity_curve(state.home, _existing(state, account), None, views.contracts(),
                            points)

    @route("GET", "/accounts/{account}/bars", Role.viewer)
    def account_bars(who: Viewer, account: str,
                     last: Annotated[int, Query(ge=0, le=100_000)] = 500) -> dict[str, Any]:
        return views.account_bars(account, last)

    # --- trader: acting ----------------------------------------------------------------------
    @route("POST", "/accounts/{account}/risk/{action}", Role.trader, response_model=RiskDoc)
    def risk_command(who: Trader, account: str,
                     action: Literal["halt", "reduce", "resume", "kill"],
                     body: RiskCommand, request: Request):
        from foxhunt.paper.accounts import operator_command

        _existing(state, account)
        request.state.audit_detail = f"reason: {body.reason}" if body.reason else ""
        doc = operator_command(state.home, account, None, views.contracts(), action,
                               body.reason or f"{action} by {who.name} through the API",
                               who=f"{who.name} through the API")
        return JSONResponse(doc.document())

    @route("GET", "/jobs", Role.viewer)
    def jobs(who: Viewer,
             state: Literal["queued", "running", "succeeded", "failed", "cancelled"] | None = None,
             last: Annotated[int, Query(ge=1, le=1000)] = 100) -> dict[str, Any]:
        listed = state_.jobs.list([state] if state else (), last)
        return {"jobs": [j.doc() for j in listed]}

    @route("GET", "/jobs/{job_id}", Role.viewer)
    def job(who: Viewer, job_id: JobId) -> dict[str, Any]:
        return state_.jobs.get(job_id).doc()

    @route("POST", "/jobs", Role.trader, status_code=201)
    def submit_job(who: Trader, body: NewJob, request: Request) -> dict[str, Any]:
        for arg in body.args:
            if arg.startswith(("/", "~")) or ".." in Path(arg).parts or "\x00" in arg:
                raise HTTPException(400, f"job argument {arg[:60]!r}: paths go through the API "
                                    "relative to FOXHUNT_HOME, without '..'")
        job = state_.jobs.submit(JobKind(body.kind), body.args, who.name, body.gpus)
        request.state.audit_detail = f"job {job.id}: {body.kind} {' '.join(body.args)[:300]}"
        return job.doc()

    @route("POST", "/jobs/{job_id}/cancel", Role.trader)
    def cancel_job(who: Trader, job_id: JobId) -> dict[str, Any]:
        return state_.jobs.cancel(job_id).doc()

    # --- admin: users, keys, audit ------------------------------------------------------------
    @route("GET", "/users", Role.admin)
    def users(who: Admin) -> list[dict[str, Any]]:
        return state.auth.users()

    @route("POST", "/users", Role.admin, status_code=201)
    def add_user(who: Admin, body: NewUser, request: Request) -> dict[str, Any]:
        state.auth.add_user(body.name, Role[body.role], body.password)
        request.state.audit_detail = f"user {body.name} as {body.role}"
        return {"name": body.name, "role": body.role}

    @route("PATCH", "/users/{name}", Role.admin)
    def change_user(who: Admin, name: str, body: UserChange, request: Request) -> dict[str, Any]:
        if body.role is None and body.password is None:
            raise HTTPException(422, "give role or password")
        if body.role is not None:
            state.auth.set_role(name, Role[body.role])
        if body.password is not None:
            state.auth.set_password(name, body.password)
        request.state.audit_detail = ", ".join(
            x for x in (f"role {body.role}" if body.role else "",
                        "password changed" if body.password else "") if x)
        return {"name": name, "role": state.auth.role_of(name).name}

    @route("DELETE", "/users/{name}", Role.admin)
    def remove_user(who: Admin, name: str) -> dict[str, Any]:
        if name == who.name:
            raise HTTPException(400, "an admin cannot remove themselves")
        state.auth.remove_user(name)
        return {"removed": name}

    @route("GET", "/keys", Role.admin)
    def keys(who: Admin) -> list[dict[str, Any]]:
        return state.auth.list_keys()

    @route("POST", "/keys", Role.admin, status_code=201)
    def create_key(who: Admin, body: NewKey, request: Request) -> dict[str, Any]:
        key_id, key = state.auth.create_key(body.user, body.label)
        request.state.audit_detail = f"key {key_id} of {body.user}"
        return {"key_id": key_id, "key": key, "user": body.user,
                "note": "shown once: only its hash is kept"}

    @route("DELETE", "/keys/{key_id}", Role.admin)
    def revoke_key(who: Admin, key_id: str) -> dict[str, Any]:
        state.auth.revoke_key(key_id)
        return {"revoked": key_id}

    @route("GET", "/audit", Role.admin)
    def audit(who: Admin, last: Annotated[int, Query(ge=1, le=10_000)] = 100) -> list[dict]:
        return state.auth.audit_trail(last)

    # --- streams -----------------------------------------------------------------------------
    @app.websocket(API + "/ws/accounts/{account}")
    async def account_stream(ws: WebSocket, account: str):
        who = await _ws_sign_in(ws, state, Role.viewer)
        if who is None:
            return
        try:
            from foxhunt.paper.accounts import check_account

            check_account(account)
            queue, first = await state.hub.subscribe(
                account, lambda: _open(account), state.home / "trading" / f"{account}.bars.jsonl")
        except FoxhuntError as exc:
            await ws.send_json({"type": "error", "error": _one_line(str(exc))})
            await ws.close(4404 if isinstance(exc, NotFound) else 4400)
            return
        try:
            await ws.send_json(first)
            await _relay(ws, queue)
        except (WebSocketDisconnect, RuntimeError):
            pass
        finally:
            state.hub.unsubscribe(account, queue)

    @app.websocket(API + "/ws/jobs")
    async def jobs_stream(ws: WebSocket):
        if await _ws_sign_in(ws, state, Role.viewer) is not None:
            await _jobs_stream(ws, state)


def _existing(state: ServerState, account: str) -> str:
    """`account`, checked to be a name with a default log here (404 when it has none)."""
    from foxhunt.paper.accounts import check_account

    check_account(account)
    if not (state.home / "trading" / f"{account}.sqlite").exists():
        raise NotFound(f"no account {account!r} in {state.home / 'trading'}")
    return account


def _open_account(state: ServerState, account: str):
    """An account's engine folded from its default log (404 when there is none)."""
    from foxhunt.paper.accounts import open_account

    return open_account(state.home, _existing(state, account), None, state.views.contracts())


async def _relay(ws: WebSocket, queue: asyncio.Queue) -> None:
    """Send the queue's batches (their JSON made once for every client) until the stream ends
    (None) or the client leaves; the client's side is read meanwhile, so a client gone quiet is
    seen at once and a stopping server does not wait on a queue no event will fill."""
    gone = asyncio.ensure_future(ws.receive())
    try:
        while True:
            got = asyncio.ensure_future(queue.get())
            done, _ = await asyncio.wait({got, gone}, return_when=asyncio.FIRST_COMPLETED)
            if gone in done:
                got.cancel()
                message = gone.result()
                if message.get("type") == "websocket.disconnect":
                    return
                gone = asyncio.ensure_future(ws.receive())  # a client's chatter is ignored
                if got.cancelled() or not got.done():
                    continue
            batch = got.result()
            if batch is None:
                await ws.close(1011)
                return
            text = getattr(batch, "text", None)
            await ws.send_text(text if text is not None else json.dumps(batch))
    finally:
        gone.cancel()


async def _jobs_stream(ws: WebSocket, state: ServerState) -> None:
    """The job queue, sent whenever a job's state or progress changes (the workers write the
    table from other processes; one read every half second finds it)."""
    last = None
    try:
        while True:
            jobs = await asyncio.to_thread(state.jobs.list, (), 100)
            doc = [j.doc() for j in jobs]
            if doc != last:
                await ws.send_text(json.dumps({"type": "jobs", "jobs": doc}))
                last = doc
            await asyncio.sleep(0.5)
    except (WebSocketDisconnect, RuntimeError):
        pass


async def _ws_sign_in(ws: WebSocket, state: ServerState, role: Role) -> Principal | None:
    """Accept, then read `{"token": ...}` within 5 s; close 4401 / 4403 on failure."""
    await ws.accept()
    try:
        first = await asyncio.wait_for(ws.receive_json(), timeout=5.0)
        who = state.tokens.check(str(first.get("token", "")) if isinstance(first, dict) else "")
    except (TimeoutError, ValueError, KeyError, WebSocketDisconnect, TokenError) as exc:
        reason = str(exc) if isinstance(exc, TokenError) else "send {\"token\": ...} first"
        await _close(ws, 4401, reason)
        return None
    now = await asyncio.to_thread(state.callers.current, who)
    if now is None:
        await _close(ws, 4401, f"{who.name}: the user was removed or the API key revoked")
        return None
    who = now
    if not who.may(role):
        await _close(ws, 4403, f"{who.name} is a {who.role.name}; this needs {role.name}")
        return None
    await ws.send_json({"type": "welcome", "user": who.name, "role": who.role.name})
    return who


async def _close(ws: WebSocket, code: int, reason: str) -> None:
    try:
        await ws.send_json({"type": "error", "error": reason})
        await ws.close(code, reason[:120])
    except (WebSocketDisconnect, RuntimeError):
        pass
