"""Evaluation of the service on test collections: retrieval quality (``retrieval``) with
standard metrics (``metrics``) on BEIR/TREC data (``datasets``), rendered by ``report``."""
