"""Other apps' chat exports, made up in their published shapes, for the import's tests and bench.

`chatgpt_export(n)` is a `conversations.json` of `n` conversations, each a root node, a
hidden system message and `turns` questions and answers (10 messages kept for 5 turns):
the second question holds an image, the third answer is preceded by "thoughts" and a
"Thought for 3 seconds" recap, the fourth by a browsing call and its tool result, and in
every third conversation the last answer was regenerated (its second version is the
`current_node`). `open_webui_export(n)` and `llama_cpp_export(n)` are those apps' "export
all chats" files, each chat with an edited first question (two versions, the second
active) and reasoning in the last answer.

The texts are predictable ("Question 2 of chat 7", "Answer 2 of chat 7") so a test can
look for them.
"""

from __future__ import annotations

from typing import Any

BASE_TIME = 1_700_000_000.0
"""The first conversation's creation, in seconds since 1970; each next one an hour later."""


def _chatgpt_node(
    key: str,
    parent: str | None,
    role: str,
    content: dict[str, Any],
    created: float,
    **extra: Any,
) -> dict[str, Any]:
    metadata = extra.pop("metadata", {})
    return {
        "id": key,
        "parent": parent,
        "children": [],
        "message": {
            "id": key,
            "author": {"role": role, "name": extra.pop("name", None), "metadata": {}},
            "create_time": created,
            "update_time": None,
            "content": content,
            "status": "finished_successfully",
            "end_turn": role == "assistant" or None,
            "weight": 1.0,
            "metadata": metadata,
            "recipient": extra.pop("recipient", "all"),
            "channel": None,
        },
    }


def chatgpt_conversation(number: int, turns: int = 5) -> dict[str, Any]:
    """One conversation of ChatGPT's `conversations.json` (see the module's docstring)."""
    start = BASE_TIME + number * 3600
    mapping: dict[str, dict[str, Any]] = {
        f"root-{number}": {"id": f"root-{number}", "message": None, "parent": None, "children": []}
    }

    def add(node: dict[str, Any]) -> str:
        mapping[node["id"]] = node
        if node["parent"] is not None:
            mapping[node["parent"]]["children"].append(node["id"])
        return node["id"]

    def text(*parts: Any) -> dict[str, Any]:
        return {"content_type": "text", "parts": list(parts)}

    last = add(
        _chatgpt_node(
            f"system-{number}",
            f"root-{number}",
            "system",
            text(""),
            start,
            metadata={"is_visually_hidden_from_conversation": True},
        )
    )
    for turn in range(turns):
        when = start + turn * 60
        question: dict[str, Any] = text(f"Question {turn} of chat {number}")
        if turn == 1:
            image = {
                "content_type": "image_asset_pointer",
                "asset_pointer": f"file-service://file-{number}",
                "size_bytes": 1000,
                "width": 64,
                "height": 64,
            }
            question = {
                "content_type": "multimodal_text",
                "parts": [image, f"Question {turn} of chat {number}"],
            }
        last = add(_chatgpt_node(f"q{turn}-{number}", last, "user", question, when))
        if turn == 2:
            thoughts = {
                "content_type": "thoughts",
                "thoughts": [
                    {"summary": "Weighing it", "content": f"Thinking about chat {number}"}
                ],
                "source_analysis_msg_id": "x",
            }
            last = add(_chatgpt_node(f"t{turn}-{number}", last, "assistant", thoughts, when + 1))
            recap = {"content_type": "reasoning_recap", "content": "Thought for 3 seconds"}
            last = add(_chatgpt_node(f"r{turn}-{number}", last, "assistant", recap, when + 2))
        if turn == 3:
            call = {"content_type": "code", "language": "unknown", "text": 'search("rivers")'}
            last = add(
                _chatgpt_node(
                    f"c{turn}-{number}", last, "assistant", call, when + 1, recipient="browser"
                )
            )
            found = {"content_type": "tether_browsing_display", "result": "Nile", "summary": ""}
            last = add(
                _chatgpt_node(f"b{turn}-{number}", last, "tool", found, when + 2, name="browser")
            )
        answer = text(f"Answer {turn} of chat {number}")
        parent = last
        last = add(
            _chatgpt_node(
                f"a{turn}-{number}",
                parent,
                "assistant",
                answer,
                when + 5,
                metadata={"model_slug": "gpt-4o"},
            )
        )
        if turn == turns - 1 and number % 3 == 0:
            again = text(f"Answer {turn} of chat {number}, regenerated")
            last = add(
                _chatgpt_node(
                    f"a{turn}b-{number}",
                    parent,
                    "assistant",
                    again,
                    when + 30,
                    metadata={"model_slug": "gpt-4o-mini"},
                )
            )
    return {
        "title": f"Chat {number}",
        "create_time": start,
        "update_time": start + turns * 60,
        "mapping": mapping,
        "moderation_results": [],
        "current_node": last,
        "plugin_ids": None,
        "conversation_id": f"conv-{number}",
        "conversation_template_id": None,
        "gizmo_id": None,
        "is_archived": False,
        "safe_urls": [],
        "default_model_slug": "gpt-4o",
        "id": f"conv-{number}",
    }


def chatgpt_export(count: int, turns: int = 5) -> list[dict[str, Any]]:
    """A `conversations.json` of `count` conversations, the newest first (as ChatGPT writes it)."""
    return [chatgpt_conversation(number, turns) for number in reversed(range(count))]


def open_webui_chat(number: int) -> dict[str, Any]:
    """One chat of Open WebUI's "Export All Chats" (`chat-export-*.json`): the first
    question edited (its second version active), the answer with a reasoning block."""
    start = int(BASE_TIME) + number * 3600

    def message(key: str, parent: str | None, role: str, content: str, at: int) -> dict:
        item: dict[str, Any] = {
            "id": key,
            "parentId": parent,
            "childrenIds": [],
            "role": role,
            "content": content,
            "timestamp": at,
        }
        if role == "assistant":
            item.update(model="llama3:8b", modelName="Llama 3", modelIdx=0, done=True)
        else:
            item["models"] = ["llama3:8b"]
        return item

    reasoning = (
        '<details type="reasoning" done="true" duration="2">\n'
        "<summary>Thought for 2 seconds</summary>\n"
        f"> Thinking about chat {number}\n> in two lines\n"
        "</details>\n"
    )
    messages = [
        message(f"u1-{number}", None, "user", f"First question of chat {number}", start),
        message(f"a1-{number}", f"u1-{number}", "assistant", "First answer", start + 5),
        message(f"u2-{number}", None, "user", f"Edited question of chat {number}", start + 60),
        message(
            f"a2-{number}",
            f"u2-{number}",
            "assistant",
            reasoning + f"Answer of chat {number}",
            start + 65,
        ),
    ]
    for item in messages:
        if item["parentId"]:
            next(m for m in messages if m["id"] == item["parentId"])["childrenIds"].append(
                item["id"]
            )
    history = {item["id"]: item for item in messages}
    return {
        "id": f"chat-{number}",
        "user_id": "user-1",
        "title": f"Web chat {number}",
        "chat": {
            "id": "",
            "title": f"Web chat {number}",
            "models": ["llama3:8b"],
            "params": {},
            "history": {"messages": history, "currentId": f"a2-{number}"},
            "messages": [history[f"u2-{number}"], history[f"a2-{number}"]],
            "tags": [],
            "timestamp": start * 1000,
            "files": [],
        },
        "updated_at": start + 65,
        "created_at": start,
        "share_id": None,
        "archived": False,
        "pinned": False,
        "meta": {},
        "folder_id": None,
    }


def open_webui_export(count: int) -> list[dict[str, Any]]:
    """Open WebUI's export of `count` chats, the newest first."""
    return [open_webui_chat(number) for number in reversed(range(count))]


def llama_cpp_conversation(number: int) -> dict[str, Any]:
    """One `ExportedConversation` of llama.cpp's Svelte web UI: its root message, the
    first question edited (its second version active), reasoning in `thinking`; times
    in milliseconds."""
    start = int(BASE_TIME * 1000) + number * 3_600_000
    conv_id = f"conv-{number}"

    def message(key: str, parent: str | None, role: str, content: str, at: int, **extra) -> dict:
        return {
            "id": key,
            "convId": conv_id,
            "type": "root" if parent is None else "text",
            "timestamp": at,
            "role": role,
            "content": content,
            "parent": parent,
            "thinking": extra.pop("thinking", ""),
            "children": [],
            **extra,
        }

    root = f"root-{number}"
    messages = [
        message(root, None, "system", "", start),
        message(f"u1-{number}", root, "user", f"First question of chat {number}", start + 1),
        message(f"a1-{number}", f"u1-{number}", "assistant", "First answer", start + 2),
        message(
            f"u2-{number}",
            root,
            "user",
            f"Edited question of chat {number}",
            start + 60_000,
            extra=[{"type": "IMAGE", "name": "photo.png", "base64Url": "data:image/png;base64,"}],
        ),
        message(
            f"a2-{number}",
            f"u2-{number}",
            "assistant",
            f"Answer of chat {number}",
            start + 65_000,
            thinking=f"Thinking about chat {number}",
            model="qwen3-4b",
            timings={"predicted_n": 5, "predicted_ms": 50},
        ),
    ]
    for item in messages:
        if item["parent"]:
            next(m for m in messages if m["id"] == item["parent"])["children"].append(item["id"])
    conv = {"id": conv_id, "name": f"Local chat {number}", "lastModified": start + 65_000}
    return {"conv": {**conv, "currNode": f"a2-{number}"}, "messages": messages}


def llama_cpp_export(count: int) -> list[dict[str, Any]]:
    """llama.cpp web UI's "export all" of `count` conversations."""
    return [llama_cpp_conversation(number) for number in range(count)]
