"""The tests of `llamachat.ui.chat.state`."""

from __future__ import annotations

import ast
import dataclasses

from llamachat.dev import structure
from llamachat.ui.chat.state import ChatState

FIELDS = frozenset(field.name for field in dataclasses.fields(ChatState))
# What changes a list or a dict in place: `state.loaded.append(x)` writes the state too.
MUTATORS = frozenset(
    ("append", "extend", "insert", "remove", "pop", "clear", "sort", "reverse")
    + ("update", "setdefault", "popitem", "__setitem__", "__delitem__")
)


def _name(node: ast.AST) -> str:
    """The last name of `node` (`self._state` -> `_state`), '' for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _pairs(node: ast.AST) -> list[tuple[ast.AST, ast.AST]]:
    """The (target, value) pairs an assignment binds, tuples taken apart element by element."""
    if isinstance(node, ast.Assign):
        found = []
        for target in node.targets:
            if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                found.extend(zip(target.elts, node.value.elts, strict=False))
            else:
                found.append((target, node.value))
        return found
    if isinstance(node, ast.AnnAssign) and node.value is not None:
        return [(node.target, node.value)]
    return []


def _holders(trees: dict[str, ast.Module]) -> set[str]:
    """The names a ChatState goes by: what `ChatState(...)` is assigned to, parameters
    annotated with it, and whatever is assigned from one of those
    (`self._state = builder.state`)."""
    names: set[str] = set()
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.arg) and node.annotation is not None:
                if "ChatState" in ast.unparse(node.annotation):
                    names.add(node.arg)
            for target, value in _pairs(node):
                if isinstance(value, ast.Call) and _name(value.func) == "ChatState":
                    names.add(_name(target))
    while True:
        more = {
            _name(target)
            for tree in trees.values()
            for node in ast.walk(tree)
            for target, value in _pairs(node)
            if _name(value) in names and _name(target)
        } - names
        if not more:
            return names
        names |= more


def _writes(tree: ast.Module, holders: set[str]) -> list[str]:
    """Every write to a field of a ChatState in `tree`, as `line: code`."""

    def is_field(node: ast.AST) -> bool:
        return (
            isinstance(node, ast.Attribute) and node.attr in FIELDS and _name(node.value) in holders
        )

    found = []
    for node in ast.walk(tree):
        stored = isinstance(getattr(node, "ctx", None), (ast.Store, ast.Del))
        if (
            (stored and is_field(node))
            or (stored and isinstance(node, ast.Subscript) and is_field(node.value))
            or (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in MUTATORS
                and is_field(node.func.value)
            )
            or (
                isinstance(node, ast.Call)
                and _name(node.func) in ("setattr", "delattr")
                and node.args
                and _name(node.args[0]) in holders
            )
        ):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def _ui_trees() -> dict[str, ast.Module]:
    """The parsed modules that can hold a ChatState: the ui layer's (it is a Qt object's
    state, and the core is Qt-free: `test_layering` holds that)."""
    return {
        name: ast.parse(path.read_text(encoding="utf-8"))
        for name, path in structure.product_modules().items()
        if name.startswith("llamachat.ui.")
    }


class TestChatState:
    """A conversation's state has one writer, `ChatWriter`, in the state's own module."""

    def test_only_the_chat_writer_writes_the_chat_state(self) -> None:
        """No module but `ChatState`'s own (its `ChatWriter`) assigns, or changes in place,
        a field of it: the conversation, outbox, compaction, skill_loader, temporary,
        versions and memory ask the writer."""
        trees = _ui_trees()
        owner = ChatState.__module__
        holders = _holders(trees)
        # The helpers' own names for it are found, so the scan sees their writes.
        assert {"state", "_state"} <= holders, holders
        writes = {name: _writes(tree, holders) for name, tree in trees.items()}
        assert writes[owner], f"the scan found no write in {owner}: it would see none anywhere"
        others = {name: found for name, found in writes.items() if found and name != owner}
        assert others == {}, f"written outside {owner}"

    def test_the_scan_sees_each_way_of_writing_a_field(self) -> None:
        """The check above fails on an assignment, `+=`, an item set, an in-place change
        and `setattr` to a field, through a name the state was handed by; a read passes."""
        source = (
            "class Helper:\n"
            "    def __init__(self, builder):\n"
            "        self._state = builder.state\n"
            "    def write(self, names):\n"
            "        self._state.session_id = 1\n"
            "        self._state.trimmed += 2\n"
            "        self._state.params['temperature'] = 0.5\n"
            "        self._state.loaded.append('notes')\n"
            "        setattr(self._state, 'editing', 3)\n"
            "        return self._state.model, self.session_id\n"
        )
        tree = ast.parse(source)
        holders = _holders({"helper": tree, **_ui_trees()})
        lines = sorted(int(line.split(":")[0]) for line in _writes(tree, holders))
        assert lines == [5, 6, 7, 8, 9]
