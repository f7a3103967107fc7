"""The gateway's page, `/ui`: plain HTML, CSS and JavaScript shipped in the package."""

from llamad.gateway.page.routes import for_browsers, page_routes

__all__ = ["for_browsers", "page_routes"]
