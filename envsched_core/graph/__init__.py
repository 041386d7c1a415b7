"""The dual-relation graph: within-environment edges W and cross-environment edges X."""

from .cross import (
    build_cross_candidates,
    build_cross_edges,
    candidate_matrix,
    cross_candidates,
    cross_edge_arrays,
    cross_signature,
    rank_cross_edges,
    rows_to_rerank,
)
from .patterns import signature_patterns
from .relation import (
    concatenated_ranges,
    edge_changes,
    edges_from_frame,
    edges_to_frame,
    propagation_matrix,
    top_k_per_source,
)
from .within import build_within_edges, similarity_matrix, within_edge_arrays

__all__ = [
    "build_cross_candidates",
    "build_cross_edges",
    "candidate_matrix",
    "concatenated_ranges",
    "build_within_edges",
    "cross_candidates",
    "cross_edge_arrays",
    "cross_signature",
    "edge_changes",
    "edges_from_frame",
    "edges_to_frame",
    "propagation_matrix",
    "rank_cross_edges",
    "rows_to_rerank",
    "signature_patterns",
    "similarity_matrix",
    "top_k_per_source",
    "within_edge_arrays",
]
