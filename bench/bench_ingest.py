"""Ingestion throughput on the CACM abstracts against raw embedding of the same texts.

    .venv/bin/python bench/bench_ingest.py [--limit N] [--json]

Baseline (same run, same model, same batch size): ``embed_documents`` over exactly
the chunk texts the pipeline produced. The ratio pipeline/raw shows what extraction,
partitioning, hashing, Chroma and the manifest cost on top; target < 1.25.
A second ingestion of the unchanged file is timed too (it must embed nothing).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from ingest.extract import ExtractOptions
from ingest.pipeline import IngestOptions, Ingestor
from tools.collection import Collection
from tools.config import load_settings
from tools.models import embeddings

CACM = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "cacm" / "cacm.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--limit", type=int, default=0, help="only the first N abstracts")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        source = CACM
        if args.limit:
            source = Path(tmp) / "cacm.jsonl"
            lines = CACM.read_text().splitlines()[: args.limit]
            source.write_text("\n".join(lines) + "\n")
        settings = load_settings({"data_dir": Path(tmp) / "data"})
        embedder = embeddings(settings)
        embedder.embed_query("warm up")  # model load is not ingestion
        options = IngestOptions(extract=ExtractOptions(json_text_field="contents"))

        def ingest() -> tuple[float, object, Collection]:
            collection = Collection(settings, "cacm", create=True)
            started = time.perf_counter()
            report = Ingestor(settings, collection, embedder, options, progress=False).run([source])
            return time.perf_counter() - started, report, collection

        first_s, report, collection = ingest()
        texts = [
            collection.manifest.chunks([cid])[cid].text
            for cid in sorted(collection.manifest.chunk_ids())
        ]
        started = time.perf_counter()
        batch = settings.embedding_batch_size
        for start in range(0, len(texts), batch):
            embedder.embed_documents(texts[start : start + batch])
        raw_s = time.perf_counter() - started
        second_s, second, _ = ingest()

    result = {
        "chunks": report.chunks_added,
        "pipeline_s": round(first_s, 2),
        "pipeline_chunks_per_s": round(report.chunks_added / first_s, 1),
        "raw_embedding_s": round(raw_s, 2),
        "raw_chunks_per_s": round(len(texts) / raw_s, 1),
        "pipeline_over_raw": round(first_s / raw_s, 3),
        "rerun_s": round(second_s, 3),
        "rerun_chunks_added": second.chunks_added,
        "rerun_speedup": round(first_s / second_s, 1),
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(
        f"ingest {result['chunks']} chunks: {result['pipeline_s']}s "
        f"({result['pipeline_chunks_per_s']} chunks/s)"
    )
    print(
        f"raw embedding of the same texts: {result['raw_embedding_s']}s "
        f"({result['raw_chunks_per_s']} chunks/s)"
    )
    print(f"pipeline / raw = {result['pipeline_over_raw']} (target < 1.25)")
    print(
        f"re-run on unchanged input: {result['rerun_s']}s, {result['rerun_chunks_added']} "
        f"chunks added ({result['rerun_speedup']}x faster)"
    )


if __name__ == "__main__":
    main()
