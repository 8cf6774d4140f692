"""Gears: how many model calls, and in what structure, answer a turn.

``direct`` is Gear 1 (one call, the ``simple`` mode). ``analyst`` is Gear 2 (one analyst plus
verification), ``sequential`` Gear 3 (depth, then breadth reviewing it, plus verification),
``cascade`` Gear 4 (seed 001's adversarial cascade). ``common`` holds what gears 2-4 share,
``prompts`` their step tasks, ``roles`` the breadth slot's diversity rule.
"""
