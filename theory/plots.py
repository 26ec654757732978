"""Notebook helper: show a matplotlib figure as a PNG under the non-interactive Agg backend."""

from __future__ import annotations

import io


def show(fig, dpi: int = 90) -> None:
    """Render `fig` to PNG, display it in the notebook output, and close it."""
    import matplotlib.pyplot as plt
    from IPython.display import Image, display

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    plt.close(fig)
    display(Image(buf.getvalue()))
