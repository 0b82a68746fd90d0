"""kafkalite-console: a web console over the brokers, the schema registry and the brokers' metrics.

The console is a client like the tools (layer 3): every page is a thin handler (``handlers/``)
over one service per feature (``services/``), and the services reach the cluster only over the
wire through :mod:`kafkalite.client`, the registry's REST API and the brokers' Prometheus
endpoints, as Redpanda Console's backend does. Pages are rendered on the server with Jinja2
(autoescaping on: records are written by anyone who can produce) and refreshed with htmx.
"""
