"""Gears: how many model calls, and in what structure, answer a turn.

``direct`` is Gear 1. ``single`` is the stand-in for the analytical gears (2-4) until they
exist: one unverified analyst call, recorded truthfully as the gear that ran, with a
``gear-N-unavailable-ran-gear-1`` contingency naming the gear the mode asked for.
"""
