"""Server settings, from ``initializationOptions`` and ``workspace/didChangeConfiguration``.

Accepted shape (camelCase, as editors send it; the same object may be nested under ``"mpl"``)::

    {"model": "deepseek-v2-lite" | "/path/to/config.json" | null,
     "debounceMs": 200,
     "inlayHints": {"defaults": true, "perLayer": true},
     "importRoots": ["/path/to/policies", ...] | "/one/folder" | null}

``importRoots``: folders outside which imports are refused (``std/`` always works); unset or
null, the server's workspace folders (or, with none, the folder of each document).

Unknown keys and wrong types never fail: they are reported as messages (logged to the client)
and the previous value is kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from mpl import shapes

DEFAULT_DEBOUNCE_MS = 200


@dataclass(frozen=True)
class Settings:
    model: str | None = None
    debounce_ms: int = DEFAULT_DEBOUNCE_MS
    hint_defaults: bool = True
    hint_per_layer: bool = True
    import_roots: tuple[str, ...] | None = None     # None: the workspace folders


@dataclass
class Loaded:
    settings: Settings
    shape: "shapes.ModelShape | None" = None
    messages: list[str] = field(default_factory=list)   # problems, for window/logMessage


def _section(obj):
    if isinstance(obj, dict):
        for key in ("mpl", "moe", "moePolicyLang", "moe-policylang"):
            if isinstance(obj.get(key), dict):
                return obj[key]
    return obj


def update(current: Settings, options) -> Loaded:
    """Settings ``current`` updated with the client's ``options`` (any JSON value)."""
    msgs: list[str] = []
    options = _section(options)
    if options is None:
        return Loaded(current, resolve_shape(current.model, msgs), msgs)
    if not isinstance(options, dict):
        msgs.append(f"settings must be an object, got {type(options).__name__}; ignored")
        return Loaded(current, resolve_shape(current.model, msgs), msgs)
    s = current
    for key, value in options.items():
        if key == "model":
            if value is None or (isinstance(value, str) and not value.strip()):
                s = replace(s, model=None)
            elif isinstance(value, str):
                s = replace(s, model=value.strip())
            else:
                msgs.append("setting 'model' must be a preset name or a config.json path; ignored")
        elif key in ("debounceMs", "debounce_ms", "debounce"):
            if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= 60_000:
                s = replace(s, debounce_ms=int(value))
            else:
                msgs.append("setting 'debounceMs' must be a number of milliseconds in [0, 60000]; ignored")
        elif key in ("inlayHints", "inlay_hints"):
            if not isinstance(value, dict):
                msgs.append("setting 'inlayHints' must be an object; ignored")
                continue
            for hk, hv in value.items():
                if not isinstance(hv, bool):
                    msgs.append(f"setting 'inlayHints.{hk}' must be true or false; ignored")
                elif hk == "defaults":
                    s = replace(s, hint_defaults=hv)
                elif hk in ("perLayer", "per_layer"):
                    s = replace(s, hint_per_layer=hv)
                else:
                    msgs.append(f"unknown setting 'inlayHints.{hk}' (known: defaults, perLayer); ignored")
        elif key in ("importRoots", "import_roots", "importRoot"):
            roots = _import_roots(value, msgs)
            if roots is not False:
                s = replace(s, import_roots=roots)
        else:
            msgs.append(f"unknown setting '{key}' (known: model, debounceMs, inlayHints, "
                        f"importRoots); ignored")
    return Loaded(s, resolve_shape(s.model, msgs), msgs)


def _import_roots(value, msgs: list[str]):
    """The ``importRoots`` setting: a tuple of folders, None (the default), or False (bad
    value, reported, the previous one is kept)."""
    if value is None or value == []:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        msgs.append("setting 'importRoots' must be a folder or a list of folders; ignored")
        return False
    return tuple(v.strip() for v in value)


def import_roots_for(settings: Settings, workspace_roots, path: str | None):
    """The import roots a document at ``path`` is checked with: the setting, else the
    workspace folders, else the document's own folder (None: a buffer with no file)."""
    import os

    if settings.import_roots is not None:
        return settings.import_roots
    if workspace_roots:
        return tuple(workspace_roots)
    return (os.path.dirname(path),) if path else None


def resolve_shape(model: str | None, msgs: list[str]):
    """The model shape for ``model`` (preset or config.json), or None with a message."""
    if not model:
        return None
    if shapes.preset(model) is None and not _regular_or_folder(model):
        # a device, a pipe or a socket: opening a FIFO would wait for a writer (the server
        # would stall), and no such file is a config.json
        msgs.append(f"model shape: {model} is not a regular file (a device or a pipe?), not a "
                    f"HuggingFace config.json; model-aware checks are off")
        return None
    try:
        return shapes.resolve(model)
    except shapes.ShapeError as e:
        msgs.append(f"model shape: {e}; model-aware checks are off")
        return None


def _regular_or_folder(path: str) -> bool:
    """True unless ``path`` (or the config.json of a folder) exists and is not a regular
    file (the reads of shapes.from_config are bounded, but only a regular file can be read
    without waiting for a writer)."""
    import os
    import stat

    try:
        if os.path.isdir(path):     # shapes.from_config reads the folder's config.json
            path = os.path.join(path, "config.json")
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return True                 # absent or unusable: shapes.resolve says why
