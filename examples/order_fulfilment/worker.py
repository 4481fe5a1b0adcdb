"""Handlers of the order-fulfilment example.

Run them with the ``baton`` CLI (from the repository root)::

    baton worker run examples.order_fulfilment.worker:registry

``charge-card`` fails transiently on the first attempt of every order (a flaky payment gateway),
so each instance shows one retry in its history; an order whose amount is not positive fails at
once with ``NonRetryableError`` (retrying would not help). ``send-confirmation`` is ``async`` to
show that both kinds of handler mix in one registry. The registry, at the end, maps each job type
of ``definition.json`` to its handler.
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

from baton_worker import JobContext, NonRetryableError, Registry


def _token(prefix: str, *parts: object) -> str:
    digest = hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:8].upper()
    return f"{prefix}-{digest}"


def reserve_stock(ctx: JobContext) -> dict[str, Any]:
    """Reserve every item of the order."""
    items = ctx.input.get("items") or []
    if not items:
        raise NonRetryableError("the order has no items")
    reserved = sum(int(item.get("qty", 1)) for item in items)
    ctx.logger.info("stock reserved", extra={"units": reserved})
    return {"reservationId": _token("RSV", ctx.instance_id), "unitsReserved": reserved}


def charge_card(ctx: JobContext) -> dict[str, Any]:
    """Charge the customer; the simulated gateway times out on the first attempt."""
    amount = float(ctx.input.get("amount") or 0)
    if amount <= 0:
        raise NonRetryableError(f"cannot charge {amount}: the amount must be positive")
    if ctx.attempt == 1:
        # A plain exception is retryable: the engine schedules attempt 2 after retryDelaySeconds.
        raise ConnectionError("payment gateway timed out (simulated; attempt 2 will succeed)")
    ctx.logger.info("card charged", extra={"amount": amount})
    return {"receipt": _token("RCPT", ctx.instance_id), "charged": amount}


def ship_parcel(ctx: JobContext) -> dict[str, Any]:
    """Hand the parcel to the carrier."""
    tracking = _token("TRK", ctx.instance_id, ctx.input.get("address"))
    ctx.logger.info("parcel shipped", extra={"tracking": tracking})
    return {"tracking": tracking}


async def send_confirmation(ctx: JobContext) -> dict[str, Any]:
    """Email the customer (an async handler: it runs on the runner's event loop)."""
    await asyncio.sleep(0.05)  # stands in for an async SMTP or HTTP call
    ctx.logger.info("confirmation sent", extra={"to": ctx.input.get("email")})
    return {"confirmationSent": True}


registry = Registry()
registry.register("reserve-stock", reserve_stock)
registry.register("charge-card", charge_card)
registry.register("ship-parcel", ship_parcel)
registry.register("send-confirmation", send_confirmation)
