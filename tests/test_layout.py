"""The package layout: layers are kept by import-linter (`make lint`); cycles are caught here."""

from __future__ import annotations

import grimp


def test_no_module_imports_itself_back() -> None:
    """No import cycle between two llamad modules, not even a lazy or type-only one."""
    graph = grimp.build_graph("llamad")
    cycles = [
        (module, dep)
        for module in graph.modules
        for dep in graph.find_modules_directly_imported_by(module)
        if graph.find_shortest_chain(importer=dep, imported=module)
    ]
    assert cycles == []
