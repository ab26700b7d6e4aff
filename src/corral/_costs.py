"""How a cost is written for people: dollars with significant digits, never ``0.0000``.

The CLI's tables and the viewer both write costs with `format_cost`, so a trial that
cost $0.000047 reads the same in the terminal and in the browser.
"""

from __future__ import annotations

import math

#: Significant digits a cost below one dollar keeps.
SIGNIFICANT = 3


def format_cost(cost: float) -> str:
    """``$0.000047``, ``$0.0123``, ``$0.10``, ``$1.50``, ``$1,234.57``; ``$0`` for nothing.

    Below a dollar the cost keeps up to `SIGNIFICANT` significant digits (so a small
    cost is never rounded away to zero, and trailing zeros go past the cents); from a
    dollar up, cents.
    """
    if not math.isfinite(cost):
        return f"${cost}"
    if cost == 0:
        return "$0"
    size = abs(cost)
    sign = "-" if cost < 0 else ""
    if round(size, 2) >= 1:
        return f"{sign}${size:,.2f}"
    decimals = SIGNIFICANT - 1 - math.floor(math.log10(size))
    text = f"{size:.{decimals}f}"
    if float(text) >= 1:  # 0.9999 rounded up to a dollar: write it as dollars
        return f"{sign}${float(text):,.2f}"
    whole, _, fraction = text.partition(".")
    return f"{sign}${whole}.{fraction.rstrip('0').ljust(2, '0')}"
