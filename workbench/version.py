"""The package's version, in a module of its own: the root package re-exports it, and the code that
records or prints it (``init``, ``--version``) imports it from here, never from the root package
(whose lazy exports import the API, which imports the services)."""

__version__ = "0.1.0"
