"""The house's layout, checked rather than reviewed by hand (docs/decisions.md, Layout).

Packages in dependency order, bottom to top: the kernel `core`, the apps, and `config`, the
project's wiring, which may import every one of them. A package imports only packages at or
below it, with every module counted: admin, management commands, migrations and wiring."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
KERNEL = "core"
APPS = ["merchants", "customers", "kyc", "webhooks", "quotes", "rails", "payments", "transfers"]
WIRING = "config"
ORDER = [KERNEL, *APPS, WIRING]
# The Celery idiom: the project package loads its Celery app when Django starts.
INIT_IMPORTS_ALLOWED = {"config/__init__.py"}


def _modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text())


def _imported_packages(path: Path) -> set[str]:
    """The project's packages `path` imports, at module level or inside a function."""
    names = set()
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
    return names & set(ORDER)


def _package_graph() -> dict[str, set[str]]:
    return {
        package: {
            imported
            for path in _modules(package)
            for imported in _imported_packages(path)
            if imported != package
        }
        for package in ORDER
    }


def test_the_package_import_graph_has_no_cycle():
    graph, done, path = _package_graph(), set(), []

    def visit(package: str) -> None:
        if package in path:
            pytest.fail(f"import cycle: {' -> '.join([*path[path.index(package) :], package])}")
        if package in done:
            return
        path.append(package)
        for imported in sorted(graph[package]):
            visit(imported)
        path.pop()
        done.add(package)

    for package in ORDER:
        visit(package)


@pytest.mark.parametrize("package", ORDER)
def test_a_package_imports_only_the_packages_below_it(package):
    allowed = set(ORDER[: ORDER.index(package) + 1])
    imports = {_name(path): _imported_packages(path) - allowed for path in _modules(package)}
    assert {name: sorted(found) for name, found in imports.items() if found} == {}


def test_no_app_imports_config():
    imports = {
        _name(path)
        for package in [KERNEL, *APPS]
        for path in _modules(package)
        if WIRING in _imported_packages(path)
    }
    assert imports == set()


def test_the_kernel_imports_no_app():
    imports = {
        _name(path): sorted(_imported_packages(path) - {KERNEL}) for path in _modules(KERNEL)
    }
    assert {name: found for name, found in imports.items() if found} == {}


def test_no_code_is_reached_through_a_dotted_string():
    """Who calls what is greppable: no import_string / import_module in application code."""
    found = set()
    for package in ORDER:
        for path in _modules(package):
            for node in ast.walk(_tree(path)):
                if isinstance(node, ast.ImportFrom) and node.module:
                    names = {alias.name for alias in node.names}
                    if names & {"import_string", "import_module"}:
                        found.add(_name(path))
                elif isinstance(node, ast.Import) and any(
                    alias.name == "importlib" for alias in node.names
                ):
                    found.add(_name(path))
    assert found == set()


def _re_exports(path: Path) -> bool:
    """Whether a package's __init__ imports names from its own modules or declares __all__."""
    package = ".".join(path.parent.relative_to(ROOT).parts)
    for node in _tree(path).body:
        if isinstance(node, ast.ImportFrom) and (
            node.level > 0 or (node.module or "").startswith(f"{package}.")
        ):
            return True
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return True
    return False


def test_no_package_re_exports_names():
    """A name is imported from the module that defines it, never through a package's __init__."""
    found = {
        _name(path)
        for package in ORDER
        for path in _modules(package)
        if path.name == "__init__.py" and _name(path) not in INIT_IMPORTS_ALLOWED
        if _re_exports(path)
    }
    assert found == set()


def _migration_dependencies(path: Path) -> set[str]:
    """The apps a migration file depends on (its `dependencies`' app labels)."""
    apps = set()
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id in ("dependencies", "run_before") for t in node.targets
        ):
            for item in ast.walk(node.value):
                if isinstance(item, ast.Tuple) and item.elts:
                    first = item.elts[0]
                    if isinstance(first, ast.Constant) and isinstance(first.value, str):
                        apps.add(first.value)
    return apps & set(APPS)


@pytest.mark.parametrize("app", APPS)
def test_an_apps_migrations_depend_only_on_the_apps_below_it(app):
    allowed = set(APPS[: APPS.index(app) + 1])
    found = {
        _name(path): sorted(_migration_dependencies(path) - allowed)
        for path in sorted((ROOT / app / "migrations").glob("*.py"))
    }
    assert {name: apps for name, apps in found.items() if apps} == {}


# The five state machines and the module that moves each (docs/decisions.md, Layout).
STATE_MACHINES = {
    "payin": "payments/services/payins.py",
    "payout": "payments/services/payouts.py",
    "refund": "payments/services/refunds.py",
    "transfer": "transfers/services/transitions.py",
    "kyc": "kyc/status.py",
}
STATUS_COLUMNS = {"status", "payin_status", "payout_status", "kyc_status"}
# Writes of a status outside core.transitions, each for a reason: a KYC document's own status
# (not a state machine's), a payin's creation (its quote consumed), a provider call's start
# (created to pending) and a pending payin's completion, each in one measured statement.
STATUS_WRITES_ALLOWED = {
    ("kyc/services.py", "kyc_document_fetch"),
    ("payments/services/payins.py", "PAYIN_CREATION"),
    ("payments/services/payins.py", "PAYIN_SUBMISSION"),
    ("payments/services/payins.py", "_payin_complete_locked"),
    ("payments/services/payins.py", "PAYIN_COMPLETION"),
}


def _calls(tree: ast.AST) -> set[str]:
    return {
        node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute | ast.Name)
    }


@pytest.mark.parametrize("machine", sorted(STATE_MACHINES))
def test_each_state_machine_moves_through_the_one_transition_helper(machine):
    """Its allowed-moves table is a core.transitions.StateMachine, and its moves go through
    transition_locked (the payments' through payment_move_locked, which calls it)."""
    tree = _tree(ROOT / STATE_MACHINES[machine])
    calls = _calls(tree)
    assert "StateMachine" in calls
    assert {"transition_locked", "payment_move_locked"} & calls
    assert "transition_locked" in _calls(_tree(ROOT / "payments/services/transitions.py"))


def _status_writes(path: Path) -> set[str]:
    """The top-level definitions of `path` that set a status column themselves: an attribute
    assignment, a setattr, an update(status=...) or SQL's SET status."""
    found = set()
    for top in _tree(path).body:
        name = getattr(top, "name", None) or next(
            (t.id for t in getattr(top, "targets", []) if isinstance(t, ast.Name)), ""
        )
        for node in ast.walk(top):
            targets = node.targets if isinstance(node, ast.Assign) else []
            if any(isinstance(t, ast.Attribute) and t.attr in STATUS_COLUMNS for t in targets):
                found.add(name)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute | ast.Name):
                called = getattr(node.func, "attr", None) or getattr(node.func, "id", None)
                keywords = {k.arg for k in node.keywords}
                if called == "update" and keywords & STATUS_COLUMNS:
                    found.add(name)
                if called == "setattr" and (
                    isinstance(node.args[1], ast.Constant) and node.args[1].value in STATUS_COLUMNS
                ):
                    found.add(name)
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and ("SET status" in node.value or "SET kyc_status" in node.value)
            ):
                found.add(name)
    return found


def test_no_status_is_set_beside_the_transition_helper():
    found = {
        (_name(path), name)
        for app in ("customers", "kyc", "payments", "transfers")
        for path in _modules(app)
        if "migrations" not in path.parts
        for name in _status_writes(path)
    }
    assert found == STATUS_WRITES_ALLOWED  # each allowed write is still found: the check works
