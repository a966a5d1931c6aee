"""`python -m agent_runtime.launcher`, the image CMD: RUNNER_MODE picks the component.

Logging is installed first, before the tenant's AGENT_ENTRYPOINT is imported, so every start-up failure is
one ERROR record and a non-zero exit, never a raw traceback. SIGTERM stops accepting connections, lets
in-flight calls finish (bounded by SHUTDOWN_TIMEOUT_S), closes the executors and exits 0. That is the
process's shutdown, not the per-execution drain (`POST /drain`, servers/drain.py) the OE asks for.
"""

from __future__ import annotations

import gc
import logging
import os
import signal
import sys
from collections.abc import Mapping
from types import FrameType
from typing import TYPE_CHECKING

from agent_runtime.contract import (
    ENTRYPOINT_ENV,
    PORTS,
    RUNNER_MODE_ENV,
    RunnerMode,
    tenant_secret_env,
)
from agent_runtime.execution_log import ExecutionLogError
from agent_runtime.listen import DEFAULT_BODY_TIMEOUT_S
from agent_runtime.logging_config import install_logging
from agent_runtime.tracing import TracingConfigError, instrument, setup_tracing

if TYPE_CHECKING:
    from agent_runtime.servers.auth import ASGIApp

logger = logging.getLogger("agent_runtime.launcher")

# Below Kubernetes' default 30 s termination grace period, so the shutdown ends before SIGKILL.
SHUTDOWN_TIMEOUT_S = 25.0
# Local runs and tests only: the operator never sets it, pods use the fixed port of their mode.
PORT_OVERRIDE_ENV = "RUNTIME_PORT"

EXIT_OK = 0
EXIT_STARTUP_FAILED = 1
EXIT_BAD_CONFIG = 2

# Modes named by the contract whose component this image does not hold yet (none today).
_NOT_BUILT: dict[RunnerMode, str] = {}


class LaunchError(ValueError):
    """The environment does not describe a component this image can start; the message says the fix."""


def select_mode(env: Mapping[str, str]) -> RunnerMode:
    """RUNNER_MODE, required; a mode that is not built yet is refused rather than faked."""
    choices = ", ".join(mode.value for mode in RunnerMode)
    raw = env.get(RUNNER_MODE_ENV, "").strip()
    if not raw:
        raise LaunchError(f"{RUNNER_MODE_ENV} is not set; set it to one of: {choices}")
    try:
        mode = RunnerMode(raw.lower())
    except ValueError:
        raise LaunchError(f"{RUNNER_MODE_ENV}={raw!r} is not a runner mode; use one of: {choices}") from None
    if mode in _NOT_BUILT:
        raise LaunchError(
            f"{RUNNER_MODE_ENV}={mode.value}: {_NOT_BUILT[mode]} is not built into this runtime image yet; "
            f"this image can run {', '.join(m.value for m in RunnerMode if m not in _NOT_BUILT)}"
        )
    return mode


def select_port(mode: RunnerMode, env: Mapping[str, str]) -> int:
    """The mode's fixed port, unless RUNTIME_PORT overrides it for a local run."""
    raw = env.get(PORT_OVERRIDE_ENV, "").strip()
    if not raw:
        return PORTS[mode]
    if not raw.isdigit() or not 0 < int(raw) < 65536:
        raise LaunchError(f"{PORT_OVERRIDE_ENV}={raw!r} is not a TCP port; use 1-65535 or unset it")
    return int(raw)


def select_drain_settings(mode: RunnerMode, env: Mapping[str, str]) -> None:
    """The AER and the Tool Pod refuse to start on a malformed drain setting or pod IP (L-06)."""
    if mode not in (RunnerMode.AER, RunnerMode.TOOL):
        return
    from agent_runtime.servers.drain import DrainSettings, DrainSettingsError, PodIdentity

    try:
        DrainSettings.from_env(env)
        PodIdentity.from_env(env, host="", port=select_port(mode, env))
    except DrainSettingsError as exc:
        raise LaunchError(str(exc)) from None


def select_body_timeout(env: Mapping[str, str]) -> float:
    """BODY_TIMEOUT_S: how long any request's body may take to arrive (408 after)."""
    from agent_runtime.listen import body_timeout_from_env

    try:
        return body_timeout_from_env(env)
    except ValueError as exc:
        raise LaunchError(str(exc)) from None


def build_component(mode: RunnerMode, env: Mapping[str, str]) -> ASGIApp:
    """Load the token, the tenant App and the bundle, and build the mode's ASGI app."""
    if mode is RunnerMode.OE:
        # A platform service: no tenant code, no bundle, no per-Agent token of its own.
        from agent_runtime.servers.oe import build_oe_from_env

        return build_oe_from_env(env)
    if mode is RunnerMode.MEMORY:
        # Per Agent, but no tenant code and no bundle: only the token, the store and the embedder.
        from agent_runtime.servers.memory import build_memory_from_env

        return build_memory_from_env(env)
    if mode is RunnerMode.TOOL:
        # Before any tenant code runs: every line the Tool Pod logs loses every form of every secret it holds.
        from agent_runtime.redaction import redact_logs, redact_std_streams, redactor_for

        redactor = redactor_for(tenant_secret_env(env).values())
        # Before any tenant code runs: no process of this uid (a tenant tool's worker) may read this
        # one's environment or memory, which hold every connector credential and LLM key (issue 36).
        from agent_runtime.process_privacy import make_undumpable

        make_undumpable()
        redact_logs(redactor)
        redact_std_streams(redactor)  # what tenant code prints, too
    # Imported here, after logging is installed: these pull in the tenant's code and the bundle.
    from agent_runtime.connectors import resolve_runtime_bundle
    from agent_runtime.execution_token import verifier_from_env
    from agent_runtime.sdk import App, load_app
    from agent_runtime.servers.aer import build_aer_app
    from agent_runtime.servers.auth import rotating_runtime_token
    from agent_runtime.servers.tool import build_tool_app

    # One token for the guard and the OE client, read again when the mounted Secret changes.
    token = rotating_runtime_token(env)
    # The OE's public key (rendered by the operator): with it only the OE's signed statements open the
    # Tool Pod and the AER's POST /execute (issue 27).
    verifier = verifier_from_env(env)
    if verifier is None:
        logger.warning(
            "no OE public key (AGENTIC_OE_PUBLIC_KEY_FILE): the %s accepts the runtime token from any "
            "holder; give the operator AGENT_OPERATOR_OE_PUBLIC_KEY_FILE so that rendered pods mount it",
            mode.value,
        )
    spec = env.get(ENTRYPOINT_ENV, "").strip()
    tenant: App | None = None
    if spec:
        tenant = load_app(spec)
        logger.info("loaded %s=%s: %d tool(s)", ENTRYPOINT_ENV, spec, len(tenant.tools))
    bundle = resolve_runtime_bundle(env=env)
    logger.info(
        "connector bundle resolved: %d connector(s), %d built-in, digest=%s",
        len(bundle.connectors),
        len(bundle.builtins),
        bundle.digest,
    )
    from agent_runtime.listen import resolve_listen_host
    from agent_runtime.servers.drain import DrainSettings, PodIdentity

    drain_settings = DrainSettings.from_env(env)
    pod = PodIdentity.from_env(env, host=resolve_listen_host(env), port=select_port(mode, env))
    if mode is RunnerMode.TOOL:
        return build_tool_app(
            connectors=bundle.connectors,
            app=tenant,
            secret_env=tenant_secret_env(env),
            token=token,
            pod_name=pod.name,  # HOSTNAME: Kubernetes sets it to the pod's name
            app_id=env.get("APP_ID") or None,
            pod_address=pod.address,
            drain_settings=drain_settings,
            builtins=bundle.builtins,
            verifier=verifier,
            tenant_entrypoint=spec or None,
        )
    if tenant is None:
        raise LaunchError(
            f"{RUNNER_MODE_ENV}=aer needs {ENTRYPOINT_ENV}=package.module:app naming the tenant's App"
        )
    if tenant.entrypoint_function is None:
        raise LaunchError(
            f"{ENTRYPOINT_ENV}={spec}: the App has no @app.entrypoint; decorate the agent's main function"
        )
    from agent_runtime.sdk import OEClient, oe_url_from_env

    oe = OEClient(oe_url_from_env(env), token=token)
    return build_aer_app(
        connectors=bundle.connectors,
        app=tenant,
        token=token,
        oe=oe,
        app_id=env.get("APP_ID") or None,
        shutdown_timeout_s=SHUTDOWN_TIMEOUT_S,
        pod=pod,
        drain_settings=drain_settings,
        builtins=bundle.builtins,
        verifier=verifier,
    )


def _ignore_signal(signum: int, frame: FrameType | None) -> None:
    """uvicorn re-raises the signal it drained on; after a clean drain that must not kill the process."""


def serve(app: ASGIApp, *, host: str, port: int, body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S) -> bool:
    """Run uvicorn on a socket we bound ourselves (dual stack when asked); True when it started.

    uvicorn has no body read timeout, so `BodyGuard` bounds the body's arrival and its JSON nesting.
    """
    import uvicorn

    from agent_runtime.listen import BodyGuard, bind_listener

    sock = bind_listener(host, port)
    config = uvicorn.Config(
        BodyGuard(app, timeout_s=body_timeout_s),
        log_config=None,  # keep our handler; uvicorn's loggers propagate to it
        access_log=False,  # a line per call would cost more than the call itself
        lifespan="on",
        server_header=False,
        proxy_headers=False,  # pods are reached directly by the OE, never through a proxy we trust
        timeout_graceful_shutdown=int(SHUTDOWN_TIMEOUT_S),
    )
    server = uvicorn.Server(config)
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _ignore_signal)
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
    return bool(server.started)


def main(env: Mapping[str, str] | None = None) -> int:
    """Start the component RUNNER_MODE names; return the process exit code."""
    env = os.environ if env is None else env
    install_logging(env)
    try:
        mode = select_mode(env)
        port = select_port(mode, env)
        select_drain_settings(mode, env)
        body_timeout_s = select_body_timeout(env)
    except LaunchError as exc:
        logger.error("%s", exc)
        return EXIT_BAD_CONFIG
    try:
        tracing_on = setup_tracing(mode.value, env)
        app = build_component(mode, env)
    except (TracingConfigError, ExecutionLogError) as exc:
        logger.error("%s", exc)
        return EXIT_BAD_CONFIG
    except Exception as exc:
        logger.error("%s start-up failed: %s", mode.value, exc, exc_info=exc)
        return EXIT_STARTUP_FAILED

    from agent_runtime.listen import resolve_listen_host

    if tracing_on:
        app = instrument(app, component=mode.value)
    # Everything built so far (modules, the app, the bundle) lives as long as the process: kept out of the
    # collector's generations, a collection triggered by a request's garbage scans only what requests made.
    gc.freeze()
    host = resolve_listen_host(env)
    logger.info("listener bind resolved: host=%s", host)
    logger.info("starting %s on port %d", mode.value, port)
    try:
        started = serve(app, host=host, port=port, body_timeout_s=body_timeout_s)
    except Exception as exc:
        logger.error("%s server failed: %s", mode.value, exc, exc_info=exc)
        return EXIT_STARTUP_FAILED
    if not started:
        logger.error("%s server did not start; see the records above", mode.value)
        return EXIT_STARTUP_FAILED
    logger.info("%s stopped", mode.value)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
