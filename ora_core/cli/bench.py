"""``ora bench``: the command group for Ora's measurements (``ora bench grounding`` ...).

Each bench module adds its commands to the one ``bench`` group: ``register(app)`` here makes
the group and hangs it on the root app, and each module's ``register(group)`` adds a command to
it (``bench_grounding.register(bench_app(app))``). ``bench_app`` returns the same group however
many modules ask, so a second module can add ``ora bench <name>`` beside ``grounding``.
"""

from __future__ import annotations

import typer

_GROUP_ATTRIBUTE = "_ora_bench_group"


def bench_app(app: typer.Typer) -> typer.Typer:
    """The ``bench`` sub-app of ``app``, made and attached on the first call."""
    group = getattr(app, _GROUP_ATTRIBUTE, None)
    if group is None:
        group = typer.Typer(help="Measurements: how well Ora's components do on labelled data.",
                            no_args_is_help=True)
        app.add_typer(group, name="bench")
        setattr(app, _GROUP_ATTRIBUTE, group)
    return group
