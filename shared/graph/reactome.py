"""The Reactome TSVs (data/reactome) as graph nodes and edges, ready for LOAD JSONL.

Every node gets an integer `key` equal to its position (its JSONL id and its vector
id), a `displayName`, its Reactome id (`stId`; genes `symbol`, GO terms `goId`,
publications `pubmedId`) and, for the kinds worth embedding, a `text`.
"""

from __future__ import annotations

import csv
import hashlib
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shared.config import PROJECT_ROOT
from shared.graph import abbreviations

DATA_DIR = PROJECT_ROOT / "data" / "reactome"
BUILD_VERSION = "reactome-graph-2"
FILES = (
    "pathways.tsv",
    "pathway_hierarchy.tsv",
    "reactions.tsv",
    "pathway_reactions.tsv",
    "gene_pathway.tsv",
    "pathway_go_bp.tsv",
    "reaction_go_mf.tsv",
    "reaction_pubmed.tsv",
    "detail/entities.tsv",
    "detail/entity_components.tsv",
    "detail/reaction_participants.tsv",
    "detail/reaction_precedence.tsv",
    "detail/reactions.tsv",
    "detail/subpathway_events.tsv",
)
ENTITY_KINDS = {
    "EntityWithAccessionedSequence": "Protein",
    "Complex": "Complex",
    "DefinedSet": "EntitySet",
    "CandidateSet": "EntitySet",
    "OpenSet": "EntitySet",
    "SimpleEntity": "SmallMolecule",
    "ChemicalDrug": "SmallMolecule",
    "Polymer": "Polymer",
    "GenomeEncodedEntity": "GenomeEncodedEntity",
    "OtherEntity": "OtherEntity",
    "Cell": "Cell",
}
KIND_WORDS = {
    "Protein": "protein",
    "Complex": "complex",
    "EntitySet": "set of alternative molecules",
    "SmallMolecule": "small molecule",
    "Polymer": "polymer",
    "GenomeEncodedEntity": "genome-encoded entity",
    "OtherEntity": "entity",
    "Cell": "cell",
}
PARTICIPANT_EDGES = {
    "input": "INPUT",
    "output": "OUTPUT",
    "catalyst": "CATALYST",
    "activator": "ACTIVATOR",
    "inhibitor": "INHIBITOR",
    "requirement": "REQUIREMENT",
}
# Measured on tests/data/retrieval_questions.tsv (see tests/test_rag_quality.py):
# a pathway's vector is 0.5 x its name + 0.5 x (name + first 800 characters of its
# summation); a reaction's 0.8 x its name + 0.2 x (name + its pathways); genes embed
# their symbol only (pathway lists made genes crowd out pathways: hit@5 0.23 -> 0.60).
# A pathway's title also spells out the abbreviations in its name, using long forms
# found in the data's own "long form (ABBR)" pairs (dev questions 47 -> 49 of 57,
# with shared.rag.rerank; tests/data/retrieval_dev_questions.tsv).
SUMMATION_CHARS = 800
TITLE_WEIGHT = {"Pathway": 0.5, "Reaction": 0.8}
GENE_PATHWAYS_IN_TEXT = 4


class DataError(ValueError):
    """A data file is missing or malformed."""


@dataclass
class GraphData:
    """Nodes (labels, properties) and edges (type, start, end, properties) by index."""

    nodes: list[tuple[list[str], dict[str, Any]]] = field(default_factory=list)
    edges: list[tuple[str, int, int, dict[str, Any]]] = field(default_factory=list)
    fingerprint: str = ""
    titles: dict[int, str] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)

    def add_node(self, labels: list[str], props: dict[str, Any]) -> int:
        key = len(self.nodes)
        self.nodes.append((labels, {"key": key, **{k: v for k, v in props.items() if v not in (None, "")}}))
        return key

    def add_edge(self, type_: str, start: int, end: int, props: dict[str, Any] | None = None) -> None:
        self.edges.append((type_, start, end, props or {}))

    def skip(self, what: str, n: int = 1) -> None:
        self.skipped[what] = self.skipped.get(what, 0) + n

    def label_counts(self) -> dict[str, int]:
        counts: dict[str, int] = defaultdict(int)
        for labels, _ in self.nodes:
            for label in labels:
                counts[label] += 1
        return dict(sorted(counts.items()))

    def edge_counts(self) -> dict[str, int]:
        counts: dict[str, int] = defaultdict(int)
        for type_, *_ in self.edges:
            counts[type_] += 1
        return dict(sorted(counts.items()))

    def texts(self) -> Iterator[tuple[int, str, str | None, float]]:
        """(key, text, title, title weight) of every node that has a text to embed."""
        for labels, props in self.nodes:
            if props.get("text"):
                weight = TITLE_WEIGHT.get(labels[0], 0.0)
                title = self.titles.get(props["key"], props["displayName"])
                yield props["key"], props["text"], title if weight else None, weight


def read_tsv(path: Path) -> list[dict[str, str]]:
    """One dict per row of a headed, unquoted, tab-separated file."""
    if not path.is_file():
        raise DataError(f"missing data file {path.name} in {path.parent}")
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
        rows = list(reader)
        if reader.fieldnames is None:
            raise DataError(f"{path.name} has no header line")
    for number, row in enumerate(rows, start=2):
        if None in row or any(v is None for v in row.values()):
            raise DataError(f"{path.name} line {number}: wrong number of columns")
    return rows


def need(rows: list[dict[str, str]], name: str, *columns: str) -> None:
    if rows and (missing := [c for c in columns if c not in rows[0]]):
        raise DataError(f"{name} lacks column(s) {', '.join(missing)}")


def fingerprint(data_dir: Path) -> str:
    """Hash of the build version, this module's code and every input file's bytes."""
    digest = hashlib.sha256(BUILD_VERSION.encode())
    digest.update(Path(__file__).read_bytes())
    digest.update(Path(abbreviations.__file__).read_bytes())
    for name in FILES:
        path = data_dir / name
        if path.is_file():
            digest.update(name.encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _bare(name: str) -> str:
    """An entity name without its trailing [compartment]."""
    return name.rsplit(" [", 1)[0] if name.endswith("]") else name


def _join(names: list[str], limit: int) -> str:
    shown = list(dict.fromkeys(names))[:limit]
    return "; ".join(shown)


def build_graph(data_dir: Path | None = None) -> GraphData:
    """Parse the Reactome folder into GraphData (raises DataError on bad input)."""
    root = Path(data_dir) if data_dir else DATA_DIR
    t = {name: read_tsv(root / name) for name in FILES}
    need(t["pathways.tsv"], "pathways.tsv", "stId", "name", "is_top_level", "is_leaf", "summation")
    need(t["reactions.tsv"], "reactions.tsv", "reaction_key", "stId", "name")
    need(t["pathway_reactions.tsv"], "pathway_reactions.tsv", "pathway_stId", "reaction_key", "position")
    need(t["gene_pathway.tsv"], "gene_pathway.tsv", "gene_symbol", "pathway_stId")
    need(t["detail/entities.tsv"], "detail/entities.tsv", "stId", "name", "schemaClass", "identifier", "gene_names")
    g = GraphData(fingerprint=fingerprint(root))

    # pathways
    pathway: dict[str, int] = {}
    pathway_name: dict[str, str] = {}
    for r in t["pathways.tsv"]:
        summation = r["summation"].strip()
        text = f"{r['name']}. {summation[:SUMMATION_CHARS]}" if summation else r["name"]
        pathway[r["stId"]] = g.add_node(
            ["Pathway"],
            {
                "stId": r["stId"],
                "displayName": r["name"],
                "species": r.get("species"),
                "isTopLevel": r["is_top_level"] == "true",
                "isLeaf": r["is_leaf"] == "true",
                "summation": summation,
                "text": text,
            },
        )
        pathway_name[r["stId"]] = r["name"]
    short_forms = abbreviations.mine(
        [r["name"] for r in t["reactions.tsv"]] + [f"{r['name']} {r['summation']}" for r in t["pathways.tsv"]]
    )
    for st_id, key in pathway.items():
        g.titles[key] = abbreviations.spelled_out(pathway_name[st_id], short_forms)
    for r in t["pathway_hierarchy.tsv"]:
        if r["parent_stId"] in pathway and r["child_stId"] in pathway:
            g.add_edge("HAS_SUBPATHWAY", pathway[r["parent_stId"]], pathway[r["child_stId"]])
        else:
            g.skip("HAS_SUBPATHWAY: unknown pathway")

    # reactions: the release-91 list, then diagram-only and GO-only ones that carry a name
    reaction_rows: dict[str, dict[str, str]] = {}
    for r in t["reactions.tsv"]:
        reaction_rows[r["reaction_key"]] = {"stId": r["stId"], "name": r["name"], "schemaClass": ""}
    detail_class = {r["stId"]: r["schemaClass"] for r in t["detail/reactions.tsv"]}
    for r in t["detail/reactions.tsv"]:
        reaction_rows.setdefault(r["stId"], {"stId": r["stId"], "name": r["name"], "schemaClass": ""})
    for r in t["reaction_go_mf.tsv"]:
        reaction_rows.setdefault(r["Identifier"], {"stId": r["Identifier"], "name": r["Name"], "schemaClass": ""})
    in_pathways: dict[str, list[str]] = defaultdict(list)
    for r in t["pathway_reactions.tsv"]:
        if r["pathway_stId"] in pathway_name:
            in_pathways[r["reaction_key"]].append(pathway_name[r["pathway_stId"]])
    sub_events = t["detail/subpathway_events.tsv"]
    for r in sub_events:
        if r["subpathway_stId"] in pathway_name and pathway_name[r["subpathway_stId"]] not in in_pathways[r["event_stId"]]:
            in_pathways[r["event_stId"]].append(pathway_name[r["subpathway_stId"]])
    reaction: dict[str, int] = {}
    for key, r in reaction_rows.items():
        where = _join(in_pathways.get(key, []), 3)
        text = f"{r['name']}. Reaction in pathway: {where}" if where else f"{r['name']}. Reaction"
        reaction[key] = g.add_node(
            ["Reaction"],
            {
                "stId": r["stId"] or None,
                "reactionKey": None if r["stId"] else key,
                "displayName": r["name"],
                "schemaClass": detail_class.get(key, "Reaction"),
                "text": text,
            },
        )
    seen_events: set[tuple[int, int]] = set()
    for r in t["pathway_reactions.tsv"]:
        if r["pathway_stId"] in pathway and r["reaction_key"] in reaction:
            pair = (pathway[r["pathway_stId"]], reaction[r["reaction_key"]])
            seen_events.add(pair)
            g.add_edge("HAS_EVENT", *pair, {"position": int(r["position"] or 0)})
        else:
            g.skip("HAS_EVENT: unknown pathway or reaction")
    for r in sub_events:
        if r["subpathway_stId"] in pathway and r["event_stId"] in reaction:
            pair = (pathway[r["subpathway_stId"]], reaction[r["event_stId"]])
            if pair not in seen_events:
                seen_events.add(pair)
                g.add_edge("HAS_EVENT", *pair)

    # genes (symbols; pathways at every level, GMT semantics)
    gene_paths: dict[str, list[str]] = defaultdict(list)
    for r in t["gene_pathway.tsv"]:
        gene_paths[r["gene_symbol"]].append(r["pathway_stId"])
    leaf = {r["stId"] for r in t["pathways.tsv"] if r["is_leaf"] == "true"}
    size: dict[str, int] = defaultdict(int)
    for r in t["gene_pathway.tsv"]:
        size[r["pathway_stId"]] += 1
    gene: dict[str, int] = {}
    for symbol, paths in gene_paths.items():
        specific = sorted((p for p in paths if p in pathway_name), key=lambda p: (p not in leaf, size[p]))
        names = _join([pathway_name[p] for p in specific], GENE_PATHWAYS_IN_TEXT)
        gene[symbol] = g.add_node(
            ["Gene"],
            {"symbol": symbol, "displayName": symbol, "text": symbol, "topPathways": names},
        )
        for p in paths:
            if p in pathway:
                g.add_edge("PARTICIPATES_IN", gene[symbol], pathway[p])
            else:
                g.skip("PARTICIPATES_IN: unknown pathway")

    # GO terms (ids only in these files) and their annotations
    go: dict[str, int] = {}

    def go_term(go_id: str, aspect: str) -> int:
        if go_id not in go:
            go[go_id] = g.add_node(["GOTerm"], {"goId": go_id, "displayName": go_id, "aspect": aspect})
        return go[go_id]

    for r in t["pathway_go_bp.tsv"]:
        if r["Identifier"] in pathway:
            g.add_edge("ANNOTATED_WITH", pathway[r["Identifier"]], go_term(r["GO_Term"], "biological_process"))
        else:
            g.skip("ANNOTATED_WITH: pathway not in release 91")
    for r in t["reaction_go_mf.tsv"]:
        g.add_edge("ANNOTATED_WITH", reaction[r["Identifier"]], go_term(r["GO_Term"], "molecular_function"))

    # publications cited by reactions that are in the graph
    publication: dict[str, int] = {}
    for r in t["reaction_pubmed.tsv"]:
        if r["reaction_stId"] not in reaction:
            g.skip("CITES: reaction not in the graph")
            continue
        pmid = r["pubmed_id"]
        if pmid not in publication:
            publication[pmid] = g.add_node(["Publication"], {"pubmedId": pmid, "displayName": f"PMID:{pmid}"})
        g.add_edge("CITES", reaction[r["reaction_stId"]], publication[pmid])

    # molecule-level entities of the 32 diagram pathways
    children: dict[str, list[str]] = defaultdict(list)
    entity_names = {r["stId"]: r["name"] for r in t["detail/entities.tsv"]}
    for r in t["detail/entity_components.tsv"]:
        children[r["parent_stId"]].append(r["child_stId"])
    entity: dict[str, int] = {}
    for r in t["detail/entities.tsv"]:
        kind = ENTITY_KINDS.get(r["schemaClass"], "OtherEntity")
        genes = [x for x in r["gene_names"].split("|") if x]
        parts = [f"{_bare(r['name'])} ({KIND_WORDS[kind]})"]
        if genes:
            parts.append(f"Gene: {genes[0]}")
        if children.get(r["stId"]):
            word = "Members" if kind == "EntitySet" else "Components"
            parts.append(f"{word}: " + _join([_bare(entity_names.get(c, c)) for c in children[r["stId"]]], 6))
        where = [pathway_name[p] for p in r.get("diagram_pathways", "").split("|") if p in pathway_name]
        if where:
            parts.append("Pathway: " + _join(where, 2))
        entity[r["stId"]] = g.add_node(
            ["PhysicalEntity", kind],
            {
                "stId": r["stId"],
                "displayName": r["name"],
                "schemaClass": r["schemaClass"],
                "identifier": r["identifier"],
                "geneNames": genes[0] if genes else None,
                "text": ". ".join(parts),
            },
        )
        if genes and genes[0] in gene:
            g.add_edge("ENCODES", gene[genes[0]], entity[r["stId"]])
    for r in t["detail/entity_components.tsv"]:
        g.add_edge(r["relation"] or "HAS_CHILD", entity[r["parent_stId"]], entity[r["child_stId"]])
    for r in t["detail/reaction_participants.tsv"]:
        if r["reaction_stId"] in reaction and r["entity_stId"] in entity:
            role = PARTICIPANT_EDGES.get(r["role"], r["role"].upper())
            g.add_edge(role, reaction[r["reaction_stId"]], entity[r["entity_stId"]], {"stoichiometry": int(r["stoichiometry"] or 1)})
        else:
            g.skip("participant: unknown reaction or entity")
    for r in t["detail/reaction_precedence.tsv"]:
        before, after = r["preceding_event"], r["following_reaction_stId"]
        if before in reaction and after in reaction:
            g.add_edge("PRECEDES", reaction[before], reaction[after])
        else:
            g.skip("PRECEDES: event outside the graph")
    return g
