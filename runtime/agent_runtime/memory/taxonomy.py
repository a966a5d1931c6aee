"""Category trees of one namespace: paths, cycles and subtrees, computed from the nodes' parent links."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from agent_runtime.memory.records import MemoryRecord

MAX_CATEGORIES = 10_000
MAX_DEPTH = 64


class Tree:
    """The categories of one namespace, by id, with their children in label order."""

    def __init__(self, nodes: Iterable[MemoryRecord]) -> None:
        self.nodes: dict[str, MemoryRecord] = {node.id: node for node in nodes}
        self.children: dict[str | None, list[str]] = {}
        for node in sorted(self.nodes.values(), key=lambda n: (n.content, n.id)):
            parent = node.parent_id if node.parent_id in self.nodes else None
            self.children.setdefault(parent, []).append(node.id)

    def path(self, node_id: str) -> list[str]:
        """Ids from the root down to `node_id` (a broken or cyclic chain stops where it breaks)."""
        path: list[str] = []
        seen: set[str] = set()
        current: str | None = node_id
        while current is not None and current in self.nodes and current not in seen and len(path) < MAX_DEPTH:
            seen.add(current)
            path.append(current)
            current = self.nodes[current].parent_id
        return path[::-1]

    def would_cycle(self, node_id: str, new_parent: str | None) -> bool:
        """True when `new_parent` is `node_id` itself or one of its descendants."""
        return new_parent is not None and node_id in self.path(new_parent)

    def descendants(self, node_id: str) -> list[str]:
        return [nid for nid, _ in self.walk(node_id, max_depth=None)][1:]

    def walk(self, root: str | None, *, max_depth: int | None) -> Iterator[tuple[str, int]]:
        """(id, depth) depth first from `root` (depth 0), or from every root category when None."""
        starts = [(root, 0)] if root is not None else [(nid, 0) for nid in self.children.get(None, [])]
        stack = starts[::-1]
        seen: set[str] = set()
        while stack:
            node_id, depth = stack.pop()
            if node_id in seen:
                continue
            seen.add(node_id)
            yield node_id, depth
            if max_depth is None or depth < max_depth:
                stack += [(child, depth + 1) for child in reversed(self.children.get(node_id, []))]


def paths(tree: Tree, ids: Iterable[str]) -> Mapping[str, list[str]]:
    return {node_id: tree.path(node_id) for node_id in ids}
