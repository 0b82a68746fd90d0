"""Thin HTTP handlers, one module per feature: parse the request, call the service in the thread
pool, render a template (or redirect after a POST). No cluster logic lives here."""
