"""Ingestion throughput on the CACM abstracts against raw embedding of the same texts.

    .venv/bin/python bench/bench_ingest.py [--limit N] [--json] [--profile FILE]

Baseline (same process, same warmed-up model): ``embed_documents`` over exactly the
texts the pipeline embedded, done two ways: one call over all of them (sentence-
transformers then sorts them all by length, so batches carry the least padding) and
the way a naive loop would, ``embedding_batch_size`` texts per call in document order.
"raw" is the faster of the two, so the ratio pipeline/raw is what extraction,
partitioning, hashing, Chroma and the manifest cost on top of the best plain use of
the embedder; target < 1.25. A second ingestion of the unchanged file is timed too
(it must embed nothing). The machine is shared: run it twice before believing a number.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import tempfile
import time
from pathlib import Path

from ingest.extract import ExtractOptions
from ingest.pipeline import IngestOptions, Ingestor, IngestReport
from tools.collection import Collection
from tools.config import load_settings
from tools.models import embeddings

CACM = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "cacm" / "cacm.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--limit", type=int, default=0, help="only the first N abstracts")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--profile", metavar="FILE", help="cProfile the first ingestion to FILE")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "cacm.jsonl"  # one JSON object per line
        lines = CACM.read_text().splitlines()
        source.write_text("\n".join(lines[: args.limit or None]) + "\n")
        settings = load_settings({"data_dir": Path(tmp) / "data"})
        embedder = embeddings(settings)
        options = IngestOptions(extract=ExtractOptions(json_text_field="contents"))
        # model load and first-batch warm-up are not ingestion
        embedder.embed_documents([json.loads(line)["contents"] for line in lines[:64]])

        def ingest(profile: str | None = None) -> tuple[float, IngestReport, Collection]:
            collection = Collection(settings, "cacm", create=True)
            ingestor = Ingestor(settings, collection, embedder, options, progress=False)
            profiler = cProfile.Profile() if profile else None
            started = time.perf_counter()
            if profiler:
                profiler.enable()
            report = ingestor.run([source])
            elapsed = time.perf_counter() - started
            if profiler:
                profiler.disable()
                profiler.dump_stats(profile)
            if report.skipped or not report.files_seen:
                raise SystemExit(f"benchmark input was not ingested: {report.skipped}")
            return elapsed, report, collection

        first_s, report, collection = ingest(args.profile)
        chunks = collection.manifest.chunks(collection.manifest.chunk_ids())
        ordered = sorted(  # file order, as the pipeline met them
            chunks.values(), key=lambda c: (c.start_line or 0, c.source, c.kind, c.chunk_index)
        )
        texts = list(dict.fromkeys(c.embed_text or c.text for c in ordered))

        started = time.perf_counter()
        embedder.embed_documents(texts)
        one_call_s = time.perf_counter() - started

        started = time.perf_counter()
        batch = settings.embedding_batch_size
        for start in range(0, len(texts), batch):
            embedder.embed_documents(texts[start : start + batch])
        batched_s = time.perf_counter() - started

        second_s, second, _ = ingest()

    raw_s = min(one_call_s, batched_s)
    result = {
        "chunks": report.chunks_added,
        "texts_embedded": len(texts),
        "pipeline_s": round(first_s, 2),
        "pipeline_chunks_per_s": round(report.chunks_added / first_s, 1),
        "raw_one_call_s": round(one_call_s, 2),
        f"raw_batches_of_{batch}_s": round(batched_s, 2),
        "raw_embedding_s": round(raw_s, 2),
        "raw_is": "one call" if one_call_s <= batched_s else f"batches of {batch}",
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
        f"raw embedding of the same {len(texts)} texts: one call {result['raw_one_call_s']}s, "
        f"batches of {batch} {result[f'raw_batches_of_{batch}_s']}s "
        f"({result['raw_chunks_per_s']} chunks/s at the faster)"
    )
    print(f"pipeline / raw = {result['pipeline_over_raw']} (target < 1.25)")
    print(
        f"re-run on unchanged input: {result['rerun_s']}s, {result['rerun_chunks_added']} "
        f"chunks added ({result['rerun_speedup']}x faster)"
    )


if __name__ == "__main__":
    main()
