"""Distil one static-embedding (`model2vec`) model from a local sentence-transformers teacher directory.

Run in a venv with ``torch==2.13.0 'model2vec[distill,quantization]'`` (not the project's), offline::

    HF_HUB_OFFLINE=1 python bench/experiments/distill_teacher.py TEACHER_DIR NAME [--pca-dims 256]
        [--sif-coefficient 1e-4]

The teacher's raw token vectors (model2vec's `create_embeddings`, the slow part: one forward pass per
vocabulary token) are kept in ``~/.cache/toolrun-bench/raw/NAME-OF-TEACHER.npy``, so another PCA size or SIF
coefficient for the same teacher takes seconds and gives the same model as a fresh distillation.

The model is saved to ``~/.cache/toolrun-bench/NAME/`` with a ``build.json`` beside it (teacher, options,
build seconds) that `search_teachers.py` reads for its table.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "toolrun-bench"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("teacher", help="a local model directory (config.json, tokenizer, weights)")
    parser.add_argument("name", help=f"the output directory's name under {CACHE}")
    parser.add_argument("--pca-dims", type=int, default=256)
    parser.add_argument("--sif-coefficient", type=float, default=1e-4, help="<= 0: no SIF weighting")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import numpy as np
    import torch
    from model2vec.distill import distill, distillation

    raw = CACHE / "raw" / f"{Path(args.teacher).absolute().name}.npy"
    create_embeddings = distillation.create_embeddings

    def cached(**kwargs: object) -> object:
        if raw.is_file():
            return np.load(raw)
        vectors = create_embeddings(**kwargs)
        raw.parent.mkdir(parents=True, exist_ok=True)
        np.save(raw, vectors)
        return vectors

    distillation.create_embeddings = cached
    reused = raw.is_file()

    torch.set_num_threads(2)
    out = CACHE / args.name
    sif = args.sif_coefficient if args.sif_coefficient > 0 else None
    started = time.perf_counter()
    model = distill(model_name=args.teacher, pca_dims=args.pca_dims, sif_coefficient=sif)
    seconds = time.perf_counter() - started
    model.save_pretrained(str(out))
    info = {
        "teacher": args.teacher,
        "pca_dims": args.pca_dims,
        "sif_coefficient": sif,
        "build_seconds": round(seconds, 1),
        "reused_teacher_vectors": reused,
    }
    (out / "build.json").write_text(json.dumps(info, indent=1) + "\n")
    print(json.dumps(info))


if __name__ == "__main__":
    main()
