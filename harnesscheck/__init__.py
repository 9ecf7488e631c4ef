"""harnesscheck: will an agent harness work against your LLM endpoint, and how fast?"""

__version__ = "0.1.0"
