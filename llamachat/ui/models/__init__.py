"""Models on screen: the picker and its status, the router's model events, the chosen model,
per-model load options, and getting a model from Hugging Face."""
