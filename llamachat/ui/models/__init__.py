"""Models on screen: the picker and its status, the router's model events, the chosen model,
per-model load options, getting a model from Hugging Face, and the RPC workers a model can
be spread over (Settings' list)."""
