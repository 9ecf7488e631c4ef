"""The kit's import rules (docs/architecture.md, "Which part may import which"), as data.

`RULES` names every part and sub-part of the tree and what it may import besides its own modules and
the base (`harnesscheck`, `errors`, `lazy`); whatever a part does not list, it never imports. An entry
that is itself a part or sub-part allows that one only (`conformance` is not `protocol.apis`, nor the
checks `conformance.test_*`); any other entry allows a module and what lies below it
(`reference_server.launch`). A module belongs to the most specific part that names it.

Read from the source: every import statement of every module, those inside functions and relative ones
too, so a lazy import that crosses a rule fails here as well (imports by a string, `importlib`, are not
read: the kit has them only within a part). Also held here: the doc's table states exactly these rules,
no two modules import each other (lazily or not), only `replay.cluster` imports Ray, and every package
folder is installed (pyproject's explicit `packages` list), so a new folder cannot be left out of a wheel.
"""

from __future__ import annotations

import ast
import functools
import re
import tomllib
from fnmatch import fnmatchcase
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
KIT = "harnesscheck"
BASE = frozenset({"harnesscheck", "harnesscheck.errors", "harnesscheck.lazy"})  # leaf modules, under all
EVERYTHING = "*"

# Bottom to top, as docs/architecture.md's table lists them: part -> what it may import.
RULES: dict[str, tuple[str, ...]] = {
    "harnesscheck": (),  # the base: __version__, errors, lazy; nothing of the kit
    "scenarios": (),  # data and its loader
    "stats": (),  # pure statistics
    "protocol": (),  # the protocol layer's package: below the checks, replay, reports and agents
    "protocol.wire": (),  # HTTP client, SSE decoder, transcripts, redaction, server_info
    "protocol.apis": ("protocol.wire", "scenarios"),  # one module per wire API, the one fold
    "reports": ("stats", "protocol.apis", "protocol.wire"),  # the timeline reads a stream with its fold
    "reference_server": ("scenarios",),  # the server never imports the kit; it reads the scenarios
    "reference_server.frontends": ("reference_server",),  # routes around the service
    "reference_server.app": ("reference_server", "reference_server.frontends"),
    "conformance.grammar": ("protocol.apis", "protocol.wire"),  # pure validators over the fold
    "conformance.test_*": ("conformance", "protocol.apis", "protocol.wire", "conformance.grammar",
                           "scenarios"),  # the checks judge over HTTP, never with the server's code
    "conformance": ("protocol.apis", "protocol.wire", "conformance.grammar", "scenarios", "stats",
                    "reports", "reference_server.launch", "reference_server.faults"),
    "conformance.mocker_replay": ("conformance", "scenarios", "reference_server.parsers",
                                  "reference_server.conversation", "reference_server.events"),
    "replay": ("protocol.apis", "protocol.wire", "scenarios"),
    "replay.benchmarks": ("replay", "protocol.apis", "protocol.wire", "scenarios", "stats", "reports",
                          "reference_server.launch", "reference_server.config", "reference_server.tokenizer",
                          "reference_server.make_model", "reference_server.parsers",
                          "reference_server.conversation", "reference_server.events"),
    "agents": ("conformance", "protocol.apis", "protocol.wire", "replay", "scenarios", "stats",
               "reference_server.launch", "reference_server.faults"),
    "cli": (EVERYTHING,),  # wires the parts into commands; nothing imports it
}
# Outside packages only one part may import (docs/architecture.md, "Agents and scale-out").
ONLY_IMPORTED_BY = {"ray": ("replay.cluster",)}


def _full(name: str) -> str:
    return name if name == KIT else f"{KIT}.{name}"


def _part(module: str) -> str | None:
    """The most specific part (a `RULES` key) a dotted module belongs to; None outside the kit."""
    if module in BASE:
        return "harnesscheck"
    if module == f"{KIT}.__main__":
        return "cli"
    best = None
    for part in RULES:
        full = _full(part)
        inside = module == full or module.startswith(full + ".") or fnmatchcase(module, full)
        if part != "harnesscheck" and inside and (best is None or len(part) > len(best)):
            best = part
    return best


def _allows(entry: str, target: str) -> bool:
    if entry == EVERYTHING:
        return True
    if entry in RULES:
        return _part(target) == entry
    full = _full(entry)
    return target == full or target.startswith(full + ".")


def _modules() -> dict[str, Path]:
    """Every module of the kit by dotted name, from pyproject's package-dir (the installed names)."""
    package_dir = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    out: dict[str, Path] = {}
    for name, folder in package_dir.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT / folder).with_suffix("")
            dotted = ".".join([name, *(p for p in rel.parts if p != "__init__")])
            out[dotted] = path
    return out


MODULES = _modules()


@functools.cache
def _parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def _imports(module: str, path: Path, known: dict[str, Path] | None = None) -> list[tuple[int, str]]:
    """(line, dotted target) of every import statement. `from pkg import name` names pkg.name where that
    is a module (importing a package's own submodule is not importing what its __init__ holds), else pkg."""
    known = MODULES if known is None else known
    tree = _parsed(path)
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
            submodules = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in known]
            found += [(node.lineno, s) for s in submodules]
            if len(submodules) < len(node.names):
                found.append((node.lineno, target))
    return found


def _crossings() -> list[str]:
    out = []
    for module, path in MODULES.items():
        own = _part(module)
        assert own is not None, f"{module} belongs to no part of RULES"
        for line, target in _imports(module, path):
            other = _part(target)
            if other is None or other == own or target in BASE or any(_allows(e, target) for e in RULES[own]):
                continue
            where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
            out.append(f"{where}:{line}: {module} ({own}) imports {target} ({other})")
    return out


def test_every_import_follows_the_rules() -> None:
    crossings = _crossings()
    assert not crossings, "imports against docs/architecture.md's rules:\n" + "\n".join(crossings)


def test_every_module_belongs_to_a_part_and_every_part_has_modules() -> None:
    parts = {_part(m) for m in MODULES}
    assert None not in parts
    assert parts == set(RULES), f"parts with no module: {set(RULES) - parts}"
    for part, entries in RULES.items():
        for entry in entries:
            named = entry == EVERYTHING or entry in RULES or any(_allows(entry, m) for m in MODULES)
            assert named, f"{part}: {entry} names no module"


def test_the_doc_states_exactly_these_rules() -> None:
    """docs/architecture.md's table (its first two columns) is RULES, row for row."""
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = doc.split("## Which part may import which", 1)[1].split("\n## ", 1)[0]
    stated = {}
    for row in section.splitlines():
        cells = row.split("|")
        if not row.startswith("| `") or len(cells) < 4:
            continue
        part = re.findall(r"`([^`]+)`", cells[1])[0]
        stated[part] = tuple(re.findall(r"`([^`]+)`", cells[2]))
    assert stated == RULES
    assert list(stated) == list(RULES)  # the same order: bottom to top
    for package, parts in ONLY_IMPORTED_BY.items():
        assert f"only {' and '.join(f'`{p}`' for p in parts)} imports `{package}`" in section


def test_no_two_modules_import_each_other() -> None:
    """No cycle of imports between modules, lazy ones included (a module's own enclosing packages aside:
    importing a submodule runs them first anyway). A lazy import that closes a cycle hides a layering
    the code does not have."""
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for module, path in MODULES.items():
        for _, target in _imports(module, path):
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target and target != module and not module.startswith(target + "."):
                graph[module].add(target)
    cycles, state = [], dict.fromkeys(graph, 0)  # 0 unseen, 1 on the path, 2 done

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for nxt in sorted(graph[module]):
            if state[nxt] == 1:
                cycles.append(" -> ".join([*path[path.index(nxt):], nxt]))
            elif state[nxt] == 0:
                visit(nxt, [*path, nxt])
        state[module] = 2

    for module in graph:
        if state[module] == 0:
            visit(module, [module])
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def _folder(module: str) -> str:
    """The top-level folder of a module (`harnesscheck.protocol.apis.chat` -> `protocol`)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and module not in BASE else KIT


def test_no_folder_cycle_and_protocol_below_its_readers() -> None:
    """Between top-level folders every arrow points one way (no `reports` <-> `conformance` cycle), and the
    protocol layer (apis, wire) imports none of the parts that read it."""
    arrows: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        for _, target in _imports(module, path):
            if target.startswith(KIT + ".") and _folder(target) != _folder(module):
                arrows.setdefault(_folder(module), set()).add(_folder(target))
    assert not arrows.get("protocol", set()) - {"scenarios", KIT}, arrows.get("protocol")
    cycles = sorted(f"{a} <-> {b}" for a, targets in arrows.items() for b in targets
                    if a < b and a in arrows.get(b, set()))
    assert not cycles, f"folders importing each other: {cycles}"


@pytest.mark.parametrize("package", sorted(ONLY_IMPORTED_BY))
def test_a_third_party_package_is_imported_by_its_one_part(package: str) -> None:
    allowed = ONLY_IMPORTED_BY[package]
    bad = [f"{path.relative_to(ROOT)}:{line}" for module, path in MODULES.items()
           if not any(_allows(p, module) for p in allowed)
           for line, target in _imports(module, path) if target.split(".")[0] == package]
    assert not bad, bad


def test_the_check_itself_sees_a_crossing(tmp_path: Path) -> None:
    """The walker reads lazy and relative imports, and the rules tell a part from its sub-parts (so the
    tests above can fail)."""
    src = tmp_path / "m.py"
    src.write_text("def f():\n    from harnesscheck.cli import main\n    from ..replay import client\n"
                   "from .grammar import anthropic\n")
    found = {t for _, t in _imports("harnesscheck.conformance.x", src)}
    assert {"harnesscheck.cli.main", "harnesscheck.replay.client",
            "harnesscheck.conformance.grammar.anthropic"} <= found
    assert _part("harnesscheck.conformance.test_streams") == "conformance.test_*"
    assert _part("harnesscheck.conformance.grammar.chat") == "conformance.grammar"
    assert _part("harnesscheck.conformance.session") == "conformance"
    assert _part("harnesscheck.reference_server.parsers.stream") == "reference_server"
    assert not any(_allows(e, "harnesscheck.conformance.test_streams") for e in RULES["replay"])
    assert not any(_allows(e, "harnesscheck.conformance.test_streams") for e in RULES["agents"])
    assert not any(_allows(e, "harnesscheck.reference_server.parsers") for e in RULES["conformance.grammar"])
    assert not any(_allows(e, "harnesscheck.replay.benchmarks.common") for e in RULES["replay"])
    assert any(_allows(e, "harnesscheck.reference_server.launch") for e in RULES["conformance"])
    assert not any(_allows(e, "harnesscheck.reference_server.service") for e in RULES["conformance"])


def test_a_crossing_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Modules written here, read as parts of the kit: the three that break a rule are reported, lazy
    import included, and the one that keeps to its row is not."""
    fakes = {
        "harnesscheck.conformance.grammar.fake": "from harnesscheck.reference_server.parsers import get\n",
        "harnesscheck.replay.fake": "def f():\n    from harnesscheck.conformance import test_streams\n",
        "harnesscheck.reference_server.fake": "from harnesscheck.stats import bootstrap\n",
        "harnesscheck.replay.fine": "from harnesscheck.protocol.apis import get\nfrom . import fold\n",
    }
    modules = dict(MODULES)
    for name, text in fakes.items():
        (tmp_path / f"{name}.py").write_text(text)
        modules[name] = tmp_path / f"{name}.py"
    monkeypatch.setitem(globals(), "MODULES", modules)
    found = [line.split(": ", 1)[1] for line in _crossings()]
    assert found == [
        "harnesscheck.conformance.grammar.fake (conformance.grammar) imports "
        "harnesscheck.reference_server.parsers (reference_server)",
        "harnesscheck.replay.fake (replay) imports harnesscheck.conformance.test_streams "
        "(conformance.test_*)",
        "harnesscheck.reference_server.fake (reference_server) imports harnesscheck.stats.bootstrap (stats)"]


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


# -- no import-time copy of the API registry (issue 44) ------------------------------------------------------
# A module that reads the registry at its import (a tuple of apis.NAMES, a dict over apis.APIS, `from ... apis
# import NAMES`) misses an API registered later (apis.register). Reading it inside a function, or through
# apis.Table / apis.names(), is what the kit does.
_REGISTRY_READS = {"NAMES", "PREFIXES", "APIS"}


def _import_time_reads(path: Path) -> list[str]:
    """Where ``path`` reads the registry's names at import: module-level statements (and class bodies, and
    default values) outside function bodies that name apis.NAMES / PREFIXES / APIS or import them."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: list[str] = []

    def visit(node: ast.AST, top: bool) -> None:
        if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("protocol.apis"):
            out.extend(f"{path.name}:{node.lineno} from {node.module} import {a.name}" for a in node.names
                       if a.name in _REGISTRY_READS)
        if top and isinstance(node, ast.Attribute) and node.attr in _REGISTRY_READS \
                and isinstance(node.value, ast.Name) and node.value.id == "apis":
            out.append(f"{path.name}:{node.lineno} apis.{node.attr}")
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                for d in [*child.args.defaults, *child.args.kw_defaults, *getattr(child, "decorator_list", [])]:
                    if d is not None:
                        visit(d, top)
                continue  # a function body runs at call time
            visit(child, top)

    visit(tree, True)
    return out


def _product_files() -> list[Path]:
    folders = ("agents", "conformance", "harnesscheck", "protocol", "replay", "reports", "scenarios", "stats")
    return [p for f in folders for p in sorted((ROOT / f).rglob("*.py")) if "toy" not in p.parts]


def test_no_module_copies_the_registry_at_import() -> None:
    found = {str(p.relative_to(ROOT)): _import_time_reads(p) for p in _product_files()}
    copies = {f: reads for f, reads in found.items() if reads and f != "protocol/apis/__init__.py"}
    assert not copies, f"read the registry at call time (apis.names(), apis.Table): {copies}"


def test_the_copy_finder_sees_one(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text("from harnesscheck.protocol import apis\nX = tuple(apis.NAMES)\n"
                    "def f(a=apis.PREFIXES):\n    return apis.NAMES\n")
    assert _import_time_reads(path) == ["m.py:2 apis.NAMES", "m.py:3 apis.PREFIXES"]
    path.write_text("from harnesscheck.protocol.apis import NAMES as APIS\n")
    assert _import_time_reads(path) == ["m.py:1 from harnesscheck.protocol.apis import NAMES"]


def test_a_module_over_600_lines_says_why_it_is_one() -> None:
    """Issue 44: no product module over ~600 lines without a reason at its top ("Why one module ...")."""
    long = []
    for path in [*_product_files(), *sorted((ROOT / "reference_server").rglob("*.py"))]:
        text = path.read_text(encoding="utf-8")
        if text.count("\n") > 600 and "Why one module" not in (ast.get_docstring(ast.parse(text)) or ""):
            long.append(f"{path.relative_to(ROOT)} ({text.count(chr(10))} lines)")
    assert not long, f"split these, or say at their top why each is one module: {long}"
