"""Authoring commands: `python -m agent_runtime.connectors compile|scaffold|regenerate|bundle ...`.

compile     OpenAPI 3.0 document -> tool_defs.yaml (every operation, or a skip with its reason)
scaffold    tool_defs.yaml -> a starter tool.yaml next to it
regenerate  tool_defs.yaml + a newer document -> updated tool_defs.yaml, tool names kept, changes listed
bundle      agent.yaml -> a bundle directory (what AGENTIC_CONNECTOR_BUNDLE_PATH points at), digest printed
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from agent_runtime.connectors.bundle import write_bundle
from agent_runtime.connectors.compile import compile_catalog
from agent_runtime.connectors.definitions import load_tool_defs
from agent_runtime.connectors.errors import ConnectorError
from agent_runtime.connectors.regenerate import regenerate_catalog
from agent_runtime.connectors.resolve import bundle_from_agent_config
from agent_runtime.connectors.toolyaml import declares_no_security, scaffold_tool_yaml

_NO_SECURITY = (
    "  note: the document declares no security scheme; if the API needs a credential, set auth: in "
    "tool.yaml (type, env), otherwise auth: {type: none}: a connector that says neither is refused"
)


def _compile(args: argparse.Namespace) -> str:
    catalog = compile_catalog(args.document, connector_name=args.name)
    catalog.write(args.output)
    lines = [f"{args.output}: {len(catalog.tools)} tools, {len(catalog.skipped)} skipped"]
    lines += [f"  skipped {s.method} {s.path}: {s.reason}" for s in catalog.skipped]
    if declares_no_security(catalog):
        lines.append(_NO_SECURITY)
    return "\n".join(lines)


def _scaffold(args: argparse.Namespace) -> str:
    catalog_path = Path(args.tool_defs)
    catalog = load_tool_defs(catalog_path)
    target = Path(args.output) if args.output else catalog_path.parent / "tool.yaml"
    if target.exists() and not args.force:
        raise ConnectorError(f"{target} exists; pass --force to overwrite it")
    tool_defs = os.path.relpath(catalog_path.resolve(), target.resolve().parent)  # tool.yaml-relative
    scaffold_tool_yaml(catalog, base_url=args.base_url, tool_defs=tool_defs).write(target)
    message = f"{target}: exposes {len(catalog.tools)} operations; trim expose.allow to what the agent needs"
    if declares_no_security(catalog):
        message += "\n  note: the document declares no security scheme, so auth: {type: none} was written; "
        message += "replace it with the provider's scheme (type, env) if the API needs a credential"
    return message


def _regenerate(args: argparse.Namespace) -> str:
    existing = load_tool_defs(args.tool_defs)
    updated, changes = regenerate_catalog(existing, args.document)
    updated.write(args.output or args.tool_defs)
    return "\n".join(
        [f"{args.output or args.tool_defs}: {len(updated.tools)} tools"]
        + [f"  added {name}" for name in changes.added]
        + [f"  removed {name}" for name in changes.removed]
        + [f"  changed {name}" for name in changes.changed]
    )


def _bundle(args: argparse.Namespace) -> str:
    bundle = bundle_from_agent_config(args.agent_config)
    index = write_bundle(bundle, args.output)
    return f"{index}: {bundle.tool_count} tools, digest {bundle.digest}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m agent_runtime.connectors", description=__doc__.splitlines()[0]
    )
    commands = parser.add_subparsers(dest="command", required=True)

    compile_cmd = commands.add_parser("compile", help="OpenAPI 3.0 document -> tool_defs.yaml")
    compile_cmd.add_argument("document", help="local OpenAPI 3.0 JSON or YAML file")
    compile_cmd.add_argument("--name", required=True, help="connector name (tool name prefix)")
    compile_cmd.add_argument("-o", "--output", default="tool_defs.yaml")
    compile_cmd.set_defaults(run=_compile)

    scaffold_cmd = commands.add_parser("scaffold", help="tool_defs.yaml -> starter tool.yaml")
    scaffold_cmd.add_argument("tool_defs")
    scaffold_cmd.add_argument("--base-url", help="the provider's API root (default: the document's server)")
    scaffold_cmd.add_argument("-o", "--output", help="default: tool.yaml beside tool_defs")
    scaffold_cmd.add_argument("--force", action="store_true")
    scaffold_cmd.set_defaults(run=_scaffold)

    regen_cmd = commands.add_parser("regenerate", help="update tool_defs.yaml from a newer document")
    regen_cmd.add_argument("tool_defs")
    regen_cmd.add_argument("document")
    regen_cmd.add_argument("-o", "--output", help="default: overwrite tool_defs")
    regen_cmd.set_defaults(run=_regenerate)

    bundle_cmd = commands.add_parser("bundle", help="agent.yaml -> bundle directory")
    bundle_cmd.add_argument("agent_config")
    bundle_cmd.add_argument("-o", "--output", required=True, help="bundle directory")
    bundle_cmd.set_defaults(run=_bundle)

    args = parser.parse_args(argv)
    try:
        print(args.run(args))
    except ConnectorError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
