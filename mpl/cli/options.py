"""The options every ``mplc`` command spells the same way (docs/MANUAL.md, "The command
line"):

* a policy file is the positional ``POLICY`` (a ``.moe`` file, or ``std/NAME`` for a
  standard-library policy); ``mplc demo`` and ``mplc trace record`` take it optionally;
* which policy of that file is ``--policy-name NAME``;
* ``--no-progress`` turns off the progress bar of a long command (drawn only when the
  standard error is a terminal).

Older spellings stay as deprecated aliases that say what to write instead: ``--policy NAME``
(compile, replay, sweep: a name) and ``--policy FILE`` (demo, trace record: a file).

Every value a command takes is a value: an empty one (``--model ''``, ``-o ''``) is a usage
error naming the option (:func:`refuse_empty_values`, applied to every command's parser), and
so is an empty item of a comma-separated list (``--capacity 8,,16``: :func:`comma_list`).
"""

from __future__ import annotations

import argparse
import sys

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


def load_policy(spec: str, name: str | None, prog: str, name_option: str | None = "--policy-name"):
    """(policy, None) or (None, exit code) after printing the problem: the diagnostics, and
    the reason itself whenever no error among them says it (an empty file has only the
    MPL112 warning; a file with several policies has none). ``name_option``: the option
    that chooses a policy of the file (None when the command has none)."""
    from mpl.stdlib_path import policy_file
    path = policy_file(spec)
    if path is None:
        print(f"{prog}: error: no such policy file: {spec}", file=sys.stderr)
        return None, 1
    import mpl
    try:
        return mpl.load(path, policy=name), None
    except mpl.PolicyError as e:
        diags = getattr(e, "diagnostics", None) or []
        if diags:
            from mpl.cli.render import render_all, use_color

            from mpl.fileio import read_text_or_none

            print(render_all(diags, lambda f: read_text_or_none(f or path),
                             color=use_color(sys.stderr)), file=sys.stderr)
        errors = [d for d in diags if d.is_error]
        if errors:
            print(f"{prog}: error: {spec}: not loaded ({len(errors)} error"
                  f"{'s' if len(errors) > 1 else ''})", file=sys.stderr)
        else:
            msg = str(e)
            if path != spec:                   # std/NAME: say it as the user did
                msg = msg.replace(path, spec)
            choose = (f"choose one with {name_option} NAME" if name_option else
                      "give a file that defines one policy")
            msg = msg.replace("choose one with policy='NAME'", choose)
            print(f"{prog}: error: {msg}", file=sys.stderr)
        return None, 1


def _not_empty(action: argparse.Action):
    """``action``'s argparse ``type`` (None: the text itself) refusing an empty value, so
    that an empty string is never taken for an option left out."""
    convert = action.type
    why = "the value is empty; give one" + (
        ", or leave the option out" if action.option_strings and not action.required else "")

    def value(text: str):
        if text == "":
            raise argparse.ArgumentTypeError(why)
        return text if convert is None else convert(text)
    value.__name__ = getattr(convert, "__name__", "str")     # argparse's "invalid int value"
    return value


def refuse_empty_values(parser: argparse.ArgumentParser) -> None:
    """Every argument of ``parser`` (and of its subcommands) that takes a value refuses an
    empty one: ``argument --model: the value is empty; ...`` (exit 2)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                refuse_empty_values(sub)
        elif action.nargs != 0:
            action.type = _not_empty(action)


def _refuse_empty_item(text: str, values: str, example: str) -> str:
    """``text`` when no comma-separated item of ``values`` (a part of it) is empty."""
    if any(not item.strip() for item in values.split(",")):
        raise argparse.ArgumentTypeError(f"'{text}' has an empty item; separate the values with "
                                         f"single commas, e.g. {example}")
    return text


def comma_list(text: str) -> str:
    """argparse ``type`` of a comma-separated list (``8,16,32``): an empty item (``8,,16``,
    a trailing comma) is refused rather than skipped."""
    return _refuse_empty_item(text, text, "8,16,32")


def assignment_list(text: str) -> str:
    """argparse ``type`` of ``NAME=V1,V2``: the values after ``=`` as :func:`comma_list`
    (what is left of ``=``, or no values at all, is the option's own reader's to judge)."""
    name, eq, values = text.partition("=")
    if not eq or not values.strip():
        return text
    return _refuse_empty_item(text, values, f"{name.strip()}=V1,V2")


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
