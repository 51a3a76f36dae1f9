"""Where collections live. ``store = "embedded"`` keeps each collection in files under
``data_dir`` (an SQLite manifest with its FTS5 keyword index, and Chroma's vectors);
``store = "postgres"`` keeps all of it in one PostgreSQL + pgvector database
(``tools.store.postgres``), so several servers and ingestion workers share it."""
