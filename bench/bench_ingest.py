"""Ingestion throughput on the CACM abstracts against raw embedding of the same texts.

    .venv/bin/python bench/bench_ingest.py [--limit N] [--rounds N] [--json] [--profile FILE]

Baseline (same process, same warmed-up model): ``embed_documents`` over exactly the
texts the pipeline embedded, done two ways: one call over all of them (sentence-
transformers then sorts them all by length, so batches carry the least padding) and
the way a naive loop would, ``embedding_batch_size`` texts per call in document order.
"raw" is the faster of the two, so the ratio pipeline/raw is what extraction,
partitioning, hashing, Chroma and the manifest cost on top of the best plain use of
the embedder; target < 1.25. A second ingestion of the unchanged file is timed too
(it must embed nothing).

The machine this runs on is shared, and a background load that changes between two
measurements swamps the ratio. So pipeline and raw runs alternate for ``--rounds``
rounds (the order flips each round) and the fastest of each counts; CPU time of this
process (all its threads) is reported next to wall time, as it is far less sensitive
to other processes, and so is the load average around each measurement.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from ingest.extract import ExtractOptions
from ingest.pipeline import IngestOptions, Ingestor, IngestReport
from tools.config import load_settings
from tools.models.factory import embeddings
from tools.store.collection import Collection

CACM = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "cacm" / "cacm.json"


def timed(work: Callable[[], object]) -> tuple[float, float, float]:
    """(wall s, CPU s of this process, 1-minute load average at the end)."""
    wall, cpu = time.perf_counter(), time.process_time()
    work()
    return time.perf_counter() - wall, time.process_time() - cpu, os.getloadavg()[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--limit", type=int, default=0, help="only the first N abstracts")
    parser.add_argument("--rounds", type=int, default=2, help="alternating measurements")
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

        runs: list[IngestReport] = []

        def ingest(name: str, profile: str | None = None) -> None:
            collection = Collection(settings, name, create=True)
            ingestor = Ingestor(settings, collection, embedder, options, progress=False)
            profiler = cProfile.Profile() if profile else None
            if profiler:
                profiler.enable()
            report = ingestor.run([source])
            if profiler:
                profiler.disable()
                profiler.dump_stats(profile)
            if report.skipped or not report.files_seen:
                raise SystemExit(f"benchmark input was not ingested: {report.skipped}")
            runs.append(report)

        pipeline = [timed(lambda: ingest("cacm0", args.profile))]
        collection = Collection(settings, "cacm0")
        chunks = collection.manifest.chunks(collection.manifest.chunk_ids())
        ordered = sorted(  # file order, as the pipeline met them
            chunks.values(), key=lambda c: (c.start_line or 0, c.source, c.kind, c.chunk_index)
        )
        texts = list(dict.fromkeys(c.embed_text or c.text for c in ordered))
        batch = settings.embedding_batch_size

        def batched() -> None:
            for start in range(0, len(texts), batch):
                embedder.embed_documents(texts[start : start + batch])

        raw = [timed(lambda: embedder.embed_documents(texts))]
        naive = timed(batched)
        for n in range(1, args.rounds):
            steps = [
                lambda n=n: pipeline.append(timed(lambda: ingest(f"cacm{n}"))),
                lambda: raw.append(timed(lambda: embedder.embed_documents(texts))),
            ]
            for step in steps if n % 2 == 0 else steps[::-1]:
                step()
        rerun = timed(lambda: ingest("cacm0"))

    report, second = runs[0], runs[-1]
    best_pipeline = min(pipeline)
    best_raw = min(raw)
    raw_s = min(best_raw[0], naive[0])
    result = {
        "chunks": report.chunks_added,
        "texts_embedded": len(texts),
        "rounds": args.rounds,
        "pipeline_s": [round(p[0], 1) for p in pipeline],
        "raw_one_call_s": [round(r[0], 1) for r in raw],
        f"raw_batches_of_{batch}_s": round(naive[0], 1),
        "raw_is": "one call" if best_raw[0] <= naive[0] else f"batches of {batch}",
        "load_avg_after_each": {
            "pipeline": [round(p[2], 1) for p in pipeline],
            "raw": [round(r[2], 1) for r in raw],
        },
        "pipeline_chunks_per_s": round(report.chunks_added / best_pipeline[0], 1),
        "raw_chunks_per_s": round(len(texts) / raw_s, 1),
        "pipeline_over_raw": round(best_pipeline[0] / raw_s, 3),
        "pipeline_over_raw_cpu": round(
            min(p[1] for p in pipeline) / min([r[1] for r in raw] + [naive[1]]), 3
        ),
        "rerun_s": round(rerun[0], 3),
        "rerun_chunks_added": second.chunks_added,
        "rerun_speedup": round(best_pipeline[0] / rerun[0], 1),
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(
        f"ingest {result['chunks']} chunks: {result['pipeline_s']} s "
        f"(best {result['pipeline_chunks_per_s']} chunks/s)"
    )
    print(
        f"raw embedding of the same {len(texts)} texts: one call {result['raw_one_call_s']} s, "
        f"batches of {batch} {result[f'raw_batches_of_{batch}_s']} s "
        f"(best {result['raw_chunks_per_s']} chunks/s, {result['raw_is']})"
    )
    print(
        f"pipeline / raw = {result['pipeline_over_raw']} wall, "
        f"{result['pipeline_over_raw_cpu']} CPU time (target < 1.25); "
        f"load average after each: {result['load_avg_after_each']}"
    )
    print(
        f"re-run on unchanged input: {result['rerun_s']} s, {result['rerun_chunks_added']} "
        f"chunks added ({result['rerun_speedup']}x faster)"
    )


if __name__ == "__main__":
    main()
