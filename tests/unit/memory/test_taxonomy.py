"""Category trees: paths, cycles, subtrees."""

from __future__ import annotations

from agent_runtime.memory.records import MemoryRecord
from agent_runtime.memory.taxonomy import Tree
from agent_runtime.memory.wire import Kind


def node(node_id: str, parent: str | None = None) -> MemoryRecord:
    return MemoryRecord(
        id=node_id,
        kind=Kind.TAXONOMIC,
        workspace_id="w",
        namespace="n",
        content=node_id.title(),
        metadata={},
        created_at=0,
        updated_at=0,
        parent_id=parent,
    )


TREE = Tree([node("root"), node("b", "root"), node("a", "root"), node("a1", "a"), node("x", "gone")])


def test_paths_and_roots() -> None:
    assert TREE.path("a1") == ["root", "a", "a1"]
    assert TREE.path("x") == ["x"]  # a missing parent makes a root
    assert TREE.children[None] == ["root", "x"]


def test_walk_is_depth_first_in_label_order_with_depth_limit() -> None:
    assert list(TREE.walk(None, max_depth=None)) == [("root", 0), ("a", 1), ("a1", 2), ("b", 1), ("x", 0)]
    assert list(TREE.walk("a", max_depth=0)) == [("a", 0)]
    assert TREE.descendants("root") == ["a", "a1", "b"]


def test_cycles() -> None:
    assert TREE.would_cycle("a", "a1") and TREE.would_cycle("a", "a")
    assert not TREE.would_cycle("a1", "b") and not TREE.would_cycle("a", None)
    broken = Tree([node("p", "q"), node("q", "p")])
    assert broken.path("p") == ["q", "p"]  # a stored cycle never loops forever
