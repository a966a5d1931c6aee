"""`agentengine completion bash|zsh|fish`: the shell's completion script (Click's own), to source."""

from __future__ import annotations

import click

SHELLS = ("bash", "zsh", "fish")
COMPLETE_VAR = "_AGENTENGINE_COMPLETE"


@click.command()
@click.argument("shell", type=click.Choice(SHELLS))
@click.pass_context
def completion(ctx: click.Context, shell: str) -> None:
    """Print the completion script for SHELL.

    \b
    bash:  eval "$(agentengine completion bash)"   (in ~/.bashrc)
    zsh:   eval "$(agentengine completion zsh)"    (in ~/.zshrc)
    fish:  agentengine completion fish > ~/.config/fish/completions/agentengine.fish
    """
    from click.shell_completion import get_completion_class

    root = ctx.find_root()
    cls = get_completion_class(shell)
    assert cls is not None  # click ships bash, zsh and fish
    script = cls(root.command, {}, root.info_name or "agentengine", COMPLETE_VAR).source()
    click.echo(script)
