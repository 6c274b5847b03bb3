"""The house rules a reviewer would otherwise check by hand: apps import each other in one
direction only, the shared kernel in `config` imports no app, and no module or function grows
past the size at which it should be split."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Each app may import only the apps before it.
APPS = ["merchants", "customers", "kyc", "webhooks", "quotes", "rails", "payments", "transfers"]
# config is the kernel every app uses, and also the project's root: these modules put the apps
# together (URLs, the dashboard's site and its cross-app worklist) and may import any of them.
CONFIG_ROOT_MODULES = {"config/urls.py", "config/admin_site.py", "config/worklist.py"}
MODULE_LINES = 600
FUNCTION_LINES = 60


def _modules(folder: str) -> list[Path]:
    return [
        path
        for path in sorted((ROOT / folder).rglob("*.py"))
        if "migrations" not in path.parts and "tests" not in path.parts
    ]


def _imported_apps(path: Path) -> set[str]:
    """The apps `path` imports, at module level or inside a function."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
    return names & {*APPS, "config"}


@pytest.mark.parametrize("app", APPS)
def test_an_app_imports_only_the_apps_below_it(app):
    allowed = {app, "config", *APPS[: APPS.index(app)]}
    imports = {
        str(path.relative_to(ROOT)): _imported_apps(path) - allowed for path in _modules(app)
    }
    assert {name: sorted(apps) for name, apps in imports.items() if apps} == {}


def test_the_config_kernel_imports_no_app():
    imports = {
        name: _imported_apps(path) - {"config"}
        for path in _modules("config")
        if (name := str(path.relative_to(ROOT))) not in CONFIG_ROOT_MODULES
    }
    assert {name: sorted(apps) for name, apps in imports.items() if apps} == {}


def _application_modules() -> list[Path]:
    return [path for folder in ["config", *APPS] for path in _modules(folder)]


def test_no_module_is_over_600_lines():
    long = {
        str(path.relative_to(ROOT)): lines
        for path in _application_modules()
        if (lines := len(path.read_text().splitlines())) > MODULE_LINES
    }
    assert long == {}


def test_no_function_is_over_60_lines():
    long = {}
    for path in _application_modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > FUNCTION_LINES:
                    long[f"{path.relative_to(ROOT)}:{node.name}"] = lines
    assert long == {}
