"""From a question to the evidence the generator reads: hybrid, dense and keyword
retrievers over a store (``hybrid``), rerankers (``rerank``) and the evidence units
chosen from the kept passages (``evidence``)."""
