"""The options every ``mplc`` command spells the same way (docs/MANUAL.md, "The command
line"):

* a policy file is the positional ``POLICY`` (a ``.moe`` file, or ``std/NAME`` for a
  standard-library policy); ``mplc demo`` and ``mplc trace record`` take it optionally;
* which policy of that file is ``--policy-name NAME``;
* ``--no-progress`` turns off the progress bar of a long command (drawn only when the
  standard error is a terminal).

Older spellings stay as deprecated aliases that say what to write instead: ``--policy NAME``
(compile, replay, sweep: a name) and ``--policy FILE`` (demo, trace record: a file).
"""

from __future__ import annotations

import argparse

POLICY_HELP = "a .moe (or .policy) file, or std/NAME for a standard-library policy"
POLICY_NAME_HELP = "which policy of the file, when it defines several"


class _Deprecated(argparse.Action):
    """An old spelling: stores its value where the new option does, after a warning naming
    the new spelling."""

    def __init__(self, option_strings, dest, new: str = "", **kw) -> None:
        self.new = new
        super().__init__(option_strings, dest, **kw)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        from mpl.cli.errors import warn
        warn(parser.prog, f"{option_string} is a deprecated spelling; write {self.new}")
        setattr(namespace, self.dest, values)


def add_policy(p, *, optional: bool = False, several: bool = False, old_option: bool = False) -> None:
    """The positional POLICY (``several``: one or more; ``optional``: zero or one).
    ``old_option``: ``--policy FILE`` is kept as a deprecated alias (dest ``policy_option``)."""
    nargs = "+" if several else ("?" if optional else None)
    p.add_argument("policy", metavar="POLICY", nargs=nargs,
                   help=POLICY_HELP + ("; several are compared" if several else ""))
    if old_option:
        p.add_argument("--policy", dest="policy_option", metavar="POLICY", action=_Deprecated,
                       new="the policy file as the first argument (mplc COMMAND POLICY ...)",
                       help=argparse.SUPPRESS)


def add_policy_name(p, *, old_option: bool = False) -> None:
    """``--policy-name NAME``; ``old_option``: ``--policy NAME`` is its deprecated alias."""
    p.add_argument("--policy-name", dest="policy_name", metavar="NAME", help=POLICY_NAME_HELP)
    if old_option:
        p.add_argument("--policy", dest="policy_name", metavar="NAME", action=_Deprecated,
                       new="--policy-name NAME", help=argparse.SUPPRESS)


def add_no_progress(p) -> None:
    p.add_argument("--no-progress", action="store_true",
                   help="no progress bar (it is drawn only when the standard error is a terminal)")


def progress_flag(args) -> bool | None:
    """None: a bar when the standard error is a terminal; False: never (``--no-progress``)."""
    return False if getattr(args, "no_progress", False) else None


def bar(args, total: int, label: str):
    """A progress bar for ``total`` units of work (:class:`mpl.sim.replay.Progress`)."""
    from mpl.sim.replay import Progress
    return Progress(total, label, progress_flag(args))
