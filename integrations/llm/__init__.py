"""Submission classification through an OpenAI-compatible chat-completions endpoint (a LiteLLM proxy)."""
