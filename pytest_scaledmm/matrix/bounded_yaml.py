"""YAML for matrix files and the corpus, read within bounds: a file of at most 1 MiB, nodes nested
at most 100 deep, and at most 250,000 nodes once aliases are expanded.

PyYAML's safe loader shares an aliased node instead of copying it, so an alias bomb ("billion
laughs") loads in microseconds; the blow-up comes later, when the data is validated, hashed or
walked (3 GB and a MemoryError for ten levels of ten aliases). Deep nesting recurses in the
composer (RecursionError). Both are counted while the document is composed, before any of that
happens, and end as one MatrixError naming the file and the line. No torch import here.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from .errors import MatrixError

MAX_BYTES = 1 << 20  # a matrix of every axis and profile is a few KiB; a large corpus ~100 KiB
MAX_DEPTH = 100  # nodes nested in nodes; a matrix needs about 6
MAX_NODES = 250_000  # scalars, lists and mappings, an alias counting as the node it repeats


def _error(path, message: str) -> MatrixError:
    return MatrixError(path, "", message)


def read_text(path: Path, what: str = "file") -> str:
    """A matrix or included file's text: a missing, unreadable, non-UTF-8 or oversized one is a
    MatrixError. At most MAX_BYTES + 1 bytes are read, whatever the file claims to be."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise _error(path, f"{what} not found") from None
    except OSError as exc:
        raise _error(path, f"cannot be read: {exc}") from None
    if len(raw) > MAX_BYTES:
        raise _error(path, f"{what} is larger than {MAX_BYTES} bytes (1 MiB), the most a matrix file may be")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _error(path, f"cannot be read: {exc}") from None


class _LimitExceeded(Exception):
    def __init__(self, message: str, mark=None):
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        super().__init__(f"{message}{where}")


def _scalar_as_str(loader: yaml.SafeLoader, node: yaml.Node) -> str:
    return loader.construct_yaml_str(node)


def _loader_class():
    class BoundedLoader(yaml.SafeLoader):
        """SafeLoader that counts nodes, aliases included at their expanded size, and depth."""

        def __init__(self, stream):
            super().__init__(stream)
            self.bound_depth = 0
            self.bound_nodes = 0
            self.bound_sizes: dict[int, tuple] = {}  # id(node) -> (node, expanded size)

        def _count(self, n: int, mark, what: str) -> None:
            self.bound_nodes += n
            if self.bound_nodes > MAX_NODES:
                raise _LimitExceeded(f"{what} expand the document past {MAX_NODES} nodes (an alias bomb?)", mark)

        def compose_node(self, parent, index):
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()
                node = self.anchors.get(event.anchor)
                if node is not None:  # an undefined alias is PyYAML's own error
                    known = self.bound_sizes.get(id(node))
                    if known is None:  # the anchored node is still open: it contains this alias
                        raise _LimitExceeded(
                            f"alias *{event.anchor} refers to a node that contains it", event.start_mark
                        )
                    self._count(known[1], event.start_mark, f"aliases (*{event.anchor})")
                return super().compose_node(parent, index)
            mark = self.peek_event().start_mark
            self.bound_depth += 1
            if self.bound_depth > MAX_DEPTH:
                raise _LimitExceeded(f"YAML nested deeper than {MAX_DEPTH} levels", mark)
            before = self.bound_nodes
            self._count(1, mark, "nodes")
            node = super().compose_node(parent, index)
            self.bound_sizes[id(node)] = (node, self.bound_nodes - before)
            self.bound_depth -= 1
            return node

        def construct_mapping(self, node, deep=False):
            # YAML lets the last of two equal keys win silently; in a matrix that hides an edit
            # (a second `tolerance:` below the first). Keys brought in by a `<<` merge may be
            # overridden, as YAML intends.
            seen: dict[tuple[str, Any], yaml.Mark] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
                    continue
                key = (key_node.tag, key_node.value)
                if key in seen:
                    raise _LimitExceeded(
                        f"duplicate key {key_node.value!r} (first at line {seen[key].line + 1})",
                        key_node.start_mark,
                    )
                seen[key] = key_node.start_mark
            return super().construct_mapping(node, deep=deep)

    # A date-like scalar stays a string: matrix files hold no dates, and a date key would not
    # survive the JSON the matrix is hashed through.
    BoundedLoader.add_constructor("tag:yaml.org,2002:timestamp", _scalar_as_str)
    return BoundedLoader


# Quoted scalars and comments (skipped), and flow brackets (counted).
_FLOW = re.compile(r"""'(?:[^']|'')*'|"(?:[^"\\]|\\.)*"|(?:^|(?<=\s))#[^\n]*|[\[\]{}]""", re.M)


def _deep_flow(text: str):
    """The offset where flow brackets ([ {) first nest deeper than MAX_DEPTH, else None. PyYAML's
    scanner looks ahead over open flow brackets before the composer sees the first one, which
    costs half a second for 5,000 of them; this linear pass refuses them first. It may miss
    brackets (an apostrophe in a plain scalar reads as a quote): the composer's count stays."""
    depth = 0
    for match in _FLOW.finditer(text):
        bracket = match.group(0)
        if bracket in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return match.start()
        elif bracket in "]}":
            depth = max(0, depth - 1)
    return None


def _mark_at(text: str, offset: int) -> str:
    line = text.count("\n", 0, offset)
    column = offset - (text.rfind("\n", 0, offset) + 1)
    return f" at line {line + 1}, column {column + 1}"


_LOADER = None


def load(path, text: str) -> Any:
    """Parse one YAML document within the bounds above; any problem is one MatrixError naming
    `path` (and the line where the YAML allows)."""
    global _LOADER
    if len(text) > MAX_BYTES or len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        raise _error(path, f"larger than {MAX_BYTES} bytes (1 MiB), the most a matrix file may be")
    deep = _deep_flow(text)
    if deep is not None:
        raise _error(path, f"YAML nested deeper than {MAX_DEPTH} levels{_mark_at(text, deep)}")
    if _LOADER is None:
        _LOADER = _loader_class()
    loader = _LOADER(text)
    try:
        return loader.get_single_data()
    except _LimitExceeded as exc:
        raise _error(path, str(exc)) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise _error(path, f"not valid YAML{where}: {problem}") from None
    except (ValueError, OverflowError) as exc:  # e.g. an integer of more than 4300 digits
        raise _error(path, f"not valid YAML: {' '.join(str(exc).split())}") from None
    except RecursionError:  # a guard only: MAX_DEPTH keeps the composer far from the limit
        raise _error(path, "YAML nested too deeply") from None
    finally:
        loader.dispose()
