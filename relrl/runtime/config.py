"""A trainer's settings written once, as a dataclass; its flags, recipes and config.yaml follow.

Each field says in `field(metadata=...)` (built by `setting()`) what a person needs to set it:
its help, and where needed its flag name and aliases, its choices, a number's range (">= 1",
"[0, 1)"), the environment variable the study read, and whether it is left out of the run
fingerprint. SettingsParser turns the dataclass into argparse flags and resolves every setting as

    dataclass default  <  environment variable  <  recipe (--config FILE.yaml)  <  flag

and then checks every field once (check_fields): a number finite and in its declared range, a
choice among its choices, whichever of the four it came from.

A recipe is a YAML mapping of field names (or flag names, `-` read as `_`) to values. Every run
writes its resolved settings to `<output>/config.yaml`, so `--config <output>/config.yaml`
reruns it; the resume check compares a new run's settings with that file.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
import types
import typing
from pathlib import Path
from typing import Any, Callable

import yaml

from relrl.runtime.checkpointing import list_checkpoints, prepare_output_dir
from relrl.runtime.cli import ArgumentParser, UsageError, check_range, parse_range, positive_int
from relrl.untrusted import MAX_YAML_BYTES, UntrustedInputError, loads_yaml

CONFIG_FILE = "config.yaml"
# --load-in-4bit: the word on the command line -> load_model's load_in_4bit
LOAD_IN_4BIT = {"auto": None, "yes": True, "no": False}


def setting(default: Any = None, help: str = "", *, flag: str | None = None,
            aliases: tuple[str, ...] = (), choices=None, positive: bool = False,
            range: str | None = None,
            env: str | None = None, fingerprint: bool = True, group: str | None = None,
            default_here: Callable[[], Any] | None = None, default_text: str | None = None,
            metavar: str | None = None, factory: Callable[[], Any] | None = None):
    """A dataclass field with what the command line and recipes need to know about it.

    flag: the flag when it is not --field-name; aliases: more flags (-G); choices: the values
    allowed, or a dict from the word on the command line to the value (auto -> None); range:
    what a number may be, besides finite (">= 0", "> 0", "[0, 1]", "(0, 1]": cli.check_range;
    every int and float field declares one); positive: an integer >= 1, the range ">= 1";
    env: the environment variable read when neither a recipe nor a flag sets
    it; fingerprint=False: speed, memory or bookkeeping only, so not part of what makes two
    runs the same run; group: the section of --help; default_here: the default on this machine
    (CUDA or not) when nothing sets it, described by default_text in the help."""
    if positive:
        range = range or ">= 1"
    parse_range(range)  # a malformed range fails where it is declared, at import
    metadata = {"help": help, "flag": flag, "aliases": tuple(aliases), "choices": choices,
                "positive": positive, "range": range, "env": env, "fingerprint": fingerprint,
                "group": group, "default_here": default_here, "default_text": default_text,
                "metavar": metavar}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def redefault(cls, name: str, default: Any):
    """Field `name` of the dataclass `cls` with another default (a subclass's), help kept."""
    field = next(f for f in dataclasses.fields(cls) if f.name == name)
    return dataclasses.field(default=default, metadata=field.metadata)


def flag_of(cls_or_cfg, name: str) -> str:
    """The command-line flag of field `name`, for messages."""
    field = next(f for f in dataclasses.fields(cls_or_cfg) if f.name == name)
    return field.metadata.get("flag") or "--" + name.replace("_", "-")


def fingerprint_fields(cls_or_cfg) -> list[str]:
    return [f.name for f in dataclasses.fields(cls_or_cfg) if f.metadata.get("fingerprint", True)]


def fingerprint_settings(cfg) -> dict:
    """The fields that make two runs the same run (dataclass order)."""
    return {name: getattr(cfg, name) for name in fingerprint_fields(cfg)}


def _choice_values(choices) -> list:
    return list(choices.values()) if isinstance(choices, dict) else list(choices)


def _choice_words(choices) -> list[str]:
    return [str(c) for c in (choices.keys() if isinstance(choices, dict) else choices)]


def _choices_text(choices) -> str:
    words = _choice_words(choices)
    return " or ".join(words) if len(words) == 2 else f"one of {', '.join(words)}"


def range_of(cls_or_cfg, name: str) -> str | None:
    """The range field `name` declares (for another setting that takes the same values)."""
    return next(f for f in dataclasses.fields(cls_or_cfg) if f.name == name).metadata.get("range")


def check_fields(cfg, sources: dict[str, str] | None = None) -> None:
    """The checks every field declares, each naming its flag: a number finite and in its
    declared range, a choice among its choices. sources: field -> where its value came from
    (a recipe, an environment variable), added to the message. The one place the declared
    checks are made: SettingsParser.parse calls it on every run's settings."""
    for field in dataclasses.fields(cfg):
        meta, value = field.metadata, getattr(cfg, field.name)
        if not meta or value is None:
            continue
        flag = flag_of(cfg, field.name)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and \
                not isinstance(meta.get("choices"), dict):
            check_range(value, meta.get("range"), flag, (sources or {}).get(field.name, ""))
        if meta.get("choices") is not None and value not in _choice_values(meta["choices"]):
            raise UsageError(f"{flag}: {_choices_text(meta['choices'])}, got {value!r}")


# ---------------------------------------------------------------------------- types
def _kind(annotation) -> tuple[type, bool]:
    """(base type, None allowed) of a field annotation: int, float, str, bool or list."""
    optional = False
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        optional, annotation = True, args[0]
    if typing.get_origin(annotation) is list:
        return list, optional
    return annotation, optional


def _number(value, kind: type):
    """int or float from a YAML value or an environment string (YAML 1.1 reads 1e-5 as text)."""
    what = "an integer" if kind is int else "a number"
    if isinstance(value, bool) or kind is int and isinstance(value, float) and not value.is_integer():
        raise ValueError(f"expected {what}, got {value!r}")
    try:
        return kind(value)
    except (TypeError, ValueError):
        raise ValueError(f"expected {what}, got {value!r}") from None


def _coerce(value, kind: type, optional: bool, choices, where: str, flag: str = ""):
    """A value from a recipe or the environment as the field's type, or a one-line error
    (naming `flag` at its end, when given)."""
    tail = f" ({flag})" if flag else ""
    if value is None:
        if optional:
            return None
        raise UsageError(f"{where}: needs a value{tail}")
    if isinstance(choices, dict) and isinstance(value, str) and value in choices:
        return choices[value]
    try:
        if kind is bool:
            if isinstance(value, str) and value.lower() in ("true", "false", "yes", "no", "1", "0"):
                return value.lower() in ("true", "yes", "1")
            if not isinstance(value, bool):
                raise ValueError(f"expected true or false, got {value!r}")
            out = value
        elif kind in (int, float):
            out = _number(value, kind)
        elif kind is list:
            items = [value] if isinstance(value, str) else value
            if not isinstance(items, list) or not all(isinstance(v, str) for v in items):
                raise ValueError(f"expected a list of paths, got {value!r}")
            out = list(items)
        else:
            if not isinstance(value, (str, int, float)) or isinstance(value, bool):
                raise ValueError(f"expected a text, got {value!r}")
            out = str(value)
    except ValueError as exc:
        raise UsageError(f"{where}: {str(exc).splitlines()[0]}{tail}") from None
    if choices is not None and out not in _choice_values(choices):
        raise UsageError(f"{where}: {_choices_text(choices)}, got {value!r}{tail}")
    return out


# ---------------------------------------------------------------------------- recipes
def read_recipe(path: str | os.PathLike) -> dict:
    """A recipe file as a mapping; bad YAML is a one-line error naming the file and line."""
    path = Path(path)
    try:  # a bounded read: --config /dev/zero must not fill the memory
        with open(path, "rb") as handle:
            raw = handle.read(MAX_YAML_BYTES + 1)
        if len(raw) > MAX_YAML_BYTES:
            raise UsageError(f"{path}: larger than the {MAX_YAML_BYTES} bytes a recipe may have")
        text = raw.decode("utf-8")
    except FileNotFoundError:
        raise UsageError(f"--config: no such file {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--config: cannot read {path} ({exc})") from None
    try:  # relrl.untrusted: aliases refused, size, nesting and integers bounded
        data = loads_yaml(text, str(path), first_line=1)
    except UntrustedInputError as exc:  # already one line naming path:line
        raise UsageError(str(exc)) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UsageError(f"{path}: a recipe is a mapping of setting: value, "
                         f"got {type(data).__name__}")
    return data


def config_text(cfg, exclude=()) -> str:
    """config.yaml's text: every setting this script takes, in the dataclass's order."""
    values = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)
              if f.name not in exclude}
    header = (f"# The resolved settings of this run ({type(cfg).__name__}). Run it again with\n"
              "#   --config this-file [--output-dir another-folder]\n")
    return header + yaml.safe_dump(values, sort_keys=False, default_flow_style=False,
                                   allow_unicode=True, width=100)


def write_config(cfg, folder: str | os.PathLike, exclude=()) -> Path:
    """<folder>/config.yaml, written beside its final place and renamed: never half a file."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / CONFIG_FILE
    fd, tmp = tempfile.mkstemp(prefix=f".{CONFIG_FILE}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            os.fchmod(handle.fileno(), 0o644)
            handle.write(config_text(cfg, exclude))
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def saved_differences(cfg, folder: str | os.PathLike) -> list[str]:
    """'name saved -> now' for each fingerprinted setting that differs from
    <folder>/config.yaml; [] when there is no such file (a run from before it existed)."""
    path = Path(folder) / CONFIG_FILE
    if not path.is_file():
        return []
    try:
        saved = read_recipe(path)
    except UsageError:
        return [f"{path} is unreadable"]
    return [f"{name} {saved[name]!r} -> {getattr(cfg, name)!r}"
            for name in fingerprint_fields(cfg)
            if name in saved and saved[name] != getattr(cfg, name)]


def prepare_run_dir(cfg, output_dir, fingerprint: str, *, resume=None, overwrite: bool = False,
                    run_files: tuple[str, ...] = (), exclude=()) -> Path | None:
    """prepare_output_dir, with config.yaml: a folder holding checkpoints of a run with other
    settings is refused naming them (a warning with --resume); the folder's checkpoints and
    fingerprint decide for runs from before config.yaml. Then this run's config.yaml is
    written. Rank 0's job; returns the checkpoint to resume from."""
    refuse_other_settings(cfg, output_dir, [output_dir], resume=resume, overwrite=overwrite)
    found = prepare_output_dir(output_dir, fingerprint, resume=resume, overwrite=overwrite,
                               run_files=run_files)
    write_config(cfg, output_dir, exclude)
    return found


def refuse_other_settings(cfg, output_dir, run_dirs, *, resume=None, overwrite=False) -> None:
    """Before a run writes into output_dir: if any of run_dirs holds checkpoints and
    output_dir/config.yaml records other settings, refuse (or warn, with --resume)."""
    if overwrite or not any(list_checkpoints(d) for d in run_dirs):
        return
    differences = saved_differences(cfg, output_dir)
    if not differences:
        return
    what = "; ".join(differences)
    if resume:
        print(f"warning: resuming with settings other than {Path(output_dir) / CONFIG_FILE}'s "
              f"({what})", file=sys.stderr)
        return
    raise UsageError(f"{output_dir} holds checkpoints of a run with other settings (its "
                     f"{CONFIG_FILE} -> now: {what}): pass --resume to continue or --overwrite "
                     "to start again")


# ---------------------------------------------------------------------------- the parser
class SettingsParser(ArgumentParser):
    """An ArgumentParser with one flag per field of a settings dataclass, and --config.

    exclude: fields this script does not take (no flag, no recipe key, not in config.yaml);
    defaults: this script's own defaults for some fields. Add the script's actions (--resume,
    --overwrite) with add_argument as usual; parse() returns (settings, actions)."""

    def __init__(self, cls, *, exclude=(), defaults=None, **kwargs):
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(**kwargs)
        self.cls, self.exclude, self.defaults = cls, set(exclude), dict(defaults or {})
        self.fields = [f for f in dataclasses.fields(cls) if f.name not in self.exclude]
        self.hints = typing.get_type_hints(cls)
        self.add_argument("--config", metavar="FILE.yaml",
                          help="a recipe: settings as YAML (recipes/, or a run's config.yaml); "
                          "flags given here override it")
        groups: dict[str | None, Any] = {None: self}
        for field in self.fields:
            group = field.metadata.get("group")
            if group not in groups:
                groups[group] = self.add_argument_group(group)
            self._add_flag(groups[group], field)

    def default_of(self, field):
        if field.name in self.defaults:
            return self.defaults[field.name]
        if field.default is not dataclasses.MISSING:
            return field.default
        return field.default_factory()

    def _help(self, field) -> str:
        meta = field.metadata
        default = self.default_of(field)
        kind, _ = _kind(self.hints[field.name])
        if meta.get("default_text"):
            text = meta["default_text"]
        elif isinstance(meta.get("choices"), dict):
            text = next((w for w, v in meta["choices"].items() if v is default), default)
        elif kind is bool:
            text = "on" if default else "off"
        elif default is None or default in ("", []):
            text = "none"
        else:
            text = str(default)
        if meta.get("default_here") is not None:
            text += f"; here: {meta['default_here']()}"
        if meta.get("env"):
            text = f"env {meta['env']}; default: {text}"
        else:
            text = f"default: {text}"
        return f"{meta.get('help', '')} ({text})".strip().replace("%", "%%")

    def _add_flag(self, parser, field) -> None:
        meta, choices = field.metadata, field.metadata.get("choices")
        flag = meta.get("flag") or "--" + field.name.replace("_", "-")
        kind, _ = _kind(self.hints[field.name])
        options: dict[str, Any] = {"dest": field.name, "default": argparse.SUPPRESS,
                                   "help": self._help(field)}
        if kind is bool and not isinstance(choices, dict):
            options["action"] = argparse.BooleanOptionalAction  # --x and --no-x
        elif choices is not None:  # the words on the command line; a dict maps them to values
            options.update(choices=list(choices), type=str if isinstance(choices, dict) else kind)
        else:
            # named after the flag, not the field (--max-total-steps N)
            options["metavar"] = meta.get("metavar") or flag.lstrip("-").replace("-", "_").upper()
            if kind is list:
                options["nargs"] = "+"
            else:
                options["type"] = positive_int(flag) if meta.get("positive") else kind
        parser.add_argument(flag, *meta.get("aliases", ()), **options)

    def _keys(self) -> dict[str, Any]:
        """Recipe key -> field: the field name, and the flag's name when it differs."""
        keys = {}
        for field in self.fields:
            keys[field.name] = field
            flag = field.metadata.get("flag")
            if flag:
                keys[flag.lstrip("-").replace("-", "_")] = field
        return keys

    def parse(self, argv=None) -> tuple[Any, argparse.Namespace]:
        """(the settings dataclass, the other flags): each setting from its flag, else the
        recipe, else its environment variable, else this machine's or the dataclass's default."""
        args = self.parse_args(argv)
        recipe_path = args.config
        recipe = read_recipe(recipe_path) if recipe_path else {}
        keys = self._keys()
        from_recipe = {}
        for key, value in recipe.items():
            field = keys.get(str(key).replace("-", "_"))
            if field is None:
                raise UsageError(f"{recipe_path}: unknown setting {key!r} (--help lists them)")
            kind, optional = _kind(self.hints[field.name])
            from_recipe[field.name] = _coerce(value, kind, optional, field.metadata.get("choices"),
                                              f"{recipe_path}: {key}", flag_of(self.cls, field.name))
        values, sources = {}, {}
        for field in self.fields:
            meta = field.metadata
            kind, optional = _kind(self.hints[field.name])
            if hasattr(args, field.name):
                value = getattr(args, field.name)
                if isinstance(meta.get("choices"), dict):
                    value = meta["choices"][value]
                values[field.name] = value
                delattr(args, field.name)
            elif field.name in from_recipe:
                values[field.name] = from_recipe[field.name]
                sources[field.name] = str(recipe_path)
            elif meta.get("env") and os.environ.get(meta["env"], "") != "":
                raw = os.environ[meta["env"]]
                values[field.name] = _coerce(raw, kind, optional, meta.get("choices"),
                                             f"environment variable {meta['env']}={raw!r}",
                                             flag_of(self.cls, field.name))
                sources[field.name] = f"environment variable {meta['env']}"
            elif meta.get("default_here") is not None:
                values[field.name] = meta["default_here"]()
            elif field.name in self.defaults:
                values[field.name] = self.defaults[field.name]
        cfg = self.cls(**values)
        check_fields(cfg, sources)  # every number finite and in range, before anything is written
        return cfg, args
