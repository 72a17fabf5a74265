"""The documentation stays true to the code: every environment variable the code reads is in
docs/configuration.md and nothing there is stale, the README stays short, and links resolve.

The variables are collected by parsing the code (AST over every module outside tests/ and bench/,
plus the Procfile), so a new `env.str("X")` or `os.environ.get("X")` cannot be forgotten.
"""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIGURATION = ROOT / "docs" / "configuration.md"
README_MAX_LINES = 260
# Code that is not the product: its own variables are described in docs/development.md and bench/.
NOT_PRODUCT = {".venv", ".git", "tests", "bench", "var", "node_modules"}
# django-environ's readers: env.str("NAME", …), env.bool(…), env.db(…), env("NAME").
ENV_READERS = {"str", "bool", "int", "float", "list", "tuple", "dict", "json", "url", "db", "db_url", "cache", "path"}
OS_ENVIRON_READERS = {"get", "setdefault", "pop"}
VARIABLE = re.compile(r"[A-Z][A-Z0-9_]*")


def product_modules():
    for path in sorted(ROOT.rglob("*.py")):
        if not NOT_PRODUCT.intersection(path.relative_to(ROOT).parts):
            yield path


def _is_os_environ(node) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ" and getattr(node.value, "id", None) == "os"


def _first_string(call: ast.Call) -> str | None:
    if call.args and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str):
        return call.args[0].value
    return None


def _reads_the_environment(call: ast.Call) -> bool:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id == "env"
    if not isinstance(func, ast.Attribute):
        return False
    owner = getattr(func.value, "id", None)
    return (
        (owner == "env" and func.attr in ENV_READERS)
        or (owner == "os" and func.attr == "getenv")
        or (_is_os_environ(func.value) and func.attr in OS_ENVIRON_READERS)
    )


def variables_read_by(source: str) -> set[str]:
    """Names passed as literals to env(…), env.<type>(…), os.environ.get/setdefault(…), os.getenv(…),
    os.environ[…]."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        name = None
        if isinstance(node, ast.Call) and _reads_the_environment(node):
            name = _first_string(node)
        elif (
            isinstance(node, ast.Subscript)
            and _is_os_environ(node.value)
            and isinstance(node.slice, ast.Constant)
            and isinstance(node.slice.value, str)
        ):
            name = node.slice.value
        if name and VARIABLE.fullmatch(name):
            found.add(name)
    return found


def variables_in_code() -> dict[str, list[str]]:
    """Each variable the product reads, with the files that read it."""
    readers: dict[str, list[str]] = {}
    sources = [(path, path.read_text()) for path in product_modules()]
    for path, source in sources:
        for name in variables_read_by(source):
            readers.setdefault(name, []).append(str(path.relative_to(ROOT)))
    # The Procfile's shell reads ${NAME} or ${NAME:-default} for each process it starts.
    for name in re.findall(r"\$\{([A-Z][A-Z0-9_]*)", (ROOT / "Procfile").read_text()):
        readers.setdefault(name, []).append("Procfile")
    return readers


def variables_documented() -> set[str]:
    """The variables in the first column of the tables of docs/configuration.md."""
    documented = set()
    for line in CONFIGURATION.read_text().splitlines():
        if not line.startswith("|"):
            continue
        first_cell = line.strip("|").split("|", 1)[0]
        documented.update(re.findall(r"`([A-Z][A-Z0-9_]*)`", first_cell))
    return documented


def test_the_parser_finds_each_way_of_reading_the_environment():
    source = (
        'import os\nX = env.str("A_STR", default="")\nY = env("A_CALL")\nZ = env.db(\n    "A_DB", default="")\n'
        'os.environ.get("B_GET")\nos.getenv("B_GETENV")\nos.environ["B_ITEM"]\nos.environ.setdefault("B_SET", "x")\n'
        'settings.get("NOT_ENV")\nos.environ.get(name)\n'
    )
    assert variables_read_by(source) == {"A_STR", "A_CALL", "A_DB", "B_GET", "B_GETENV", "B_ITEM", "B_SET"}


def test_every_variable_the_code_reads_is_documented():
    readers = variables_in_code()
    assert "SECRET_KEY" in readers and "DATABASE_URL" in readers, "the parser no longer sees config/settings.py"
    undocumented = {name: files for name, files in readers.items() if name not in variables_documented()}
    assert not undocumented, f"add these to a table in docs/configuration.md: {undocumented}"


def test_every_documented_variable_is_still_read():
    stale = variables_documented() - set(variables_in_code())
    assert not stale, f"docs/configuration.md documents variables nothing reads any more: {sorted(stale)}"


def test_the_readme_stays_short():
    lines = len((ROOT / "README.md").read_text().splitlines())
    assert lines < README_MAX_LINES, f"README.md has {lines} lines: move detail into docs/"


def documentation_pages():
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "bench" / "README.md"]


def relative_links(text: str) -> list[str]:
    """Targets of Markdown links and images that point into the repository (no scheme, not an anchor)."""
    targets = re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", text)
    return [t for t in targets if not re.match(r"[a-z][a-z0-9+.-]*:", t) and not t.startswith("#")]


def test_every_relative_link_points_at_a_file_that_exists():
    broken = []
    for page in documentation_pages():
        for target in relative_links(page.read_text()):
            if not (page.parent / target.split("#", 1)[0]).exists():
                broken.append(f"{page.relative_to(ROOT)} → {target}")
    assert not broken, "broken links: " + ", ".join(broken)


def test_the_documentation_names_nothing_outside_the_repository():
    outside = re.compile(r"\.\./shared|SPEC\.md|ARCHITECTURE\.md|STACK\.md")
    pages = [*documentation_pages(), *sorted(ROOT.glob("bench/**/README.md"))]
    named = [str(page.relative_to(ROOT)) for page in pages if outside.search(page.read_text())]
    assert not named, f"these pages point outside the repository: {named}"
