"""Chat and embedding models: specs (``spec``), the factories that build a model from
settings (``factory``), and the local ones: llama.cpp chat (``local_llm``), the
embedding model (``local_embeddings``) and the verified weights they load
(``local_assets``)."""
