"""What ``prfaas-plan validate`` prints: the numpy reference implementation run on a scaled-down copy of
each model, its cache bytes, FLOPs and outputs compared with `prfaas_plan.arithmetic`
(`prfaas_plan.reference.checks`)."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import PlanError


@dataclass(frozen=True)
class ValidateAnswer:
    """Per-model check results (``results``: `reference.checks` records with ``rows``), one summary row
    per model, the equivalence tolerance (relative) and whether every check passed."""

    results: list
    summary: list[dict]
    tolerance: float
    seed: int
    layers: str

    @property
    def all_passed(self) -> bool:
        return all(v.ok for v in self.results)


def answer_validate(models: list[str] | None = None, layers: str = "pattern", seed: int = 0) -> ValidateAnswer:
    """Validate ``models`` (default every profile) with ``layers`` 'pattern' (first layers until every
    attention kind occurs twice) or 'all', random weights and tokens from ``seed``."""
    from ..profiles import all_models, get_model
    from ..reference import checks  # numpy-heavy: imported only when validation runs

    if layers not in ("pattern", "all"):
        raise PlanError(f"`layers` {layers!r}: expected 'pattern' or 'all'")
    if seed < 0:
        raise PlanError(f"`seed` {seed}: expected a whole number >= 0")
    profiles = [get_model(m) for m in models] if models else [all_models()[n] for n in sorted(all_models())]
    results = [checks.validate_model(m, seed=seed, layers=layers) for m in profiles]
    summary = []
    for v in results:
        s = v.scaled
        failed = sum(r["result"] == "FAIL" for r in v.rows)
        summary.append({"model": v.model, "scaled_layers": s.num_layers, "scaled_hidden": s.hidden_size,
                        "scaled_attention": s.attention_summary,
                        "checks": sum(r["result"] != "info" for r in v.rows), "failed": failed,
                        "status": "ok" if failed == 0 else "FAIL"})
    return ValidateAnswer(results, summary, checks.TOL, seed, layers)
