"""The LangGraph server's HTTP layer (the guard in front of its routes), shared by
``rag serve`` and the chat page."""
