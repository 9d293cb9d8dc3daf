"""SKILL.md files in the shapes published skill collections use, for the skills tests.

Each entry is written here from scratch in the exact frontmatter shape of a kind of
skill found in public collections (Anthropic's skills repository, Claude Code and
Codex skill folders, community collections): long unquoted descriptions, colons in
plain values, quoted and folded values, `license` lines pointing at a LICENSE.txt,
`allowed-tools` as a list or a comma string, `metadata` tables, extra harness keys,
CRLF files with a byte order mark. No text is copied from those collections (their
licences differ, and some are proprietary); only their shapes are.

`CORPUS` lists `CorpusSkill(folder, text, name, description)`: the folder the file
goes in, the file's text, and the name and full description it must load with.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CorpusSkill:
    """One SKILL.md: where it goes, what it holds, and what it must load as."""

    folder: str
    text: str
    name: str
    description: str


_LONG = (
    "Toolkit for turning spreadsheets into charts and summaries, covering pivot tables, "
    "formulas, conditional formatting, number formats and chart types. " * 9
).strip()

CORPUS: tuple[CorpusSkill, ...] = (
    # A one-line unquoted description, two sentences; license points at a file.
    CorpusSkill(
        "pdf",
        "---\n"
        "name: pdf\n"
        "description: Full toolkit for working with PDF files, from pulling out text and "
        "tables to building new documents, joining and splitting them and filling forms. "
        "Use it whenever a task asks to read, make, fill or change PDF documents in bulk.\n"
        "license: Proprietary. LICENSE.txt has complete terms\n"
        "---\n\n# PDF processing\n\nFor forms, read forms.md first.\n",
        "pdf",
        "Full toolkit for working with PDF files, from pulling out text and tables to "
        "building new documents, joining and splitting them and filling forms. Use it "
        "whenever a task asks to read, make, fill or change PDF documents in bulk.",
    ),
    # An unquoted `: ` inside the description, which strict YAML rejects.
    CorpusSkill(
        "skill-author",
        "---\n"
        "name: skill-author\n"
        "description: Guide for writing new skills. Use when: someone wants to make a skill "
        "or improve one that already exists.\n"
        "license: Complete terms in LICENSE.txt\n"
        "---\n\nStart from the template.\n",
        "skill-author",
        "Guide for writing new skills. Use when: someone wants to make a skill or improve "
        "one that already exists.",
    ),
    # A double-quoted description holding colons and an escaped quote.
    CorpusSkill(
        "brand-colours",
        "---\n"
        'name: "brand-colours"\n'
        'description: "Applies the house palette and type: headings, body text, charts. '
        'Use it when a document must look \\"on brand\\"."\n'
        "---\n\nColours are listed in palette.md.\n",
        "brand-colours",
        "Applies the house palette and type: headings, body text, charts. Use it when a "
        'document must look "on brand".',
    ),
    # A folded block description, allowed-tools as a YAML list, a metadata table.
    CorpusSkill(
        "changelog-writer",
        "---\n"
        "name: changelog-writer\n"
        "description: >\n"
        "  Writes release notes from the commits since the last tag.\n"
        "  Use after a release branch is cut: it groups changes by kind.\n"
        "allowed-tools:\n"
        "  - Bash\n"
        "  - Read\n"
        "metadata:\n"
        '  version: "1.2"\n'
        "  author: docs-team\n"
        "---\n\nRun git log first.\n",
        "changelog-writer",
        "Writes release notes from the commits since the last tag. Use after a release "
        "branch is cut: it groups changes by kind.",
    ),
    # Claude Code's shape: allowed-tools as one comma string, extra harness keys.
    CorpusSkill(
        "code-review",
        "---\n"
        "name: code-review\n"
        "description: Reviews a diff for bugs, style and missing tests. Use when the user "
        "asks for a review of staged changes or a pull request.\n"
        "allowed-tools: Read, Grep, Glob, Bash(git diff:*)\n"
        "argument-hint: [pr-number] [focus]\n"
        "model: inherit\n"
        "disable-model-invocation: false\n"
        "---\n\nRead the diff, then the files it touches.\n",
        "code-review",
        "Reviews a diff for bugs, style and missing tests. Use when the user asks for a "
        "review of staged changes or a pull request.",
    ),
    # A plain description over several lines, one of them holding `: `.
    CorpusSkill(
        "db-migrations",
        "---\n"
        "name: db-migrations\n"
        "description: Plans and writes schema migrations for SQL databases.\n"
        '  Triggers: "add a column", "rename a table", "migrate the schema".\n'
        "  Never drops data without a backup step.\n"
        "compatibility: Needs a database client on the PATH\n"
        "---\n\nOne migration per change.\n",
        "db-migrations",
        'Plans and writes schema migrations for SQL databases. Triggers: "add a column", '
        '"rename a table", "migrate the schema". Never drops data without a backup step.',
    ),
    # Over the 1,024 characters agentskills.io allows (published skills do this).
    CorpusSkill(
        "spreadsheets",
        f"---\nname: spreadsheets\ndescription: {_LONG}\nlicense: MIT\n---\n\nOpen the file.\n",
        "spreadsheets",
        _LONG,
    ),
    # A literal block description, and a name that differs from its folder.
    CorpusSkill(
        "webapp-tests",
        "---\n"
        "name: webapp-testing\n"
        "description: |\n"
        "  Drives a local web app in a headless browser to check it works.\n"
        "  Use for screenshots, console logs and clicking through forms.\n"
        "license: Apache-2.0\n"
        "---\n\nStart the server with scripts/serve.sh.\n",
        "webapp-testing",
        "Drives a local web app in a headless browser to check it works.\n"
        "Use for screenshots, console logs and clicking through forms.",
    ),
    # Windows line endings and a byte order mark; `#` and quotes inside a plain value.
    CorpusSkill(
        "dotnet-build",
        "\ufeff---\r\n"
        "name: dotnet-build\r\n"
        "description: Builds and tests C# and F# projects with the dotnet CLI; it won't "
        "touch NuGet.config.\r\n"
        "version: 0.3.0\r\n"
        "---\r\n\r\nRun dotnet build.\r\n",
        "dotnet-build",
        "Builds and tests C# and F# projects with the dotnet CLI; it won't touch NuGet.config.",
    ),
    # No name at all: the folder's name is used (as Claude Code does).
    CorpusSkill(
        "meeting-notes",
        "---\n"
        "description: Turns a meeting transcript into notes with decisions and action items.\n"
        "when_to_use: After a call, when a transcript is pasted\n"
        "---\n\nList decisions first.\n",
        "meeting-notes",
        "Turns a meeting transcript into notes with decisions and action items.",
    ),
    # A single-quoted description with a doubled quote; user-invocable false.
    CorpusSkill(
        "internal-comms",
        "---\n"
        "name: internal-comms\n"
        "description: 'Drafts status updates, newsletters and incident write-ups in the "
        "company''s voice. Use for any internal announcement.'\n"
        "user-invocable: false\n"
        "---\n\nKeep it short.\n",
        "internal-comms",
        "Drafts status updates, newsletters and incident write-ups in the company's voice. "
        "Use for any internal announcement.",
    ),
)
"""The corpus, in no particular order."""
