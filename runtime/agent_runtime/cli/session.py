"""The client of one command: the global flags resolved into a target and an open OE client."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import click

from agent_runtime.cli.config import Options, Target, resolve, sends_token_in_clear

if TYPE_CHECKING:
    from agent_runtime.cli.client import OEClient


def target(ctx: click.Context) -> Target:
    """The target of the global flags, environment and kubeconfig."""
    options = ctx.find_object(Options) or Options()
    return resolve(options, os.environ)


def open_client(ctx: click.Context) -> tuple[OEClient, Target]:
    """An OE client for the target (httpx is imported only here, so `--help` stays fast)."""
    from agent_runtime.cli.client import OEClient

    where = target(ctx)
    if where.server is None:
        # No URL given: the OE of the kubeconfig's cluster, through a port-forward closed with the client.
        from agent_runtime.cli.kubeapi import KubeAPI
        from agent_runtime.cli.portforward import forwarded

        assert where.context is not None  # resolve() refuses a target with neither
        api = KubeAPI.of(where.context, token=where.context_token)
        forward = forwarded(api, environ=os.environ)
        url = forward.__enter__().url
        return OEClient(
            server=url, token=where.token, on_close=lambda: forward.__exit__(None, None, None)
        ), where
    if sends_token_in_clear(where.server):
        click.echo(
            f"warning: {where.server} is plain http: the token crosses the network unencrypted", err=True
        )
    return OEClient(server=where.server, token=where.token), where
