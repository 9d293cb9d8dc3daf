"""Skills: instruction folders loaded into a conversation on demand.

A skill is a folder ``<root>/<name>/SKILL.md`` (agentskills.io): YAML frontmatter
with ``name`` and ``description`` (plus optional ``license``, ``compatibility``,
``metadata``, ``allowed-tools`` and any other keys, which are kept), then markdown
instructions, and any files those point at. The model loads one through the
``load_skill`` tool and reads its files through ``read_skill_file``
(`read_skill_file`, `resource_files`); the user loads one by typing ``/name`` or by
naming it in a message (`SkillStore.mentions` says which mentions load at once and
which are only suggested).

The package, by responsibility:

    store       SkillStore: the skills of the roots, scanned, cached, refreshed; mentions
    parse       one SKILL.md read and validated: Skill, Problem, the limits
    text        what the model reads (catalog, tool replies, system_part) and /commands
    files       the files of a skill's folder and the read_skill_file tool
    importing   import_folder: copy skill folders in, validated, never overwriting

Everything public is importable from here (``from llamachat.skills import SkillStore``).

Errors: scanning never raises. Whatever is wrong with a root, a folder or a file
becomes a `Problem` (its path and a sentence saying what to fix; `skipped` tells an
error from a warning), and the good skills load regardless. Only these raise:

    SkillError              base of this package's exceptions
    ├── SkillImportError    import_folder refused one or more folders
    │                       (.problems: list[Problem], .imported: list[Path])
    └── SkillFileError      read_skill_file cannot answer (the sentence the model reads)
"""

from llamachat.skills.files import (
    FILE_MAX,
    READ_FILE_NAME,
    SkillFileError,
    read_file_schema,
    read_skill_file,
    resource_files,
)
from llamachat.skills.importing import SkillImportError, import_folder
from llamachat.skills.parse import (
    BODY_MAX,
    CATALOG_DESCRIPTION_CHARS,
    COMPATIBILITY_MAX,
    DESCRIPTION_MAX,
    FRONTMATTER_MAX,
    NAME_MAX,
    SKILL_FILE,
    Problem,
    Skill,
    SkillError,
)
from llamachat.skills.skill_store import SkillStore, reported_problems_path
from llamachat.skills.text import (
    CATALOG_CHARS,
    LOAD_SKILL_NAME,
    NO_MORE_TOOLS,
    SKILL_HEADER,
    budgeted_catalog,
    parse_commands,
    parse_name,
    system_part,
    tool_message,
)

__all__ = [
    "BODY_MAX",
    "CATALOG_CHARS",
    "CATALOG_DESCRIPTION_CHARS",
    "COMPATIBILITY_MAX",
    "DESCRIPTION_MAX",
    "FILE_MAX",
    "FRONTMATTER_MAX",
    "LOAD_SKILL_NAME",
    "NAME_MAX",
    "NO_MORE_TOOLS",
    "READ_FILE_NAME",
    "SKILL_FILE",
    "SKILL_HEADER",
    "Problem",
    "Skill",
    "SkillError",
    "SkillFileError",
    "SkillImportError",
    "SkillStore",
    "budgeted_catalog",
    "import_folder",
    "parse_commands",
    "parse_name",
    "read_file_schema",
    "read_skill_file",
    "reported_problems_path",
    "resource_files",
    "system_part",
    "tool_message",
]
