"""Lease reaper: returns expired job leases to UNLOCKED and counts them (every minute)."""

from __future__ import annotations

from baton_lambda.scheduled import scheduled

handler = scheduled("reaper", lambda engine: {"leasesExpired": engine.reap_expired_leases()})
