"""The imports of a Python file, relative ones resolved: shared by the layering checks of setpo/ and reproduce/."""

from __future__ import annotations

import ast
from pathlib import Path


def file_imports(path: Path, package: str) -> list[tuple[int, str, list[str]]]:
    """(line, module, names) of every import in the file, the ones inside functions too.

    ``import a.b`` gives ("a.b", []); ``from m import x, y`` gives (m, ["x", "y"]), with a relative m resolved
    against ``package`` (the package the file belongs to).
    """
    out = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            out.append((node.lineno, module, [a.name for a in node.names]))
    return out
