"""The gateway's page, `/ui`: plain HTML, CSS and JavaScript shipped in the package."""

from llamad.gateway.page.routes import BrowserRoot, page_routes

__all__ = ["BrowserRoot", "page_routes"]
