"""Prompt sections that carry tools: `Section`, `Prompt`, `RenderedPrompt` (see `toolrun.prompts._prompt`)."""

from toolrun.prompts._prompt import Prompt, PromptError, RenderedPrompt, Section, Template

__all__ = ["Prompt", "PromptError", "RenderedPrompt", "Section", "Template"]
