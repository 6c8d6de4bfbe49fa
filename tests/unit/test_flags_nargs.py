"""Flags that take several words (argparse ``nargs="+"``, vllm/engine/arg_utils.py ``get_kwargs``): the words after
them are theirs, not the positional model of ``vllm serve``; controls keep single-word flags and ``=`` forms as they
were."""

from pdd_operator.compat.pair import role_from_container
from pdd_operator.vllm.flags import loose_unknown, parse_flags


def test_several_served_names_leave_no_positional_model():
    model, flags = parse_flags(["vllm", "serve", "--served-model-name", "a", "b"])
    assert model is None
    assert flags["--served-model-name"] == "a b"


def test_several_served_names_after_the_model_keep_the_model():
    model, flags = parse_flags(["vllm", "serve", "m", "--served-model-name", "a", "b", "--port", "8000"])
    assert (model, flags["--served-model-name"], flags["--port"]) == ("m", "a b", "8000")


def test_several_names_then_model_flag():
    model, flags = parse_flags(["python3", "-m", "vllm.entrypoints.openai.api_server", "--served-model-name", "x",
                                "y", "--model", "org/m"][2:])
    assert model == "org/m" and flags["--served-model-name"] == "x y"


def test_lora_modules_and_api_key_take_several_words():
    model, flags = parse_flags(["vllm", "serve", "--lora-modules", "a=/p", "b=/q", "--api-key", "k1", "k2",
                                "&&", "echo", "done"])
    assert model is None
    assert flags["--lora-modules"] == "a=/p b=/q" and flags["--api-key"] == "k1 k2"


def test_control_single_word_flags_still_leave_the_model():
    # --allowed-origins and --middleware lose nargs in _customize_cli_kwargs (vllm/entrypoints/common/cli_args.py
    # 0.34.0), so the word after their value is the model
    model, flags = parse_flags(["vllm", "serve", "--allowed-origins", '["*"]', "m", "--middleware", "x.y"])
    assert model == "m" and flags["--allowed-origins"] == '["*"]' and flags["--middleware"] == "x.y"


def test_control_equals_form_takes_one_word():
    model, flags = parse_flags(["vllm", "serve", "--served-model-name=a", "m"])
    assert model == "m" and flags["--served-model-name"] == "a"


def test_unknown_expansion_after_names_stays_loose():
    argv = ["vllm", "serve", "m", "--served-model-name", "a", "<unknown:EXTRA>"]
    assert parse_flags(argv) == ("m", {"--served-model-name": "a"})
    assert loose_unknown(argv) == "EXTRA"


def test_an_unknown_expansion_as_the_first_name_is_the_flags_value():
    """argparse gives a ``nargs="+"`` flag at least its first word, whatever the expansion holds."""
    assert parse_flags(["vllm", "serve", "m", "--served-model-name", "<unknown:NAME>"]) == (
        "m", {"--served-model-name": "<unknown:NAME>"})


def test_an_engine_with_several_served_names_keeps_the_first_as_its_name():
    """vLLM reports the first of several names (vllm/config/model.py ``get_served_model_name``)."""
    container = {"name": "vllm", "image": "vllm/vllm-openai:v0.24.0", "command": ["vllm", "serve"],
                 "args": ["--model", "/models/gpt2", "--served-model-name", "openai-community/gpt2", "gpt2"]}
    role = role_from_container("prefill", container, {}, version_text=None)
    assert (role.model, role.served_model_name) == ("/models/gpt2", "openai-community/gpt2")
