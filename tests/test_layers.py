"""The kit's import layers (docs/architecture.md, "Which part may import which"): a module may import its
own part and the parts below it, never one above. Read from the source (every import statement, those
inside functions too), so a lazy import that crosses a layer fails here as well. Also: every package
folder is installed (pyproject's explicit `packages` list), so a new folder cannot be left out of a wheel.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Bottom to top. The base is harnesscheck/__init__.py (the version) and harnesscheck/errors.py.
LAYERS: list[tuple[str, ...]] = [
    ("harnesscheck",),  # the base: __version__, errors
    ("harnesscheck.scenarios", "harnesscheck.stats"),
    ("harnesscheck.reports",),
    ("harnesscheck.reference_server",),
    ("harnesscheck.conformance",),
    ("harnesscheck.replay",),
    ("harnesscheck.agents",),
    ("harnesscheck.cli",),
]
FOLDERS = {"harnesscheck.agents": "agents", "harnesscheck.conformance": "conformance", "harnesscheck.replay": "replay",
           "harnesscheck.reports": "reports", "harnesscheck.stats": "stats", "harnesscheck.scenarios": "scenarios",
           "harnesscheck.reference_server": "reference_server", "harnesscheck.cli": "harnesscheck/cli"}
BASE_MODULES = {"harnesscheck", "harnesscheck.errors"}


def _part(module: str) -> str | None:
    """The part (a LAYERS entry) a dotted module name belongs to; None outside the kit."""
    if module in BASE_MODULES:
        return "harnesscheck"
    best = None
    for layer in LAYERS[1:]:
        for part in layer:
            if module == part or module.startswith(part + "."):
                best = part
    return best


def _rank(part: str) -> int:
    return next(i for i, layer in enumerate(LAYERS) if part in layer)


def _modules() -> list[tuple[str, Path]]:
    out = [("harnesscheck", ROOT / "harnesscheck" / "__init__.py"), ("harnesscheck.errors", ROOT / "harnesscheck" / "errors.py")]
    for name, folder in FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT / folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            out.append((".".join([name, *parts]), path))
    return out


def _imports(module: str, path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.append((node.lineno, target))
            found += [(node.lineno, f"{target}.{a.name}") for a in node.names if _part(f"{target}.{a.name}")]
    return found


def test_no_part_imports_a_part_above_it() -> None:
    crossings = []
    for module, path in _modules():
        own = _part(module)
        assert own is not None, module
        for line, target in _imports(module, path):
            other = _part(target)
            if other is None or other == own:
                continue
            if _rank(other) >= _rank(own) and not (other == "harnesscheck" and target in BASE_MODULES):
                crossings.append(f"{path.relative_to(ROOT)}:{line}: {own} imports {target} ({other})")
    assert not crossings, "imports against the layers (docs/architecture.md):\n" + "\n".join(crossings)


def test_nothing_but_the_cli_imports_the_cli() -> None:
    bad = [f"{path.relative_to(ROOT)}:{line}" for module, path in _modules() if _part(module) != "harnesscheck.cli"
           for line, target in _imports(module, path) if _part(target) == "harnesscheck.cli"]
    assert not bad, bad


def test_the_check_itself_sees_a_crossing(tmp_path: Path) -> None:
    """The walker reads lazy and relative imports (so the tests above can fail)."""
    src = tmp_path / "m.py"
    src.write_text("def f():\n    from harnesscheck.cli import main\n    from ..replay import client\n")
    found = dict((t, n) for n, t in _imports("harnesscheck.conformance.x", src))
    assert "harnesscheck.cli" in found and "harnesscheck.replay" in found
    assert _rank(_part("harnesscheck.cli.main")) > _rank(_part("harnesscheck.conformance.apis"))


def test_every_package_folder_is_installed() -> None:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed, mapping = set(setuptools["packages"]), setuptools["package-dir"]
    missing = []
    for name, folder in mapping.items():
        for d in [ROOT / folder, *sorted(p for p in (ROOT / folder).rglob("*") if p.is_dir())]:
            if "__pycache__" in d.parts or not any(f.is_file() for f in d.iterdir()):
                continue
            dotted = ".".join([name, *d.relative_to(ROOT / folder).parts])
            if dotted not in listed:
                missing.append(dotted)
    assert not missing, f"package folders missing from pyproject's [tool.setuptools] packages: {missing}"


@pytest.mark.parametrize("name", ["reports", "stats", "replay", "scenarios", "conformance", "agents"])
def test_no_bare_top_level_names_are_installed(name: str) -> None:
    """Installed names live under harnesscheck: a folder named like a part cannot shadow the kit."""
    listed = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    assert not any(n == name or n.startswith(name + ".") for n in listed)
