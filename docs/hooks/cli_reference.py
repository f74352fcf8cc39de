"""MkDocs hook: the command-line reference, generated from the real parser.

A page's line ``<!-- cli-reference -->`` becomes one section per sub-command of
:data:`moram_avalanche.cli.COMMANDS`, in their order: its help and description, its usage (a
``text`` block, as ``--help`` prints it) and a table of its arguments with their defaults and
help, read from :func:`moram_avalanche.cli.build_parser` (so the reference cannot drift from
the command line). :func:`cli_reference_markdown` is the generator, tested without MkDocs
(``tests/docs/test_docs_hooks.py``).
"""

from __future__ import annotations

import argparse
import logging
import re
from typing import List

from page_markers import MarkerLine

MARKER = MarkerLine("cli-reference")
#: the width usage lines are wrapped at (fixed, so the page does not depend on the terminal)
USAGE_WIDTH = 100
logger = logging.getLogger("mkdocs.hooks.cli_reference")


def escape(text: str) -> str:
    """``text`` for a Markdown paragraph or table cell: one line; ``\\ * _ [ ] |`` escaped and
    ``<`` written as an entity outside `code spans`, which stay as written."""
    text = " ".join(text.split())
    parts = re.split(r"(`[^`]*`)", text)
    for index in range(0, len(parts), 2):  # the even parts are outside code spans
        part = re.sub(r"([\\*_\[\]|])", r"\\\1", parts[index])
        parts[index] = part.replace("<", "&lt;")
    return "".join(parts)


def expand(help_text: str, action: argparse.Action, prog: str) -> str:
    """An argparse help string as ``--help`` prints it (``%(default)s`` filled in, ``%%`` -> ``%``)."""
    return help_text % dict(vars(action), prog=prog)


def sub_parsers(parser: argparse.ArgumentParser) -> dict:
    """``{name: parser}`` of the sub-commands of ``parser``, in their order."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise ValueError("the parser has no sub-commands (add_subparsers)")


def invocation(action: argparse.Action) -> str:
    """How an argument is written: ``--out OUT``, ``--full``, ``LOG_DIR``, ``--encoder {visual,text}``."""
    if action.metavar is not None:
        metavar = action.metavar
    elif action.choices is not None:
        metavar = "{" + ",".join(map(str, action.choices)) + "}"
    else:
        metavar = action.dest.upper()
    if not action.option_strings:
        return metavar
    names = ", ".join(action.option_strings)
    return names if action.nargs == 0 else f"{names} {metavar}"


def default_text(action: argparse.Action) -> str:
    """The default as the table shows it: ``required``, ``off`` for a flag, ``-`` for none."""
    if action.required:
        return "required"
    if action.nargs == 0:
        return "off"
    if action.default is None or action.default == argparse.SUPPRESS:
        return "-"
    return f"`{action.default}`"


def arguments_table(parser: argparse.ArgumentParser) -> List[str]:
    """The rows of a sub-command's argument table (``-h`` left out)."""
    rows = ["| argument | default | help |", "|---|---|---|"]
    for action in parser._actions:
        if action.dest == "help":
            continue
        help_text = escape(expand(action.help or "", action, parser.prog))
        rows.append(f"| `{invocation(action)}` | {default_text(action)} | {help_text} |")
    return rows


def usage(parser: argparse.ArgumentParser) -> str:
    """``parser``'s usage line(s), wrapped at :data:`USAGE_WIDTH` columns."""
    formatter = argparse.HelpFormatter(parser.prog, width=USAGE_WIDTH)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)
    return formatter.format_help().strip()


def cli_reference_markdown(parser: argparse.ArgumentParser, commands: dict) -> str:
    """The reference of ``parser``'s sub-commands, ``commands`` giving each one's ``help`` and
    ``description`` (:class:`moram_avalanche.cli.Command`)."""
    parsers = sub_parsers(parser)
    lines = ["```text", usage(parser), "```", ""]
    for name, command in commands.items():
        sub = parsers[name]
        lines += [f"## `{sub.prog}`", "", escape(command.help.replace("%%", "%")) + ".", ""]
        if command.description:
            lines += [escape(command.description.replace("%%", "%")), ""]
        lines += ["```text", usage(sub), "```", "", *arguments_table(sub), ""]
    return "\n".join(lines)


def generate() -> str:
    """The reference of the package's own command line."""
    from moram_avalanche.cli import COMMANDS, build_parser

    return cli_reference_markdown(build_parser(), COMMANDS)


def on_pre_build(config, **kwargs) -> None:
    MARKER.start()


def on_page_markdown(markdown, page, config, files, **kwargs):
    return MARKER.replace(markdown, page.file.src_uri, generate)


def on_post_build(config, **kwargs) -> None:
    MARKER.warn_if_unused(logger)
    if MARKER.pages:
        logger.info("command-line reference generated from moram_avalanche.cli.build_parser() in %s",
                    ", ".join(MARKER.pages))
