"""The session viewer's static files (`static/`), served by `orchestrator.api.routers.web`.

Plain HTML, CSS and ES modules, committed as they are served: no build step, no CDN, so the page
works on a machine that is offline.
"""
