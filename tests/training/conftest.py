"""Shared fixtures of the training tests: a tiny random chat LM built locally (no download)."""

import pytest
from transformers import AutoModelForCausalLM, AutoTokenizer

from training.tiny_lm import build_tiny_lm


@pytest.fixture(scope="session")
def tiny_lm_dir(tmp_path_factory):
    """A folder holding the tiny Qwen2 chat model (seed 0) and its tokenizer with a tools template."""
    return build_tiny_lm(tmp_path_factory.mktemp("tiny_lm"), seed=0)


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_lm_dir):
    return AutoTokenizer.from_pretrained(tiny_lm_dir)


@pytest.fixture
def tiny_model(tiny_lm_dir):
    """A fresh copy of the tiny model (float32, CPU, eval mode) for each test: tests may train it."""
    return AutoModelForCausalLM.from_pretrained(tiny_lm_dir).eval()
