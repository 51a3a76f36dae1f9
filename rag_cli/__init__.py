"""The ``rag`` command line: the service's entry point for people and CI."""
