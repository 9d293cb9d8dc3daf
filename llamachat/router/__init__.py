"""llama.cpp's router and other OpenAI-compatible servers.

`client.Client` speaks HTTP to a server and runs the streaming tool loop; `server` starts
and supervises the llama-server llamachat runs itself; `models` reads and manages the
models a router offers; `providers` says where each model lives.
"""
