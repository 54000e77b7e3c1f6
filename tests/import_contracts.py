"""Custom import-linter contracts for rules the built-in ones cannot say (registered in pyproject.toml's
``[tool.importlinter]``; ``make test`` runs ``lint-imports``).

- ``acyclic_modules``: no import cycle between files anywhere under the root package. import-linter's own
  ``acyclic_siblings`` works on packages; this one walks the file graph (Tarjan's strongly connected
  components), so a cycle hidden inside one package, or through a package's ``__init__``, is found too.
- ``independent_routers``: no HTTP module imports another. A module is a router when its last name ends with
  ``router`` or ``_pages`` (the web pages); what two routers share belongs in a service (or, for pages, in
  ``lanner.web.templating``).
"""

from __future__ import annotations

import sys

from importlinter import Contract, ContractCheck, fields, output


def _strongly_connected(modules: set[str], imports: dict[str, set[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(modules) + 100))

    def visit(module: str) -> None:
        nonlocal counter
        index[module] = low[module] = counter
        counter += 1
        stack.append(module)
        on_stack.add(module)
        for imported in imports[module]:
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    try:
        for module in sorted(modules):
            if module not in index:
                visit(module)
    finally:
        sys.setrecursionlimit(limit)
    return found


class AcyclicModulesContract(Contract):
    type_name = "acyclic_modules"

    root = fields.StringField()

    def check(self, graph, verbose: bool) -> ContractCheck:  # type: ignore[no-untyped-def]
        root = str(self.root)  # type: ignore[attr-defined]
        modules = {root} | set(graph.find_descendants(root))
        imports = {m: {i for i in graph.find_modules_directly_imported_by(m) if i in modules} for m in modules}
        cycles = _strongly_connected(modules, imports)
        return ContractCheck(kept=not cycles, metadata={"cycles": cycles, "imports": imports})

    def render_broken_contract(self, check: ContractCheck) -> None:
        imports = check.metadata["imports"]
        for cycle in check.metadata["cycles"]:
            output.print_error(f"{len(cycle)} files import each other in a circle:", bold=True)
            members = set(cycle)
            for module in cycle:
                inside = sorted(imports[module] & members)
                output.print(f"  {module} -> {', '.join(inside)}")
            output.new_line()


def _is_router(module: str) -> bool:
    return module.rsplit(".", 1)[-1].endswith(("router", "_pages"))


class IndependentRoutersContract(Contract):
    type_name = "independent_routers"

    root = fields.StringField()

    def check(self, graph, verbose: bool) -> ContractCheck:  # type: ignore[no-untyped-def]
        routers = sorted(m for m in graph.find_descendants(str(self.root)) if _is_router(m))  # type: ignore[attr-defined]
        broken = [(router, imported) for router in routers
                  for imported in sorted(graph.find_modules_directly_imported_by(router))
                  if imported != router and _is_router(imported)]
        return ContractCheck(kept=not broken, metadata={"broken": broken, "routers": routers})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for router, imported in check.metadata["broken"]:
            output.print_error(f"{router} imports {imported}: share a service instead")
