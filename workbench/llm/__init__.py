"""The LLM judge. The only package that imports openai and tenacity."""
