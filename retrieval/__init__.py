"""Retrieval for long-document domains (chunking, FAISS coarse index, BM25, fine ranking,
context assembly). Not built yet; no current domain uses it."""
