"""llama.cpp's router and other OpenAI-compatible servers.

`client.Client` speaks HTTP to a server and runs the streaming tool loop, reading answers
with `stream` over `transport`'s sockets; its exceptions are `llamachat.errors`,
and `llamachat.api_keys` masks and checks API keys. `server` starts and supervises the llama-server
llamachat runs itself (`binary`: which one; `lock`: which llamachat runs it, and its key;
`model_files`: its models folder and preset). `models` reads and manages the models a
router offers; `providers` says where each model lives.
"""
