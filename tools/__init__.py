"""What the graph nodes and the ingestion pipeline call: config, models, stores, retrievers."""
