"""Interoperability with other libraries (Hugging Face transformers)."""
