"""Sockets: the only package that subclasses Twisted's protocol classes."""
