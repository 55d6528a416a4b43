"""Accuracy report of the cost model against measured kernel tables (placeholder until the fits land)."""

from __future__ import annotations

from pathlib import Path

from optsched.cost.calibration import CALIBRATION_DIR, load_calibration

__all__ = ["default_data_dir", "validation_report", "format_report"]


def default_data_dir() -> Path:
    """../shared/data relative to the repository root."""
    return Path(__file__).resolve().parents[2].parent / "shared" / "data"


def validation_report(data_dir: Path) -> dict:
    """Shipped calibration residual summaries (measured-data evaluation added with the fits)."""
    rows = []
    for p in sorted(CALIBRATION_DIR.glob("*.json")):
        rows.extend(load_calibration(p).residuals.get("table", []))
    return {"data_dir": str(data_dir), "data_present": Path(data_dir).exists(), "source": "shipped", "rows": rows}


def format_report(report: dict) -> str:
    lines = [f"data: {report['data_dir']} ({'present' if report['data_present'] else 'absent'}); "
             f"table from: {report['source']}"]
    for r in report["rows"]:
        lines.append(str(r))
    if not report["rows"]:
        lines.append("no calibration residuals shipped yet")
    return "\n".join(lines)
