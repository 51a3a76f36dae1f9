"""`rag ui`: a local chat page for trying the service (an entry point, like rag_cli)."""
