"""One service per feature: plain Python over the client APIs, driven by the handlers and the tests."""
