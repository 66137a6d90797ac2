"""``prfaas-plan model import``: a Hugging Face ``config.json`` becomes a model-profile YAML."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from ..errors import PlanError
from .app import model_app
from .envelope import emit_or_text
from .options import FormatOpt, OptOutput

if TYPE_CHECKING:
    import yaml


def _dumper() -> type[yaml.SafeDumper]:
    """A YAML dumper in block style, except that lists of scalars (layer indices) stay on one line.
    Built on first use, as `import_cmd` imports hf_import: registering the commands needs neither."""
    import yaml

    class Dumper(yaml.SafeDumper):
        pass

    def represent_list(dumper: yaml.SafeDumper, data: list):
        flow = all(not isinstance(v, (list, dict)) for v in data)
        return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)

    Dumper.add_representer(list, represent_list)
    return Dumper


@model_app.command("import")
def import_cmd(
    config: str = typer.Argument(..., help="A Hugging Face config.json."),
    name: Optional[str] = typer.Option(None, "--name", help="Profile name (default: from _name_or_path or "
                                       "a file name like org--Model.config.json)."),
    output: OptOutput = None,
    output_dir: Optional[str] = typer.Option(None, "--output-dir", help="Write NAME.yaml into this folder "
                                             "(usable with --profiles)."),
    fmt: FormatOpt = "table",
) -> None:
    """Import a Hugging Face config.json as a model profile (YAML to stdout, or to a file). With --format
    json the envelope carries the summary and, without a file to write, the profile as the one row of
    ``profile``; csv gives the summary only, so it needs -o or --output-dir (a profile is nested)."""
    import yaml

    from ..output.report import write_atomic
    from ..planning.profiles import import_summary
    from ..profiles import model_from_dict
    from ..profiles.hf_import import import_hf_config, read_hf_config

    if output is not None and output_dir is not None:
        raise PlanError("--output and --output-dir: give one of them, not both")
    if output_dir is not None and not Path(output_dir).is_dir():
        raise PlanError(f"--output-dir {output_dir!r}: not a folder")
    if output is not None and Path(output).is_dir():
        raise PlanError(f"--output {output!r}: is a folder; give a file name or use --output-dir")
    if str(fmt) == "csv" and output is None and output_dir is None:
        raise PlanError("--format csv: a profile is nested and has no CSV form; give -o/--output-dir, or use "
                        "--format json or table")
    profile = import_hf_config(read_hf_config(config), name, source=config)
    model = model_from_dict(profile, config)
    summary = import_summary(model)
    header = [f"Imported by `prfaas-plan model import` from {Path(config).name}."] + summary
    text = "".join(f"# {line}\n" for line in header) + yaml.dump(
        profile, Dumper=_dumper(), sort_keys=False, allow_unicode=True, width=100)
    from ..output.report import Report, Section

    facts = Section("summary", f"Imported {model.name}", [{"fact": line} for line in summary])
    if output is None and output_dir is None:
        emit_or_text(Report([facts, Section("profile", "Profile", [profile])], meta={"model": model.name}),
                     fmt, text)
        return
    path = Path(output) if output else Path(output_dir) / f"{model.name}.yaml"
    try:
        write_atomic(path, text)
    except OSError as exc:
        raise PlanError(f"{path}: cannot write ({exc.strerror})") from None
    emit_or_text(Report([facts, Section("files", "Files written", [{"file": str(path), "kind": "model-profile"}])],
                        meta={"model": model.name}), fmt, "\n".join(summary + [f"wrote {path}"]) + "\n")
