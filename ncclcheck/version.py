"""ncclcheck's own version, in a module of its own so that the package and the report model
both read it without importing each other."""

__version__ = "0.1.0"
